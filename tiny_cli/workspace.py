"""Workspace: the registry and cards one command works with, loaded from Settings."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from tiny_cli.cards.snapshot import CardSet, load_card_set
from tiny_cli.errors import CardError, ConfigError, TinyError
from tiny_cli.settings import Settings
from tiny_cli.tools.builtin import builtin_writes, default_registry
from tiny_cli.tools.mcp_names import mcp_path

if TYPE_CHECKING:  # routing brings numpy and the embedder: only commands that route pay
    import httpx

    from tiny_cli.cards.load import Card  # the checker: only for a set not taken whole
    from tiny_cli.routing.embed import Embedder, Progress
    from tiny_cli.routing.router import Router
    from tiny_cli.tools.mcp_config import McpConfig  # read only where an mcp.yaml is
    from tiny_cli.tools.registry import Registry  # a route builds none (open_router)


@dataclass(frozen=True)
class Workspace:
    """Settings, every registered tool, and the loaded cards (built when first asked for)."""

    settings: Settings
    registry: Registry
    card_set: CardSet  # in load order

    @property
    def cards(self) -> Mapping[str, Card]:
        """The loaded cards by id: asking for ids, or whether one is there, builds no card."""
        return self.card_set.by_id

    def card(self, card_id: str) -> Card:
        """Return the card named `card_id`, or raise ConfigError listing the known ids."""
        if card_id not in self.cards:
            known = ", ".join(sorted(self.cards)) or "none"
            raise ConfigError(f"no card {card_id!r} in {self.settings.cards_dir} (known: {known})")
        return self.cards[card_id]


def open_workspace(
    settings: Settings, transport: httpx.BaseTransport | None = None, wanted: str | None = None
) -> Workspace:
    """Load the tool registry and every card; raise CardError if any card is broken.

    `wanted` names the card the command needs: if it is missing too, that is said first.

    Tools of MCP servers (mcp.yaml) join the registry unbound: a server starts only when a
    run needs it. An unchanged card folder is taken from its snapshot (tiny_cli.cards.snapshot).
    """
    registry = default_registry(settings, transport=transport)
    mcp = mcp_settings(settings)
    cards = _card_set(settings, registry.writes(), mcp, wanted)
    if cards.facts.mcp:
        _add_mcp(registry, mcp)
    _add_declared(registry, cards)
    return Workspace(settings, registry, cards)


def open_router(
    settings: Settings,
    transport: httpx.BaseTransport | None = None,
    progress: Progress | None = None,
) -> Router:
    """Build the concierge for the settings' cards, as `make_router(open_workspace(...))`.

    A route runs no tool, so no tool registry is built: the built-in tools' names suffice
    to check the cards, unless the user's own tools (TINY_TOOLS) must be imported to be known.
    """
    cards = _card_set(settings, known_tools(settings), mcp_settings(settings))
    return router_for(settings, cards, transport, progress)


def known_tools(settings: Settings) -> dict[str, bool]:
    """Map each built-in and user tool a card may name to whether it writes (no MCP tools)."""
    if settings.tools_spec:  # the user's tools are known only once imported
        return default_registry(settings).writes()
    return builtin_writes()


def _card_set(
    settings: Settings, known: Mapping[str, bool], mcp: McpConfig | None, wanted: str | None = None
) -> CardSet:
    """Load the cards folder (from its snapshot when unchanged); CardError if a card is broken."""
    if not settings.cards_dir.exists():
        raise _no_cards(settings)
    try:
        return load_card_set([settings.cards_dir], known, mcp, settings.cache_dir)
    except CardError as exc:
        raise _unknown_first(exc, wanted, settings.cards_dir) from None


def _no_cards(settings: Settings) -> ConfigError:
    """The cards folder is not there: say who named it, and how to name another one."""
    folder, where = settings.cards_dir, settings.origin("cards_dir")
    if where == "--cards":  # the user just typed it: no advice to type it
        return ConfigError(f"no cards directory {folder} (given by --cards)")
    if where:
        return ConfigError(f"no cards directory {folder} (from {where}); pass --cards or change it")
    return ConfigError(f"no cards directory {folder}; pass --cards or set TINY_CARDS")


def _unknown_first(exc: CardError, wanted: str | None, folder: Path) -> TinyError:
    """The card a command asks for, missing, is the first thing to say; then the broken ones."""
    if wanted is None or any(c.id == wanted for c in exc.loaded):
        return exc
    if any(Path(p.file).stem == wanted for p in exc.problems):  # it may be the broken one
        return exc
    known = ", ".join(sorted(c.id for c in exc.loaded)) or "none"
    first = str(exc.problems[0]) if exc.problems else ""
    more = f" and {len(exc.problems) - 1} more" if len(exc.problems) > 1 else ""
    return ConfigError(
        f"no card {wanted!r} in {folder} (known: {known}); besides, "
        f"{len(exc.problems)} card problem(s): {first}{more} (tiny validate lists them)"
    )


def _add_declared(registry: Registry, cards: CardSet) -> None:
    """Register the functions cards declare (validation made sure each name means one schema)."""
    from tiny_cli.tools.registry import declared_tool

    for card_id, spec in cards.facts.functions:
        if spec["name"] not in registry:
            tool = declared_tool(spec["name"], spec.get("description", ""), spec["parameters"])
            registry.add(tool, f"card {card_id}")


def mcp_settings(settings: Settings) -> McpConfig | None:
    """Read the MCP servers file (TINY_MCP, or mcp.yaml in the cards folder), if there is one."""
    path = mcp_path(settings.cards_dir, settings.mcp_file)
    if path is None:  # no servers: their reader and types are not needed
        return None
    from tiny_cli.tools.mcp_config import load_mcp_config

    return load_mcp_config(path)


def _add_mcp(registry: Registry, mcp: McpConfig | None) -> None:
    if mcp is not None and mcp.servers:
        from tiny_cli.tools.mcp_client import (
            McpTools,  # the SDK itself loads only when a server starts
        )

        registry.add_source(McpTools(mcp))


def make_router(
    ws: Workspace,
    transport: httpx.BaseTransport | None = None,
    progress: Progress | None = None,
) -> Router:
    """Build the concierge for the workspace's cards with the configured embedder.

    `progress(done, total)` hears how far embedding new card texts has got.
    """
    return router_for(ws.settings, ws.card_set, transport, progress)


def router_for(
    s: Settings,
    cards: Sequence[Card],
    transport: httpx.BaseTransport | None = None,
    progress: Progress | None = None,
) -> Router:
    """Build the concierge for `cards` with the settings' embedder and learned examples."""
    from tiny_cli.routing.learned import load_learned
    from tiny_cli.routing.threshold import build_router
    from tiny_cli.secrets import scrubber

    # a hand-added secret in learned.jsonl reaches neither the router's cache nor --explain
    learned = load_learned(learned_folder(s)).scrubbed(scrubber(s.api_key))
    from tiny_cli.routing.tooltexts import gathered

    embedder = embedder_for(s, transport)
    return build_router(
        cards, embedder, s.cache_dir, learned, s.threshold, progress, tool_texts=gathered(s)
    )


def embedder_for(s: Settings, transport: httpx.BaseTransport | None = None) -> Embedder:
    """Return the configured embedder (TINY_EMBEDDER / --embedder)."""
    from tiny_cli.routing.embed import get_embedder

    return get_embedder(s.embedder, base_url=s.base_url, api_key=s.api_key, transport=transport)


def learned_folder(s: Settings) -> Path:
    """Return the folder whose learned.jsonl teaches the router: the cards folder."""
    return s.cards_dir if s.cards_dir.is_dir() else s.cards_dir.parent
