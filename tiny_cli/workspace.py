"""Workspace: the registry and cards one command works with, loaded from Settings."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tiny_cli.cards.card import Card
from tiny_cli.cards.load import load_cards
from tiny_cli.errors import CardError, ConfigError, TinyError
from tiny_cli.settings import Settings, check_settings
from tiny_cli.text import check_transport, wrong_kind
from tiny_cli.tools.builtin import builtin_writes, default_registry
from tiny_cli.tools.mcp_config import McpConfig, mcp_settings, original, qualified
from tiny_cli.tools.registry import Registry, declared_tool

if TYPE_CHECKING:  # HTTP only where tools are built: a route needs none
    import httpx

SHOWN_ID_CHARS = 80  # of a card id no card has, as an error quotes it (a host may send a novel)


@dataclass(frozen=True)
class Workspace:
    """Settings, every registered tool, and the loaded cards."""

    settings: Settings
    registry: Registry
    cards: Mapping[str, Card]  # by id, in load order

    def card(self, card_id: str) -> Card:
        """Return the card named `card_id`, or raise ConfigError listing the known ids."""
        if not isinstance(card_id, str):
            raise wrong_kind("card_id", "a card's id (a string)", card_id)
        if card_id not in self.cards:
            known = ", ".join(sorted(self.cards)) or "none"
            asked = card_id if len(card_id) <= SHOWN_ID_CHARS else card_id[:SHOWN_ID_CHARS] + "…"
            raise ConfigError(f"no card {asked!r} in {self.settings.cards_dir} (known: {known})")
        return self.cards[card_id]


def open_workspace(
    settings: Settings, transport: httpx.BaseTransport | None = None, wanted: str | None = None
) -> Workspace:
    """Load the tool registry and every card; CardError if one is broken (`wanted`'s lack first)."""
    check_settings(settings)
    check_transport(transport)  # else accepted here and failing only at the first http_get
    registry = default_registry(settings, transport=transport)
    mcp = mcp_settings(settings)
    cards = open_cards(settings, registry.writes(), mcp, wanted)
    if any(qualified(original(t)) for card in cards.values() for t in card.tools):
        _add_mcp(registry, mcp)
    _add_declared(registry, cards.values())
    return Workspace(settings, registry, cards)


def known_tools(settings: Settings) -> dict[str, bool]:
    """Map each built-in and user tool a card may name to whether it writes (no MCP tools)."""
    if settings.tools_spec:  # the user's tools are known only once imported
        return default_registry(settings).writes()
    return builtin_writes()


def open_cards(
    settings: Settings,
    known: Mapping[str, bool] | None = None,
    mcp: McpConfig | None = None,
    wanted: str | None = None,
) -> dict[str, Card]:
    """Load the cards folder by id; CardError if a card is broken."""
    check_settings(settings)
    if not settings.cards_dir.exists():
        raise _no_cards(settings)
    known = known_tools(settings) if known is None else known
    mcp = mcp_settings(settings) if mcp is None else mcp
    try:
        cards = load_cards([settings.cards_dir], known, mcp, settings.cache_dir)
    except CardError as exc:
        raise _unknown_first(exc, wanted, settings.cards_dir) from None
    return {card.id: card for card in cards}


def _no_cards(settings: Settings) -> ConfigError:
    """The cards folder is not there: say who named it, and how to name another one."""
    folder, source = settings.cards_dir, settings.origin("cards_dir")
    if source is None:
        message = f"no cards directory {folder}; pass --cards or set TINY_CARDS"
    elif source.kind in ("flag", "keyword"):  # the user just gave it: no advice to give it
        message = f"no cards directory {folder} (given by {source})"
    else:
        message = f"no cards directory {folder} (from {source}); pass --cards or change it"
    return ConfigError(message, path=folder, field=source.name if source else None)


def _unknown_first(exc: CardError, wanted: str | None, folder: Path) -> TinyError:
    """The card a command asks for, missing, is the first thing to say; then the broken ones."""
    broken = any(Path(p.file).stem == wanted for p in exc.problems)  # it may be the broken one
    if wanted is None or broken or any(c.id == wanted for c in exc.loaded):
        return exc
    known = ", ".join(sorted(c.id for c in exc.loaded)) or "none"
    first = str(exc.problems[0]) if exc.problems else ""
    more = f" and {len(exc.problems) - 1} more" if len(exc.problems) > 1 else ""
    return ConfigError(
        f"no card {wanted!r} in {folder} (known: {known}); besides, "
        f"{len(exc.problems)} card problem(s): {first}{more} (tiny validate lists them)"
    )


def _add_declared(registry: Registry, cards: Iterable[Card]) -> None:
    """Register the functions cards declare (validation made sure each name means one schema)."""
    for card in cards:
        for spec in card.functions:
            if spec["name"] not in registry:
                tool = declared_tool(spec["name"], spec.get("description", ""), spec["parameters"])
                registry.add(tool, f"card {card.id}")


def _add_mcp(registry: Registry, mcp: McpConfig | None) -> None:
    if mcp is not None and mcp.servers:
        from tiny_cli.tools.mcp_tools import McpTools  # the MCP SDK: only with servers

        registry.add_source(McpTools(mcp))
