"""Workspace: the registry and cards one command works with, loaded from Settings."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiny_cli.cards.snapshot import CardSet, load_card_set
from tiny_cli.errors import CardError, ConfigError, EmbedderError, TinyError
from tiny_cli.settings import Settings
from tiny_cli.tools.builtin import default_registry
from tiny_cli.tools.mcp_config import McpConfig, load_mcp_config, mcp_path, original
from tiny_cli.tools.registry import Registry, declared_tool

if TYPE_CHECKING:  # routing brings numpy and the embedder: only commands that route pay
    import httpx

    from tiny_cli.cards.load import Card, Problem  # the checker: only for a set not taken whole
    from tiny_cli.routing.embed import Embedder, Progress
    from tiny_cli.routing.router import Overlap, Router


CONNECT_SECONDS = 30.0  # `tiny validate --connect`: how long a server may take to start


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
    if not settings.cards_dir.exists():
        raise ConfigError(
            f"no cards directory {settings.cards_dir}; pass --cards or set TINY_CARDS"
        )
    mcp = mcp_settings(settings)
    try:
        cards = load_card_set([settings.cards_dir], registry.writes(), mcp, settings.cache_dir)
    except CardError as exc:
        raise _unknown_first(exc, wanted, settings.cards_dir) from None
    if cards.facts.mcp:
        _add_mcp(registry, mcp)
    _add_declared(registry, cards)
    return Workspace(settings, registry, cards)


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
    for card_id, spec in cards.facts.functions:
        if spec["name"] not in registry:
            tool = declared_tool(spec["name"], spec.get("description", ""), spec["parameters"])
            registry.add(tool, f"card {card_id}")


def mcp_settings(settings: Settings) -> McpConfig | None:
    """Read the MCP servers file (TINY_MCP, or mcp.yaml in the cards folder), if there is one."""
    return load_mcp_config(mcp_path(settings.cards_dir, settings.mcp_file))


def _add_mcp(registry: Registry, mcp: McpConfig | None) -> None:
    if mcp is not None and mcp.servers:
        from tiny_cli.tools.mcp_client import (
            McpTools,  # the SDK itself loads only when a server starts
        )

        registry.add_source(McpTools(mcp))


@dataclass(frozen=True)
class Validation:
    """What `tiny validate` found: good cards, problems (fail), and routing warnings (don't)."""

    cards: list[Card]
    problems: list[Problem]
    warnings: list[Problem]

    @property
    def missing_path(self) -> bool:
        """Whether a path given to check does not exist: a usage error, not a card's problem."""
        return any(p.field == "path" for p in self.problems)

    def to_json(self) -> dict[str, Any]:
        """Return the result as one JSON document (`tiny validate --json`)."""
        return {
            "ok": not self.problems,
            "cards": [
                {
                    "id": c.id,
                    "file": str(c.path) if c.path else None,
                    "tools": [original(t) for t in c.tools],  # as the card writes them
                    "side_effects": c.side_effects,
                }
                for c in self.cards
            ],
            "problems": [_problem_json(p) for p in self.problems],
            "warnings": [_problem_json(p) for p in self.warnings],
        }


def _problem_json(p: Problem) -> dict[str, Any]:
    return {"file": p.file, "line": p.line, "field": p.field, "message": p.message}


def validate(
    settings: Settings,
    paths: Sequence[Path],
    transport: httpx.BaseTransport | None = None,
    connect: bool = False,
) -> Validation:
    """Check card files (default: the cards directory); warn where cards overlap for routing.

    `connect` also starts the MCP servers the cards name and checks each tool exists there
    (and that a card with a writing tool says `side_effects: write`).
    """
    from tiny_cli.cards.load import check_cards

    registry = default_registry(settings)
    folders = list(paths) or [settings.cards_dir]
    mcp = mcp_settings(_checked_folder(settings, folders))
    cards, problems = check_cards(folders, registry.writes(), mcp, settings.cache_dir)
    if connect and mcp is not None:
        problems += connect_problems(cards, mcp)
    if not paths:  # the cards folder as a whole: its learned examples too
        from tiny_cli.routing.learned import check_learned

        problems += check_learned(learned_folder(settings), cards)
    if problems or len(cards) < 2:
        return Validation(cards, problems, [])
    return Validation(cards, problems, routing_warnings(settings, cards, transport))


def _checked_folder(settings: Settings, folders: Sequence[Path]) -> Settings:
    """The MCP servers of the one folder named (its mcp.yaml), unless TINY_MCP names a file.

    `tiny validate examples/mcp/cards` checks that folder's cards against its own servers,
    as pre-commit calls it with files of one folder: their folder's mcp.yaml.
    """
    named = {p if p.is_dir() else p.parent for p in folders}
    if settings.mcp_file or len(named) != 1:
        return settings
    return replace(settings, cards_dir=named.pop())


def connect_problems(
    cards: Sequence[Card], mcp: McpConfig, seconds: float = CONNECT_SECONDS
) -> list[Problem]:
    """Start the servers the cards name; a problem for each tool missing or not allowed."""
    from tiny_cli.cards.load import Problem
    from tiny_cli.tools.mcp_client import McpTools

    source = McpTools(mcp)
    problems = []
    for card in cards:
        file = str(card.path) if card.path else card.id
        for found in source.check(card.tools, card.writes, seconds):
            line = _line_of(card.path, found.name)
            problems.append(Problem(file, line, f"tools[{found.index}]", found.message))
    return problems


def routing_warnings(
    settings: Settings, cards: Sequence[Card], transport: httpx.BaseTransport | None = None
) -> list[Problem]:
    """Name every card text that sits closer to another card than to its own card."""
    from tiny_cli.cards.load import Problem

    try:
        router = _router(settings, cards, transport)
    except EmbedderError as exc:
        return [Problem(str(settings.cards_dir), None, "routing", f"overlap check skipped: {exc}")]
    from tiny_cli.routing.learned import LEARNED_FILENAME

    by_id = {card.id: card for card in cards}
    learned = learned_folder(settings) / LEARNED_FILENAME
    return [_overlap_problem(by_id[o.agent_id], o, learned) for o in router.overlaps()]


def make_router(
    ws: Workspace,
    transport: httpx.BaseTransport | None = None,
    progress: Progress | None = None,
) -> Router:
    """Build the concierge for the workspace's cards with the configured embedder.

    `progress(done, total)` hears how far embedding new card texts has got.
    """
    return _router(ws.settings, ws.card_set, transport, progress)


def _router(
    s: Settings,
    cards: Sequence[Card],
    transport: httpx.BaseTransport | None,
    progress: Progress | None = None,
) -> Router:
    from tiny_cli.routing.learned import load_learned
    from tiny_cli.routing.threshold import build_router

    learned = load_learned(learned_folder(s))
    embedder = embedder_for(s, transport)
    return build_router(cards, embedder, s.cache_dir, learned, s.threshold, progress)


def embedder_for(s: Settings, transport: httpx.BaseTransport | None = None) -> Embedder:
    """Return the configured embedder (TINY_EMBEDDER / --embedder)."""
    from tiny_cli.routing.embed import get_embedder

    return get_embedder(s.embedder, base_url=s.base_url, api_key=s.api_key, transport=transport)


def learned_folder(s: Settings) -> Path:
    """Return the folder whose learned.jsonl teaches the router: the cards folder."""
    return s.cards_dir if s.cards_dir.is_dir() else s.cards_dir.parent


def _overlap_problem(card: Card, overlap: Overlap, learned: Path) -> Problem:
    from tiny_cli.cards.load import Problem

    taught = overlap.kind == "example" and overlap.text not in card.examples
    kind = "learned example" if taught else overlap.kind
    message = (
        f"{kind} {overlap.text!r} sits closer to card {overlap.other_id!r} "
        f"({overlap.other:.2f}) than to the rest of {card.id!r} ({overlap.own:.2f}); "
        + ("teach it to the right card with tiny learn, or delete its line" if taught
           else "reword it, or move it there")
    )  # fmt: skip
    if taught:  # the line of learned.jsonl that holds it, as JSON writes it
        return Problem(
            str(learned), _line_of(learned, json.dumps(overlap.text)[1:-1]), "routing", message
        )
    file = str(card.path) if card.path else card.id
    probe = card.summary if overlap.kind == "summary" else overlap.text
    return Problem(file, _line_of(card.path, probe), "routing", message)


def _line_of(path: Path | None, text: str) -> int | None:
    """Return the first line of the card file that holds the start of `text`, if any."""
    if path is None:
        return None
    probe = text.strip()[:40]  # a folded summary's first line holds at least its start
    try:
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    return next((n for n, line in enumerate(lines, 1) if probe and probe in line), None)
