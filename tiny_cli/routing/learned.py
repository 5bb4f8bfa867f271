"""Learned routing examples: the corrections a cards folder was taught, in a file beside it.

`learned.jsonl` in the cards folder holds one line per example, `{"task": ..., "card": ID}`,
or `"card": null` for a task no card should take (the folder's out-of-scope examples),
sorted by card and task so a diff shows what was taught. Its first line is a header with
the threshold derived from these examples (tiny_cli.routing.threshold), and the sha of the
examples it was derived from: hand edits make it stale, and a stale threshold is not used.
The file is the same shape `tiny learn FILE` reads, so it can be taught to another folder.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import unicodedata
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiny_cli.errors import ConfigError

if TYPE_CHECKING:  # cards from the snapshot: the checker loads only if a card is built
    from tiny_cli.cards.load import Card, Problem

__all__ = [
    "LEARNED_FILENAME",
    "MAX_EXAMPLES_PER_CARD",
    "MAX_OUT_OF_SCOPE",
    "DerivedThreshold",
    "Learned",
    "Merge",
    "check_learned",
    "load_labelled",
    "load_learned",
    "merge",
    "normalise",
    "with_learned",
    "write_learned",
]

# Beyond these, the least useful example goes (tiny_cli.learn): measured gains flatten from
# 60 to 100 examples per card, and the kNN view reads only each card's 3 nearest.
MAX_EXAMPLES_PER_CARD = 100
MAX_OUT_OF_SCOPE = 1000
MAX_LEARNED_BYTES = 16 * 1024 * 1024  # 200 cards x 100 examples is ~2 MB
LEARNED_FILENAME = "learned.jsonl"  # in the cards folder; not a card (cards are YAML)
HEADER_KIND = "tiny learned routing examples"
VERSION = 1


@dataclass(frozen=True)
class DerivedThreshold:
    """The abstain threshold cross-validated on a folder's examples, and what it gave there."""

    value: float
    target_recall: float
    examples: int
    out_of_scope: int
    folds: int
    cv_top1: float
    cv_recall: float
    generic_recall: float
    embedder: str
    sha: str

    def describe(self) -> str:
        """Say in one line where the threshold comes from."""
        return (
            f"derived by tiny learn from {self.examples} examples and {self.out_of_scope} "
            f"out-of-scope ones ({self.folds}-fold cross-validation: abstains on "
            f"{self.target_recall:.0%} of the held-out out-of-scope examples and generic "
            f"requests together; held out, examples route right and pass it "
            f"{self.cv_top1:.0%}, out-of-scope ones abstain {self.cv_recall:.0%}, "
            f"generic requests {self.generic_recall:.0%})"
        )


@dataclass(frozen=True)
class Learned:
    """A cards folder's learned examples: per card, out of scope, and the derived threshold."""

    path: Path
    examples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    out_of_scope: tuple[str, ...] = ()
    threshold: DerivedThreshold | None = None

    def sha(self) -> str:
        """Return the sha256 of the examples (what a derived threshold is valid for)."""
        return hashlib.sha256(self._lines(header=False).encode()).hexdigest()

    def count(self) -> int:
        """Return how many in-scope examples the file holds."""
        return sum(len(v) for v in self.examples.values())

    def fresh_threshold(self, embedder: str) -> DerivedThreshold | None:
        """Return the derived threshold if it was derived from these examples with `embedder`."""
        t = self.threshold
        return t if t is not None and t.sha == self.sha() and t.embedder == embedder else None

    def _lines(self, header: bool = True) -> str:
        rows = [
            json.dumps({"task": task, "card": card}, ensure_ascii=False)
            for card in sorted(self.examples)
            for task in sorted(self.examples[card])
        ]
        rows += [
            json.dumps({"task": t, "card": None}, ensure_ascii=False)
            for t in sorted(self.out_of_scope)
        ]
        if header:
            head: dict[str, Any] = {"kind": HEADER_KIND, "version": VERSION}
            if self.threshold is not None:
                head["threshold"] = asdict(self.threshold)
            rows.insert(0, json.dumps(head, ensure_ascii=False))
        return "".join(row + "\n" for row in rows)


@dataclass(frozen=True)
class Merge:
    """What teaching a batch changed: examples added, moved from another card, already known."""

    learned: Learned
    added: int
    moved: int
    known: int


def normalise(task: str) -> str:
    """Return the form two examples are compared in: NFKC, case-folded, single spaces."""
    return " ".join(unicodedata.normalize("NFKC", task).casefold().split())


def load_learned(folder: Path) -> Learned:
    """Read `folder`'s learned.jsonl; an empty Learned when there is none."""
    path = folder / LEARNED_FILENAME
    if not path.is_file():
        return Learned(path)
    rows = _read_rows(path)
    header = rows.pop(0)[1] if rows and rows[0][1].get("kind") == HEADER_KIND else {}
    examples: dict[str, list[str]] = {}
    out: list[str] = []
    for number, row in rows:
        task, card = _example(path, number, row)
        (out if card is None else examples.setdefault(card, [])).append(task)
    threshold = _threshold(path, header.get("threshold")) if header else None
    return Learned(path, {k: tuple(v) for k, v in examples.items()}, tuple(out), threshold)


