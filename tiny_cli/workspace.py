"""Workspace: the registry and cards one command works with, loaded from Settings."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from tiny_cli.builtin import default_registry
from tiny_cli.cards import Card, Problem, check_cards, load_cards
from tiny_cli.embed import get_embedder
from tiny_cli.errors import ConfigError
from tiny_cli.routing import Router
from tiny_cli.settings import Settings
from tiny_cli.tools import Registry


@dataclass(frozen=True)
class Workspace:
    """Settings, every registered tool, and the loaded cards by id."""

    settings: Settings
    registry: Registry
    cards: dict[str, Card]

    def card(self, card_id: str) -> Card:
        """Return the card named `card_id`, or raise ConfigError listing the known ids."""
        if card_id not in self.cards:
            known = ", ".join(sorted(self.cards)) or "none"
            raise ConfigError(f"no card {card_id!r} in {self.settings.cards_dir} (known: {known})")
        return self.cards[card_id]


def open_workspace(settings: Settings, transport: httpx.BaseTransport | None = None) -> Workspace:
    """Load the tool registry and every card; raise CardError if any card is broken."""
    registry = default_registry(settings, transport=transport)
    if not settings.cards_dir.exists():
        raise ConfigError(
            f"no cards directory {settings.cards_dir}; pass --cards or set TINY_CARDS"
        )
    cards = load_cards([settings.cards_dir], registry.writes())
    return Workspace(settings, registry, {c.id: c for c in cards})


def validate(settings: Settings, paths: Sequence[Path]) -> tuple[list[Card], list[Problem]]:
    """Check card files (default: the cards directory) against the schema and the registry."""
    registry = default_registry(settings)
    return check_cards(list(paths) or [settings.cards_dir], registry.writes())


def make_router(ws: Workspace, transport: httpx.BaseTransport | None = None) -> Router:
    """Build the concierge for the workspace's cards with the configured embedder."""
    s = ws.settings
    embedder = get_embedder(s.embedder, base_url=s.base_url, api_key=s.api_key, transport=transport)
    return Router(list(ws.cards.values()), embedder, s.home / "cache", s.threshold)
