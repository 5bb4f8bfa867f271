"""The runner: one card, one Brief, a fresh context, a hard budget, a Digest back."""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

import jsonschema

from tiny_cli.budget import (
    DEFAULT_MAX_GHOST_CALLS,
    Clock,
    Meter,
    cap_result,
    cut_summary,
    effective_budget,
)
from tiny_cli.cards import Card
from tiny_cli.deadline import DeadlineExceeded, call_within
from tiny_cli.digest import (
    CHARS_PER_TOKEN,
    MODEL_STATUSES,
    Brief,
    CallOutcome,
    CallRecord,
    Digest,
    Reply,
    Status,
    field_values,
    parse_reply,
    with_caller_tokens,
)
from tiny_cli.errors import ProviderError
from tiny_cli.prompts import repair_message, system_prompt, user_message, wrap_up_message
from tiny_cli.provider import Completion, Provider, ProviderTimeout, ToolCall
from tiny_cli.tools import Registry, Tool, ToolCallError

Approve = Callable[[Card, str, dict[str, Any]], bool]
"""Asked before every call of a write tool: may `card` call this tool with these arguments?

The arguments are the validated ones the tool would run with (a copy). Only `True` approves.
The runner never asks a person itself: the caller decides how (a prompt, `--yes`, a bench).
"""

WRITE_DECLINED = "write_declined"
NO_EVIDENCE = "no_evidence"  # `ok` claimed, but none of the agent's tools ran
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
) -> Digest:
    """Run `card` on `brief` in a fresh context under its budget; return the Digest.

    Every call of a tool that writes is put to `approve` first, as that call with those
    arguments; a declined call is answered to the model as declined and never runs.
    """
    budget = effective_budget(card, brief)
    required = required_fields(card, brief)
    meter = Meter(budget, clock)
    messages = fresh_context(card, brief)
    schemas = registry.schemas(card.tools)
    repaired = wrapping = False
    draft = ""
    while True:
        if meter.remaining() <= 0:
            return _ended(card, brief, meter, "max_wall_seconds", draft)
        try:
            reply = provider.complete(
                model=model,
                messages=messages,
                tools=[] if wrapping else schemas,
                max_tokens=budget.max_output_tokens,
                timeout=meter.remaining(),
            )
        except ProviderTimeout as exc:
            return _ended(card, brief, meter, "max_wall_seconds", draft, str(exc))
        except ProviderError as exc:
            return _digest(card, brief, meter, "failed", reason=str(exc))
        meter.tokens_in += reply.tokens_in
        meter.tokens_out += reply.tokens_out
        messages.append(_assistant(reply))
        if reply.tool_calls and not wrapping:
            messages += [
                _call_tool(call, card, registry, meter, approve) for call in reply.tool_calls
            ]
            if len(meter.ghosts()) > DEFAULT_MAX_GHOST_CALLS:
                return _digest(card, brief, meter, "failed", reason="ghost_calls")
            if meter.tools_spent():
                wrapping = True
                messages.append({"role": "user", "content": wrap_up_message(budget.max_tool_calls)})
            continue
        parsed = parse_reply(reply.content, required)
        if wrapping:
            return _finish(card, brief, meter, parsed, required, forced="max_tool_calls")
        if not parsed.problems:
            return _finish(card, brief, meter, parsed, required)
        if repaired:
            return _digest(
                card,
                brief,
                meter,
                "failed",
                reason="schema",
                notes=(f"answer still unusable after one repair: {'; '.join(parsed.problems)}",),
            )
        repaired, draft = True, reply.content or draft
        messages.append({"role": "user", "content": repair_message(parsed.problems, required)})


def fresh_context(card: Card, brief: Brief) -> list[dict[str, Any]]:
    """Return the first request's messages: exactly [system, user], nothing inherited."""
    budget = effective_budget(card, brief)
    return [
        {
            "role": "system",
            "content": system_prompt(card, required_fields(card, brief), budget.max_output_tokens),
        },
        {"role": "user", "content": user_message(brief)},
    ]


def required_fields(card: Card, brief: Brief) -> tuple[str, ...]:
    """Return the card's required fields plus the Brief's must_return, without repeats."""
    return tuple(dict.fromkeys((*card.returns_required, *brief.must_return)))


# --- tool calls ---------------------------------------------------------------------------


