"""The one way a router is built: from settings, cards, learned examples and an embedder.

Every command that routes (route, delegate, serve, validate's overlap check, the bench)
calls `build_router`; what it is not given it reads from the settings: the embedder, the
learned examples beside the cards (scrubbed of the API key) and the threshold. The router's
state is cached by what it is built from (tiny_cli.routing.state).

With learned examples the fixed default threshold stops fitting: the kNN view lifts
in-scope scores, and the out-of-scope examples pull their neighbours down. So
`derive_threshold` cross-validates on the folder's own data: the threshold is the lowest
score that abstains on the target share of each fold's held-out out-of-scope examples
together with the shipped background of generic requests, as corrections alone are a biased
sample (docs/routing.md); with fewer than `MIN_OUT_OF_SCOPE` the default applies. A derived
threshold is fresh while what it was derived on is unchanged (`threshold_basis`).
Precedence: the settings' threshold (--threshold > TINY_THRESHOLD > the project file) > a
fresh derived threshold > DEFAULT_THRESHOLD. The margin over the second card counts only
with a derived threshold, the one scale it was derived on.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from tiny_cli.cards.card import Card
from tiny_cli.errors import ConfigError
from tiny_cli.routing.embed import (
    CachedEmbedder,
    Embedder,
    Progress,
    VectorCache,
    fingerprint,
    get_embedder,
)
from tiny_cli.routing.examples_file import (
    LEARNED_FILENAME,
    DerivedThreshold,
    Learned,
    load_learned,
    normalise,
    with_learned,
)
from tiny_cli.routing.router import DEFAULT_THRESHOLD, MARGIN_WEIGHT, Router, background_texts
from tiny_cli.routing.state import STATE_VERSION, cards_key
from tiny_cli.routing.tooltexts import ToolTexts, gathered
from tiny_cli.secrets import scrubber
from tiny_cli.settings import Origin, Settings, check_settings
from tiny_cli.text import wrong_kind

if TYPE_CHECKING:
    import httpx

__all__ = [
    "ABSTAIN_TARGET",
    "FOLDS",
    "MIN_OUT_OF_SCOPE",
    "build_router",
    "chosen_threshold",
    "derive_threshold",
    "embedder_for",
    "folder_learned",
    "learned_file",
    "learned_folder",
    "stale_threshold",
    "taught_tasks",
    "threshold_basis",
]

FOLDS = 5
# The project's bar for the abstain rule: abstain on at least this share of the tasks that
# no card fits (`best_at_target` in evaluation reports the best in-scope accuracy reaching it).
ABSTAIN_TARGET = 0.80
# Under this many out-of-scope examples, the quantile a fold can see is mostly noise: with
# 20, each fold holds out 4 and the 80 % point rests on 16 scores.
MIN_OUT_OF_SCOPE = 20
DAMAGED_HEADER = (
    "the header's threshold is not as `tiny learn` wrote it (a value of another type, "
    "or a field missing)"
)
Basis = tuple[str, str, int]  # the cards' key, the tool texts' key, the router's version
NO_BASIS: Basis = ("", "", 0)  # no threshold derived: nothing to compare


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
    folder: Iterable[Card] | None = None,
) -> Router:
    """Return the router for `cards` with their learned examples and the chosen threshold.

    `learned`: default, the cards folder's learned.jsonl; `embedder`: default, the settings'
    (reached through `transport`); `progress(done, total)` hears how far embedding new card
    texts has got; `keep_state=False` for a throwaway router (its state is not saved);
    `tool_texts`: default, the descriptions of the tools cards name but do not declare, read
    without starting anything (tiny_cli.routing.tooltexts); `folder`: every card of the
    folder when `cards` are some of them (the bench's universes), so a threshold derived on
    the folder still holds.
    """
    cards = _checked(settings, cards)
    learned = learned if learned is not None else folder_learned(settings)
    embedder = embedder or embedder_for(settings, transport)
    tool_texts = tool_texts if tool_texts is not None else gathered(settings, cards=cards)
    # hashing every card's view costs a large folder time on each route: only with a threshold
    derived_on = tuple(folder) if folder is not None else cards
    basis = threshold_basis(derived_on, tool_texts) if learned.threshold is not None else NO_BASIS
    given = (settings.threshold, settings.origin("threshold"))
    value, margin, source = chosen_threshold(learned, embedder, given, basis)
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
        tool_texts=tool_texts,
    )


def _checked(settings: Any, cards: Any) -> tuple[Card, ...]:
    """The cards, after refusing settings or cards of another kind (a ConfigError naming them)."""
    check_settings(settings)
    # a mapping would give its ids: `workspace.cards` where `.values()` was meant
    iterable = isinstance(cards, Iterable) and not isinstance(cards, str | Mapping)
    given = tuple(cards) if iterable else ()
    odd = [c for c in given if not isinstance(c, Card)]
    if not iterable or odd:
        raise wrong_kind("cards", "Cards (workspace.cards.values())", odd[0] if odd else cards)
    return given


def folder_learned(settings: Settings) -> Learned:
    """The cards folder's learned examples as a router reads them: scrubbed of secrets."""
    return load_learned(learned_folder(settings)).scrubbed(scrubber(settings.api_key))


def stale_threshold(settings: Settings, cards: Sequence[Card], router: Router) -> str | None:
    """Say why `router` (for `cards`) uses the default over a stale derived threshold, if so."""
    learned = folder_learned(settings)
    if settings.threshold is not None:
        return None
    if learned.damaged_header:  # read as no threshold, yet one was written: stale, say so
        return DAMAGED_HEADER
    if learned.threshold is None:
        return None
    basis = threshold_basis(cards, router.tools)
    return learned.why_stale(fingerprint(router.embedder), *basis)


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


def learned_folder(s: Settings, *, writing: bool = False) -> Path:
    """Return the folder whose learned.jsonl teaches the router: the cards folder."""
    # `writing`: never into the seed cards tiny ships
    if writing and s.cards_dir != s.own_cards_dir():
        raise ConfigError(
            f"no cards folder here: {s.own_cards_dir()} does not exist, and learned.jsonl goes "
            "beside your own cards, never into the ones tiny ships; run `tiny init`, or pass "
            "--cards (or set TINY_CARDS)",
            path=s.own_cards_dir(),
        )
    return s.cards_dir if s.cards_dir.is_dir() else s.cards_dir.parent


def learned_file(s: Settings) -> Path:
    """Return the learned.jsonl that teaches the router (it may not exist)."""
    return learned_folder(s) / LEARNED_FILENAME


# --- the threshold ------------------------------------------------------------------------


def chosen_threshold(
    learned: Learned, embedder: Embedder, given: tuple[float | None, Origin | None], basis: Basis
) -> tuple[float, float, str]:
    """The threshold a router uses, the margin's weight, and where the threshold comes from."""
    value, origin = given
    if value is not None:
        return value, 0.0, f"given by {origin or 'the settings'}"
    why = learned.why_stale(fingerprint(embedder), *basis)
    if learned.threshold is not None and why is None:
        return learned.threshold.value, MARGIN_WEIGHT, learned.threshold.describe()
    return DEFAULT_THRESHOLD, 0.0, _why_default(learned, why)


def threshold_basis(cards: Sequence[Card], tool_texts: ToolTexts | None) -> Basis:
    """The keys of the cards' routing views and tool texts, and the router's version."""
    ordered = sorted(cards, key=lambda card: card.id)  # the folder's order is no change
    return cards_key(ordered), (tool_texts or ToolTexts()).key(ordered), STATE_VERSION


def derive_threshold(
    cards: Sequence[Card],
    learned: Learned,
    embedder: Embedder,
    cache_dir: Path | None,
    *,
    tool_texts: ToolTexts | None = None,
) -> DerivedThreshold | None:
    """Cross-validate the threshold on the folder's examples; None with too few out of scope."""
    if len(learned.out_of_scope) < MIN_OUT_OF_SCOPE:
        return None
    # the threshold is cross-validated on taught and generated examples, each held out as the
    # router holds it; the sha is of the file as written, generated lines included
    sha = learned.sha()
    on_cards, on_tools, router = threshold_basis(cards, tool_texts)
    if not isinstance(embedder, CachedEmbedder):  # every fold embeds the same texts again
        embedder = CachedEmbedder(embedder, VectorCache(cache_dir))
    outside, generic, inside = _held_out_scores(cards, learned, embedder, cache_dir, tool_texts)
    ids = {card.id for card in cards}
    # every fold scores the whole background: each held-out example counts FOLDS times
    value = _lowest_abstaining(outside * FOLDS + generic, ABSTAIN_TARGET)
    return DerivedThreshold(
        value=value,
        target_recall=ABSTAIN_TARGET,
        examples=sum(len(ts) for c, ts in learned.every_example().examples.items() if c in ids),
        out_of_scope=len(learned.out_of_scope),
        folds=FOLDS,
        cv_top1=round(sum(s >= value and ok for s, ok in inside) / max(len(inside), 1), 4),
        cv_recall=round(sum(s < value for s in outside) / len(outside), 4),
        generic_recall=round(sum(s < value for s in generic) / len(generic), 4),
        embedder=fingerprint(embedder),
        sha=sha,
        cards_key=on_cards,
        tools_key=on_tools,
        router=router,
    )


def _held_out_scores(
    cards: Sequence[Card],
    learned: Learned,
    embedder: Embedder,
    cache_dir: Path | None,
    tool_texts: ToolTexts | None,
) -> tuple[list[float], list[float], list[tuple[float, bool]]]:
    """Scores of each fold's held-out out-of-scope examples, the background, held-out examples."""
    outside: list[float] = []
    generic: list[float] = []
    inside: list[tuple[float, bool]] = []
    background, ids = background_texts(), {card.id for card in cards}
    every = learned.every_example().examples  # taught and generated: each is held out once
    for fold in range(FOLDS):
        router = _fold_router(cards, learned, embedder, cache_dir, fold, tool_texts)
        held_out = [t for t in learned.out_of_scope if _fold(t) == fold]
        known = [(t, c) for c, ts in every.items() if c in ids for t in ts if _fold(t) == fold]
        decisions = router.route_many([*held_out, *(t for t, _ in known), *background], 1)
        split = len(held_out), len(held_out) + len(known)
        outside += [d.score for d in decisions[: split[0]]]
        generic += [d.score for d in decisions[split[1] :]]
        inside += [
            (d.score, d.candidates[0].agent_id == card)
            for d, (_, card) in zip(decisions[split[0] : split[1]], known, strict=True)
        ]
    return outside, generic, inside


def _fold_router(
    cards: Sequence[Card],
    learned: Learned,
    embedder: Embedder,
    cache_dir: Path | None,
    fold: int,
    tool_texts: ToolTexts | None,
) -> Router:
    """The router built without fold `fold`'s examples and out-of-scope examples."""
    kept = Learned(
        learned.path,
        {c: tuple(t for t in ts if _fold(t) != fold) for c, ts in learned.examples.items()},
        tuple(t for t in learned.out_of_scope if _fold(t) != fold),
        generated={
            c: tuple(t for t in ts if _fold(t) != fold) for c, ts in learned.generated.items()
        },
    )
    return Router(
        with_learned(cards, kept),
        embedder,
        cache_dir,
        out_of_scope=kept.out_of_scope,
        margin=MARGIN_WEIGHT,
        keep_state=False,
        tool_texts=tool_texts,
    )


def _lowest_abstaining(scores: Sequence[float], target: float) -> float:
    """The lowest threshold, rounded up to 0.01, under which `target` of `scores` fall."""
    ranked = np.sort(np.asarray(scores, dtype=np.float64))
    k = max(1, math.ceil(target * len(ranked) - 1e-9))
    above = float(np.nextafter(ranked[k - 1], np.inf))  # abstain means score < threshold
    return math.ceil(above * 100) / 100


def _fold(task: str) -> int:
    """Assign a text to a fold by its hash: the same split on every machine and every run."""
    return int(hashlib.sha256(task.encode()).hexdigest(), 16) % FOLDS


def _why_default(learned: Learned, why: str | None) -> str:
    """Why the default threshold applies: `why` the derived one is stale, else what is missing."""
    base = f"default {DEFAULT_THRESHOLD}"
    stale = f"{base}: the derived threshold in {learned.path.name} is stale"
    if why is not None:
        return f"{stale}: {why}; run `tiny learn`"
    if learned.threshold is not None or learned.damaged_header:
        return f"{stale}; run `tiny learn`"
    if learned.out_of_scope or learned.examples or learned.generated:
        return (
            f"{base}: {learned.path.name} has {len(learned.out_of_scope)} out-of-scope "
            f"examples, and deriving one needs {MIN_OUT_OF_SCOPE}"
        )
    return f"{base}: no learned examples beside the cards"
