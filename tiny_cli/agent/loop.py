"""The runner: one card, one Brief, a fresh context, a hard budget, a Digest back."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import jsonschema

from tiny_cli.agent.actions import (
    read_action,
    recover_calls,
    response_format,
    result_message,
    tool_mode_for,
)
from tiny_cli.agent.budget import (
    DEFAULT_MAX_GHOST_CALLS,
    DEFAULT_MAX_RESULT_CHARS,
    DEFAULT_WALL_SCALE,
    Clock,
    Meter,
    cap_result,
    cut_summary,
    effective_budget,
)
from tiny_cli.agent.evidence import evidence_of, field_sources, needs_evidence
from tiny_cli.agent.prompts import (
    call_first_message,
    repair_message,
    system_prompt,
    tools_section,
    user_message,
    wrap_up_message,
)
from tiny_cli.agent.reply import Reply, field_values, parse_reply
from tiny_cli.cards.load import Budget, Card, answer_schema
from tiny_cli.deadline import call_within
from tiny_cli.digest import (
    CHARS_PER_TOKEN,
    MODEL_STATUSES,
    Brief,
    CallOutcome,
    CallRecord,
    Digest,
    Status,
    with_caller_tokens,
)
from tiny_cli.errors import (
    DeadlineExceeded,
    ProviderError,
    ProviderTimeout,
    ToolCallError,
    ToolServerError,
)
from tiny_cli.events import (
    BudgetHit,
    Finished,
    GhostCall,
    ModelReplied,
    ModeSwitched,
    Observer,
    RunStarted,
    ToolCalled,
    ToolFinished,
    TurnStarted,
    ignore,
)
from tiny_cli.provider.client import Completion, Provider, ToolCall
from tiny_cli.settings import ToolMode
from tiny_cli.tools.artifacts import (
    READ_ARTIFACT,
    Artifact,
    ArtifactStore,
    held_note,
    stored_result,
)
from tiny_cli.tools.read_artifact import read_artifact_tool
from tiny_cli.tools.registry import Registry, Tool

Approve = Callable[[Card, str, dict[str, Any]], bool]
"""Asked before every call of a write tool: may `card` call this tool with these arguments?

