"""The concierge: rank cards for a task by meaning and wording, route to the best or abstain.

A card is not one vector but a few, each a reason a task may belong to it: its routing text
("id words: summary"), one vector per capability its summary lists ("Handles X: a, b and
c" gives a, b and c), each tool it allows, and, when it has examples, the mean of its routing
text and examples (examples a model generated count as one group: tiny_cli.routing.space).
A task's semantic score for a card is its best cosine to any of them, in a space centred on
a shipped background of generic requests and whitened by the cards' own within-card spread
(shrinkage that falls smoothly as the cards give more data). A lexical score — BM25 of the
task against the card's texts, divided by what the task's words could score at most — is
added with a small weight. The sum becomes a z-score against the same sum for the
background sentences, so one threshold means the same for three cards or a thousand.
docs/routing.md has the rule, its measurements and the threshold's derivation.

A route also says why (`explain`: the reason behind each score, for `tiny route --explain`)
and which card texts overlap (`overlaps`, which `tiny validate` warns of).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from tiny_cli.cards.card import Card, card_text
from tiny_cli.errors import ConfigError
from tiny_cli.routing.embed import Embedder, Progress, VectorCache, fingerprint
from tiny_cli.routing.examples_file import normalise
from tiny_cli.routing.lexical import Lexical, capabilities
from tiny_cli.routing.space import CardSpace, Source, nearest_mean
from tiny_cli.routing.state import Saved, load_state, save_state, state_key
from tiny_cli.routing.tooltexts import ToolTexts, tool_named, tool_views
from tiny_cli.settings import DEFAULT_TOP, PACKAGE_DATA
from tiny_cli.text import check_task, decimals_apart, wrong_kind

# The z-score at which 80 % of MetaTool's abstain tasks abstain, on the calibration half of
# its tasks, the larger of without and with examples (1.47 / 1.39), rounded up to 0.05.
# `python benchmarks/routing.py` re-derives it every run (the z@80%R column).
DEFAULT_THRESHOLD = 1.5
# Weight of the lexical score (0-1) against the cosine; measured on MetaTool and HWU64.
LEXICAL_WEIGHT = 0.3
MIN_SCALE = 1e-3  # a degenerate background spread must not divide by ~0
# A card with examples is also scored by the mean of its KNN_K best example cosines (a kNN
# view): one vector per example scored alone was worst, the mean of all of them blurs a card
# whose examples are varied (docs/routing.md, "Learning").
KNN_K = 3
# Weight of the margin over the second card in the abstain score (z + w * margin), measured
# with learned examples; 0 keeps the plain best z.
MARGIN_WEIGHT = 0.5
# Tasks embedded and scored at once: 100,000 one-word lines in one batch held gigabytes.
ROUTE_CHUNK = 1_024
JSON_DECIMALS = 4  # of a score in --json, more where a score would print as the threshold
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
    taught: bool = False  # the task itself was taught (learned.jsonl): it goes where it was told

    def scrubbed(self, scrub: Callable[[str], str]) -> Decision:
        """The decision with its task passed through `scrub` (a key pasted into it)."""
        return replace(self, task=scrub(self.task))

    def decimals(self, least: int) -> int:
        """The fewest decimals, at least `least`, that show the score and the threshold apart."""
        return decimals_apart(self.score, self.threshold, least)

    def to_json(self) -> dict[str, Any]:
        """Return the `tiny route --json` object for this task."""
        places = self.decimals(JSON_DECIMALS)
        doc = {
            "task": self.task,
            "decision": self.decision,
            "agent_id": self.agent_id,
            "score": rounded(self.score, places),
            "threshold": rounded(self.threshold, places),
            "candidates": [
                {"agent_id": c.agent_id, "score": rounded(c.score, places)} for c in self.candidates
            ],
        }
        return {**doc, "taught": True} if self.taught else doc


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
    tool: str | None = None  # the tool whose view drove the score (source "tool")

    def to_json(self, places: int = JSON_DECIMALS) -> dict[str, Any]:
        """Return this reason as plain JSON types, its score to `places` decimals."""
        return {
            "agent_id": self.agent_id,
            "score": rounded(self.score, places),
            "cosine": rounded(self.cosine),
            "source": self.source,
            "tool": self.tool,
            "text": self.text,
            "lexical": rounded(self.lexical),
            "words": list(self.words),
            "nearest_example": self.nearest_example,
            "nearest_example_cosine": None
            if self.nearest_example_cosine is None
            else rounded(self.nearest_example_cosine),
        }


@dataclass(frozen=True)
class Explanation:
    """A routing decision with the reason behind each candidate's score."""

    decision: Decision
    reasons: tuple[Reason, ...]
    threshold_source: str = ""
    tools_source: str = ""  # where tool descriptions not in the cards came from, how old
    score_source: str = ""  # the margin in the decision's score, over which rival ("": none)

    def scrubbed(self, scrub: Callable[[str], str]) -> Explanation:
        """The explanation with its task passed through `scrub`."""
        return replace(self, decision=self.decision.scrubbed(scrub))

    def to_json(self) -> dict[str, Any]:
        """Return the `tiny route --explain --json` object."""
        reasons = [r.to_json(self.decision.decimals(JSON_DECIMALS)) for r in self.reasons]
        return {
            **self.decision.to_json(),
            "threshold_source": self.threshold_source,
            "tools_source": self.tools_source,
            "score_source": self.score_source,
            "reasons": reasons,
        }


