"""Routing that learns, measured: a learning curve from corrections, on every dev set.

Corrections come from each set's training part, never its test part, in the order the
router gets them wrong — the way a user's corrections arrive: route the training tasks,
teach the ones it got wrong (at most a few per card per round, in a seeded order), rebuild,
repeat until every card has its n corrections or nothing is wrong any more. A training
task that must abstain counts as a correction of its own bucket ("out of scope"), capped
at n like a card. After 0, 3, 10, 30 and 60 corrections per card: the best top-1 at abstain
recall ≥ 0.80 on the test part, and top-1 / abstain recall at the threshold `tiny learn`
derives (or the default, when the folder has too few out-of-scope examples to derive one).
Run through `python benchmarks/routing.py` (its `--curve` options) or on its own.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from tiny_cli.cards.card import Card
from tiny_cli.routing.embed import Embedder
from tiny_cli.routing.evaluation import evaluate, load_eval_file
from tiny_cli.routing.examples_file import Learned, merge
from tiny_cli.routing.factory import build_router, derive_threshold
from tiny_cli.routing.router import Router
from tiny_cli.settings import Settings

Labelled = list[tuple[str, str | None]]
STEPS = (0, 3, 10, 30, 60)
ROUND_SHARE = 3  # a round teaches at most a third of what a card still lacks (at least 1)
SCAN_CHUNK = 1024  # training tasks routed at a time while looking for a round's corrections
OUT_OF_SCOPE = "(out of scope)"


@dataclass(frozen=True)
class CurvePoint:
    """The test-part figures after `per_card` corrections per card (fewer if none were wrong)."""

    per_card: int
    taught: int
    out_of_scope: int
    best_top1: float | None
    best_threshold: float | None
    top1: float
    recall: float
    threshold: float
    derived: bool

    def to_json(self) -> dict[str, Any]:
        """Return this point as plain JSON types."""
        return {k: round(v, 4) if isinstance(v, float) else v for k, v in vars(self).items()}


def curve(
    cards: Sequence[Card],
    train: Labelled,
    test: Labelled,
    embedder: Embedder,
    cache_dir: Path,
    seed: int = 0,
    steps: Sequence[int] = STEPS,
) -> list[CurvePoint]:
    """Teach corrections from `train` up to each step's count per card; measure on `test`."""
    pool = list(train)
    random.Random(seed).shuffle(pool)
    learned = Learned(cache_dir / "learned.jsonl")  # never written: kept in memory
    points = []
    for n in steps:
        learned = _teach(cards, learned, pool, embedder, cache_dir, n)
        learned = replace(learned, threshold=derive_threshold(cards, learned, embedder, cache_dir))
        points.append(_measure(cards, learned, test, embedder, cache_dir, n))
    return points


def _teach(
    cards: Sequence[Card],
    learned: Learned,
    pool: Labelled,
    embedder: Embedder,
    cache_dir: Path,
    n: int,
) -> Learned:
    """Teach wrongly routed training tasks until each bucket has `n` or none is wrong.

    A round routes the pool in its (seeded) order, a chunk at a time, and stops once it has
    a round's worth of corrections: early rounds, with many errors, route a fraction of it.
    """
    while True:
        have = Counter({c: len(t) for c, t in learned.examples.items()})
        have[OUT_OF_SCOPE] = len(learned.out_of_scope)
        taught = {task for tasks in learned.examples.values() for task in tasks}
        taught.update(learned.out_of_scope)
        remaining = [(t, c) for t, c in pool if t not in taught]
        router = _router(cards, embedder, cache_dir, learned, keep_state=False)
        batch = _round(router, remaining, have, n)
        if not batch:
            return learned
        learned = merge(learned, batch, cards).learned


def _router(
    cards: Sequence[Card], embedder: Embedder, cache_dir: Path, learned: Learned, **kw: Any
) -> Router:
    """The router tiny builds (tiny_cli.routing.factory), its files under `cache_dir`."""
    settings = Settings(home=cache_dir, cards_dir=cache_dir, docs_dir=cache_dir)
    return build_router(settings, cards, learned=learned, embedder=embedder, **kw)


def _round(router: Any, remaining: Labelled, have: Counter[str], n: int) -> Labelled:
    """One round's corrections: the wrongly routed, in pool order, a round's share per bucket."""
    batch: Labelled = []
    buckets = {c if c is not None else OUT_OF_SCOPE for _, c in remaining}
    enough = sum(max(1, math.ceil((n - have[b]) / ROUND_SHARE)) for b in buckets if have[b] < n)
    for start in range(0, len(remaining), SCAN_CHUNK):
        wrong = _wrong(router, remaining[start : start + SCAN_CHUNK])
        batch = _batch([*batch, *wrong], have, n)
        if len(batch) >= enough // ROUND_SHARE:
            break
    return batch


def _wrong(router: Any, labelled: Labelled) -> Labelled:
    decisions = router.route_many([t for t, _ in labelled], 1) if labelled else []
    return [(t, c) for (t, c), d in zip(labelled, decisions, strict=True) if d.agent_id != c]