The arguments are the validated ones the tool would run with (a copy). Only `True` approves.
The runner never asks a person itself: the caller decides how (a prompt, `--yes`, a bench).
"""

WRITE_DECLINED = "write_declined"
NO_EVIDENCE = "no_evidence"  # `ok` claimed, but none of the agent's tools ran
UNVERIFIED_WRITE = "unverified_write"  # a writer's `ok` without a successful write call
MAX_ARGUMENT_CHARS = 100_000  # one call's JSON arguments; more is not a tool call


def decline_writes(card: Card, tool: str, arguments: dict[str, Any]) -> bool:
    """Approve nothing: the default, so a caller that forgot to choose writes nothing."""
    return False


def approve_writes(card: Card, tool: str, arguments: dict[str, Any]) -> bool:
    """Approve every write (`--yes`, the bench in its scratch home); the Digest lists each one."""
    return True


def invoke(
    card: Card,
    brief: Brief,
    *,
    registry: Registry,
    provider: Provider,
    model: str,
    approve: Approve = decline_writes,
    clock: Clock = time.monotonic,
    tool_mode: ToolMode | None = None,
    wall_scale: float = DEFAULT_WALL_SCALE,
    observer: Observer = ignore,
    artifacts: ArtifactStore | None = None,
    held: Sequence[Artifact] = (),
) -> Digest:
    """Run `card` on `brief` in a fresh context under its budget; return the Digest.

    Every call of a tool that writes is put to `approve` first, as that call with those
    arguments; a declined call is answered to the model as declined and never runs.
    `tool_mode` (flag or env) wins over the card's; see `tiny_cli.agent.actions`. `observer` gets
    every step as an event (`tiny_cli.events`), ending with `Finished`.

    With `artifacts`, a tool result over the result limit is stored there whole and the agent
    gets `read_artifact`; without, it is cut. `held` are earlier artifacts the agent may read.
    """
    meter = Meter(effective_budget(card, brief, wall_scale), clock)
    mode = tool_mode_for(card, tool_mode)
    try:  # start the MCP servers the card needs, within its wall budget
        registry.bind(card.tools, meter.remaining(), card.writes)
    except ToolServerError as exc:
        return _unavailable(card, brief, meter, model, mode, observer, str(exc))
    run = _Run(card, brief, registry, approve, meter, mode, observer, _shelf(card, artifacts, held))
    observer(_started(run, model))
    digest = _loop(run, provider, model)
    observer(Finished(digest, tuple(run.messages)))
    return digest


def _loop(run: _Run, provider: Provider, model: str) -> Digest:
    """Ask, run the calls, and go on until an answer, a failure or a spent budget."""
    meter = run.meter
    while True:
        if meter.remaining() <= 0:
            return _ended(run, "max_wall_seconds", meter.slowest())
        try:
            reply = run.ask(provider, model)
        except ProviderTimeout as exc:
            return _ended(run, "max_wall_seconds", f"{exc}; {meter.slowest()}")
        except ProviderError as exc:
            return _digest(run, "failed", reason=str(exc))
        calls = run.calls_in(reply)
        if calls:
            try:
                run.call_tools(calls, reply)
            except ToolServerError as exc:  # a tool server died: no later call can reach it
                return _digest(run, "failed", reason=str(exc))
            if len(meter.ghosts()) > DEFAULT_MAX_GHOST_CALLS:
                run.observer(BudgetHit("ghost_calls"))
                return _digest(run, "failed", reason="ghost_calls")
            continue
        if run.insist_on_a_tool(reply):
            continue
        done = run.answer(reply)
        if done is not None:
            return done


def _unavailable(
    card: Card,
    brief: Brief,
    meter: Meter,
    model: str,
    mode: ToolMode,
    observer: Observer,
    reason: str,
) -> Digest:
    """A tool server the card needs could not be started: `failed`, before any model call."""
    budget = meter.budget
    observer(
        RunStarted(
            card.id,
            model,
            mode,
            brief.goal,
            budget.max_tool_calls,
            budget.max_wall_seconds,
            budget.max_output_tokens,
            (),
        )
    )
    cost = meter.cost()
    digest = with_caller_tokens(
        Digest(card.id, "failed", notes_for_caller=brief.notes, cost=cost, reason=reason)
    )
    observer(Finished(digest, ()))
    return digest


def _started(run: _Run, model: str) -> RunStarted:
    budget = run.meter.budget
    return RunStarted(
        run.card.id,
        model,
        run.mode,
        run.brief.goal,
        budget.max_tool_calls,
        budget.max_wall_seconds,
        budget.max_output_tokens,
        tuple(run.messages),
    )


def _shelf(card: Card, store: ArtifactStore | None, held: Sequence[Artifact]) -> _Shelf | None:
    """Return the run's artifacts: none without a store, or if the card has a tool so named."""
    if store is None or READ_ARTIFACT in card.tools:
        return None  # long results are then cut, as they always were
    return _Shelf(store, held)


class _Shelf:
    """The artifacts one run may read: given by the caller, or stored by this run."""

    def __init__(self, store: ArtifactStore, given: Sequence[Artifact]) -> None:
        self.store = store
        self.held: list[Artifact] = list(given)
        self.created: list[Artifact] = []
        self.reader = read_artifact_tool(store, lambda: self.held, DEFAULT_MAX_RESULT_CHARS)

    def keep(self, tool: str, text: str, card: str) -> Artifact:
        """Store a result and hold it; raises OSError when it cannot be stored."""
        artifact = self.store.save(text, tool=tool, card=card)
        self.created.append(artifact)
        self.held.append(artifact)
        return artifact