@dataclass(frozen=True)
class Overlap:
    """A card text that sits closer to another card than to the rest of its own card."""

    agent_id: str
    kind: str
    text: str
    other_id: str
    own: float
    other: float


def rounded(value: float, places: int = JSON_DECIMALS) -> float:
    """Round a score for JSON output (four decimals unless told)."""
    return round(float(value), places)


class Router:
    """Rank cards for tasks; card and background vectors come from the on-disk cache."""

    def __init__(
        self,
        cards: Sequence[Card],
        embedder: Embedder,
        cache_dir: Path | None,
        threshold: float | None = None,
        *,
        out_of_scope: Sequence[str] = (),
        knn: int = KNN_K,
        margin: float = 0.0,
        threshold_source: str | None = None,
        taught: Mapping[str, str | None] | None = None,
        progress: Progress | None = None,
        keep_state: bool = True,
        tool_texts: ToolTexts | None = None,
    ) -> None:
        if not cards:
            raise ConfigError(
                "no cards to route to; add a card or point --cards at a folder of cards"
            )
        self.cards = tuple(cards)
        self.ids = tuple(card.id for card in self.cards)
        self._by_id = np.argsort(np.argsort(np.array(self.ids)))  # each card's rank by id: ties
        self.embedder = embedder
        self.knn, self.margin = knn, margin
        self.threshold = DEFAULT_THRESHOLD if threshold is None else float(threshold)
        if not math.isfinite(self.threshold):  # nan would abstain on everything, silently
            raise ConfigError(f"threshold {threshold!r} is not a number; use e.g. 1.5")
        self.out_of_scope = tuple(dict.fromkeys(out_of_scope))
        self.tools = tool_texts or ToolTexts()  # what cards name but do not declare
        # `progress` hears how far embedding the cards has got (a new state); keep_state=False
        # for throwaway routers (cross-validation folds)
        saved = self._state(cache_dir, progress, keep_state)
        self._space, self._lexical, self._oos = saved.space, saved.lexical, saved.out_of_scope
        self._loc, self._scale, self._conf_loc, self._conf_scale = saved.scales
        # a task taught as it stands (normalised) goes where it was taught, whatever it scores
        self.taught = dict(taught or {})
        self.threshold_source = threshold_source or (
            f"default {DEFAULT_THRESHOLD}" if threshold is None else "given"
        )

    def _state(self, cache_dir: Path | None, progress: Progress | None, keep: bool) -> Saved:
        """The saved state of what this router is built from, else a new one (saved if `keep`)."""
        background = _sha(background_texts())
        settings = (self.knn, self.margin, background, LEXICAL_WEIGHT, self.tools.key())
        key = state_key(self.cards, self.out_of_scope, fingerprint(self.embedder), settings)
        saved = load_state(cache_dir, key) if keep else None
        if saved is None:
            saved = self._computed(VectorCache(cache_dir), progress)
            if keep:
                save_state(cache_dir, key, saved)
        return saved

    def _computed(self, cache: VectorCache, progress: Progress | None) -> Saved:
        """Embed the card texts, whiten, index, and measure the background: a new state."""
        background = background_vectors(self.embedder, cache)
        texts = routing_texts(self.cards, self.tools.descriptions)
        centre = background.mean(axis=0)
        self._space = _card_space(cache, self.embedder, texts, centre, self.knn, progress)
        self._lexical = _lexical(texts)
        oos = cache.embed(self.embedder, list(self.out_of_scope)) if self.out_of_scope else None
        self._oos = self._space.project(oos) if oos is not None else np.zeros((0, 1), np.float32)
        projected = self._space.project(background)
        raw = self._raw(projected, background_texts())
        self._loc, self._scale = _spread(raw.max(axis=1))
        # the abstain score (best z plus a share of its margin) is a z-score against the
        # background too, so a threshold means the same with or without the margin
        rival = self._z(self._oos_raw(projected))
        margin = self.margin
        conf = _spread(_with_margin(margin, self._z(raw), rival)) if margin else (0.0, 1.0)
        return Saved(self._space, self._lexical, self._oos, (self._loc, self._scale, *conf))

    def route(self, task: str, top: int = DEFAULT_TOP) -> Decision:
        """Route one task."""
        return self.route_many([task], top)[0]

    def route_many(self, tasks: Sequence[str], top: int = DEFAULT_TOP) -> list[Decision]:
        """Route many tasks, ROUTE_CHUNK at a time; each scores as it would alone (`each_row`)."""
        _check_top(top)
        if isinstance(tasks, str):  # routed as one task per character
            raise ConfigError("tasks: must be a list of tasks, got a string", field="tasks")
        _check_tasks(tasks)  # all of them, before a chunk is embedded
        decisions: list[Decision] = []
        for chunk in _chunks(tasks):
            _, scores, confidence = self._scored(chunk)
            decisions += [
                self._decide(task, row, float(c), top)
                for task, row, c in zip(chunk, scores, confidence, strict=True)
            ]
        return decisions

    def scores(self, tasks: Sequence[str]) -> np.ndarray:
        """Return the (tasks, cards) z-scores of `tasks`, embedded ROUTE_CHUNK at a time."""
        parts = [
            self._z(self._raw(self._space.project(self.embedder.embed(chunk)), chunk))
            for chunk in _chunks(tasks)
        ]
        return np.concatenate(parts) if parts else np.zeros((0, len(self.ids)), np.float32)

    def confidence(self, scores: np.ndarray, out_of_scope: np.ndarray | None = None) -> np.ndarray:
        """Return each row's abstain score: its best z plus a share of the margin, as a z."""
        if out_of_scope is None:
            out_of_scope = np.full(len(scores), -np.inf, dtype=np.float32)
        return (_with_margin(self.margin, scores, out_of_scope) - self._conf_loc) / self._conf_scale

    def explain(self, task: str, top: int = DEFAULT_TOP) -> Explanation:
        """Route one task and say which text and which words drove each candidate's score."""
        _check_top(top)
        _check_tasks([task])
        query, row, confidence = self._scored([task])
        decision = self._decide(task, row[0], float(confidence[0]), top)
        lexical = self._lexical.scores([task])[0]
        by_id = {card_id: i for i, card_id in enumerate(self.ids)}
        reasons = tuple(
            self._reason(by_id[c.agent_id], c.score, query[0], lexical, task)
            for c in decision.candidates
        )
        said = _score_source(self, query[0], row[0])
        return Explanation(decision, reasons, self.threshold_source, self.tools.source, said)

    def overlaps(self) -> list[Overlap]:
        """Find card texts whose nearest card, leaving the text itself out, is another card."""
        own, other, nearest = self._space.closeness()
        return [
            Overlap(self.ids[c], kind, text, self.ids[nearest[i]], float(own[i]), float(other[i]))
            for i, (c, kind, text) in enumerate(self._space.flat)
            if other[i] > own[i] and kind != "tool"  # a tool's text is not the card's to edit
        ]

    # --- scoring --------------------------------------------------------------------------

    def _scored(self, tasks: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Each task's projected row, its (tasks, cards) z-scores and its abstain score."""
        projected = self._space.project(self.embedder.embed(list(tasks)))
        scores = self._z(self._raw(projected, tasks))
        return projected, scores, self.confidence(scores, self._z(self._oos_raw(projected)))

    def _raw(self, projected: np.ndarray, texts: Sequence[str]) -> np.ndarray:
        """Each card's semantic score plus the weighted lexical score."""
        return self._space.semantic(projected) + LEXICAL_WEIGHT * self._lexical.scores(texts)

    def _oos_raw(self, projected: np.ndarray) -> np.ndarray:
        """Each task's mean cosine to its `knn` nearest out-of-scope examples."""
        return nearest_mean(self._oos, projected, self.knn)

    def _decide(self, task: str, row: np.ndarray, score: float, top: int) -> Decision:
        order = np.lexsort((self._by_id, -row))[:top]  # the higher score; a tie: the lower id
        candidates = tuple(Candidate(self.ids[i], float(row[i])) for i in order)
        key = normalise(task)
        taught = key in self.taught
        agent_id = self.taught[key] if taught else None
        if not taught and score >= self.threshold:
            agent_id = candidates[0].agent_id
        verdict: Literal["route", "abstain"] = "abstain" if agent_id is None else "route"
        return Decision(task, verdict, agent_id, score, self.threshold, candidates, taught)

    def _z(self, raw: np.ndarray) -> np.ndarray:
        return (raw - self._loc) / self._scale

    def _reason(
        self, card: int, score: float, query: np.ndarray, lexical: np.ndarray, task: str
    ) -> Reason:
        """Why `card` scored `score` for `task` (its rows `query`, `lexical`): text, words, tool."""
        near = self._space.nearest(card, query)
        return Reason(
            agent_id=self.ids[card],
            score=score,
            cosine=near.cosine,
            source=near.source,
            text=near.text,
            lexical=LEXICAL_WEIGHT * float(lexical[card]),
            words=self._lexical.matched(task, card),
            nearest_example=near.example,
            nearest_example_cosine=near.example_cosine,
            tool=tool_named(self.cards, card, self.tools.descriptions, near),
        )


def _check_tasks(tasks: Sequence[Any]) -> None:
    """ConfigError for the first task that is not a string a route takes (check_task)."""
    for task in tasks:
        if not isinstance(task, str):
            raise wrong_kind("task", "a string", task)
        check_task(task)


def _chunks(tasks: Sequence[str]) -> Iterator[list[str]]:
    """`tasks` in lists of ROUTE_CHUNK: memory follows a chunk's vectors, not the input's."""
    for start in range(0, len(tasks), ROUTE_CHUNK):
        yield list(tasks[start : start + ROUTE_CHUNK])


def _check_top(top: Any) -> None:
    """A decision names at least its best candidate (the faces refuse a --top under 1 first)."""
    if not isinstance(top, int) or isinstance(top, bool):
        raise wrong_kind("top", "an integer", top)
    if top < 1:
        raise ConfigError(f"top: must be at least 1, got {top}", field="top")


def _spread(values: np.ndarray) -> tuple[float, float]:
    """Mean and standard deviation, the deviation kept off zero."""
    return float(values.mean()), max(float(values.std()), MIN_SCALE)


def _with_margin(margin: float, scores: np.ndarray, out_of_scope: np.ndarray) -> np.ndarray:
    """Each row's best z plus `margin` times its lead over the closer rival (the second card
    or the out-of-scope examples); an out-of-scope example nearer than every card counts in
    full, margin or not: a taught "not this" holds for its neighbours under any threshold."""
    best = scores.max(axis=1)
    rival = np.maximum(_second(scores), out_of_scope)
    lead = np.where(np.isfinite(rival), best - rival, 0.0)
    weight = np.where(out_of_scope > best, max(margin, 1.0), margin)
    return best + weight * lead


def _second(scores: np.ndarray) -> np.ndarray:
    """Each row's second-best z (-inf with one card)."""
    if scores.shape[1] < 2:
        return np.full(len(scores), -np.inf, dtype=np.float32)
    return -np.partition(-scores, 1, axis=1)[:, 1]


def _score_source(router: Router, query: np.ndarray, row: np.ndarray) -> str:
    """Say what a task's abstain score is made of besides the best z ("": nothing)."""
    best = float(row.max())
    second = float(_second(row[None])[0])
    oos = float(router._z(router._oos_raw(query[None]))[0])
    if not router.margin and not oos > best:
        return ""
    if max(second, oos) == -np.inf:
        return f"the best card's z, {best:.3f}, re-expressed against the background (no rival)"
    if oos >= second:
        nearest = router.out_of_scope[int(np.argmax(router._oos @ query))]
        rival = f"the out-of-scope examples (z {oos:.3f}; nearest {nearest!r})"
    else:
        rival = f"card {router.ids[int(np.argsort(-row)[1])]!r} (z {second:.3f})"
    full = oos > best  # nearer than every card: counts in full
    weight = max(router.margin, 1.0) if full else router.margin
    lead = f"{best:.3f} + {weight:g} * ({best:.3f} - ({max(second, oos):.3f}))"
    counted = ", counted in full: nearer than every card" if full else ""
    # with no margin the score is this sum as it stands (Router._computed: loc 0, scale 1)
    again = "; re-expressed as a z against the background" if router.margin else ""
    return f"{lead}: the best card's z and its lead over {rival}{counted}{again}"


def _lexical(texts: Sequence[Sequence[tuple[str, str]]]) -> Lexical:
    """BM25 over each card's own texts and, apart, each of its tools: a card scores its best."""
    # its tools' texts joined into its document ranked a little worse on BFCL (docs/routing.md)
    documents: list[str] = []
    owners: list[int] = []
    for card, rows in enumerate(texts):
        tools = [text for kind, text in rows if kind == "tool"]
        own = "\n".join(text for kind, text in rows if kind != "tool")
        documents += [own, *tools]
        owners += [card] * (1 + len(tools))
    return Lexical(documents, owners)


def routing_texts(
    cards: Sequence[Card], descriptions: Mapping[str, str]
) -> list[list[tuple[str, str]]]:
    """Each card's routing texts as (kind, text): `card_texts`, then its tools' views."""
    views = tool_views(cards, descriptions)
    return [
        list(dict.fromkeys([*card_texts(card), *(("tool", v) for _, v in tools)]))
        for card, tools in zip(cards, views, strict=True)
    ]


def card_texts(card: Card) -> list[tuple[str, str]]:
    """Return a card's routing texts as (kind, text): summary, capabilities, examples."""
    texts = [("summary", card_text(card))]
    texts += [("capability", item) for item in capabilities(card.summary)]
    texts += [("example", example) for example in card.examples]
    texts += [("generated", example) for example in card.generated]
    return list(dict.fromkeys(texts))


def _card_space(
    cache: VectorCache,
    embedder: Embedder,
    texts: list[list[tuple[str, str]]],
    centre: np.ndarray,
    knn: int,
    progress: Progress | None,
) -> CardSpace:
    """Embed the card texts into their space, which overwrites the vectors (held only once)."""
    flat = [text for rows in texts for _, text in rows]
    vectors = cache.embed(embedder, flat, progress, keep=False)
    return CardSpace(texts, vectors, centre, knn, overwrite=True)


def background_texts() -> list[str]:
    """Return the shipped generic sentences the abstain rule measures tasks against."""
    text = (PACKAGE_DATA / BACKGROUND_TEXT).read_text("utf-8")
    return [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]


def background_vectors(embedder: Embedder, cache: VectorCache) -> np.ndarray:
    """Return the background's vectors: shipped ones when they match, else embed and cache."""
    texts = background_texts()
    shipped = PACKAGE_DATA / BACKGROUND_VECTORS
    if shipped.is_file():
        with shipped.open("rb") as handle, np.load(handle) as data:
            ours = str(data["fingerprint"]) == fingerprint(embedder)
            if ours and str(data["text_sha"]) == _sha(texts):
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


def _sha(texts: Sequence[str]) -> str:
    return hashlib.sha256("\n".join(texts).encode()).hexdigest()
