"""tiny as an MCP server: `delegate`, `invoke` and `route` as tools, the cards as resources.

Built on the official `mcp` SDK and imported only by `tiny serve`. Each tool call runs its card
in a worker thread and is logged like a command-line run. Writes: `allow_writes` approves every
one; a host that declares elicitation is asked about each; with neither, a writer card stops
with `needs_confirmation`. From protocol 2026-07-28 on the question goes back as an
`InputRequiredResult` and the run waits, parked, for the host's retry carrying the answer. On
stdio the SDK talks through `stdio.answering_stdio`, so a host that closes stdin gets every answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import queue
import secrets
import socket
import sys
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from functools import partial
from typing import Annotated, Any

import anyio
import anyio.to_thread
import uvicorn
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.resources import TextResource
from mcp.types import (
    CallToolResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    InputRequiredResult,
    TextContent,
    ToolAnnotations,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import Field

from tiny_cli._version import __version__
from tiny_cli.agent.loop import Approve, approve_writes, decline_writes
from tiny_cli.cards.card import Card
from tiny_cli.cards.load import article
from tiny_cli.delegation import WRITE_NOT_CONFIRMED, LazyRouter, Routes, run_card
from tiny_cli.delegation import delegate as run_delegate
from tiny_cli.digest import Brief, CallRecord, Digest, make_brief
from tiny_cli.errors import ConfigError, TinyError
from tiny_cli.events import Observer, ignore
from tiny_cli.provider.client import Provider
from tiny_cli.routing.router import Decision
from tiny_cli.secrets import Scrubber, scrubber
from tiny_cli.serve.stdio import answering_stdio
from tiny_cli.session import open_session, write_question
from tiny_cli.settings import DEFAULT_TOP, Settings
from tiny_cli.text import kind_of, printable, write_call
from tiny_cli.tools.artifacts import ArtifactStore
from tiny_cli.tools.mcp_config import original
from tiny_cli.workspace import Workspace, open_workspace

__all__ = [
    "Served",
    "build_server",
    "card_facts",
    "card_resources",
    "digest_result",
    "digest_text",
    "error_result",
    "route_text",
    "serve",
]

HOST = "127.0.0.1"  # --http listens on loopback only: the server runs agents with your key
COMMAND = "serve"  # the run log's `command` for every served run
CARDS_URI = "tiny://cards"
APPROVAL_SECONDS = 300.0  # a write call nobody answers within this is declined
WRITE_KEY = "approve_write"  # the key of the approval question in an InputRequiredResult
APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "allow": {
            "type": "boolean",
            "title": "Allow this write",
            "description": "Run exactly this call; accepting without a value allows it.",
            "default": True,
        }
    },
}
DRAIN_GRACE_SECONDS = 30.0  # past the longest card's wall budget: routing, the answer's way out
# Ctrl-C under --http: an answer already on its way out may finish, a running call may not hold
# the exit (uvicorn waits for it without bound); well inside the CLI's INTERRUPT_GRACE_SECONDS
STOP_GRACE_SECONDS = 1
NOT_CONFIRMED_NOTE = (
    "{card} writes and nobody can approve a write here: use a host that supports "
    "elicitation (each write call is then asked), or start `tiny serve --allow-writes`"
)

Task = Annotated[str, Field(description="What to do, in one sentence.")]
MustReturn = Annotated[
    list[str] | None, Field(description="Field names the Digest must fill, besides the card's.")
]
Inputs = Annotated[
    dict[str, str] | None, Field(description="Named inputs the agent needs: URLs, terms, names.")
]
Hint = Annotated[
    str | None, Field(description="Short context (cut to 800 characters); never a dialogue.")
]
MaxTokens = Annotated[
    # at least 16: checked by the Brief, so a host gets tiny's one line, not the SDK's dump
    int | None,
    Field(description="Lower the card's per-answer token budget (never raise); at least 16."),
]


class _InFlight:
    """The runs a server started and has not seen end; at exit they are settled, not dropped."""

    def __init__(self) -> None:
        self.runs: set[_Pending] = set()
        self.lock = threading.Lock()

    def settle(self, seconds: float) -> None:
        """Decline every write a run waits on (its host is gone), then wait for the runs to
        end and be logged, up to `seconds` in all."""
        deadline = time.monotonic() + seconds
        with self.lock:
            runs = list(self.runs)
        for pending in runs:
            pending.answers.put(False)
        for pending in runs:
            if pending.thread is not None:
                pending.thread.join(max(0.0, deadline - time.monotonic()))


@dataclass(frozen=True)
class Served:
    """What every served run shares: the workspace, the model, the run log and the write rule."""

    ws: Workspace
    provider: Provider
    # run label, its task (`goal=`) and the host's W3C trace context (`trace=`, when it sent
    # one) -> its observer
    observe: Callable[..., Observer] = lambda label, **_: ignore
    allow_writes: bool = False
    artifacts: ArtifactStore | None = None
    # what a reply may not hold: the keys the stores scrub (default: the environment's)
    caller_scrub: Scrubber = field(default_factory=lambda: scrubber().for_caller())
    in_flight: _InFlight = field(default_factory=_InFlight)  # settled before the log closes


def build_server(served: Served, router: Routes | None = None) -> MCPServer:
    """Return the MCP server for a workspace; `router`: the concierge (default: the
    workspace's LazyRouter, built on its first task, asked one task at a time)."""
    ws = served.ws
    concierge = router if router is not None else LazyRouter(ws.settings, ws.cards.values())
    service = _Service(served, concierge)
    # on the root before the SDK would put its rich handler there; this server's, not an
    # earlier one's (its scrubber knows this server's keys)
    root = logging.getLogger()
    for earlier in [h for h in root.handlers if isinstance(h, _LogLine)]:
        root.removeHandler(earlier)
    root.addHandler(_LogLine(served.caller_scrub.text))
    server: MCPServer = _Server(
        "tiny",
        version=__version__,
        instructions="Delegate a task to a tiny agent; you get back a short Digest.",
        log_level="WARNING",
    )
    _add_tools(server, service, ws)
    for resource in card_resources(ws):
        server.add_resource(resource)
    return server


def serve(settings: Settings, *, http_port: int | None = None, allow_writes: bool = False) -> None:
    """Serve the settings' cards over stdio, or streamable HTTP on 127.0.0.1:`http_port`."""
    if http_port is not None:
        _check_port(http_port)  # --http needs no stdout (pythonw): nothing is written there
        _serve(settings, allow_writes, partial(_over_http, http_port))
        return
    if sys.stdin is None or sys.stdout is None:  # `tiny serve <&-`: no channel to a host
        raise ConfigError("stdin or stdout is closed: tiny serve speaks MCP over both (or --http)")
    # stdout is the protocol's alone from here to the end: the tools' imports, the drain too
    with answering_stdio() as relay:
        _serve(settings, allow_writes, lambda server, drain: relay(_over_stdio(server), drain))


def _serve(
    settings: Settings, allow_writes: bool, run: Callable[[MCPServer, float], float]
) -> None:
    """Serve the workspace with `run(server, drain)` (it returns the drain time left), then
    settle the runs still going."""
    ws = open_workspace(settings)
    with open_session(settings, COMMAND) as session:
        provider = session.provider(COMMAND)
        caller_scrub = session.artifacts.scrub.for_caller()
        served = Served(
            ws, provider, session.observe, allow_writes, session.artifacts, caller_scrub
        )
        drain = run(build_server(served), _drain_seconds(ws, settings))
        # a call the host cancelled or left parked still ends and is logged (mcp.md promises it)
        served.in_flight.settle(drain)


def _over_stdio(server: MCPServer) -> Callable[[], None]:
    """Serve stdio until the SDK's stdin ends (the relay keeps it open while answers are due)."""
    return partial(anyio.run, server.run_stdio_async)


def _over_http(port: int, server: MCPServer, drain: float) -> float:
    """Serve streamable HTTP until stopped; the runs still going then have the whole drain."""
    print(f"tiny serve: MCP at http://{HOST}:{port}/mcp", file=sys.stderr, flush=True)
    app = server.streamable_http_app(host=HOST)  # what run_streamable_http_async serves
    # log_config None: uvicorn's records go to the root logger, in _LogLine's form
    config = uvicorn.Config(
        app, HOST, port, log_config=None, log_level="warning",
        timeout_graceful_shutdown=STOP_GRACE_SECONDS,
    )  # fmt: skip
    anyio.run(uvicorn.Server(config).serve)
    return drain


class _LogLine(logging.Handler):
    """What the SDK and uvicorn log (warnings and worse): one line each on stderr, as tiny's
    own lines are, scrubbed and escaped; a Host header a client sent may hold ESC or markup."""

    def __init__(self, scrub: Callable[[str], str]) -> None:
        # libraries that set their own level (bm25s) would chat here below WARNING
        super().__init__(logging.WARNING)
        self.scrub = scrub

    def emit(self, record: logging.LogRecord) -> None:
        """Write `tiny serve: LEVEL: message (ExceptionType)` on stderr."""
        error = record.exc_info[1] if record.exc_info else None
        if isinstance(error, asyncio.CancelledError):
            return  # a call Ctrl-C cut off: its run is logged interrupted, nothing failed
        try:
            text = record.getMessage().strip()
        except Exception:  # a bad format string in a library's call: its template still says much
            text = str(record.msg)
        text += f" ({type(error).__name__})" if error is not None else ""
        line = f"tiny serve: {record.levelname.lower()}: {printable(self.scrub(text))}"
        with contextlib.suppress(OSError, ValueError):  # stderr closed: nobody left to tell
            print(line, file=sys.stderr, flush=True)


# --- the tools ------------------------------------------------------------------------------


class _Server(MCPServer):
    """The SDK's server, each call's arguments first held to its tool's schema: a problem is one
    line naming the argument, and one the schema does not name is refused, not dropped."""

    _schemas: dict[str, dict[str, Any]] | None = None

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context | None = None
    ) -> CallToolResult | InputRequiredResult:
        """Check the arguments against the tool's schema, then call it as the SDK does."""
        if self._schemas is None:
            self._schemas = {t.name: t.input_schema for t in await self.list_tools()}
        if name in self._schemas:
            _check_arguments(name, self._schemas[name], arguments)
            # JSON Schema reads 1e20 and 3.0 as integers, pydantic not 1e20 (it dumps): pass on
            # the integer the check read, where the schema asks for one
            takes = self._schemas[name].get("properties", {})
            arguments = {
                k: _whole(v) if _integer(takes.get(k)) else v for k, v in arguments.items()
            }
        return await super().call_tool(name, arguments, context)