def _batch(wrong: Labelled, have: Counter[str], n: int) -> Labelled:
    room = {bucket: n - count for bucket, count in have.items()}
    batch: Labelled = []
    added: Counter[str] = Counter()
    for task, card in wrong:
        bucket = OUT_OF_SCOPE if card is None else card
        left = room.get(bucket, n)
        if added[bucket] < max(1, math.ceil(left / ROUND_SHARE)) and added[bucket] < left:
            batch.append((task, card))
            added[bucket] += 1
    return batch


def _measure(
    cards: Sequence[Card],
    learned: Learned,
    test: Labelled,
    embedder: Embedder,
    cache_dir: Path,
    n: int,
) -> CurvePoint:
    router = _router(cards, embedder, cache_dir, learned, keep_state=False)
    report = evaluate(router, test)
    best = report.best_at_target
    return CurvePoint(
        per_card=n,
        taught=learned.count(),
        out_of_scope=len(learned.out_of_scope),
        best_top1=None if best is None else best.in_scope_accuracy,
        best_threshold=None if best is None else best.threshold,
        top1=report.top1_in_scope,
        recall=report.abstain_recall,
        threshold=router.threshold,
        derived=learned.threshold is not None,
    )


def split_by_hash(labelled: Labelled) -> tuple[Labelled, Labelled]:
    """Split tasks by a hash of their text: (half 0, half 1), the same on every machine."""
    halves: tuple[Labelled, Labelled] = ([], [])
    for task, card in labelled:
        halves[int(hashlib.sha256(task.encode()).hexdigest(), 16) % 2].append((task, card))
    return halves


# --- the sets, the BFCL cards, the tables -------------------------------------------------


def curve_sets(
    hwu64: Path, metatool: Path, metatool_cards: Any, folder_cards: Any
) -> dict[str, tuple[list[Card], Labelled, Labelled]]:
    """Return each dev set with a training part: cards, train, test.

    HWU64: cross-validation fold 1's own training part and test part. MetaTool: its labelled
    queries minus the test tasks and card examples (benchmarks/data/README.md), and — it has
    no out-of-scope training queries — the test's abstain tasks split by a hash of their
    text: half 0 teaches, half 1 is tested.
    """
    meta_test = load_eval_file(metatool / "tasks.jsonl")
    teach, keep = split_by_hash([item for item in meta_test if item[1] is None])
    meta_train = load_eval_file(metatool / "train.jsonl") + teach
    meta = [item for item in meta_test if item[1] is not None] + keep
    return {
        "HWU64": (
            folder_cards(hwu64 / "cards"),
            load_eval_file(hwu64 / "train.jsonl"),
            load_eval_file(hwu64 / "tasks.jsonl"),
        ),
        "MetaTool, summaries": (metatool_cards(False), meta_train, meta),
        "MetaTool, +examples": (metatool_cards(True), meta_train, meta),
    }


def bfcl_routing(
    cards: Sequence[Card],
    tasks: Labelled,
    embedder: Embedder,
    cache_dir: Path,
    right: Mapping[str, frozenset[str]] | None = None,
    generated: Learned | None = None,
) -> list[dict[str, Any]]:
    """Top-1, recall @1/@3/@5 and abstain on irrelevance for the bench-at-scale cards.

    Before: the router as it was before learning (no kNN view). After, untaught: today's
    default. After, taught: half the irrelevance tasks (by hash) taught as out of scope,
    measured on the other half and every in-scope task; with `generated` (the cards' file of
    `tiny learn --generate`), the same beside those examples, the threshold derived on both.
    `right`: each task's cards that hold its expected function with the same definition.
    """
    teach, keep = split_by_hash([item for item in tasks if item[1] is None])
    in_scope = [item for item in tasks if item[1] is not None]
    taught = _derived(cards, merge(Learned(cache_dir / "bfcl.jsonl"), teach, cards).learned,
                      embedder, cache_dir)  # fmt: skip
    rows = [
        ("before (no kNN view)", Router(cards, embedder, cache_dir, knn=0), in_scope + keep),
        (
            "after, untaught",
            _router(cards, embedder, cache_dir, Learned(Path("-"))),
            in_scope + keep,
        ),
        (
            f"after, {len(teach)} irrelevance tasks taught",
            _router(cards, embedder, cache_dir, taught),
            in_scope + keep,
        ),
    ]
    if generated is not None:
        both = _derived(cards, replace(taught, generated=generated.generated), embedder, cache_dir)
        name = f"after, generated examples and {len(teach)} irrelevance tasks taught"
        rows.append((name, _router(cards, embedder, cache_dir, both), in_scope + keep))
    return [_bfcl_row(name, router, labelled, right or {}) for name, router, labelled in rows]


