"""The concierge: rank cards for a task by meaning and wording, route to the best or abstain.

A card is not one vector but a few, each a reason a task may belong to it: its routing text
("id words: summary"), one vector per capability its summary lists ("Handles X: a, b and
c" gives a, b and c), and, when it has examples, the mean of its routing text and examples.
A task's semantic score for a card is its best cosine to any of them, in a space centred on
a shipped background of generic requests and whitened by the cards' own within-card spread
(shrinkage that falls smoothly as the cards give more data). A lexical score — BM25 of the
task against the card's texts, divided by what the task's words could score at most — is
added with a small weight. The sum becomes a z-score against the same sum for the
background sentences, so one threshold means the same for three cards or a thousand.
docs/routing.md has the rule, its measurements and the threshold's derivation.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tiny_cli.cards.load import Card, card_text
from tiny_cli.digest import check_task
from tiny_cli.errors import ConfigError
from tiny_cli.routing.embed import Embedder, VectorCache, fingerprint
from tiny_cli.settings import DEFAULT_TOP
from tiny_cli.text import tokenize

# The z-score at which 80 % of MetaTool's abstain tasks abstain, on the calibration half of
# its tasks, the larger of without and with examples (1.47 / 1.39), rounded up to 0.05.
# `python benchmarks/routing.py` re-derives it every run (the z@80%R column).
DEFAULT_THRESHOLD = 1.5
# Weight of identity in the within-card covariance, at least: 5-fold cross-validation on
# the MetaTool cards' own texts (not its tasks) scored 0.5-0.8 alike. With fewer texts than
# dimensions the weight rises smoothly towards 1 (see _whitening).
WITHIN_SHRINKAGE = 0.6
# Weight of the lexical score (0-1) against the cosine; measured on MetaTool and HWU64.
LEXICAL_WEIGHT = 0.3
BM25_K1 = 1.2
MIN_SCALE = 1e-3  # a degenerate background spread must not divide by ~0
BACKGROUND_TEXT = "background.txt"
BACKGROUND_VECTORS = "background-vectors.npz"

Source = Literal["summary", "capability", "summary + examples"]


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


@dataclass(frozen=True)
class Reason:
    """Why one card scored what it did for one task."""

    agent_id: str
    score: float
    cosine: float
    source: Source
    text: str
    lexical: float
    words: tuple[str, ...]
    nearest_example: str | None
    nearest_example_cosine: float | None

    def to_json(self) -> dict[str, Any]:
        """Return this reason as plain JSON types."""
        return {
            "agent_id": self.agent_id,
            "score": _round(self.score),
            "cosine": _round(self.cosine),
            "source": self.source,
            "text": self.text,
            "lexical": _round(self.lexical),
            "words": list(self.words),
            "nearest_example": self.nearest_example,
            "nearest_example_cosine": None
            if self.nearest_example_cosine is None
            else _round(self.nearest_example_cosine),
        }


@dataclass(frozen=True)
class Explanation:
    """A routing decision with the reason behind each candidate's score."""

    decision: Decision
    reasons: tuple[Reason, ...]

    def to_json(self) -> dict[str, Any]:
        """Return the `tiny route --explain --json` object."""
        return {**self.decision.to_json(), "reasons": [r.to_json() for r in self.reasons]}


@dataclass(frozen=True)
class Overlap:
    """A card text that sits closer to another card than to the rest of its own card."""

    agent_id: str
    kind: str
    text: str
    other_id: str
    own: float
    other: float