def _check_arguments(tool: str, schema: Mapping[str, Any], arguments: Mapping[str, Any]) -> None:
    """ToolError, one line, for an argument the schema does not name or does not allow."""
    known = schema.get("properties", {})
    unknown = sorted(set(arguments) - set(known), key=str)
    if unknown:
        named = ", ".join(known)
        raise ToolError(
            f"tiny: error: {printable(str(unknown[0]))!r}: no argument of {tool} ({named})"
        )
    error = best_match(Draft202012Validator(schema).iter_errors(dict(arguments)))
    if error is None:
        return
    where = ".".join(map(str, error.absolute_path)) or "arguments"
    if error.validator in ("type", "anyOf"):
        branches = error.schema.get("anyOf", [error.schema])
        why = f"must be {article([b.get('type') for b in branches])}, got {kind_of(error.instance)}"
    elif error.validator == "minimum":
        why = f"must be at least {error.validator_value}"
    elif error.validator == "required":
        where = next(n for n in error.validator_value if n not in error.instance)
        why = "missing"
    else:
        why = f"does not fit its schema ({error.validator})"
    raise ToolError(f"tiny: error: {printable(where)}: {why}")  # as a Brief's problem says


def _integer(schema: Any) -> bool:
    """Whether an argument's schema asks for an integer (an optional one's `anyOf` too)."""
    if not isinstance(schema, Mapping):
        return False
    return schema.get("type") == "integer" or any(map(_integer, schema.get("anyOf", ())))


