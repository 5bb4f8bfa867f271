"""Routing quality on a labelled task file: ranking, the abstain rule, and each card."""

from __future__ import annotations

import codecs
import json
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np

from tiny_cli.errors import ConfigError
from tiny_cli.routing.factory import ABSTAIN_TARGET
from tiny_cli.routing.router import Decision, Router, rounded
from tiny_cli.text import check_task, looks_utf16
from tiny_cli.tools.mcp_config import original
from tiny_cli.userfiles import jsonl_lines, load_json, load_yaml_list, read_bytes, read_text

RANKS = (3, 5)  # besides the first: a right card among the first k, never abstaining
SWEEP_STEP = 0.5
SWEEP_STEPS_EACH_SIDE = 4
MAX_CONFUSIONS = 20
YAML_SUFFIXES = (".yaml", ".yml")
# a bench task's `{site}` is its page server; routed as a loopback URL, as the bench routes it
BENCH_SITE = "{site}"
BENCH_SITE_URL = "http://127.0.0.1"
NOT_UTF8 = re.compile("[\udc80-\udcff]")  # a byte surrogateescape could not decode

Labelled = Sequence[tuple[str, str | None]]
T = TypeVar("T")


@dataclass(frozen=True)
class AlsoRight:
    """What else counts as right for a task: its `acceptable` cards, each card allowing its tool."""

    cards: frozenset[str] = frozenset()
    tool: str | None = None


@dataclass(frozen=True)
class SweepPoint:
    """What one threshold would give: in-scope accuracy against abstain recall."""

    threshold: float
    in_scope_accuracy: float | None  # None: no task has a right card
    abstain_recall: float | None  # None: no task must abstain

    def to_json(self) -> dict[str, float | None]:
        """Return this point as plain JSON numbers (null: no task to measure it on)."""
        return {name: _rounded(value) for name, value in asdict(self).items()}


@dataclass(frozen=True)
class CardQuality:
    """How one card fared: of its tasks, how many reached it; of what reached it, how many fit."""

    agent_id: str
    tasks: int
    routed: int
    recall: float | None  # None: no task expects the card
    precision: float | None  # None: no task was routed to it
    lost_to_abstain: int

    def to_json(self) -> dict[str, Any]:
        """Return this row as plain JSON types."""
        rates = {"recall": _rounded(self.recall), "precision": _rounded(self.precision)}
        return {**asdict(self), **rates}


@dataclass(frozen=True)
class EvalReport:
    """Routing quality on a labelled task file; a rate over an empty group is None."""

    n: int
    several_right: int  # in-scope tasks with more than one right card
    top1_in_scope: float | None  # routed (not abstained) to a right card
    top1_never_abstain: float | None  # the best card is right: with the above, ranking apart
    topk_never_abstain: tuple[tuple[int, float | None], ...]  # (k, share) for each k of RANKS
    accuracy: float
    abstain_precision: float | None
    abstain_recall: float | None
    threshold: float
    best_at_target: SweepPoint | None
    sweep: tuple[SweepPoint, ...]
    per_card: tuple[CardQuality, ...]
    confusions: tuple[tuple[str, str, int], ...]

    def to_json(self) -> dict[str, Any]:
        """Return the `tiny route --eval --json` object."""
        return {
            "n": self.n,
            "several_right": self.several_right,
            "top1_in_scope": _rounded(self.top1_in_scope),
            "top1_never_abstain": _rounded(self.top1_never_abstain),
            **{f"top{k}_never_abstain": _rounded(share) for k, share in self.topk_never_abstain},
            "accuracy": rounded(self.accuracy),
            "abstain_precision": _rounded(self.abstain_precision),
            "abstain_recall": _rounded(self.abstain_recall),
            "threshold": rounded(self.threshold),
            "best_at_target": None
            if self.best_at_target is None
            else self.best_at_target.to_json(),
            "sweep": [p.to_json() for p in self.sweep],
            "per_card": [c.to_json() for c in self.per_card],
            "confusions": [{"expected": e, "got": g, "count": n} for e, g, n in self.confusions],
        }


@dataclass(frozen=True)
class EvalTasks:
    """A labelled task file as read: the tasks that can be routed, and each line that cannot."""

    labelled: tuple[tuple[str, str | None], ...]
    errors: tuple[str, ...]  # "file:line: field: why", one per line left out
    also: tuple[AlsoRight, ...] = ()  # one per labelled task: what else counts as right


def load_eval_file(path: Path) -> list[tuple[str, str | None]]:
    """Read labelled tasks (see `read_eval_file`); the first bad line is a ConfigError."""
    found = read_eval_file(path)
    if found.errors:
        raise ConfigError(found.errors[0])
    return list(found.labelled)