class _Run:
    """One invocation's state: the context so far, the tool mode, and what has happened."""

    def __init__(
        self,
        card: Card,
        brief: Brief,
        registry: Registry,
        approve: Approve,
        meter: Meter,
        mode: ToolMode,
        observer: Observer = ignore,
        shelf: _Shelf | None = None,
    ) -> None:
        self.card, self.brief, self.registry, self.approve = card, brief, registry, approve
        self.meter, self.mode, self.observer, self.shelf = meter, mode, observer, shelf
        self.required = required_fields(card, brief)
        self.schemas = registry.schemas(card.tools) + self._reader_schema()
        self.json = mode == "json"  # auto starts native and may switch
        self.messages = _context(self._prompted(), brief, meter.budget, self._tools_text())
        if shelf is not None and shelf.held:
            self.messages[1]["content"] += "\n\n" + held_note(shelf.held)
        self.wrapping = self.repaired = self.insisted = False
        self.draft = ""
        self.notes: tuple[str, ...] = ()

    def ask(self, provider: Provider, model: str) -> Completion:
        """Send the context with this mode's tools or constraint; count what the answer cost."""
        forced = self.card.first == "tool" and not self.wrapping and not self._called_a_tool()
        tools = [] if self.json or self.wrapping else self.schemas
        asked = self.meter.clock()
        turn = self.meter.turns + 1
        self.observer(TurnStarted(turn, self.meter.remaining(), len(self.meter.calls), self.json))
        try:
            reply = provider.complete(
                model=model,
                messages=self.messages,
                tools=tools,
                max_tokens=self.meter.budget.max_output_tokens,
                timeout=self.meter.remaining(),
                response_format=self._constraint(forced) if self.json else None,
                tool_choice="required" if forced and tools else None,
            )
        finally:
            self.meter.model_seconds += self.meter.clock() - asked
        self.meter.turns += 1
        self.meter.tokens_in += reply.tokens_in
        self.meter.tokens_out += reply.tokens_out
        seconds = self.meter.clock() - asked
        self.observer(
            ModelReplied(
                turn,
                reply.tokens_in,
                reply.tokens_out,
                seconds,
                reply.content,
                len(reply.tool_calls),
            )
        )
        return reply

    def calls_in(self, reply: Completion) -> tuple[ToolCall, ...]:
        """Return the calls a reply asks for: native, json-mode, or recovered from its text."""
        if self.wrapping:
            return ()
        if self.json:
            call = read_action(reply.content, len(self.meter.calls))
            return (call,) if call is not None else ()
        if reply.tool_calls:
            return reply.tool_calls
        return recover_calls(reply.content, len(self.meter.calls))

    def call_tools(self, calls: Sequence[ToolCall], reply: Completion) -> None:
        """Run each call and answer it; a call not sent as `tool_calls` is answered as text."""
        native = bool(reply.tool_calls) and not self.json
        recovered = not native and not self.json
        self.messages.append(_assistant(reply) if native else _said(reply.content))
        for call in calls:
            content = self._handle(call, recovered)
            self.messages.append(
                _tool_message(call, content) if native else result_message(call.name, content)
            )
        if recovered and self.mode == "auto":
            self._switch_to_json("the model wrote tool calls as text")
        if self.meter.tools_spent():
            self.observer(BudgetHit("max_tool_calls"))
            self.wrapping = True
            limit = self.meter.budget.max_tool_calls
            self.messages.append({"role": "user", "content": wrap_up_message(limit)})

    def _handle(self, call: ToolCall, recovered: bool) -> str:
        """Run one call between its two events; a ghost is reported as such."""
        self.observer(ToolCalled(call.id, call.name, call.arguments, recovered))
        before, started = len(self.meter.calls), self.meter.clock()
        content = _call_tool(call, self, recovered)
        record = self.meter.calls[-1] if len(self.meter.calls) > before else None
        outcome = record.outcome if record is not None else None
        if outcome == "ghost":
            self.observer(GhostCall(call.name, len(self.meter.ghosts())))
        seconds = self.meter.clock() - started
        self.observer(ToolFinished(call.id, call.name, outcome, seconds, content))
        return content

    def insist_on_a_tool(self, reply: Completion) -> bool:
        """`first: tool` in auto mode: an answer before any tool ran switches the run to json."""
        if self.card.first != "tool" or self._called_a_tool() or self.wrapping:
            return False
        if self.mode != "auto" or self.json or self.insisted:
            return False
        if parse_reply(reply.content, ()).data.get("status") == "refused":
            return False  # not its job: a refusal needs no tool result
        self.insisted = True
        self.messages += [_said(reply.content), {"role": "user", "content": call_first_message()}]
        self._switch_to_json("the model answered before calling a tool")
        return True

    def answer(self, reply: Completion) -> Digest | None:
        """Finish on a usable answer; ask once for a repair; fail on a second bad answer."""
        self.messages.append(_said(reply.content))
        parsed = parse_reply(reply.content, self.required, self.card.returns)
        if self.wrapping:
            return _finish(self, parsed, forced="max_tool_calls")
        if not parsed.problems:
            return _finish(self, parsed)
        if self.repaired:
            note = f"answer still unusable after one repair: {'; '.join(parsed.problems)}"
            return _digest(run=self, status="failed", reason="schema", notes=(note,))
        self.repaired, self.draft = True, reply.content or self.draft
        repair = repair_message(parsed.problems, self.required, self.card.returns)
        self.messages.append({"role": "user", "content": repair})
        return None

    def tool(self, name: str) -> Tool | None:
        """Return the tool `name` if this agent has it now: its card's, or read_artifact."""
        if name in self.card.tools and name in self.registry:
            return self.registry[name]
        if name == READ_ARTIFACT and self.shelf is not None and self.shelf.held:
            return self.shelf.reader
        return None

    def tool_names(self) -> list[str]:
        """Name the tools this agent has now, as a ghost call's answer lists them."""
        return [s["function"]["name"] for s in self.schemas]

    def kept(self, name: str, text: str) -> str | None:
        """Store a long result as an artifact; return what the model sees, None if not stored."""
        if self.shelf is None or name == READ_ARTIFACT:  # a window is short: never stored again
            return None
        first = not self.shelf.held
        try:
            artifact = self.shelf.keep(name, text, self.card.id)
        except OSError as exc:
            why = exc.strerror or type(exc).__name__
            self.notes += (f"a {name} result was cut: it could not be stored ({why})",)
            return None
        if first:  # from now on the agent can read it, in either tool mode
            self.schemas = self.schemas + self._reader_schema()
        return stored_result(text, artifact, DEFAULT_MAX_RESULT_CHARS)

    def _reader_schema(self) -> list[dict[str, Any]]:
        reader = self.tool(READ_ARTIFACT) if READ_ARTIFACT not in self.card.tools else None
        return [reader.schema()] if reader is not None else []

    def _prompted(self) -> Card:
        """The card as its system prompt names it: with read_artifact once the run has it."""
        if not self._reader_schema():
            return self.card
        return replace(self.card, tools=(*self.card.tools, READ_ARTIFACT))

    def _constraint(self, forced: bool) -> dict[str, Any]:
        tools = [] if self.wrapping else self.schemas
        answer = None if forced and tools else answer_schema(self.card, self.required)
        return response_format(tools, answer)

    def _switch_to_json(self, why: str) -> None:
        if self.json:
            return
        self.json = True
        self.messages[0] = _context(
            self._prompted(), self.brief, self.meter.budget, self._tools_text(json_mode=True)
        )[0]
        self.notes += (f"switched to json tool mode: {why}",)
        self.observer(ModeSwitched("json", why))

    def _tools_text(self, json_mode: bool | None = None) -> str | None:
        return (
            tools_section(self.schemas) if (self.json if json_mode is None else json_mode) else None
        )

    def _called_a_tool(self) -> bool:
        """True once a call reached a tool or the approver (a ghost or bad arguments did not)."""
        return any(c.outcome not in ("ghost", "bad_arguments") for c in self.meter.calls)