def _whole(value: Any) -> Any:
    """A float with no fraction as the int it is; any other value as it is."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _add_tools(server: MCPServer, service: _Service, ws: Workspace) -> None:
    """Register delegate, invoke and route with schemas derived from their signatures."""
    ids = ", ".join(sorted(ws.cards))
    CardId = Annotated[str, Field(description=f"The card to run: one of {ids}.")]

    async def delegate(
        task: Task,
        ctx: Context,
        must_return: MustReturn = None,
        inputs: Inputs = None,
        context_hint: Hint = None,
        max_output_tokens: MaxTokens = None,
    ) -> CallToolResult | InputRequiredResult:
        """Route a task to the tiny agent whose card fits and run it in a fresh context
        under a hard budget; return its Digest (status, summary, fields, cost), or
        `abstain` when no card fits."""
        brief = (task, must_return or (), inputs, context_hint, max_output_tokens)
        return await service.call(ctx, None, brief)

    async def invoke(
        card: str,
        task: Task,
        ctx: Context,
        must_return: MustReturn = None,
        inputs: Inputs = None,
        context_hint: Hint = None,
        max_output_tokens: MaxTokens = None,
    ) -> CallToolResult | InputRequiredResult:
        """Run one named card on a task in a fresh context under its budget; return its
        Digest."""
        brief = (task, must_return or (), inputs, context_hint, max_output_tokens)
        return await service.call(ctx, card, brief)

    async def route(task: Task, top: Annotated[int, Field(ge=1)] = DEFAULT_TOP) -> CallToolResult:
        """Rank the cards for a task by embedding similarity, or abstain; no model call."""
        return await service.route(task, top)

    # the card ids are known only now: postponed annotations could not name a local type
    invoke.__annotations__["card"] = CardId
    for fn, read_only in ((delegate, False), (invoke, False), (route, True)):
        hints = ToolAnnotations(read_only_hint=read_only, open_world_hint=not read_only)
        server.add_tool(fn, annotations=hints, structured_output=False)


TRACE_KEYS = ("traceparent", "tracestate")  # W3C trace context a host may put in `_meta`


class _Service:
    """The tools' work: build the Brief, run the card off the event loop, approve writes."""

    def __init__(self, served: Served, router: Routes) -> None:
        self.served = served
        self.router = router  # delegate runs and `route` share it (a LazyRouter: one at a time)
        self.parked: dict[str, _Pending] = {}

    def run(
        self, card_id: str | None, brief: Brief, approve: Approve, trace: Mapping[str, str]
    ) -> Digest:
        """Run the card named `card_id` on the Brief, or (None) route it to the card it fits."""
        s, label = self.served, "invoke" if card_id is not None else "delegate"
        # its observer logs its task (an abstain too); its spans continue the host's trace
        observer = s.observe(label, goal=brief.goal, **({"trace": trace} if trace else {}))
        run: dict[str, Any] = {"provider": s.provider, "approve": approve, "observer": observer}
        run["artifacts"] = s.artifacts
        if card_id is None:
            return run_delegate(s.ws, self.router, brief, **run)
        return run_card(s.ws, card_id, brief, **run)

    async def route(self, task: str, top: int) -> CallToolResult:
        """Return the routing decision and candidates for `task`."""
        try:
            decision = await anyio.to_thread.run_sync(self.router.route, task, top)
        except TinyError as exc:
            return error_result(exc)
        decision = decision.scrubbed(self.served.caller_scrub.text)  # as a Digest's task is
        return CallToolResult(
            content=[TextContent(type="text", text=route_text(decision))],
            structured_content=decision.to_json(),
        )

    async def call(
        self, ctx: Context, card_id: str | None, brief: tuple[Any, ...]
    ) -> CallToolResult | InputRequiredResult:
        """Start a run on the Brief made of `brief` (or resume a parked one with the host's
        answer: bad input is an error only when the call is not a retry) and follow it."""
        if ctx.request_state is not None:
            pending = self.parked.pop(ctx.request_state, None)
            if pending is None:
                return error_result(ConfigError("no run waits for this answer any more"))
            pending.answers.put(_approved((ctx.input_responses or {}).get(WRITE_KEY)))
            return await self._follow(ctx, pending)
        try:
            the_brief = make_brief(*brief)
        except TinyError as exc:
            return error_result(exc)
        pending = _Pending()
        approve, trace = self._approver(ctx, pending), _trace_context(ctx)
        pending.start(lambda: self.run(card_id, the_brief, approve, trace), self.served.in_flight)
        return await self._follow(ctx, pending)

    def _approver(self, ctx: Context, pending: _Pending) -> Approve:
        """--allow-writes approves all; a host that can elicit is asked; else nothing is."""
        if self.served.allow_writes:
            return approve_writes
        caps = ctx.client_capabilities
        return pending.ask if caps is not None and caps.elicitation is not None else decline_writes

    async def _follow(
        self, ctx: Context, pending: _Pending
    ) -> CallToolResult | InputRequiredResult:
        """Wait for the run's Digest, putting each write call it asks about to the host."""
        while True:
            event = await anyio.to_thread.run_sync(pending.events.get, abandon_on_cancel=True)
            if isinstance(event, Digest):
                return digest_result(event.scrubbed(self.served.caller_scrub))
            if isinstance(event, TinyError):
                return error_result(event)
            if isinstance(event, BaseException):
                raise event  # a bug: the SDK logs it on stderr and tells the host
            if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
                return self._park(pending, event)
            scrub = self.served.caller_scrub.text
            pending.answers.put(await _elicit(ctx, event.message(scrub), scrub))

    def _park(self, pending: _Pending, question: _Question) -> InputRequiredResult:
        """Keep the waiting run under a fresh key; the host's retry names it."""
        for key in [k for k, p in self.parked.items() if p.gave_up]:
            del self.parked[key]  # their runs declined the write and went on without us
        key = secrets.token_hex(12)
        self.parked[key] = pending
        asked = question.message(self.served.caller_scrub.text)
        form = ElicitRequestFormParams(message=asked, requested_schema=APPROVAL_SCHEMA)
        return InputRequiredResult(
            input_requests={WRITE_KEY: ElicitRequest(params=form)}, request_state=key
        )