def load_labelled(path: Path) -> list[tuple[str, str | None]]:
    """Read a `tiny learn` file: JSONL `{"task": ..., "card": ID | null}` (a header is skipped)."""
    rows = _read_rows(path)
    if rows and rows[0][1].get("kind") == HEADER_KIND:
        rows.pop(0)
    labelled = [_example(path, number, row) for number, row in rows]
    if not labelled:
        raise ConfigError(f"{path}: no examples to learn")
    return labelled


def merge(
    learned: Learned, labelled: Iterable[tuple[str, str | None]], cards: Sequence[Card]
) -> Merge:
    """Add labelled tasks; the latest label of a task wins, and a card must be one of `cards`."""
    known_ids = {card.id for card in cards}
    place: dict[str, tuple[str, str | None]] = {}  # normalised task -> (text, card)
    for owner, tasks in learned.examples.items():
        place.update((normalise(t), (t, owner)) for t in tasks)
    place.update((normalise(t), (t, None)) for t in learned.out_of_scope)
    added = moved = known = 0
    for task, card in labelled:
        if card is not None and card not in known_ids:
            raise ConfigError(f"card {card!r}: no such card (the task was {task[:60]!r})")
        key = normalise(task)
        before = place.get(key)
        if before is not None and before[1] == card:
            known += 1
            continue
        moved, added = (moved + 1, added) if before is not None else (moved, added + 1)
        place[key] = (task.strip(), card)
    return Merge(_rebuild(learned, place.values()), added, moved, known)


def with_learned(cards: Sequence[Card], learned: Learned) -> list[Card]:
    """Return the cards with their learned examples added after their own."""
    return [
        replace(
            card,
            examples=tuple(dict.fromkeys((*card.examples, *learned.examples.get(card.id, ())))),
        )
        if card.id in learned.examples
        else card
        for card in cards
    ]


def write_learned(learned: Learned) -> None:
    """Write the file atomically (a temporary file beside it, then a rename)."""
    tmp = learned.path.with_name(f".{learned.path.name}.tmp-{os.getpid()}")
    try:
        tmp.write_text(learned._lines(), "utf-8")
        tmp.replace(learned.path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        raise ConfigError(f"{learned.path}: cannot write: {exc.strerror or exc}") from exc


def check_learned(folder: Path, cards: Sequence[Card]) -> list[Problem]:
    """Check `folder`'s learned.jsonl: readable, known cards, no task taught twice."""
    from tiny_cli.cards.load import Problem

    path = folder / LEARNED_FILENAME
    if not path.is_file():
        return []
    try:
        rows = _read_rows(path)
        if rows and rows[0][1].get("kind") == HEADER_KIND:
            _threshold(path, rows.pop(0)[1].get("threshold"))
        labelled = [(number, *_example(path, number, row)) for number, row in rows]
    except ConfigError as exc:
        return [Problem(str(path), None, "file", str(exc).removeprefix(f"{path}").lstrip(": "))]
    known = {card.id for card in cards}
    own = {normalise(e): card.id for card in cards for e in card.examples}
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for number, task, card in labelled:
        if card is not None and card not in known:
            problems.append(Problem(str(path), number, "card", f"no card {card!r} in the folder"))
        if normalise(task) in own and own[normalise(task)] != card:
            where = own[normalise(task)]
            problems.append(
                Problem(str(path), number, "task", f"an example of card {where!r} in its own file")
            )
        first = seen.setdefault(normalise(task), number)
        if first != number:
            problems.append(
                Problem(str(path), number, "task", f"taught twice (first on line {first})")
            )
    return problems


# --- helpers ------------------------------------------------------------------------------


def _rebuild(learned: Learned, placed: Iterable[tuple[str, str | None]]) -> Learned:
    examples: dict[str, list[str]] = {}
    out: list[str] = []
    for task, card in placed:
        (out if card is None else examples.setdefault(card, [])).append(task)
    return replace(
        learned, examples={k: tuple(v) for k, v in examples.items()}, out_of_scope=tuple(out)
    )


def _read_rows(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        if path.stat().st_size > MAX_LEARNED_BYTES:
            raise ConfigError(f"{path}: larger than {MAX_LEARNED_BYTES // 2**20} MiB")
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from exc
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path}:{number}: not JSON: {exc.msg}") from None
        if not isinstance(row, dict):
            raise ConfigError(
                f'{path}:{number}: expected an object like {{"task": ..., "card": ...}}'
            )
        rows.append((number, row))
    return rows


def _example(path: Path, number: int, row: Mapping[str, Any]) -> tuple[str, str | None]:
    task, card = row.get("task"), row.get("card", "<missing>")
    if not isinstance(task, str) or not task.strip():
        raise ConfigError(f"{path}:{number}: task: expected a non-empty string")
    if card is not None and (not isinstance(card, str) or not card or card == "<missing>"):
        raise ConfigError(f"{path}:{number}: card: expected a card id, or null for out of scope")
    return task.strip(), card


def _threshold(path: Path, data: Any) -> DerivedThreshold | None:
    if data is None:
        return None
    try:
        threshold = DerivedThreshold(**data)
    except TypeError:
        raise ConfigError(f"{path}:1: threshold: not a threshold tiny learn wrote") from None
    if not isinstance(threshold.value, (int, float)) or not math.isfinite(threshold.value):
        raise ConfigError(f"{path}:1: threshold: value {threshold.value!r} is not a number")
    return threshold