def fresh_context(card: Card, brief: Brief, tools_text: str | None = None) -> list[dict[str, Any]]:
    """Return the first request's messages: exactly [system, user], nothing inherited.

    `tools_text` describes the tools in the prompt (json mode, where no `tools` field is sent).
    """
    return _context(card, brief, effective_budget(card, brief), tools_text)


def required_fields(card: Card, brief: Brief) -> tuple[str, ...]:
    """Return the card's required fields plus the Brief's must_return, without repeats."""
    return tuple(dict.fromkeys((*card.returns_required, *brief.must_return)))


def _context(
    card: Card, brief: Brief, budget: Budget, tools_text: str | None
) -> list[dict[str, Any]]:
    required = required_fields(card, brief)
    system = system_prompt(card, required, budget.max_output_tokens, tools_text)
    return [{"role": "system", "content": system}, {"role": "user", "content": user_message(brief)}]


# --- tool calls ---------------------------------------------------------------------------


def _call_tool(call: ToolCall, run: _Run, recovered: bool = False) -> str:
    """Attempt one call; every failure becomes a tool result the model can act on.

    A write tool runs only on a card with `side_effects: write` and only when `approve`
    says yes to this very call; otherwise the model is told it did not run.
    """
    card, meter = run.card, run.meter

    def record(outcome: CallOutcome, writes: bool = False, args: Any = None) -> None:
        meter.calls.append(CallRecord(call.name, outcome, writes, args, recovered))

    tool = run.tool(call.name)
    if tool is None:
        record("ghost")  # counted even past the budget
        have = ", ".join(run.tool_names()) or "none"
        return f"error: unknown tool {call.name!r}. Your tools are: {have}."
    if meter.tools_spent() or meter.remaining() <= 0:
        return "error: not run, the budget is spent"
    args, problem = _arguments(call.arguments, tool.parameters)
    if problem:
        record("bad_arguments", tool.writes)
        return f"error: {problem}. Call {call.name} again with valid arguments."
    shown = copy.deepcopy(args) if tool.writes else None  # as approved, whatever the tool does
    if tool.writes and not card.writes:  # the card loader refuses this; never trust it alone
        record("not_allowed", True, shown)
        return (
            f"error: {call.name} writes and this agent may not write; it was not run. "
            "Answer without it."
        )
    if tool.writes and not _approved(run.approve, card, call.name, args, meter):
        record("declined", True, shown)
        return (
            f"declined: the user did not approve this call of {call.name} with these arguments, "
            "so it did not run and nothing was written. If the arguments were wrong, call it "
            "again with corrected ones; otherwise say in your answer that this was not done."
        )
    started = meter.clock()
    outcome, result = _run_tool(tool, args, meter.remaining())
    meter.tool_seconds += meter.clock() - started
    record(outcome, tool.writes, shown)
    if isinstance(result, ToolServerError):  # counted as a call, then the run ends
        raise result
    return _result_text(call.name, outcome, result, args, run)