def _trace_context(ctx: Context) -> dict[str, str]:
    """The host's W3C trace context from the request's `_meta`; empty when it sent none."""
    meta = ctx.request_context.meta or {}
    return {k: v for k in TRACE_KEYS if isinstance(v := meta.get(k), str)}


@dataclass(frozen=True)
class _Question:
    """A write call the run waits on: this card, this tool, these arguments."""

    card: str
    tool: str
    arguments: Mapping[str, Any]

    def message(self, scrub: Callable[[str], str]) -> str:
        """Return the question shown to the user."""
        return write_question(self.card, self.tool, self.arguments, scrub)


class _Pending:
    """One run in its own thread, talking to the event loop through two queues."""

    def __init__(self) -> None:
        self.events: queue.Queue[Digest | _Question | BaseException] = queue.Queue()
        self.answers: queue.Queue[bool] = queue.Queue()
        self.gave_up = False  # a question went unanswered for APPROVAL_SECONDS
        self.thread: threading.Thread | None = None

    def start(self, run: Callable[[], Digest], in_flight: _InFlight) -> None:
        """Run in a daemon thread, known to `in_flight` (settled at exit) until it ends."""

        def work() -> None:
            try:
                self.events.put(run())
            except BaseException as exc:  # handed to the loop, which decides what it means
                self.events.put(exc)
            finally:
                with in_flight.lock:
                    in_flight.runs.discard(self)

        self.thread = threading.Thread(target=work, name="tiny-serve-run", daemon=True)
        with in_flight.lock:
            in_flight.runs.add(self)
        self.thread.start()

    def ask(self, card: Card, tool: str, arguments: dict[str, Any]) -> bool:
        """Approve (runner side): put the call to the host and wait for the answer."""
        self.events.put(_Question(card.id, tool, dict(arguments)))
        try:
            return self.answers.get(timeout=APPROVAL_SECONDS)
        except queue.Empty:
            self.gave_up = True
            return False


