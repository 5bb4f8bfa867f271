"""Prompts: the system prompt built from a card, the Brief as a user message, the repair turn."""

from __future__ import annotations

import json
from collections.abc import Sequence

from tiny_cli.cards import Card
from tiny_cli.digest import CHARS_PER_TOKEN, Brief


def system_prompt(card: Card, required: Sequence[str], max_output_tokens: int) -> str:
    """Write the card's system prompt: identity, job, refusals, tools, output contract, brevity."""
    lines = [f"You are {card.id}, a tiny agent with one job: {card.summary}"]
    if card.does_not:
        lines += ["", "You do not:", *(f"- {d}" for d in card.does_not)]
    tools = ", ".join(card.tools) if card.tools else "none"
    lines += ["", f"Tools you can call: {tools}. No other tool exists for you."]
    lines += [
        "",
        "When you are done, answer with exactly one JSON object and no other text:",
        json.dumps(_contract(required), ensure_ascii=False),
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


def repair_message(problems: Sequence[str], required: Sequence[str]) -> str:
    """Name what is wrong with the answer, once, and restate the contract."""
    listed = "; ".join(problems)
    return (
        f"Your answer cannot be used: {listed}. Answer again with exactly one JSON object: "
        f"{json.dumps(_contract(required), ensure_ascii=False)}"
    )


def wrap_up_message(max_tool_calls: int) -> str:
    """Tell the agent its tool budget is spent and it must answer from what it has."""
    return (
        f"Your budget of {max_tool_calls} tool calls is spent; no more tools. Answer now with "
        'the JSON object from what you have, "status": "partial" if anything is missing.'
    )


def _contract(required: Sequence[str]) -> dict[str, str]:
    return {"status": "ok", "summary": "<the answer, briefly>", **{f: "<...>" for f in required}}


def _brevity(max_output_tokens: int) -> str:
    words = max(10, max_output_tokens * CHARS_PER_TOKEN // 6)
    return f"Be brief: the summary must stay under about {words} words; longer ones are cut."