def read_eval_file(path: Path, known: Collection[str] | None = None) -> EvalTasks:
    """Read labelled tasks, each bad line (one expecting a card not in `known`) an error."""
    # JSONL `{"task": ..., "expected": card id or null}`, or a bench task file as it is (JSONL
    # or YAML naming `expected_agent`); `acceptable` and `expected_tool` also count as right
    entries = _eval_entries(path)
    labelled, also, errors = [], [], []
    for where, entry in entries:
        try:
            task, want, extra = _eval_entry(where, entry)
            _check_known(where, want, extra, known)
        except ConfigError as exc:
            errors.append(str(exc))
            continue
        labelled.append((task, want))
        also.append(extra)
    if not entries:
        raise ConfigError(f"{path}: no tasks in eval file")
    return EvalTasks(tuple(labelled), tuple(errors), tuple(also))


def evaluate(router: Router, labelled: Labelled, also: Sequence[AlsoRight] = ()) -> EvalReport:
    """Route every labelled task once and measure ranking, abstention, each card and a sweep."""
    # every figure is of the router's decision: a taught task goes where it was taught
    if not labelled:
        raise ConfigError("nothing to evaluate: the eval set is empty")
    also = tuple(also) or (AlsoRight(),) * len(labelled)
    _check_expected(router, labelled, also)
    decisions = router.route_many([task for task, _ in labelled], top=max(RANKS))
    right = _right_cards(router, labelled, also)
    got = [d.agent_id for d in decisions]
    outcomes = _outcomes(decisions, right)
    did = sum(g is None for g in got)
    both = sum(not r and g is None for r, g in zip(right, got, strict=True))
    good = sum(g in r if r else g is None for r, g in zip(right, got, strict=True))
    return EvalReport(
        n=len(labelled),
        several_right=sum(len(r) > 1 for r in right),
        top1_in_scope=_share(g in r for g, r in zip(got, right, strict=True) if r),
        top1_never_abstain=_among_first(1, decisions, right),
        topk_never_abstain=tuple((k, _among_first(k, decisions, right)) for k in RANKS),
        accuracy=good / len(labelled),
        abstain_precision=both / did if did else None,
        abstain_recall=_share(g is None for g, r in zip(got, right, strict=True) if not r),
        threshold=router.threshold,
        best_at_target=_best_at_target(outcomes),
        sweep=_sweep(outcomes, router.threshold),
        per_card=_per_card(router, [want for _, want in labelled], got, right),
        confusions=_confusions([want for _, want in labelled], got, right),
    )


def _among_first(
    k: int, decisions: Sequence[Decision], right: Sequence[frozenset[str]]
) -> float | None:
    """The share of in-scope tasks with a right card among their first `k` candidates."""
    # a taught task goes where it was taught whatever its ranking: that card alone, at every k
    return _share(
        d.agent_id in r if d.taught else any(c.agent_id in r for c in d.candidates[:k])
        for d, r in zip(decisions, right, strict=True)
        if r
    )


def _share(found: Iterable[bool]) -> float | None:
    """The share of true values; None of none."""
    found = list(found)
    return sum(found) / len(found) if found else None


def _rounded(value: float | None) -> float | None:
    return None if value is None else rounded(value)


def _right_cards(
    router: Router, labelled: Labelled, also: Sequence[AlsoRight]
) -> list[frozenset[str]]:
    """Each task's right cards: none for a task that must abstain."""
    # a tool by the name the card writes (`time.get_current_time`) or the model's (`time__...`)
    allowing: dict[str, set[str]] = {}
    for card in router.cards:
        for name in {*card.tools, *map(original, card.tools)}:
            allowing.setdefault(name, set()).add(card.id)
    return [
        frozenset()
        if want is None
        else frozenset({want, *extra.cards, *allowing.get(extra.tool or "", ())})
        for (_, want), extra in zip(labelled, also, strict=True)
    ]


# --- helpers ------------------------------------------------------------------------------


def _eval_entries(path: Path) -> list[tuple[str, Any]]:
    """Each entry with where it is: "file:line" of JSONL, "file: task N" of a YAML list."""
    if path.suffix.lower() in YAML_SUFFIXES:
        data = load_yaml_list(
            path, _read(path, read_text), "an eval file in YAML is a list of tasks"
        )
        return [(f"{path}: task {n}", entry) for n, entry in enumerate(data, 1)]
    raw = _read(path, read_bytes)
    if looks_utf16(raw):  # every line would be garbage: the file's error, once
        raise ConfigError(f"{path}: cannot read eval file: UTF-16 text; save it as UTF-8")
    # a byte not UTF-8 kept as a lone surrogate, so it is its line's error, not the file's;
    # split on "\n" only (a U+2028 inside a task stays); less a BOM (a file saved on Windows)
    text = raw.removeprefix(codecs.BOM_UTF8).decode("utf-8", "surrogateescape")
    return [
        (f"{path}:{number}", _JsonLine(line))
        for number, line in enumerate(jsonl_lines(text), 1)
        if line.strip()
    ]


