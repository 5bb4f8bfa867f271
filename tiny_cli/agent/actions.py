"""Actions: how a model asks for a tool, in each tool mode, and how tiny reads the request.

- `native`: OpenAI `tools` / `tool_calls`.
- `json`: no `tools`; every reply is constrained by a `response_format` json_schema whose
  branches are exactly the card's tools (`{"tool": NAME, "arguments": {...}}`) and the final
  answer. Small local models that never emit `tool_calls` still make real calls this way.
- `auto`: native, switching a run to json when the model writes a call as text.

A call written as text (bare JSON, a ```json fence, Hermes `<tool_call>` tags, doubled
braces) is a *recovered* call: run like any other, counted apart, never silent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

from tiny_cli.cards.card import Card
from tiny_cli.provider.client import ToolCall
from tiny_cli.settings import DEFAULT_TOOL_MODE, ToolMode

SCHEMA_NAME = "tiny_action"
MAX_RECOVERED_CALLS = 8  # call-shaped objects taken from one reply; more is not a plan
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCED = re.compile(r"```(?:json|JSON|tool_call)?\s*(.*?)```", re.S)
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")


def tool_mode_for(card: Card, setting: ToolMode | None) -> ToolMode:
    """Pick the tool mode: --tool-mode > TINY_TOOL_MODE (both in `setting`) > card > default."""
    return setting or card.tool_mode or DEFAULT_TOOL_MODE


def response_format(
    tools: Sequence[Mapping[str, Any]], answer: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Return the json_schema response_format: one branch per tool, plus the answers if allowed.

    `tools` are OpenAI tool schemas; `answer` is the final answer's schema, or None while the
    card must call a tool first: then neither the answer nor a refusal is offered. (Offered a
    refusal on its first turn, Qwen2.5-Coder-1.5B refused 8 of the 12 tasks routed to the right
    card; the concierge, not the card, turns away tasks nobody should do.)
    """
    branches = [_tool_branch(t["function"]) for t in tools]
    if answer is not None or not branches:
        if answer is not None:
            branches.append(dict(answer))
        branches.append(_refusal_branch())
    schema = branches[0] if len(branches) == 1 else {"anyOf": branches}
    return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": schema}}


def read_action(text: str | None, number: int) -> ToolCall | None:
    """Return the tool call a json-mode reply asks for, or None for a final answer."""
    data = _load(text or "")
    if not isinstance(data, dict) or "status" in data:
        return None
    return _as_call(data, f"json_{number}")


def recover_calls(text: str | None, first_number: int) -> tuple[ToolCall, ...]:
    """Return the tool calls a reply wrote as text instead of `tool_calls` (none if none).

    An object counts as a call when it names a tool and carries arguments, and is not an
    answer (no `status`); Hermes `<tool_call>` blocks, fences and bare JSON are read.
    """
    calls: list[ToolCall] = []
    for chunk in _chunks(text or "")[:MAX_RECOVERED_CALLS]:
        data = _load(chunk)
        for item in data if isinstance(data, list) else [data]:
            call = _as_call(item, f"recovered_{first_number + len(calls)}")
            if call is not None and len(calls) < MAX_RECOVERED_CALLS:
                calls.append(call)
    return tuple(calls)


def result_message(name: str, content: str) -> dict[str, Any]:
    """Return a tool result for a call made without `tool_calls` (json mode, recovered)."""
    return {
        "role": "user",
        "content": f"Result of {name}:\n{content}\n\nCall another tool or give your final answer.",
    }


# --- helpers ------------------------------------------------------------------------------


def _tool_branch(function: Mapping[str, Any]) -> dict[str, Any]:
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return {
        "type": "object",
        "properties": {"tool": {"const": function["name"]}, "arguments": parameters},
        "required": ["tool", "arguments"],
        "additionalProperties": False,
    }


def _refusal_branch() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"status": {"const": "refused"}, "summary": {"type": "string"}},
        "required": ["status", "summary"],
        "additionalProperties": False,
    }


def _chunks(text: str) -> list[str]:
    """Return the places a call may be written: tagged blocks, else fences, else the text."""
    tagged = [m.group(1) for m in _TAGGED.finditer(text)]
    if tagged:
        return tagged
    fenced = [m.group(1) for m in _FENCED.finditer(text)]
    return fenced or [text]


def _load(chunk: str) -> Any:
    """Parse a JSON value; also the doubled-brace form some chat templates teach (`{{...}}`)."""
    chunk = chunk.strip()
    for candidate in (chunk, chunk.replace("{{", "{").replace("}}", "}")):
        try:
            return json.loads(candidate)
        except (ValueError, RecursionError):
            continue
    return None


def _as_call(data: Any, call_id: str) -> ToolCall | None:
    """Turn {"name"|"tool": N, "arguments": {...}} (or {"function": {...}}) into a ToolCall."""
    if not isinstance(data, dict) or "status" in data:
        return None
    if isinstance(data.get("function"), dict):
        data = data["function"]
    name = next((data[k] for k in _NAME_KEYS if isinstance(data.get(k), str)), None)
    key = next((k for k in _ARGUMENT_KEYS if k in data), None)
    if not name or key is None:
        return None
    arguments = data[key]
    if isinstance(arguments, str):
        return ToolCall(call_id, name, arguments)  # checked like any call's raw arguments
    return ToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False))
