"""`tiny cards list` and `tiny cards show`: the cards a project has, as tiny sees them.

`show` gives what the model is sent for a card: its system prompt (for a Brief with no
extra fields, in the tool mode it starts in) and its tool schemas. Showing a card starts no
server: an MCP tool is a placeholder naming its server, with a kept description if any.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from tiny_cli.agent.loop import system_prompt, tools_section
from tiny_cli.agent.reply import tool_mode_for
from tiny_cli.cards.card import Card
from tiny_cli.tools.mcp_config import mcp_settings, original, qualified
from tiny_cli.workspace import Workspace

__all__ = ["card_detail", "card_rows"]


def card_rows(ws: Workspace) -> list[dict[str, Any]]:
    """One row per card, by id: id, summary, tools, side effects, file."""
    return [_row(ws.cards[card_id]) for card_id in sorted(ws.cards)]


def card_detail(ws: Workspace, card_id: str) -> dict[str, Any]:
    """Everything about one card, with the system prompt and tool schemas the model gets."""
    card = ws.card(card_id)  # an unknown id is a ConfigError naming the known ones
    required = tuple(dict.fromkeys(card.returns_required))  # no Brief: nothing more asked
    schemas = _tool_schemas(ws, card)
    prompt = system_prompt(
        card, required, card.budget.max_output_tokens, _tools_text(ws, card, schemas)
    )
    return {
        **_row(card),
        "examples": list(card.examples),
        "does_not": list(card.does_not),
        "returns_required": list(required),
        "first": card.first,
        "model": card.model,
        "tool_mode": card.tool_mode,
        "budget": asdict(card.budget),  # max_tool_calls, max_output_tokens, max_wall_seconds
        "system_prompt": prompt,
        "tool_schemas": schemas,
    }


def _tools_text(ws: Workspace, card: Card, schemas: list[dict[str, Any]]) -> str | None:
    """The tools list the prompt carries in json tool mode (as the runner writes it), else None."""
    if tool_mode_for(card, ws.settings.tool_mode) != "json":
        return None  # native and auto start with the tools in the request, not the prompt
    return tools_section([s if "function" in s else _unstarted_function(s) for s in schemas])


def _unstarted_function(placeholder: dict[str, Any]) -> dict[str, Any]:
    """A placeholder as the tools list shows it: its arguments are the server's to say."""
    server = placeholder["server"]
    said = [placeholder.get("description", ""), f"(its arguments: from MCP server {server!r})"]
    return {"function": {"name": placeholder["name"], "description": " ".join(filter(None, said))}}


def _tool_schemas(ws: Workspace, card: Card) -> list[dict[str, Any]]:
    """The card's tool schemas in its order; a placeholder for an MCP tool not started."""
    registry = ws.registry.with_declared(card.functions, card.id)
    # an MCP tool (`server.tool`) the registry holds no schema for: its server is not up
    waiting = [t for t in card.tools if original(t) != t and t not in registry]
    known = _kept_descriptions(ws) if waiting else {}
    ready = iter(registry.schemas([t for t in card.tools if t not in waiting]))
    return [_placeholder(t, known) if t in waiting else next(ready) for t in card.tools]


def _placeholder(tool: str, known: dict[str, str]) -> dict[str, Any]:
    """An MCP tool shown without its server: its names, and its description if one is kept."""
    name = original(tool)
    parts = qualified(name)
    server = parts[0] if parts else name
    described = {"description": known[name]} if name in known else {}
    schema = f"from MCP server {server!r} when it starts (not started now)"
    return {"name": tool, "mcp_tool": name, "server": server, **described, "schema": schema}


def _kept_descriptions(ws: Workspace) -> dict[str, str]:
    """The MCP tool descriptions kept by the last `tiny cards sync`, import or --connect."""
    # deferred: the routing package loads numpy, which only a card with such a tool needs
    from tiny_cli.routing.tooltexts import mcp_definitions, mcp_tool_lists

    # only the lists kept for these servers as this project defines them: not another's
    mcp = mcp_settings(ws.settings)
    definitions = mcp_definitions(mcp.servers) if mcp is not None else {}
    return mcp_tool_lists(ws.settings.cache_dir, 0.0, definitions)[0]


def _row(card: Card) -> dict[str, Any]:
    return {
        "id": card.id,
        "summary": card.summary,
        "tools": list(card.tools),
        "side_effects": card.side_effects,
        "file": str(card.path) if card.path is not None else None,
    }
