"""Prompts: the system prompt built from a card, the Brief as a user message, the repair turn."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from tiny_cli.cards.card import Card
from tiny_cli.cards.returns import field_template
from tiny_cli.digest import CHARS_PER_TOKEN, Brief


def system_prompt(
    card: Card, required: Sequence[str], max_output_tokens: int, tools_text: str | None = None
) -> str:
    """Write the card's system prompt: identity, job, instructions, refusals, tools, contract.

    `tools_text` (json tool mode) describes the tools and how to call them in the reply itself.
    """
    lines = [f"You are {card.id}, a tiny agent with one job: {card.summary}"]
    if card.instructions:  # a Markdown card's body (a Claude Code subagent's system prompt)
        lines += ["", "Instructions:", card.instructions]
    if card.does_not:
        lines += ["", "You do not:", *(f"- {d}" for d in card.does_not)]
    tools = ", ".join(card.tools) if card.tools else "none"
    lines += ["", f"Tools you can call: {tools}. No other tool exists for you."]
    if tools_text:
        lines += [tools_text]
    lines += _evidence_rules(card)
    lines += [
        "",
        "When you are done, answer with exactly one JSON object and no other text:",
        _contract(required, card.returns),
        'Use "status": "partial" if you could do only part of it, and say what is missing.',
        'If the task is not your job, answer {"status": "refused", "summary": "<why>"}.',
        "",
        _brevity(max_output_tokens),
    ]
    return "\n".join(lines)


def user_message(brief: Brief) -> str:
    """Render the Brief as the one user message of a fresh context."""
    lines = [f"Task: {brief.goal}"]
    if brief.inputs:
        lines += ["Inputs:", *(f"- {k}: {v}" for k, v in brief.inputs.items())]
    if brief.context_hint:
        lines += [f"Context hint: {brief.context_hint}"]
    if brief.must_return:
        lines += [f"Also return these fields: {', '.join(brief.must_return)}"]
    return "\n".join(lines)


def repair_message(
    problems: Sequence[str], required: Sequence[str], types: Mapping[str, Any] | None = None
) -> str:
    """Name what is wrong with the answer, once, and restate the contract."""
    listed = "; ".join(problems)
    return (
        f"Your answer cannot be used: {listed}. Answer again with exactly one JSON object: "
        f"{_contract(required, types)}"
    )


def wrap_up_message(max_tool_calls: int) -> str:
    """Tell the agent its tool budget is spent and it must answer from what it has."""
    return (
        f"Your budget of {max_tool_calls} tool calls is spent; no more tools. Answer now with "
        'the JSON object from what you have, "status": "partial" if anything is missing.'
    )


def tools_section(schemas: Sequence[Mapping[str, Any]]) -> str:
    """Describe the tools for json tool mode, where the request carries no `tools` field."""
    lines = [
        'To call a tool, reply with only {"tool": "<name>", "arguments": {...}}; '
        "you get its result, then call another tool or give your final answer.",
    ]
    for schema in schemas:
        function = schema["function"]
        parameters = function.get("parameters")
        params = parameters.get("properties") if isinstance(parameters, Mapping) else None
        args = ", ".join(f"{k}: {_type_of(v)}" for k, v in (params or {}).items())
        lines.append(f"- {function['name']}({args}): {function.get('description', '')}".rstrip())
    return "\n".join(lines)


def _type_of(schema: Any) -> Any:
    """A parameter's JSON type for the tools list, as written (recordings hold these prompts);
    a schema that is not an object (`true`) accepts anything."""
    return schema.get("type", "any") if isinstance(schema, Mapping) else "any"


def call_first_message() -> str:
    """Tell an agent that must use a tool first (`first: tool`) to do so before answering."""
    return (
        "You answered without calling a tool. This job needs a tool result first: "
        'reply with {"tool": "<name>", "arguments": {...}} for one of your tools.'
    )


def _evidence_rules(card: Card) -> list[str]:
    """Tell a writer (and a card that must not answer from memory) what `ok` requires."""
    if card.writes:
        return [
            "",
            'Say "ok" only after a write tool succeeded. If nothing was written (it exists '
            'already, a detail is missing), answer "partial" and say why.',
        ]
    if card.first == "tool":
        return ["", "Answer only from what your tools return; call a tool before answering."]
    return []


def _contract(required: Sequence[str], types: Mapping[str, Any] | None = None) -> str:
    """The answer template: JSON but for typed values, shown bare (`"rows": <integer>`)."""
    shown = {"status": '"ok"', "summary": '"<the answer, briefly>"'}
    shown |= {f: field_template((types or {}).get(f)) for f in required}
    pairs = (f"{json.dumps(k, ensure_ascii=False)}: {v}" for k, v in shown.items())
    return "{" + ", ".join(pairs) + "}"


def _brevity(max_output_tokens: int) -> str:
    words = max(10, max_output_tokens * CHARS_PER_TOKEN // 6)
    return f"Be brief: the summary must stay under about {words} words; longer ones are cut."