async def _elicit(ctx: Context, question: str, scrub: Callable[[str], str]) -> bool:
    """Ask the host mid-call (protocols before 2026-07-28); any failure declines, said on
    stderr (what the host said scrubbed and escaped: it may echo the key, or ESC)."""
    try:
        result = await ctx.session.elicit_form(
            question, APPROVAL_SCHEMA, related_request_id=ctx.request_id
        )
    except Exception as exc:  # a host that cannot ask has not approved
        why = printable(scrub(str(exc)))
        print(f"tiny serve: write declined, the host could not be asked: {why}", file=sys.stderr)
        return False
    return _approved(result)


def _approved(result: Any) -> bool:
    """Only an accepted answer approves, unless it says `allow: false`."""
    if not isinstance(result, ElicitResult) or result.action != "accept":
        return False
    return (result.content or {}).get("allow", True) is True


# --- results --------------------------------------------------------------------------------


def digest_result(digest: Digest) -> CallToolResult:
    """Return the Digest as structured content with a short, escaped text rendering."""
    if digest.reason == WRITE_NOT_CONFIRMED:  # the CLI's note names --yes, which serve lacks
        note = NOT_CONFIRMED_NOTE.format(card=digest.agent_id)
        digest = replace(digest, notes_for_caller=(note,))
    return CallToolResult(
        content=[TextContent(type="text", text=digest_text(digest))],
        structured_content=digest.to_json(),
    )


def error_result(exc: TinyError) -> CallToolResult:
    """Return bad input as a tool error the host shows: one readable line."""
    text = printable(f"tiny: error: {exc}", keep="\n")
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