def _result_text(name: str, outcome: CallOutcome, result: Any, args: Any, run: _Run) -> str:
    """Say what a call that ran gave back; a successful one is kept as evidence.

    A result over the limit is stored as an artifact when the run has a store (the model
    sees its head and handle), else cut.
    """
    if outcome == "tool_error":
        return f"error: {name} failed: {result}"
    if outcome == "timeout":  # the budget is spent with it: tell the caller which tool hung
        run.notes += (f"{name} did not answer before the time budget ran out",)
        return f"error: {name} did not finish before the time budget"
    text = (
        result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    )
    long = len(text) > DEFAULT_MAX_RESULT_CHARS
    shown = (run.kept(name, text) if long else None) or cap_result(text)
    run.meter.evidence.append(evidence_of(args, shown))  # what the model saw, not what was cut
    return shown


def _approved(approve: Approve, card: Card, name: str, args: dict[str, Any], meter: Meter) -> bool:
    """Ask `approve` about this call; time spent waiting for a person is not the agent's."""
    asked = meter.clock()
    try:
        return approve(card, name, copy.deepcopy(args)) is True
    finally:
        meter.started += meter.clock() - asked


def _run_tool(tool: Tool, args: dict[str, Any], seconds: float) -> tuple[CallOutcome, Any]:
    """Run a tool, waiting at most `seconds`: the wall budget covers tools too."""
    try:
        return "ok", call_within(seconds, lambda: tool(**args), name=f"tiny-tool-{tool.name}")
    except DeadlineExceeded:
        return "timeout", None
    except ToolCallError as exc:  # the tool's own words: what the model should do instead
        return "tool_error", str(exc)
    except ToolServerError as exc:  # the server behind the tool is gone: the caller ends the run
        return "tool_error", exc
    except Exception as exc:  # a failing tool is input for the model, not a crash
        return "tool_error", f"{type(exc).__name__}: {exc}"