def _read(path: Path, read: Callable[[Path], T]) -> T:
    """`read(path)`, bounded for pipes and devices; what fails is the whole file's error."""
    try:
        return read(path)
    except ConfigError as exc:
        why = str(exc).removeprefix(f"{path}: ")
        raise ConfigError(f"{path}: cannot read eval file: {why}") from None


@dataclass(frozen=True)
class _JsonLine:
    """A JSONL line not parsed yet: a line that is not UTF-8 or not JSON is that line's error."""

    text: str

    def checked(self, where: str) -> str:
        """The line; ConfigError at `where` for a byte that is not UTF-8 (a lone surrogate)."""
        bad = NOT_UTF8.search(self.text)
        if bad is None:
            return self.text
        at = len(self.text[: bad.start()].encode("utf-8", "surrogateescape")) + 1
        raise ConfigError(f"{where}: not UTF-8 (byte {at} of the line)")


def _eval_entry(where: str, entry: Any) -> tuple[str, str | None, AlsoRight]:
    item = _json_item(where, entry.checked(where)) if isinstance(entry, _JsonLine) else entry
    if not isinstance(item, dict):
        raise ConfigError(f"{where}: expected an object with 'task' and 'expected'")
    task = item.get("task")
    if not isinstance(task, str) or not task.strip():
        raise ConfigError(f"{where}: task: must be a non-empty string")
    key = "expected" if "expected" in item or "expected_agent" not in item else "expected_agent"
    if key not in item:
        raise _missing_label(where, item)
    want = item[key]
    if want is not None and not isinstance(want, str):
        raise ConfigError(f"{where}: {key}: must be a card id or null, got {want!r}")
    bench = key == "expected_agent"  # a bench task: its {site} is the page server
    task = task.replace(BENCH_SITE, BENCH_SITE_URL) if bench else task
    check_task(task, where)  # the text routed: one too long is this line's error, not the file's
    return task, want, _also_right(where, item, want)


def _missing_label(where: str, item: dict[str, Any]) -> ConfigError:
    """No label: say which keys the entry has, so a misspelled one (`expected_agnet`) shows."""
    keys = ", ".join(repr(str(k)[:40]) for k in list(item)[:8])
    return ConfigError(
        f"{where}: expected (or expected_agent): missing; the entry has {keys} "
        "(use null for a task that should abstain)"
    )


def _also_right(where: str, item: dict[str, Any], want: str | None) -> AlsoRight:
    """What else a line counts as right: its `acceptable` cards and its expected tool."""
    cards = item.get("acceptable", [])
    if not isinstance(cards, list) or not all(isinstance(c, str) for c in cards):
        raise ConfigError(f"{where}: acceptable: must be a list of card ids, got {cards!r}")
    if cards and want is None:
        raise ConfigError(f"{where}: acceptable: names cards, but expected is null (abstain)")
    call = item.get("expect_call")
    tool = item.get("expected_tool", call.get("name") if isinstance(call, dict) else None)
    if tool is not None and not isinstance(tool, str):
        raise ConfigError(f"{where}: expected_tool: must be a tool name, got {tool!r}")
    return AlsoRight(frozenset(cards), tool)


def _json_item(where: str, line: str) -> Any:
    try:
        return load_json(line, where)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: invalid JSON: {exc.msg}") from exc
    except RecursionError:
        raise ConfigError(f"{where}: invalid JSON: nested too deeply") from None
    except ValueError:  # a number past Python's digit limit
        raise ConfigError(f"{where}: invalid JSON: a number too long to read") from None


def _check_known(
    where: str, want: str | None, extra: AlsoRight, known: Collection[str] | None
) -> None:
    """ConfigError for a line whose expected or acceptable card is not among `known`."""
    if known is None:
        return
    if want is not None and want not in known:
        raise ConfigError(f"{where}: expected: no card {want!r} is loaded")
    missing = sorted(extra.cards - set(known))
    if missing:
        raise ConfigError(f"{where}: acceptable: no card {missing[0]!r} is loaded")


def _check_expected(router: Router, labelled: Labelled, also: Sequence[AlsoRight]) -> None:
    named = {want for _, want in labelled if want is not None}
    named.update(card for extra in also for card in extra.cards)
    unknown = sorted(named - set(router.ids))
    if unknown:
        shown = ", ".join(unknown[:5]) + (
            f" (and {len(unknown) - 5} more)" if len(unknown) > 5 else ""
        )
        raise ConfigError(f"the eval file expects cards that are not loaded: {shown}")