def _derived(cards: Sequence[Card], learned: Learned, embedder: Embedder, cache: Path) -> Learned:
    """`learned` with the threshold `tiny learn` derives on it."""
    return replace(learned, threshold=derive_threshold(cards, learned, embedder, cache))


def _bfcl_row(
    name: str, router: Router, labelled: Labelled, right: Mapping[str, frozenset[str]]
) -> dict[str, Any]:
    decisions = router.route_many([t for t, _ in labelled], 5)
    pairs = list(zip(labelled, decisions, strict=True))
    inside = [(c, d) for (_, c), d in pairs if c is not None]
    outside = [d for (_, c), d in pairs if c is None]
    shared = [(right.get(d.task, frozenset({c})), d) for c, d in inside]
    recall = {
        f"{rule}@{k}": sum(bool(ok & {x.agent_id for x in d.candidates[:k]}) for ok, d in rows)
        / len(rows)
        for rule, rows in (("exact", [(frozenset({c}), d) for c, d in inside]), ("shared", shared))
        for k in (1, 3, 5)
    }
    return {
        **recall,
        "in_scope_abstained": sum(d.agent_id is None for _, d in inside),
        "router": name,
        "in_scope": len(inside),
        "irrelevance": len(outside),
        "top1_never_abstain": sum(d.candidates[0].agent_id == c for c, d in inside) / len(inside),
        "top1": sum(d.agent_id == c for c, d in inside) / len(inside),
        "top3_recall": sum(c in {x.agent_id for x in d.candidates[:3]} for c, d in inside)
        / len(inside),
        "abstain_on_irrelevance": sum(d.agent_id is None for d in outside) / len(outside),
        "threshold": router.threshold,
    }


def print_curves(console: Console, curves: dict[str, list[CurvePoint]], seeds: int) -> None:
    """One table: each set's figures after 0, 3, 10, 30 and 60 corrections per card."""
    table = Table(
        title=f"routing that learns: corrections from each set's training part "
        f"(mean of {seeds} seed{'s' if seeds > 1 else ''})"
    )
    for name in (
        "set",
        "per card",
        "taught",
        "out of scope",
        "best top1 @R≥0.80",
        "threshold",
        "top1",
        "abstain R",
    ):
        table.add_column(name, justify="left" if name == "set" else "right")
    for set_name, points in curves.items():
        for p in points:
            best = "—" if p.best_top1 is None else f"{p.best_top1:.3f} @ {p.best_threshold:.2f}"
            kind = "derived" if p.derived else "default"
            table.add_row(
                set_name,
                str(p.per_card),
                str(p.taught),
                str(p.out_of_scope),
                best,
                f"{p.threshold:.2f} ({kind})",
                f"{p.top1:.3f}",
                f"{p.recall:.3f}",
            )
    console.print(table)
    console.print(
        "[dim]per card: the corrections each card may get (fewer when the router already gets "
        "the rest right). top1 / abstain R: on the test part, at the threshold tiny learn "
        "derives (default while there are under 20 out-of-scope examples).[/dim]"
    )


def print_bfcl(console: Console, rows: list[dict[str, Any]]) -> None:
    """The bench-at-scale cards: ranking, top-3 recall and abstain on irrelevance."""
    table = Table(title="routing the bench-at-scale BFCL cards (200 cards)")
    heads = ("router", "in scope", "irrelevance", "right card @1 / @3 / @5 (shared function)",
             "exact card @1 / @3 / @5", "top1", "in scope abstained", "abstain on irrelevance",
             "threshold")  # fmt: skip
    for name in heads:
        table.add_column(name, justify="left" if name == "router" else "right")
    for r in rows:
        table.add_row(
            r["router"],
            str(r["in_scope"]),
            str(r["irrelevance"]),
            " / ".join(f"{r[f'shared@{k}']:.3f}" for k in (1, 3, 5)),
            " / ".join(f"{r[f'exact@{k}']:.3f}" for k in (1, 3, 5)),
            f"{r['top1']:.3f}",
            str(r["in_scope_abstained"]),
            f"{r['abstain_on_irrelevance']:.3f}",
            f"{r['threshold']:.2f}",
        )
    console.print(table)
    console.print(
        "[dim]right card: the expected card, or one holding the expected function with the "
        "same name (before BFCL's _m<N> suffix), description and parameters. exact card: "
        "the expected card only.[/dim]"
    )


def mean_curve(runs: list[list[CurvePoint]]) -> list[CurvePoint]:
    """Average curves of several seeds point by point (their steps are the same)."""
    return [_mean_point(points) for points in zip(*runs, strict=True)]


def _mean_point(points: Sequence[CurvePoint]) -> CurvePoint:
    def avg(name: str) -> Any:
        values = [getattr(p, name) for p in points]
        return None if None in values else sum(values) / len(values)

    means = {k: avg(k) for k in ("best_top1", "best_threshold", "top1", "recall", "threshold")}
    counts = {k: round(avg(k)) for k in ("taught", "out_of_scope")}
    return replace(points[0], **means, **counts, derived=all(p.derived for p in points))
