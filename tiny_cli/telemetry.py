"""OpenTelemetry traces of tiny's runs, named by the GenAI semantic conventions 1.37 (development).

An observer of the run events (tiny_cli.events): it turns them into spans and never changes a
run. It is imported only when tracing is on (tiny_cli.settings: the OTEL_* variables, or the
project file's `tracing`), so the OpenTelemetry SDK it imports loads only then; the SDK comes with
`pip install 'tiny-cli[otel]'`. One delegated task, re-routed after a refusal:

    delegate
    ├── tiny.route                      decision, score, threshold, candidates
    ├── invoke_agent policy-docs        the Digest's status and reason; events: ghost calls,
    │   ├── chat qwen2.5:7b-instruct    the repair, a budget stop, a mode switch
    │   └── execute_tool docs_search    events: a declined write, an artifact kept
    └── invoke_agent policy-web

Messages, tool arguments and results go on spans only with
OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, and then through the one scrubber
(tiny_cli.secrets); the API key is in no attribute, event or resource. docs/observability.md.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, TextIO
from urllib.parse import urlsplit

from opentelemetry.context import Context
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import (
    BatchSpanProcessor,
    ConsoleSpanExporter,
    SimpleSpanProcessor,
    SpanExporter,
)
from opentelemetry.trace import Span, SpanKind, StatusCode, Tracer, set_span_in_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from tiny_cli._version import __version__
from tiny_cli.digest import Digest
from tiny_cli.errors import DeadlineExceeded
from tiny_cli.events import (
    Aborted,
    ArtifactKept,
    BudgetHit,
    Ended,
    Event,
    Finished,
    GhostCall,
    ModelReplied,
    ModeSwitched,
    Observer,
    Repairing,
    Routed,
    RunStarted,
    ToolCalled,
    ToolFinished,
    TurnStarted,
)
from tiny_cli.secrets import Scrubber
from tiny_cli.setting_rules import otlp_timeout
from tiny_cli.settings import Settings
from tiny_cli.threads import call_within

__all__ = ["SCHEMA_URL", "Tracing", "open_tracing"]

SCHEMA_URL = "https://opentelemetry.io/schemas/1.37.0"  # the GenAI conventions followed
PROVIDER = "openai"  # the API tiny speaks (OpenAI chat completions); server.address says whose
SERVICE = "tiny"  # service.name unless OTEL_SERVICE_NAME or OTEL_RESOURCE_ATTRIBUTES name one
TOOL_TYPE = "function"  # every tiny tool is a function the client runs
FAILED_CALLS = ("ghost", "bad_arguments", "tool_error", "timeout")  # error.type on the tool span
DECLINED_CALLS = ("declined", "not_allowed")
UNFINISHED = "the run did not finish"  # the status of a span still open when tracing closes
ABORTED = "aborted"  # error.type of a run an error ended (Aborted)
# the status then, unless content is captured: the error's message may quote the task (a
# replay's miss names the last message), and with capture off no span holds a message
ABORTED_UNSAID = "an error ended the run (its message is on spans only with content capture on)"
FAILED = "failed"  # error.type of a failed run whose reason is a message, not a label
# a reason that is a label (`ghost_calls`, `schema`, `rate_limited`): error.type as it is;
# anything else (a server's error message, which may quote the task) is only the status, and
# with capture off not even that: a failed run's reason is this line
_LABEL = re.compile(r"[a-z][a-z0-9_]{0,39}")
FAILED_UNSAID = "the run failed (its message is on spans only with content capture on)"
TRACE_CONTEXT = TraceContextTextMapPropagator()  # a host's trace: W3C, whatever OTEL_PROPAGATORS
DEFAULT_WAIT = 10.0  # seconds: the OTLP exporter's default timeout
DEFAULT_PORTS = {"http": 80, "https": 443}  # server.port of a base URL that names none

OPERATION = "gen_ai.operation.name"
SYSTEM = "gen_ai.system"  # before 1.37's gen_ai.provider.name; some backends still read it
PROVIDER_NAMES = {"gen_ai.provider.name": PROVIDER, SYSTEM: PROVIDER}
AGENT_NAME, AGENT_ID = "gen_ai.agent.name", "gen_ai.agent.id"
REQUEST_MODEL, MAX_TOKENS = "gen_ai.request.model", "gen_ai.request.max_tokens"
INPUT_TOKENS, OUTPUT_TOKENS = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"
TOOL_NAME, CALL_ID = "gen_ai.tool.name", "gen_ai.tool.call.id"


def open_tracing(
    settings: Settings,
    scrub: Scrubber,
    *,
    exporter: SpanExporter | None = None,
    stream: TextIO | None = None,
    env: Mapping[str, str] | None = None,
) -> Tracing:
    """Start a tracer provider with the settings' exporters (or `exporter`, sent span by span).

    `env` (the process environment, unless a test gives another; the OTLP exporter reads that
    itself) sets only the longest wait at close: the exporter's timeout, else DEFAULT_WAIT.
    `console` writes to `stream` (stderr: stdout is the command's).
    """
    resource = Resource.create({"service.version": __version__})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": SERVICE}))
    provider = TracerProvider(resource=resource)
    if exporter is not None:
        provider.add_span_processor(SimpleSpanProcessor(exporter))
    out = stream or sys.stderr
    # console first: the shutdown goes processor by processor, and a collector may hold it
    for name in sorted(settings.tracing) if exporter is None else ():
        made = ConsoleSpanExporter(out=out) if name == "console" else OTLPSpanExporter()
        provider.add_span_processor(BatchSpanProcessor(made))
    # a bad timeout is refused where the OTLP exporter is on (check_tracing); console ignores it
    timeout = otlp_timeout(os.environ if env is None else env)
    wait = DEFAULT_WAIT if timeout is None else timeout
    return Tracing(provider, scrub, settings.base_url, settings.trace_content, wait)


class Tracing:
    """The tracer of one command: an observer per run, a span over many (the bench), the flush."""

    def __init__(
        self,
        provider: TracerProvider,
        scrub: Scrubber,
        base_url: str,
        content: bool,
        wait: float = DEFAULT_WAIT,
    ) -> None:
        self.provider, self.wait = provider, wait  # wait: seconds the export at close may take
        self.tracer: Tracer = provider.get_tracer("tiny_cli", __version__, schema_url=SCHEMA_URL)
        self.scrub, self.content = scrub, content
        url = urlsplit(base_url)  # settings checked it: no credentials in it
        port = url.port or DEFAULT_PORTS.get(url.scheme)  # the conventions require it then
        self.server: dict[str, Any] = {"server.address": url.hostname or ""}
        if port is not None:
            self.server["server.port"] = port
        self.parent: Context | None = None  # the span every run goes under (the bench's)
        self._runs: set[_RunTrace] = set()  # the runs not finished yet

    def observer(self, run: str, carrier: Mapping[str, str] | None = None) -> Observer:
        """Return the observer of run `run`, under the W3C trace context in `carrier` if any."""
        parent = self.parent
        if carrier and carrier.get("traceparent"):
            parent = TRACE_CONTEXT.extract(dict(carrier))
        traced = _RunTrace(self, run, parent)
        self._runs.add(traced)
        return traced

    @contextmanager
    def span(self, name: str, attributes: Mapping[str, Any]) -> Iterator[None]:
        """Put every run observed inside the block under one span `name` (e.g. the bench's)."""
        span = self.tracer.start_span(name, context=self.parent, attributes=dict(attributes))
        outer, self.parent = self.parent, set_span_in_context(span)
        try:
            yield
        except BaseException as exc:
            error_text = str(exc) if self.content else ""  # may quote a task, as Aborted's may
            span.set_status(StatusCode.ERROR, self.scrub.text(error_text or type(exc).__name__))
            raise
        finally:
            self.parent = outer
            span.end()

    def close(self) -> bool:
        """End what is still open (a run cut short) with an error; export every span left,
        waiting at most `wait` seconds; return whether the export finished in that time."""
        for run in list(self._runs):
            run.abandon()
        # the SDK's shutdown sends the queue batch by batch, each up to the exporter's
        # timeout: a down or slow collector would hold the exit that many times over
        try:
            call_within(self.wait, self.provider.shutdown, "tiny-trace-export")
        except DeadlineExceeded:
            return False
        return True


class _RunTrace:
    """The spans of one run: the task (delegate), its invocations, their model and tool calls."""

    def __init__(self, tracing: Tracing, run: str, parent: Context | None) -> None:
        self.t, self.run, self.parent = tracing, run, parent
        self.text = tracing.scrub.text  # content as a span may carry it: scrubbed
        self.task: Span | None = None  # delegate
        self.agent: Span | None = None  # invoke_agent
        self.chat: Span | None = None
        self.tool: Span | None = None
        self.model, self.max_tokens, self.opened = "", 0, False

    def __call__(self, event: Event) -> None:
        """Turn one event into span starts, ends, attributes and events."""
        handle = _HANDLERS.get(type(event))
        if handle is not None:
            handle(self, event)

    def routed(self, e: Routed) -> None:
        """Open the task's span, started when routing was, and its finished routing span."""
        started = time.time_ns() - int(max(e.seconds, 0.0) * 1e9)
        self.task = self._start("delegate", self.parent, {"tiny.run": self.run}, started)
        route = {
            "tiny.route.decision": e.decision,
            "tiny.route.score": e.score,
            "tiny.route.threshold": e.threshold,
            "tiny.route.candidates": [agent for agent, _ in e.candidates],
            "tiny.route.chosen": e.agent_id or "",
        }
        self._start("tiny.route", self._under(self.task), route, started).end()

    def run_started(self, e: RunStarted) -> None:
        """Open an invocation's span (a re-route's second one too)."""
        self._end_agent(None)
        self.model, self.max_tokens = e.model, e.max_output_tokens
        attributes = {
            OPERATION: "invoke_agent",
            **PROVIDER_NAMES,
            AGENT_NAME: e.card_id,
            AGENT_ID: e.card_id,
            REQUEST_MODEL: e.model,
            MAX_TOKENS: e.max_output_tokens,
            "tiny.tool_mode": e.tool_mode,
            "tiny.budget.max_tool_calls": e.max_tool_calls,
            "tiny.budget.max_wall_seconds": e.max_wall_seconds,
            **self.t.server,
            "tiny.run": self.run,
        }
        if self.t.content:
            attributes.update(_input_content(e.messages, self.text))
        parent = self._under(self.task) if self.task is not None else self.parent
        self.agent = self._start(f"invoke_agent {e.card_id}", parent, attributes)

    def turn_started(self, e: TurnStarted) -> None:
        """Open a model request's span."""
        if self.agent is None:
            return
        attributes = {
            OPERATION: "chat",
            **PROVIDER_NAMES,
            REQUEST_MODEL: self.model,
            MAX_TOKENS: self.max_tokens,
            "tiny.turn": e.turn,
            "tiny.json_mode": e.json_mode,
            **self.t.server,
        }
        under = self._under(self.agent)
        self.chat = self._start(f"chat {self.model}", under, attributes, kind=SpanKind.CLIENT)

    def model_replied(self, e: ModelReplied) -> None:
        """Close the request's span with the usage and the finish reason."""
        if self.chat is None:
            return
        self.chat.set_attributes({INPUT_TOKENS: e.tokens_in, OUTPUT_TOKENS: e.tokens_out})
        if e.finish_reason:
            self.chat.set_attribute("gen_ai.response.finish_reasons", [e.finish_reason])
        if self.t.content and (e.content or e.calls):
            message = json.dumps([_output_message(e, self.text)], ensure_ascii=False)
            self.chat.set_attribute("gen_ai.output.messages", message)
        self.chat.end()
        self.chat = None

    def tool_called(self, e: ToolCalled) -> None:
        """Open a tool call's span."""
        if self.agent is None:
            return
        name = self.text(e.name)  # the model wrote it (a ghost's name may quote anything)
        attributes: dict[str, Any] = {
            OPERATION: "execute_tool",
            TOOL_NAME: name,
            CALL_ID: self.text(e.call_id),
            "gen_ai.tool.type": TOOL_TYPE,
            "tiny.tool.recovered": e.recovered,
        }
        if self.t.content:
            attributes["gen_ai.tool.call.arguments"] = self.text(e.arguments)
        self.tool = self._start(f"execute_tool {name}", self._under(self.agent), attributes)

    def tool_finished(self, e: ToolFinished) -> None:
        """Close the call's span with its outcome; a failed call sets the error status."""
        span, self.tool = self.tool, None
        if span is None:
            return
        outcome = e.outcome or "not_run"  # None: the budget was spent before it
        span.set_attribute("tiny.tool.outcome", outcome)
        if self.t.content:
            span.set_attribute("gen_ai.tool.call.result", self.text(e.result))
        if outcome in DECLINED_CALLS:
            declined = {TOOL_NAME: self.text(e.name), "tiny.tool.outcome": outcome}
            span.add_event("tiny.write.declined", declined)
        if outcome in FAILED_CALLS:
            _failed(span, outcome, outcome)
        span.end()

    def mark(self, name: str, attributes: Mapping[str, Any], on_tool: bool = False) -> None:
        """Add a span event to the open tool call's span (`on_tool`) or the invocation's."""
        span = (self.tool if on_tool else None) or self.agent or self.task
        if span is not None:
            span.add_event(name, dict(attributes))

    def ended(self, e: Ended) -> None:
        """One invocation of the task is over (the task may go on: a re-route)."""
        self._end_agent(e.digest)

    def finished(self, e: Finished) -> None:
        """The run is over: close its spans with the Digest; a run with none gets one."""
        if not self.opened:  # no model call (an abstain, a writer nobody can approve)
            card = e.digest.agent_id
            attributes = {OPERATION: "invoke_agent", "tiny.run": self.run}
            attributes |= {AGENT_NAME: card, AGENT_ID: card} if card else {}
            name = f"invoke_agent {card}" if card else "invoke_agent"
            self.agent = self._start(name, self.parent, attributes)
        self._end_agent(e.digest)
        if self.task is not None:
            _close(self.task, e.digest, self.reason(e.digest))
            self.task = None
        self.t._runs.discard(self)

    def aborted(self, e: Aborted) -> None:
        """An error ended the run (raised to its caller): end its spans with it, now; Ctrl-C
        ends them as a run cut short."""
        if e.interrupted:
            self.abandon()
        else:
            self.abandon(ABORTED, self.text(e.reason) if self.t.content else ABORTED_UNSAID)
        self.t._runs.discard(self)

    def abandon(self, kind: str = "unfinished", description: str = UNFINISHED) -> None:
        """End every open span of the run as an error (by default: a run cut short, Ctrl-C)."""
        for span in (self.tool, self.chat, self.agent, self.task):
            if span is not None:
                _failed(span, kind, description)
                span.end()
        self.tool = self.chat = self.agent = self.task = None

    def _end_agent(self, digest: Digest | None) -> None:
        for span in (self.tool, self.chat):  # left open by an error, e.g. a provider's
            if span is not None:
                if digest is not None:
                    _failed_as(span, digest, self.reason(digest))
                span.end()
        if self.agent is not None and digest is not None:
            _close(self.agent, digest, self.reason(digest))
        elif self.agent is not None:
            self.agent.end()
        self.tool = self.chat = self.agent = None

    def reason(self, digest: Digest) -> str:
        """The Digest's reason as a span carries it: a failed run's message (a server's, which
        may quote the task) only with content capture on."""
        reason = digest.reason or ""
        hidden = digest.status == "failed" and not self.t.content and not _LABEL.fullmatch(reason)
        return FAILED_UNSAID if reason and hidden else self.text(reason)

    def _under(self, span: Span) -> Context:
        return set_span_in_context(span, self.parent)

    def _start(
        self,
        name: str,
        parent: Context | None,
        attributes: Mapping[str, Any],
        start: int | None = None,
        kind: SpanKind = SpanKind.INTERNAL,
    ) -> Span:
        self.opened = True
        return self.t.tracer.start_span(name, parent, kind, dict(attributes), start_time=start)


def _close(span: Span, digest: Digest, reason: str) -> None:
    """End a span with the Digest's status, reason (as spans carry it) and cost; `failed` is
    an error."""
    span.set_attributes(
        {
            "tiny.digest.status": digest.status,
            INPUT_TOKENS: digest.cost.tokens_in,
            OUTPUT_TOKENS: digest.cost.tokens_out,
            "tiny.cost.tool_calls": digest.cost.tool_calls,
            "tiny.cost.ghost_calls": digest.cost.ghost_calls,
        }
    )
    if reason:
        span.set_attribute("tiny.digest.reason", reason)
    if digest.routing is not None and digest.routing.rerouted_from:
        span.set_attribute("tiny.routing.rerouted_from", digest.routing.rerouted_from)
    _failed_as(span, digest, reason)
    span.end()


def _failed_as(span: Span, digest: Digest, reason: str) -> None:
    """Set the error status on `span`, described by `reason` (as spans carry it), when the
    Digest says the run failed."""
    if digest.status == "failed":
        label = reason == digest.reason and _LABEL.fullmatch(reason)
        _failed(span, reason if label else FAILED, reason)


def _failed(span: Span, kind: str, description: str) -> None:
    span.set_attribute("error.type", kind)
    span.set_status(StatusCode.ERROR, description or None)


def _input_content(
    messages: Sequence[Mapping[str, Any]], text: Callable[[str], str]
) -> dict[str, str]:
    """The fresh context as the conventions' system instructions and input messages (JSON)."""

    def part(m: Mapping[str, Any]) -> dict[str, str]:
        return {"type": "text", "content": text(str(m.get("content") or ""))}

    system = [part(m) for m in messages if m.get("role") == "system"]
    said = [
        {"role": m.get("role"), "parts": [part(m)]} for m in messages if m.get("role") != "system"
    ]
    return {
        "gen_ai.system_instructions": json.dumps(system, ensure_ascii=False),
        "gen_ai.input.messages": json.dumps(said, ensure_ascii=False),
    }


def _output_message(e: ModelReplied, text: Callable[[str], str]) -> dict[str, Any]:
    """The model's answer as the conventions' output message: its text, and its tool calls."""
    parts = [{"type": "text", "content": text(e.content)}] if e.content else []
    parts += [_call_part(call, text) for call in e.calls]
    return {"role": "assistant", "parts": parts, "finish_reason": e.finish_reason or ""}


def _call_part(call: tuple[str, str, str], text: Callable[[str], str]) -> dict[str, Any]:
    """A tool call as the conventions' tool_call part: its arguments an object when JSON."""
    call_id, name, arguments = call
    scrubbed = text(arguments)  # scrubbed first: `[redacted]` keeps the JSON whole
    return {
        "type": "tool_call",
        "id": text(call_id),
        "name": text(name),
        "arguments": _json(scrubbed),
    }


def _json(arguments: str) -> Any:
    try:
        return json.loads(arguments)
    except ValueError:
        return arguments  # as the model wrote them (the call fails as bad_arguments)


def _ghost(run: _RunTrace, e: GhostCall) -> None:
    run.mark("tiny.ghost_call", {TOOL_NAME: run.text(e.name), "tiny.ghost_calls": e.count})


def _budget(run: _RunTrace, e: BudgetHit) -> None:
    run.mark("tiny.budget.stop", {"tiny.budget.limit": e.limit})


def _repair(run: _RunTrace, e: Repairing) -> None:
    shown = {"tiny.repair.problems": [run.text(p) for p in e.problems]} if run.t.content else {}
    run.mark("tiny.repair", {"tiny.repair.count": len(e.problems), **shown})


def _artifact(run: _RunTrace, e: ArtifactKept) -> None:
    kept = {"tiny.artifact.handle": e.handle, TOOL_NAME: e.tool, "tiny.artifact.chars": e.chars}
    run.mark("tiny.artifact.kept", kept, on_tool=True)


def _mode(run: _RunTrace, e: ModeSwitched) -> None:
    run.mark("tiny.mode_switched", {"tiny.tool_mode": e.to, "tiny.mode_switched.why": e.why})


_HANDLERS: dict[type, Callable[[_RunTrace, Any], None]] = {
    Routed: _RunTrace.routed,
    RunStarted: _RunTrace.run_started,
    TurnStarted: _RunTrace.turn_started,
    ModelReplied: _RunTrace.model_replied,
    ToolCalled: _RunTrace.tool_called,
    ToolFinished: _RunTrace.tool_finished,
    GhostCall: _ghost,
    BudgetHit: _budget,
    Repairing: _repair,
    ArtifactKept: _artifact,
    ModeSwitched: _mode,
    Ended: _RunTrace.ended,
    Finished: _RunTrace.finished,
    Aborted: _RunTrace.aborted,
}