@dataclass(frozen=True)
class _Outcomes:
    """Each task's decision at any threshold, as the router makes it (router `_decide`)."""

    scope: np.ndarray  # the task has a right card
    hit: np.ndarray  # the card it goes to when routed is right: its taught card, else its best
    scores: np.ndarray
    taught: np.ndarray  # routed where it was taught, or abstained, whatever the threshold
    taught_route: np.ndarray  # taught to a card (not out of scope)

    def routed(self, threshold: float) -> np.ndarray:
        """Which tasks route (not abstain) at `threshold`."""
        return np.where(self.taught, self.taught_route, self.scores >= threshold)


def _outcomes(decisions: Sequence[Decision], right: Sequence[frozenset[str]]) -> _Outcomes:
    """Where each task goes when it routes: its taught card, else its best; and if it may."""
    goes = [d.agent_id if d.taught else d.candidates[0].agent_id for d in decisions]
    return _Outcomes(
        scope=np.array([bool(r) for r in right], dtype=bool),
        hit=np.array([g in r for g, r in zip(goes, right, strict=True)], dtype=bool),
        scores=np.array([d.score for d in decisions]),
        taught=np.array([d.taught for d in decisions], dtype=bool),
        taught_route=np.array([d.taught and d.agent_id is not None for d in decisions], bool),
    )


def _rates(outcomes: _Outcomes, threshold: float) -> tuple[float | None, float | None]:
    """Return (in-scope tasks routed to a right card, abstain tasks abstained) at `threshold`."""
    scope, routed = outcomes.scope, outcomes.routed(threshold)
    accuracy = float((routed & outcomes.hit)[scope].mean()) if scope.any() else None
    recall = float((~routed)[~scope].mean()) if (~scope).any() else None
    return accuracy, recall


def _sweep(outcomes: _Outcomes, threshold: float) -> tuple[SweepPoint, ...]:
    steps = range(-SWEEP_STEPS_EACH_SIDE, SWEEP_STEPS_EACH_SIDE + 1)
    points = [threshold + k * SWEEP_STEP for k in steps]
    return tuple(SweepPoint(t, *_rates(outcomes, t)) for t in points)


def _best_at_target(o: _Outcomes) -> SweepPoint | None:
    """Return the threshold with the best in-scope accuracy among those reaching the target."""
    # exact, not a grid's guess: every gap between two distinct scores is a candidate
    must_abstain, in_scope = int((~o.scope).sum()), int(o.scope.sum())
    if not must_abstain or not in_scope:
        return None
    free = ~o.taught
    abstain = np.sort(o.scores[~o.scope & free])
    right = np.sort(o.scores[o.scope & o.hit & free])
    distinct = np.unique(o.scores)
    thresholds = np.concatenate(
        [[distinct[0] - 1], (distinct[1:] + distinct[:-1]) / 2, [distinct[-1] + 1]]
    )
    kept_out = int((~o.scope & o.taught & ~o.taught_route).sum())  # taught out of scope
    recall = (np.searchsorted(abstain, thresholds, "left") + kept_out) / must_abstain
    sent = int((o.scope & o.hit & o.taught).sum())  # taught to a right card
    accuracy = (len(right) - np.searchsorted(right, thresholds, "left") + sent) / in_scope
    reaching = np.flatnonzero(recall >= ABSTAIN_TARGET)
    if not len(reaching):
        return None
    k = reaching[np.argmax(accuracy[reaching])]  # the lowest such threshold on a tie
    return SweepPoint(float(thresholds[k]), float(accuracy[k]), float(recall[k]))


def _per_card(
    router: Router,
    expected: Sequence[str | None],
    got: Sequence[str | None],
    right: Sequence[frozenset[str]],
) -> tuple[CardQuality, ...]:
    """Each card's recall (to a right card) of its tasks, and precision of those routed to it."""
    rows = []
    for card_id in router.ids:
        mine = [i for i, want in enumerate(expected) if want == card_id]
        reached = sum(got[i] in right[i] for i in mine)
        routed = [i for i, g in enumerate(got) if g == card_id]
        fit = sum(card_id in right[i] for i in routed)
        rows.append(
            CardQuality(
                agent_id=card_id,
                tasks=len(mine),
                routed=len(routed),
                recall=reached / len(mine) if mine else None,
                precision=fit / len(routed) if routed else None,
                lost_to_abstain=sum(got[i] is None for i in mine),
            )
        )
    return tuple(rows)


def _confusions(
    expected: Sequence[str | None], got: Sequence[str | None], right: Sequence[frozenset[str]]
) -> tuple[tuple[str, str, int], ...]:
    pairs = Counter(
        (w or "abstain", g or "abstain")
        for w, g, r in zip(expected, got, right, strict=True)
        if w != g and g not in r
    )
    ranked = sorted(pairs.items(), key=lambda item: (-item[1], item[0]))
    return tuple((w, g, n) for (w, g), n in ranked[:MAX_CONFUSIONS])
