"""The one way a router is built: from settings, cards, learned examples and an embedder.

Every command that routes (route, delegate, serve, validate's overlap check, the bench)
calls `build_router`. What it does not get it reads from the settings: the embedder they
name, the learned examples beside the cards (scrubbed of the API key) and the threshold,
given or derived (tiny_cli.routing.threshold). The router's state is cached by what it is
built from (tiny_cli.routing.state).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from tiny_cli.cards.card import Card
from tiny_cli.routing.embed import Embedder, Progress, get_embedder
from tiny_cli.routing.examples_file import Learned, load_learned, normalise, with_learned
from tiny_cli.routing.router import Router
from tiny_cli.routing.threshold import chosen_threshold
from tiny_cli.routing.tooltexts import ToolTexts, gathered
from tiny_cli.secrets import scrubber
from tiny_cli.settings import Settings

if TYPE_CHECKING:
    import httpx

__all__ = ["build_router", "embedder_for", "learned_folder", "taught_tasks"]


def build_router(
    settings: Settings,
    cards: Iterable[Card],
    *,
    learned: Learned | None = None,
    embedder: Embedder | None = None,
    transport: httpx.BaseTransport | None = None,
    progress: Progress | None = None,
    keep_state: bool = True,
    tool_texts: ToolTexts | None = None,
) -> Router:
    """Return the router for `cards` with their learned examples and the chosen threshold.

    `learned`: default, the cards folder's learned.jsonl; `embedder`: default, the settings'
    (reached through `transport`); `progress(done, total)` hears how far embedding new card
    texts has got; `keep_state=False` for a throwaway router (its state is not saved);
    `tool_texts`: default, the descriptions of the tools cards name but do not declare, read
    without starting anything (tiny_cli.routing.tooltexts).
    """
    cards = tuple(cards)
    if learned is None:  # a hand-added secret reaches neither the router's cache nor --explain
        learned = load_learned(learned_folder(settings)).scrubbed(scrubber(settings.api_key))
    embedder = embedder or embedder_for(settings, transport)
    value, margin, source = chosen_threshold(learned, embedder, settings.threshold)
    return Router(
        with_learned(cards, learned),
        embedder,
        settings.cache_dir,
        value,
        out_of_scope=learned.out_of_scope,
        margin=margin,
        threshold_source=source,
        taught=taught_tasks(learned, {card.id for card in cards}),
        progress=progress,
        keep_state=keep_state,
        tool_texts=tool_texts if tool_texts is not None else gathered(settings),
    )


def taught_tasks(learned: Learned, card_ids: set[str]) -> dict[str, str | None]:
    """Map each taught task (normalised) to its card, or None for out of scope."""
    taught: dict[str, str | None] = {normalise(t): None for t in learned.out_of_scope}
    for card, tasks in learned.examples.items():
        if card in card_ids:  # a card deleted since: `tiny validate` names its lines
            taught.update((normalise(t), card) for t in tasks)
    return taught


def embedder_for(s: Settings, transport: httpx.BaseTransport | None = None) -> Embedder:
    """Return the configured embedder (TINY_EMBEDDER / --embedder)."""
    return get_embedder(s.embedder, base_url=s.base_url, api_key=s.api_key, transport=transport)


def learned_folder(s: Settings) -> Path:
    """Return the folder whose learned.jsonl teaches the router: the cards folder."""
    return s.cards_dir if s.cards_dir.is_dir() else s.cards_dir.parent
