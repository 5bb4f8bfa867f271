"""Tools as routing texts: each tool a card allows is one more view of what the card can do.

A tool's view is its name split into words ("crm_find_company" → "crm find company",
"getWeather" → "get weather") and its description. Descriptions come from where they are
without running anything: the built-in tools' docstrings (static), the functions a card
declares itself, and a mapping the caller passes in (the user's @tool functions when their
module is imported anyway, an MCP server's last tool list kept beside the cards). A tool
with no known description routes by its name alone. A tool that more than MAX_TOOL_SHARE of
the cards allow says nothing about which of them a task wants, so it is no view of any.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from tiny_cli.cards.load import Card

__all__ = ["MAX_TOOL_SHARE", "card_tools", "described", "split_name", "tool_key", "tool_views"]

# A tool allowed by more than this share of the cards (and by more than one) is left out of
# every card's views: a placeholder every card lists (HWU64's docs_search) is no evidence.
MAX_TOOL_SHARE = 0.5
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^0-9A-Za-z]+")


def split_name(name: str) -> str:
    """Split a tool name into lower-case words: "crm_find_company" → "crm find company"."""
    words = _SEPARATORS.split(_CAMEL.sub(" ", name))
    return " ".join(word.lower() for word in words if word)


def card_tools(card: Card, descriptions: Mapping[str, str]) -> list[tuple[str, str]]:
    """Return (tool name, description) for each tool `card` allows; "" when none is known.

    The card's own declared function comes first, then `descriptions`, then the built-ins.
    """
    own = {f["name"]: described(f) for f in card.functions}
    builtin = builtin_descriptions()
    return [
        (tool, own.get(tool) or descriptions.get(tool) or builtin.get(tool, ""))
        for tool in dict.fromkeys(card.tools)
    ]


def tool_views(
    cards: Sequence[Card], descriptions: Mapping[str, str]
) -> list[list[tuple[str, str]]]:
    """Return each card's tool views as (tool name, routing text), shared tools left out."""
    tools = [card_tools(card, descriptions) for card in cards]
    held = Counter(name for rows in tools for name, _ in rows)
    limit = max(1, int(MAX_TOOL_SHARE * len(cards)))
    return [[(name, view_text(name, text)) for name, text in rows if held[name] <= limit]
            for rows in tools]  # fmt: skip


def described(spec: Mapping[str, object]) -> str:
    """A declared function's description and its parameters' names (not their descriptions:
    with them BFCL ranked worse, docs/routing.md "Tools")."""
    text = str(spec.get("description") or "")
    schema = spec.get("parameters")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return text
    return f"{text} Parameters: {', '.join(split_name(str(name)) for name in properties)}."


def view_text(name: str, description: str) -> str:
    """One tool's routing text: its name as words, then its description."""
    words = split_name(name)
    return f"{words}: {' '.join(description.split())}" if description.strip() else words


def tool_key(descriptions: Mapping[str, str]) -> str:
    """Hash the tool descriptions a router is given (part of its state's key)."""
    text = json.dumps(sorted(descriptions.items()), ensure_ascii=False)
    builtin = json.dumps(sorted(builtin_descriptions().items()), ensure_ascii=False)
    return hashlib.sha256(f"{text}\0{builtin}\0{MAX_TOOL_SHARE}".encode()).hexdigest()[:32]


def builtin_descriptions() -> dict[str, str]:
    """The built-in tools' descriptions, read from their docstrings (no registry is built)."""
    from tiny_cli.tools import builtin

    return builtin.builtin_descriptions()
