"""The runner: one card, one Brief, a fresh context, a hard budget, a Digest back."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
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
from tiny_cli.tools import Registry


def invoke(
    card: Card,
    brief: Brief,
    *,
    registry: Registry,
    provider: Provider,
    model: str,
    clock: Clock = time.monotonic,
) -> Digest:
    """Run `card` on `brief` in a fresh context under its budget; return the Digest."""
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
            messages += [_call_tool(call, card, registry, meter) for call in reply.tool_calls]
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


def _call_tool(call: ToolCall, card: Card, registry: Registry, meter: Meter) -> dict[str, Any]:
    """Attempt one call; every failure becomes a tool message the model can act on."""
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
    outcome, result = _run_tool(tool.func, args, meter.remaining())
    meter.calls.append(CallRecord(call.name, outcome, tool.writes))
    if outcome == "tool_error":
        return _tool_message(call, f"error: {call.name} failed: {result}")
    if outcome == "timeout":
        return _tool_message(call, f"error: {call.name} did not finish before the time budget")
    text = (
        result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    )
    return _tool_message(call, cap_result(text))


def _run_tool(func: Any, args: dict[str, Any], seconds: float) -> tuple[CallOutcome, Any]:
    """Run a tool, waiting at most `seconds`: the wall budget covers tools too.

    A daemon thread, not an executor: a hung tool must not keep the process alive.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["result"] = func(**args)
        except Exception as exc:  # a failing tool is input for the model, not a crash
            box["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=target, daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        return "timeout", None
    if "error" in box:
        return "tool_error", box["error"]
    return "ok", box.get("result")


def _arguments(raw: str, schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    try:
        args = json.loads(raw or "{}")
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at character {exc.pos})"
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


def _note(detail: str) -> tuple[str, ...]:
    return (detail,) if detail else ()


def _model_notes(data: Any) -> tuple[str, ...]:
    notes = data.get("notes") or data.get("notes_for_caller") or ()
    if isinstance(notes, str):
        return (notes,)
    return tuple(str(n) for n in notes) if isinstance(notes, list) else ()