@dataclass(frozen=True)
class _Vector:
    """One of a card's vectors: whose, from what, and which text."""

    card: int
    source: Source
    text: str


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
        if not math.isfinite(self.threshold):  # nan would abstain on everything, silently
            raise ConfigError(f"threshold {threshold!r} is not a number; use e.g. 1.5")
        cache = VectorCache(cache_dir)
        background = background_vectors(embedder, cache)
        self._centre = background.mean(axis=0)
        self._texts = [card_texts(card) for card in self.cards]
        self._build_vectors(cache)
        self._lexical = _Lexical(["\n".join(text for _, text in texts) for texts in self._texts])
        best = self._raw(background, background_texts()).max(axis=1)
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
        for task in tasks:
            check_task(task)
        scores = self.scores(tasks)
        return [self._decide(task, row, top) for task, row in zip(tasks, scores, strict=True)]

    def scores(self, tasks: Sequence[str]) -> np.ndarray:
        """Return the (tasks, cards) z-scores of `tasks`."""
        raw = self._raw(self.embedder.embed(list(tasks)), tasks)
        return (raw - self._loc) / self._scale

    def explain(self, task: str, top: int = DEFAULT_TOP) -> Explanation:
        """Route one task and say which text and which words drove each candidate's score."""
        check_task(task)
        vector = self.embedder.embed([task])
        row = (self._raw(vector, [task])[0] - self._loc) / self._scale
        decision = self._decide(task, row, top)
        query = self._project(vector)[0]
        lexical = self._lexical.scores([task])[0]
        by_id = {card.id: i for i, card in enumerate(self.cards)}
        reasons = tuple(
            self._reason(by_id[c.agent_id], c.score, query, float(lexical[by_id[c.agent_id]]), task)
            for c in decision.candidates
        )
        return Explanation(decision, reasons)

    def overlaps(self) -> list[Overlap]:
        """Find card texts whose nearest card, leaving the text itself out, is another card.

        Closeness to a card is the best of the cosine to any of its texts and to the mean of
        its texts; for the text's own card, both without the text itself.
        """
        own, other, nearest = self._closeness()
        return [
            Overlap(
                self.cards[c].id,
                kind,
                text,
                self.cards[nearest[i]].id,
                float(own[i]),
                float(other[i]),
            )
            for i, (c, kind, text) in enumerate(self._flat)
            if other[i] > own[i]
        ]

    # --- building -------------------------------------------------------------------------

    def _build_vectors(self, cache: VectorCache) -> None:
        """Embed every card text, whiten, and keep each card's few reason vectors."""
        self._flat = [
            (i, kind, text) for i, texts in enumerate(self._texts) for kind, text in texts
        ]
        embedded = cache.embed(self.embedder, [text for _, _, text in self._flat])
        projected = _unit(embedded - self._centre)
        labels = np.array([i for i, _, _ in self._flat])
        means = np.stack([projected[labels == i].mean(axis=0) for i in range(len(self.cards))])
        residuals = projected - means[labels]
        self._whiten = _whitening(residuals, dof=len(projected) - len(self.cards))
        self._text_vectors = _unit(projected @ self._whiten)
        self._labels = labels
        vectors, owners = self._reason_vectors()
        self._vectors = np.stack(vectors)
        self._owners = owners
        self._starts = np.flatnonzero(np.diff([-1, *(o.card for o in owners)]))

    def _reason_vectors(self) -> tuple[list[np.ndarray], list[_Vector]]:
        vectors: list[np.ndarray] = []
        owners: list[_Vector] = []
        start = 0
        for i, texts in enumerate(self._texts):
            rows = self._text_vectors[start : start + len(texts)]
            for row, (kind, text) in zip(rows, texts, strict=True):
                if kind != "example":
                    vectors.append(row)
                    owners.append(
                        _Vector(i, "summary" if kind == "summary" else "capability", text)
                    )
            examples = [j for j, (kind, _) in enumerate(texts) if kind == "example"]
            if examples:
                vectors.append(_unit(rows[[0, *examples]].mean(axis=0)))
                owners.append(_Vector(i, "summary + examples", texts[0][1]))
            start += len(texts)
        return vectors, owners

    # --- scoring --------------------------------------------------------------------------

    def _raw(self, vectors: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Best cosine over each card's vectors plus the weighted lexical score."""
        cosines = self._project(vectors) @ self._vectors.T
        # each card's vectors are contiguous and it has at least one: max within each run
        semantic = np.maximum.reduceat(cosines, self._starts, axis=1)
        return semantic + LEXICAL_WEIGHT * self._lexical.scores(texts)

    def _project(self, vectors: np.ndarray) -> np.ndarray:
        """Centre on the background mean, whiten, and rescale to unit length."""
        return _unit(_unit(vectors - self._centre) @ self._whiten)

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

    def _reason(
        self, card: int, score: float, query: np.ndarray, lexical: float, task: str
    ) -> Reason:
        mine = [j for j, o in enumerate(self._owners) if o.card == card]
        best = max(mine, key=lambda j: float(self._vectors[j] @ query))
        examples = [
            j for j, (i, kind, _) in enumerate(self._flat) if i == card and kind == "example"
        ]
        near = max(examples, key=lambda j: float(self._text_vectors[j] @ query), default=None)
        return Reason(
            agent_id=self.cards[card].id,
            score=score,
            cosine=float(self._vectors[best] @ query),
            source=self._owners[best].source,
            text=self._owners[best].text,
            lexical=LEXICAL_WEIGHT * lexical,
            words=self._lexical.matched(task, card),
            nearest_example=None if near is None else self._flat[near][2],
            nearest_example_cosine=None
            if near is None
            else float(self._text_vectors[near] @ query),
        )

    def _closeness(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return, per text: closeness to its own card, to the closest other card, which one."""
        vectors, labels = self._text_vectors, self._labels
        cosines = vectors @ vectors.T
        np.fill_diagonal(cosines, -np.inf)  # a text is not evidence for itself
        starts = np.flatnonzero(np.diff([-1, *labels]))  # each card's texts are contiguous
        best_text = np.maximum.reduceat(cosines, starts, axis=1)
        sums = np.add.reduceat(vectors, starts, axis=0)
        to_mean = vectors @ _unit(sums).T
        rows = np.arange(len(vectors))
        leave_one_out = np.sum(vectors * _unit(sums[labels] - vectors), axis=1)
        closeness = np.maximum(best_text, to_mean)
        own = np.maximum(best_text[rows, labels], leave_one_out)
        sizes = np.diff([*starts, len(vectors)])
        own[sizes[labels] == 1] = np.inf  # a card with one text has nothing to be close to
        closeness[rows, labels] = -np.inf
        nearest = closeness.argmax(axis=1)
        return own, closeness[rows, nearest], nearest


def card_texts(card: Card) -> list[tuple[str, str]]:
    """Return a card's routing texts as (kind, text): summary, capabilities, examples."""
    texts = [("summary", card_text(card))]
    texts += [("capability", item) for item in capabilities(card.summary)]
    texts += [("example", example) for example in card.examples]
    return list(dict.fromkeys(texts))


def capabilities(summary: str) -> list[str]:
    """Split the list after a colon in a summary into its items ("X: a, b and c" → a, b, c)."""
    items: list[str] = []
    for sentence in _SENTENCE_END.split(summary.strip()):
        _, colon, tail = sentence.strip().rstrip(".!?").partition(":")
        if not colon:
            continue
        parts = [_LEADING_AND.sub("", p) for p in _top_level_split(tail)]
        if parts and "(" not in parts[-1]:
            parts[-1:] = _LAST_AND.split(parts[-1], maxsplit=1)
        parts = [p.strip() for p in parts if p.strip()]
        if len(parts) >= 2:  # a single item restates the summary
            items += parts
    return items


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


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CONJUNCTION = r"(?:and|or|und|oder|et|ou|y|o)"
_LEADING_AND = re.compile(rf"^\s*{_CONJUNCTION}\s+", re.IGNORECASE)
# the last "and" of the last item: "reads them out and sends emails" → two items
_LAST_AND = re.compile(rf"\s+{_CONJUNCTION}\s+(?!.*\s{_CONJUNCTION}\s)", re.IGNORECASE)


def _top_level_split(text: str) -> list[str]:
    """Split on commas and semicolons outside brackets: "lights (on, off), plugs" → 2."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += (char in "([") - (char in ")]")
        if char in ",;" and depth <= 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


class _Lexical:
    """BM25 of a task against each card's texts, divided by the most its words could score."""

    def __init__(self, documents: Sequence[str]) -> None:
        import bm25s  # here: only routing needs it, and it costs ~0.1 s to import

        tokens = [tokenize(d) for d in documents]
        self._words = [frozenset(words) for words in tokens]
        self._df = Counter(word for words in tokens for word in set(words))
        self._n = len(documents)
        self._index = bm25s.BM25(k1=BM25_K1)
        if self._df:  # bm25s cannot index a corpus without a single word
            self._index.index(tokens, show_progress=False)

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """Return (texts, cards) scores in 0-1: 1 only if every word scores its full idf."""
        out = np.zeros((len(texts), self._n), dtype=np.float32)
        for row, text in enumerate(texts):
            words = set(tokenize(text))
            known = sorted(w for w in words if w in self._df)
            if known:
                # unknown words count in the divisor at full idf: a task that is mostly words
                # no card uses is mostly not about these cards
                out[row] = self._index.get_scores(known) / sum(self._idf(w) for w in words)
        return out

    def matched(self, text: str, card: int) -> tuple[str, ...]:
        """Return the task's (stemmed) words that also occur in card `card`'s texts."""
        return tuple(w for w in dict.fromkeys(tokenize(text)) if w in self._words[card])

    def _idf(self, word: str) -> float:
        # Lucene's idf, as bm25s uses it: a word in no card gets the largest value
        seen = self._df.get(word, 0)
        return math.log(1 + (self._n - seen + 0.5) / (seen + 0.5))


def _whitening(residuals: np.ndarray, dof: int) -> np.ndarray:
    """Return S^-1/2 of the within-card covariance shrunk towards a multiple of identity.

    The weight of identity is dim / (dim + dof), at least WITHIN_SHRINKAGE: with few texts
    per card (three seed cards) the covariance is mostly noise and the metric stays close to
    plain cosine; with hundreds of cards with examples it is the cross-validated 0.6.
    Computed from the thin SVD of the residuals: with 20 texts that is 20 directions, not a
    384 x 384 eigendecomposition on every `tiny route`.
    """
    count, dim = residuals.shape
    if dof <= 0 or not count:  # nothing to learn from: plain cosine
        return np.eye(dim, dtype=np.float32)
    _, singular, directions = np.linalg.svd(residuals.astype(np.float64), full_matrices=False)
    variances = singular**2 / count  # the within-card covariance's eigenvalues
    spread = float(variances.sum()) / dim
    if spread <= MIN_SCALE**2:
        return np.eye(dim, dtype=np.float32)
    weight = max(WITHIN_SHRINKAGE, dim / (dim + dof))
    floor = weight * spread  # every direction the residuals do not span keeps this variance
    boost = 1 / np.sqrt((1 - weight) * variances + floor) - 1 / np.sqrt(floor)
    whiten = np.eye(dim) / np.sqrt(floor) + (directions.T * boost) @ directions
    return whiten.astype(np.float32)


def _unit(matrix: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(matrix, axis=-1, keepdims=True)
    return (matrix / np.where(norms > 0, norms, 1.0)).astype(np.float32)


def _sha(texts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()


def _round(value: float) -> float:
    return round(float(value), 4)