def _arguments(raw: str, schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    if len(raw or "") > MAX_ARGUMENT_CHARS:
        return {}, f"arguments are {len(raw):,} characters; at most {MAX_ARGUMENT_CHARS:,}"
    try:
        args = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at character {exc.pos})"
    except RecursionError:
        return {}, "arguments are nested too deeply to be tool arguments"
    if not isinstance(args, dict):
        return {}, "arguments must be a JSON object"
    errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(args), key=str)
    if errors:
        where = "/".join(map(str, errors[0].absolute_path)) or "arguments"
        return {}, f"invalid arguments: {where}: {errors[0].message}"
    return args, None


def _tool_message(call: ToolCall, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call.id, "content": content}


def _assistant(reply: Completion) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    return message


def _said(content: str | None) -> dict[str, Any]:
    """Return the model's reply as plain assistant text (json mode, recovered calls, answers)."""
    return {"role": "assistant", "content": content or ""}


# --- building the Digest ------------------------------------------------------------------


def _finish(run: _Run, reply: Reply, forced: str | None = None) -> Digest:
    """Turn a parsed answer into a Digest; cut the summary if it is over budget."""
    data, budget = reply.data, run.meter.budget
    status: Status = data["status"] if data.get("status") in MODEL_STATUSES else "partial"
    reason = None if status == "ok" else str(data.get("reason") or f"{status}_by_agent")
    summary = str(field_values(data, ["summary"]).get("summary") or "")
    summary, cut = cut_summary(summary, budget.max_output_tokens)
    notes = _model_notes(data) + reply.problems + reply.notes
    if cut:
        notes += (f"summary cut to {budget.max_output_tokens * CHARS_PER_TOKEN} characters",)
        if status == "ok":
            status, reason = "partial", "summary_cut"
    if forced and status != "refused":
        status, reason = "partial", forced
    fields = {} if status == "refused" else field_values(data, run.required)
    return _digest(run, status, summary, fields, notes, reason)


def _ended(run: _Run, reason: str, detail: str = "") -> Digest:
    """The wall clock ran out: partial with the draft if one exists, else failed."""
    run.observer(BudgetHit(reason))
    if not run.draft:
        return _digest(run, "failed", reason=reason, notes=_note(detail))
    summary, _ = cut_summary(run.draft, run.meter.budget.max_output_tokens)
    notes = (
        *_note(detail),
        "the summary is an unchecked draft: time ran out before a valid answer",
    )
    return _digest(run, "partial", summary, reason=reason, notes=notes)