def _call_tool(
    call: ToolCall, card: Card, registry: Registry, meter: Meter, approve: Approve
) -> dict[str, Any]:
    """Attempt one call; every failure becomes a tool message the model can act on.

    A write tool runs only on a card with `side_effects: write` and only when `approve`
    says yes to this very call; otherwise the model is told it did not run.
    """
    if call.name not in card.tools or call.name not in registry:
        meter.calls.append(CallRecord(call.name, "ghost"))  # counted even past the budget
        have = ", ".join(card.tools) or "none"
        return _tool_message(call, f"error: unknown tool {call.name!r}. Your tools are: {have}.")
    if meter.tools_spent() or meter.remaining() <= 0:
        return _tool_message(call, "error: not run, the budget is spent")
    tool = registry[call.name]
    args, problem = _arguments(call.arguments, tool.parameters)
    if problem:
        meter.calls.append(CallRecord(call.name, "bad_arguments", tool.writes))
        return _tool_message(
            call, f"error: {problem}. Call {call.name} again with valid arguments."
        )
    shown = copy.deepcopy(args) if tool.writes else None  # as approved, whatever the tool does
    if tool.writes and not card.writes:  # the card loader refuses this; never trust it alone
        meter.calls.append(CallRecord(call.name, "not_allowed", True, shown))
        return _tool_message(
            call,
            f"error: {call.name} writes and this agent may not write; it was not run. "
            "Answer without it.",
        )
    if tool.writes and not _approved(approve, card, call.name, args, meter):
        meter.calls.append(CallRecord(call.name, "declined", True, shown))
        return _tool_message(
            call,
            f"declined: the user did not approve this call of {call.name} with these arguments, "
            "so it did not run and nothing was written. If the arguments were wrong, call it "
            "again with corrected ones; otherwise say in your answer that this was not done.",
        )
    outcome, result = _run_tool(tool, args, meter.remaining())
    meter.calls.append(CallRecord(call.name, outcome, tool.writes, shown))
    if outcome == "tool_error":
        return _tool_message(call, f"error: {call.name} failed: {result}")
    if outcome == "timeout":
        return _tool_message(call, f"error: {call.name} did not finish before the time budget")
    text = (
        result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    )
    return _tool_message(call, cap_result(text))


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


# --- building the Digest ------------------------------------------------------------------


def _finish(
    card: Card,
    brief: Brief,
    meter: Meter,
    reply: Reply,
    required: Sequence[str],
    forced: str | None = None,
) -> Digest:
    """Turn a parsed answer into a Digest; cut the summary if it is over budget."""
    data = reply.data
    status: Status = data["status"] if data.get("status") in MODEL_STATUSES else "partial"
    reason = None if status == "ok" else str(data.get("reason") or f"{status}_by_agent")
    summary = str(field_values(data, ["summary"]).get("summary") or "")
    summary, cut = cut_summary(summary, meter.budget.max_output_tokens)
    notes = _model_notes(data) + reply.problems
    if cut:
        notes += (f"summary cut to {meter.budget.max_output_tokens * CHARS_PER_TOKEN} characters",)
        if status == "ok":
            status, reason = "partial", "summary_cut"
    if forced and status != "refused":
        status, reason = "partial", forced
    fields = {} if status == "refused" else field_values(data, required)
    return _digest(card, brief, meter, status, summary, fields, notes, reason)


def _ended(
    card: Card, brief: Brief, meter: Meter, reason: str, draft: str, detail: str = ""
) -> Digest:
    """The wall clock ran out: partial with the draft if one exists, else failed."""
    if not draft:
        return _digest(card, brief, meter, "failed", reason=reason, notes=_note(detail))
    summary, _ = cut_summary(draft, meter.budget.max_output_tokens)
    notes = (
        *_note(detail),
        "the summary is an unchecked draft: time ran out before a valid answer",
    )
    return _digest(card, brief, meter, "partial", summary, reason=reason, notes=notes)


def _digest(
    card: Card,
    brief: Brief,
    meter: Meter,
    status: Status,
    summary: str = "",
    fields: dict[str, Any] | None = None,
    notes: tuple[str, ...] = (),
    reason: str | None = None,
) -> Digest:
    status, reason, notes = _unwritten(meter, status, reason, notes)
    status, reason, notes = _unevidenced(card, meter, status, reason, notes)
    ghosts = meter.ghosts()
    if ghosts:
        notes += (
            f"{len(ghosts)} ghost call(s) to tools this agent does not have: {', '.join(ghosts)}",
        )
    digest = Digest(
        card.id,
        status,
        summary,
        fields or {},
        (),
        brief.notes + notes,
        meter.cost(),
        reason,
        calls=tuple(meter.calls),
    )
    return with_caller_tokens(digest)


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


def _unevidenced(
    card: Card, meter: Meter, status: Status, reason: str | None, notes: tuple[str, ...]
) -> tuple[Status, str | None, tuple[str, ...]]:
    """A writer says `ok` (or even `partial`) only on evidence: one of its tools ran.

    Seen with a 1.5B model: crm-writer answered "Company added successfully", company_id
    12345, with no tool call and no CRM file. With no tool result behind it, `ok` would be
    tiny vouching for an invented write: the run is `partial`, reason `no_evidence`.
    (Reader cards answering from nothing are the same problem, not yet enforced.)
    """
    if status not in ("ok", "partial") or not card.writes:
        return status, reason, notes
    if any(c.outcome == "ok" for c in meter.calls):
        return status, reason, notes
    note = "the agent answered without running any of its tools: nothing was written"
    if reason:
        notes += (f"also: {reason}",)
    return "partial", NO_EVIDENCE, (*notes, note)


def _note(detail: str) -> tuple[str, ...]:
    return (detail,) if detail else ()


def _model_notes(data: Any) -> tuple[str, ...]:
    notes = data.get("notes") or data.get("notes_for_caller") or ()
    if isinstance(notes, str):
        return (notes,)
    return tuple(str(n) for n in notes) if isinstance(notes, list) else ()
