"""`tiny cards list` and `tiny cards show`: the cards a project has, as tiny sees them.

`show` gives what the model is sent for a card: its system prompt (for a Brief with no
extra fields) and its tool schemas, so a card is read the way it runs.
"""

from __future__ import annotations

from typing import Any

from tiny_cli.agent.loop import system_prompt
from tiny_cli.workspace import Workspace

__all__ = ["card_detail", "card_rows"]


def card_rows(ws: Workspace) -> list[dict[str, Any]]:
    """One row per card, by id: id, summary, tools, side effects, file."""
    return [_row(ws, ws.cards[card_id]) for card_id in sorted(ws.cards)]


def card_detail(ws: Workspace, card_id: str) -> dict[str, Any]:
    """Everything about one card, with the system prompt and tool schemas the model gets."""
    card = ws.card(card_id)  # an unknown id is a ConfigError naming the known ones
    required = tuple(dict.fromkeys(card.returns_required))  # no Brief: nothing more asked
    budget = card.budget
    return {
        **_row(ws, card),
        "examples": list(card.examples),
        "does_not": list(card.does_not),
        "returns_required": list(required),
        "first": card.first,
        "model": card.model,
        "tool_mode": card.tool_mode,
        "budget": {
            "max_tool_calls": budget.max_tool_calls,
            "max_output_tokens": budget.max_output_tokens,
            "max_wall_seconds": budget.max_wall_seconds,
        },
        "system_prompt": system_prompt(card, required, budget.max_output_tokens),
        "tool_schemas": ws.registry.with_declared(card.functions, card.id).schemas(card.tools),
    }


def _row(ws: Workspace, card: Any) -> dict[str, Any]:
    return {
        "id": card.id,
        "summary": card.summary,
        "tools": list(card.tools),
        "side_effects": card.side_effects,
        "file": str(card.path) if card.path is not None else None,
    }