def digest_text(d: Digest) -> str:
    """Return the Digest in a few plain lines, with no terminal control characters."""
    head = f"{d.agent_id or 'no card'} · {d.status}" + (f" ({d.reason})" if d.reason else "")
    lines = [head, *([d.summary] if d.summary else [])]
    lines += [
        f"re-routed: {a.agent_id} {a.status} ({a.summary or a.reason}) → {d.agent_id}"
        for a in d.attempts
    ]
    lines += [f"{k}: {json.dumps(v, ensure_ascii=False)}" for k, v in d.fields.items()]
    lines += [f"missing: {', '.join(d.missing)}"] if d.missing else []
    lines += [f"note: {n}" for n in d.notes_for_caller]
    for verdict, calls in (("approved", d.approved_writes()), ("declined", d.declined_writes())):
        lines += [f"{verdict} write: {_write(c)}" for c in calls]
    c = d.cost
    lines.append(
        f"cost: {c.tokens_in} tokens in, {c.tokens_out} out, {c.tool_calls} tool calls, "
        f"{c.ghost_calls} ghost calls, {c.wall_seconds:.2f} s"
    )
    # each line escaped apart: a newline a model wrote in its summary or a note would
    # otherwise start a line of tiny's own ("approved write: …") that no one wrote
    return "\n".join(map(printable, lines))


def _write(call: CallRecord) -> str:
    """A write call as the CLI shows it: its outcome too, unless it is `ok` or `declined`."""
    outcome = "" if call.outcome in ("ok", "declined") else f" ({call.outcome})"
    return write_call(call.name, call.arguments or {}) + outcome


def route_text(decision: Decision) -> str:
    """Return the routing decision and its candidates in plain lines."""
    target = decision.agent_id if decision.decision == "route" else "abstain"
    n = decision.decimals(3)
    head = f"{decision.decision} → {target} (score {decision.score:.{n}f}, "
    head += f"threshold {decision.threshold:.{n}f})"
    lines = [head, *(f"  {c.agent_id}: {c.score:.3f}" for c in decision.candidates)]
    return "\n".join(map(printable, lines))


# --- resources ------------------------------------------------------------------------------


def card_facts(card: Card) -> dict[str, Any]:
    """Return what a host needs to pick a card: id, summary, tools, side effects, budget."""
    return {
        "id": card.id,
        "summary": card.summary,
        "examples": list(card.examples),
        "tools": [original(t) for t in card.tools],  # as cards write them: time.get_current_time
        "returns_required": list(card.returns_required),
        "side_effects": card.side_effects,
        "budget": asdict(card.budget),  # max_tool_calls, max_output_tokens, max_wall_seconds
    }


def card_resources(ws: Workspace) -> list[TextResource]:
    """Return the card list, and each card, as JSON resources."""
    cards = [card_facts(c) for c in sorted(ws.cards.values(), key=lambda c: c.id)]
    about = "Every card tiny serves: id, summary, tools, side effects, budget."
    listed: list[tuple[str, str, str, Any]] = [(CARDS_URI, "cards", about, cards)]
    listed += [(f"{CARDS_URI}/{c['id']}", c["id"], c["summary"], c) for c in cards]
    return [
        TextResource(
            uri=uri,
            name=name,
            description=description,
            mime_type="application/json",
            text=json.dumps(document, ensure_ascii=False, indent=2),
        )
        for uri, name, description, document in listed
    ]


# --- wiring ---------------------------------------------------------------------------------


def _check_port(port: int) -> None:
    """Refuse a port that is out of range or taken, before anything starts."""
    if not 0 < port < 65536:
        raise ConfigError(f"--http {port}: a port is 1 to 65535")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        if os.name == "posix":  # as uvicorn binds: TIME_WAIT must not keep a restart off the
            # port (on Windows the option would let it bind over a port in use)
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((HOST, port))
        except OSError as exc:
            raise ConfigError(
                f"--http {port}: cannot listen on {HOST}:{port}: {exc.strerror}"
            ) from None


def _drain_seconds(ws: Workspace, settings: Settings) -> float:
    """How long a closed stdin waits for the calls in flight: the longest wall budget, and some."""
    longest = max((c.budget.max_wall_seconds for c in ws.cards.values()), default=0.0)
    return longest * settings.wall_scale + DRAIN_GRACE_SECONDS