def _digest(
    run: _Run,
    status: Status,
    summary: str = "",
    fields: dict[str, Any] | None = None,
    notes: tuple[str, ...] = (),
    reason: str | None = None,
) -> Digest:
    meter, card = run.meter, run.card
    notes = run.notes + notes
    status, reason, notes = _unwritten(meter, status, reason, notes)
    status, reason, notes = _unverified_write(card, meter, status, reason, notes)
    status, reason, notes = _unevidenced(card, meter, status, reason, notes)
    ghosts = meter.ghosts()
    if ghosts:
        notes += (
            f"{len(ghosts)} ghost call(s) to tools this agent does not have: {', '.join(ghosts)}",
        )
    fields = fields or {}
    if reason == UNVERIFIED_WRITE:  # the claim and its invented fields are not printed as done
        summary, fields = "Nothing was written: the agent claimed a write that no tool made.", {}
    digest = Digest(
        card.id,
        status,
        summary,
        fields,
        tuple(run.shelf.created) if run.shelf is not None else (),
        run.brief.notes + notes,
        meter.cost(),
        reason,
        calls=tuple(meter.calls),
        field_sources=field_sources(fields, meter.evidence, _asked(run.brief)),
    )
    return with_caller_tokens(digest)


def _asked(brief: Brief) -> str:
    return "\n".join([brief.goal, *brief.inputs.values(), brief.context_hint])


def _unwritten(
    meter: Meter, status: Status, reason: str | None, notes: tuple[str, ...]
) -> tuple[Status, str | None, tuple[str, ...]]:
    """Never `ok` when a write call did not run because it was declined (or not allowed).

    Nothing written at all → `needs_confirmation`; some other write ran → `partial`; the
    reason is `write_declined` either way. `refused` and `failed` stay as they are.
    """
    unwritten = [c.name for c in meter.calls if c.outcome in ("declined", "not_allowed")]
    if not unwritten:
        return status, reason, notes
    notes += (f"{len(unwritten)} write call(s) not approved, so not run: {', '.join(unwritten)}",)
    if status not in ("ok", "partial"):
        return status, reason, notes
    if reason:
        notes += (f"also: {reason}",)
    written = any(c.writes and c.outcome == "ok" for c in meter.calls)
    return ("partial" if written else "needs_confirmation"), WRITE_DECLINED, notes


def _unverified_write(
    card: Card, meter: Meter, status: Status, reason: str | None, notes: tuple[str, ...]
) -> tuple[Status, str | None, tuple[str, ...]]:
    """A writer's `ok` stands only on a write call that ran and succeeded.

    Seen with a 1.5B model: crm-writer answered "Successfully added", company_id 12345, with
    no tool call and no CRM file. tiny must never print an invented write as done.
    """
    if status != "ok" or not card.writes or card.write_optional:
        return status, reason, notes
    if any(c.writes and c.outcome == "ok" for c in meter.calls):
        return status, reason, notes
    note = "the agent said ok, but no write tool ran successfully: nothing was written"
    return "failed", UNVERIFIED_WRITE, (*notes, note)


def _unevidenced(
    card: Card, meter: Meter, status: Status, reason: str | None, notes: tuple[str, ...]
) -> tuple[Status, str | None, tuple[str, ...]]:
    """An answer that needs a tool result (a writer, `first: tool`, "not from memory") has one.

    With none of its tools run successfully, `ok` becomes `partial` (reason `no_evidence`) and a
    `partial` keeps its status but gains the note: the model alone vouches for it.
    """
    if status not in ("ok", "partial") or not (card.writes or needs_evidence(card)):
        return status, reason, notes
    if any(c.outcome == "ok" for c in meter.calls):
        return status, reason, notes
    what = "nothing was written" if card.writes else "the answer is the model's own, unchecked"
    note = f"the agent answered without a successful call of its tools: {what}"
    if status == "ok" or card.writes:
        if reason:
            notes += (f"also: {reason}",)
        return "partial", NO_EVIDENCE, (*notes, note)
    return status, reason, (*notes, note)


def _note(detail: str) -> tuple[str, ...]:
    return (detail,) if detail else ()


def _model_notes(data: Any) -> tuple[str, ...]:
    notes = data.get("notes") or data.get("notes_for_caller") or ()
    if isinstance(notes, str):
        return (notes,)
    return tuple(str(n) for n in notes) if isinstance(notes, list) else ()
