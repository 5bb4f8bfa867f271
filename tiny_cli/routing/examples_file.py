"""Learned routing examples: the corrections a cards folder was taught, in a file beside it.

`learned.jsonl` in the cards folder holds one line per example, `{"task": ..., "card": ID}`,
or `"card": null` for a task no card should take (the folder's out-of-scope examples),
sorted by card and task so a diff shows what was taught. Its first line is a header with
the threshold derived from these examples (tiny_cli.routing.factory), with the sha of the
examples and the keys of the cards and tool texts it was derived on: a hand edit, an edited
card or a changed tool list makes it stale, and a stale threshold is not used.
The file is the same shape `tiny learn FILE` reads, so it can be taught to another folder.
Examples a model wrote (`tiny learn --generate`) follow the taught ones, each line marked
`"source": "generated"` with the `key` of the inputs it was written from; readers that
ignore the mark read them as taught examples. Those are all the fields there are: tiny
rewrites the file, so a line with a field it does not know is refused rather than dropped,
and so is a file of a newer version than this tiny reads.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import unicodedata
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from itertools import chain
from pathlib import Path
from typing import Any

from tiny_cli.cards.card import Card, Problem
from tiny_cli.errors import ConfigError
from tiny_cli.secrets import Scrubber
from tiny_cli.text import check_task, half_pair, printable
from tiny_cli.userfiles import jsonl_line, jsonl_lines, load_json, read_text, write_text

__all__ = [
    "LEARNED_FILENAME",
    "MAX_EXAMPLES_PER_CARD",
    "MAX_GENERATED_CHARS",
    "MAX_LEARNED_BYTES",
    "MAX_OUT_OF_SCOPE",
    "UNCHECKED",
    "DerivedThreshold",
    "Learned",
    "Lesson",
    "Merge",
    "carry_generated",
    "check_learned",
    "check_size",
    "line_of_example",
    "load_learned",
    "load_lesson",
    "merge",
    "normalise",
    "own_examples",
    "unknown_card",
    "usable_generated",
    "with_learned",
    "write_learned",
]

# Beyond these, the least useful example goes (tiny_cli.teach): measured gains flatten from
# 60 to 100 examples per card, and the kNN view reads only each card's 3 nearest.
MAX_EXAMPLES_PER_CARD = 100
MAX_OUT_OF_SCOPE = 1000
MAX_LEARNED_BYTES = 16 * 1024 * 1024  # 200 cards x 100 examples is ~2 MB
MAX_GENERATED_CHARS = 300  # a longer "request" is not one a user types
LEARNED_FILENAME = "learned.jsonl"  # in the cards folder; not a card (cards are YAML)
HEADER_KIND = "tiny learned routing examples"
# hashed with a file's generated examples: they are read as one group (tiny_cli.routing.space),
# so a threshold derived while they were read one by one, like taught ones, is stale
GENERATED_RULE = "\0generated examples read as one group"
GENERATED = "generated"  # the `source` of a line `tiny learn --generate` wrote
UNCHECKED = "+unchecked"  # after a card's key until the overlap check has run on its examples
VERSION = 1
HEADER_FIELDS = ("kind", "version", "threshold")
LINE_FIELDS = ("task", "card", "source", "key")  # source and key: a generated line's


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
    # what it was derived on besides the examples (tiny_cli.routing.factory `threshold_basis`):
    # the cards' routing views and their tools' texts. "" in a file from before they were kept:
    # not checked, so such a threshold is used as before until `tiny learn` derives it again
    cards_key: str = ""
    tools_key: str = ""
    # the router's version (tiny_cli.routing.state STATE_VERSION): another router scores the
    # same tasks otherwise. 0 in a file from before it was kept: not checked, as above
    router: int = 0

    def describe(self) -> str:
        """Say in one line where the threshold comes from."""
        # no example held out: no rate of them to give (0% would read as a failure)
        routed = f"examples route right and pass it {self.cv_top1:.0%}, " if self.examples else ""
        return (
            f"derived by tiny learn from {self.examples} examples and {self.out_of_scope} "
            f"out-of-scope ones ({self.folds}-fold cross-validation: abstains on "
            f"{self.target_recall:.0%} of the held-out out-of-scope examples and generic "
            f"requests together; held out, {routed}out-of-scope ones abstain "
            f"{self.cv_recall:.0%}, generic requests {self.generic_recall:.0%})"
        )


@dataclass(frozen=True)
class Learned:
    """A cards folder's learned examples: per card, out of scope, and the derived threshold."""

    path: Path
    examples: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    out_of_scope: tuple[str, ...] = ()
    threshold: DerivedThreshold | None = None
    damaged_header: bool = False  # a header threshold not as tiny learn writes it: stale
    generated: Mapping[str, tuple[str, ...]] = field(default_factory=dict)  # by a model
    generation: Mapping[str, str] = field(default_factory=dict)  # card -> key of its inputs

    def scrubbed(self, scrub: Scrubber) -> Learned:
        """Return these examples with every secret replaced (the file is meant to be committed)."""
        every = "\n".join(
            chain(*self.examples.values(), self.out_of_scope, *self.generated.values())
        )
        if scrub.text(every) == every:  # one pass over all: a clean file (most) costs no walk
            return self
        out = tuple(map(scrub.text, self.out_of_scope))
        examples, made = _scrubbed(scrub, self.examples), _scrubbed(scrub, self.generated)
        return replace(self, examples=examples, out_of_scope=out, generated=made)

    def every_example(self) -> Learned:
        """Return these examples with each card's generated ones after its taught ones."""
        # for counting and cross-validation; the router reads them apart (`with_learned`)
        if not self.generated:
            return self
        cards = sorted({*self.examples, *self.generated})
        both = {c: (*self.examples.get(c, ()), *self.generated.get(c, ())) for c in cards}
        return replace(self, examples=both, generated={}, generation={})

    def sha(self, rule: str = GENERATED_RULE) -> str:
        """Return the sha256 of the examples (what a derived threshold is valid for)."""
        lines = self._lines(header=False)
        if self.generated:  # see GENERATED_RULE
            lines += rule
        return hashlib.sha256(lines.encode()).hexdigest()

    def count(self) -> int:
        """Return how many in-scope examples the file holds."""
        return sum(len(v) for v in self.examples.values())

    def keeping_generated(self, made: Mapping[str, Sequence[str]]) -> Learned:
        """Return these examples with `made` as the generated ones; a card left none has no key."""
        kept = {card: tuple(tasks) for card, tasks in made.items() if tasks}
        keys = {card: key for card, key in self.generation.items() if card in kept}
        return replace(self, generated=kept, generation=keys)

    def why_stale(self, embedder: str, cards_key: str, tools_key: str, router: int) -> str | None:
        """Say what changed since the threshold was derived; None if nothing did, or none is."""
        t = self.threshold
        if t is None:
            return None
        since = "changed since `tiny learn` derived it"
        before_rule = bool(self.generated) and t.sha == self.sha(rule="")  # same lines, old rule
        changes = (
            (before_rule, f"the way tiny reads generated examples {since}"),
            (t.sha != self.sha(), f"the examples {since}"),
            (t.embedder != embedder, f"it was derived with another embedder ({t.embedder})"),
            (t.cards_key not in ("", cards_key), f"the cards {since}"),
            (t.tools_key not in ("", tools_key), f"the texts of the cards' tools {since}"),
            (t.router not in (0, router), f"the router {since}"),
        )
        return next((why for changed, why in changes if changed), None)

    def _lines(self, header: bool = True) -> str:
        # line separators escaped: a pasted U+2028 must not split a line for `str.splitlines`
        rows = [
            jsonl_line({"task": task, "card": card})
            for card in sorted(self.examples)
            for task in sorted(self.examples[card])
        ]
        rows += [jsonl_line({"task": t, "card": None}) for t in sorted(self.out_of_scope)]
        rows += [
            jsonl_line({"task": task, "card": card, "source": GENERATED, "key": key})
            for card in sorted(self.generated)
            for key in [self.generation.get(card, "")]
            for task in sorted(self.generated[card])
        ]
        if header:
            head: dict[str, Any] = {"kind": HEADER_KIND, "version": VERSION}
            if self.threshold is not None:
                head["threshold"] = asdict(self.threshold)
            rows.insert(0, jsonl_line(head))
        return "".join(rows)


@dataclass(frozen=True)
class Lesson:
    """What `tiny learn FILE` read: labelled tasks at their lines, a learned file's generated."""

    labelled: tuple[tuple[str, str | None], ...]
    path: Path | None = None  # the file read; None: tasks from elsewhere (corrections)
    lines: tuple[int, ...] = ()  # the line of each labelled task, where read from `path`
    generated: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    generation: Mapping[str, str] = field(default_factory=dict)

    def where(self, index: int) -> str:
        """Name where labelled task `index` came from: FILE:LINE, else its text."""
        if self.path is not None and index < len(self.lines):
            return f"{self.path}:{self.lines[index]}"
        return f"task {printable(self.labelled[index][0][:60])!r}"

    def scrubbed(self, scrub: Scrubber) -> Lesson:
        """Return the lesson with every secret replaced, generated lines too."""
        labelled = tuple((scrub.text(task), card) for task, card in self.labelled)
        return replace(self, labelled=labelled, generated=_scrubbed(scrub, self.generated))


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


def load_learned(folder: Path, check_generated: bool = True) -> Learned:
    """Read `folder`'s learned.jsonl; an empty Learned when there is none."""
    # not `check_generated`: a generated task route refuses (an older tiny wrote it) is read
    # as written, so that `tiny learn --prune-generated` can remove it
    path = folder / LEARNED_FILENAME
    if not path.is_file():
        return Learned(path)
    header, lines = _read(path, check_generated=check_generated)
    taught, made, keys = _split(lines)
    _refuse_two_labels(path, taught)
    examples, out = _grouped((task, card) for _, task, card in taught)
    threshold = _threshold(header.get("threshold"))
    damaged = threshold is None and header.get("threshold") is not None
    return Learned(path, examples, out, threshold, damaged, made, keys)


def load_lesson(path: Path) -> Lesson:
    """Read a `tiny learn` file: JSONL `{"task": ..., "card": ID | null}`, its header skipped."""
    _, lines = _read(path, strict=False)  # not rewritten: a field tiny ignores may stay
    if not lines:
        raise ConfigError(f"{path}: no examples to learn")
    taught, made, keys = _split(lines)
    labelled = tuple((task, card) for _, task, card in taught)
    return Lesson(labelled, path, tuple(n for n, _, _ in taught), made, keys)


def merge(
    learned: Learned, labelled: Iterable[tuple[str, str | None]], cards: Sequence[Card]
) -> Merge:
    """Add labelled tasks; the latest label of a task wins, and a card must be one of `cards`."""
    # the counts are of the file's net change: a task relabelled and back again is known
    known_ids = {card.id for card in cards}
    labelled = list(labelled)
    before, again = _by_task(learned)
    place = dict(before)
    for task, card in labelled:
        if card is not None and card not in known_ids:
            why = f"card {card!r}: no such card (the task was {task[:60]!r})"
            raise ConfigError(why, field="card")  # no path: `unknown_card` finds FILE's line
        key = normalise(task)
        if key not in place or place[key][1] != card:  # the same label keeps the text it has
            place[key] = (task.strip(), card)
    for key, was in before.items():
        if place[key][1] == was[1]:  # back where it was: the line stays as it is
            place[key] = was
    added = len(place) - len(before)
    moved = sum(place[key][1] != was[1] for key, was in before.items())
    # a second line of a task (a hand edit) stays as written, under the task's label now
    kept = [*place.values(), *((task, place[normalise(task)][1]) for task in again)]
    return Merge(_rebuild(learned, kept), added, moved, len(labelled) - added - moved)


def _by_task(learned: Learned) -> tuple[dict[str, tuple[str, str | None]], list[str]]:
    """Each task's (normalised) first line with its label, and the tasks of later lines."""
    every: list[tuple[str, str | None]] = [(t, c) for c, ts in learned.examples.items() for t in ts]
    every += [(t, None) for t in learned.out_of_scope]
    first: dict[str, tuple[str, str | None]] = {}
    again: list[str] = []
    for task, card in every:
        key = normalise(task)
        if key in first:
            again.append(task)
        else:
            first[key] = (task, card)
    return first, again


def carry_generated(learned: Learned, lesson: Lesson, cards: Sequence[Card]) -> tuple[Learned, int]:
    """Put `lesson`'s generated lines in, each card's replacing its own; return how many stay."""
    # less a copy of any other example, and less a line `--generate` would not write
    known = {card.id for card in cards}
    for card in lesson.generated:
        if card not in known:  # no path: `unknown_card` finds FILE's line
            raise ConfigError(f"card {card!r}: no such card", field="card")
    made, keys = dict(learned.generated), dict(learned.generation)
    others = (ts for card, ts in learned.generated.items() if card not in lesson.generated)
    taken = {normalise(t) for t in chain(*learned.examples.values(), learned.out_of_scope, *others)}
    taken |= set(own_examples(cards))
    for card, tasks in lesson.generated.items():
        kept: dict[str, str] = {}
        for task in tasks:
            if normalise(task) not in taken and usable_generated(task):
                kept.setdefault(normalise(task), task)
        taken |= set(kept)  # a later card's copy goes: `tiny validate` flags a task twice
        made[card] = tuple(kept.values())
        # not checked among this folder's cards yet: the next --generate checks them
        keys[card] = lesson.generation[card].removesuffix(UNCHECKED) + UNCHECKED
    # none kept: no line, as `--generate` leaves a card whose every one was dropped
    carried = sum(len(made[card]) for card in lesson.generated)
    return replace(learned, generation=keys).keeping_generated(made), carried


def usable_generated(task: str) -> bool:
    """Tell whether a model may write `task` as a generated example: one `tiny route` takes."""
    # no half of a UTF-16 pair: JSON allows `"\ud800"`, no file can hold it
    try:
        check_task(task)
    except ConfigError:
        return False
    return len(task) <= MAX_GENERATED_CHARS and not half_pair(task)


def own_examples(cards: Sequence[Card]) -> dict[str, str]:
    """Every card's own examples, normalised, with the card each is of."""
    return {normalise(e): card.id for card in cards for e in card.examples}


def with_learned(cards: Sequence[Card], learned: Learned) -> list[Card]:
    """Return the cards with their taught examples after their own, and their generated ones."""
    return [
        _learned_card(card, learned)
        if card.id in learned.examples or card.id in learned.generated
        else card
        for card in cards
    ]


def _learned_card(card: Card, learned: Learned) -> Card:
    examples = tuple(dict.fromkeys((*card.examples, *learned.examples.get(card.id, ()))))
    taught = {normalise(t) for t in examples}  # taught wins, as `tiny learn` compares texts
    made = dict.fromkeys(
        t for t in learned.generated.get(card.id, ()) if normalise(t) not in taught
    )
    return replace(card, examples=examples, generated=tuple(made))


def write_learned(learned: Learned) -> None:
    """Write the file atomically, never through a link; ConfigError when too large to read."""
    text = learned._lines()
    _refuse_too_large(learned.path, text)
    write_text(learned.path, text)


def check_size(learned: Learned) -> None:
    """Refuse a file too large to read before a threshold is derived (embedding every example)."""
    _refuse_too_large(learned.path, learned._lines(header=False))


def check_learned(folder: Path, cards: Sequence[Card]) -> list[Problem]:
    """Return every bad line's problem in `folder`'s learned.jsonl, in line order."""
    path = folder / LEARNED_FILENAME
    if not path.is_file():
        return []
    unread: list[ConfigError] = []
    try:  # a damaged threshold is stale, as an edited one is: no problem
        _, labelled = _read(path, problems=unread)
    except ConfigError as exc:
        return [_problem(path, exc)]
    problems = [_problem(path, exc) for exc in unread] + _labels_checked(path, labelled, cards)
    return sorted(problems, key=lambda p: p.line or 0)


def _labels_checked(path: Path, labelled: Sequence[_Line], cards: Sequence[Card]) -> list[Problem]:
    """An unknown card, another card's own example, a task taught twice."""
    known = {card.id for card in cards}
    own = own_examples(cards)
    problems: list[Problem] = []
    seen: dict[str, int] = {}
    for number, task, card, _ in labelled:
        key = normalise(task)
        if card is not None and card not in known:
            problems.append(Problem(str(path), number, "card", f"no card {card!r} in the folder"))
        if own.get(key, card) != card:
            why = f"an example of card {own[key]!r} in its own file"
            problems.append(Problem(str(path), number, "task", why))
        first = seen.setdefault(key, number)
        if first != number:
            problems.append(
                Problem(str(path), number, "task", f"taught twice (first on line {first})")
            )
    return problems


def _refuse_two_labels(path: Path, taught: Iterable[_Taught]) -> None:
    """Refuse a task taught under two labels (a hand edit, a git merge): a rewrite loses one."""
    first: dict[str, tuple[int, str | None]] = {}
    for number, task, card in taught:
        at, label = first.setdefault(normalise(task), (number, card))
        if label != card:
            raise ConfigError(
                f"{path}:{number}: task: taught twice, to {_label(card)} here and to "
                f"{_label(label)} on line {at}; keep the line you mean",
                path=path,
                field="task",
            )


def _label(card: str | None) -> str:
    return "out of scope" if card is None else repr(card)


def _grouped(
    placed: Iterable[tuple[str, str | None]],
) -> tuple[dict[str, tuple[str, ...]], tuple[str, ...]]:
    """Taught tasks by card, and the out-of-scope ones (card None), in their order."""
    examples: dict[str, list[str]] = {}
    out: list[str] = []
    for task, card in placed:
        (out if card is None else examples.setdefault(card, [])).append(task)
    return {k: tuple(v) for k, v in examples.items()}, tuple(out)


def _rebuild(learned: Learned, placed: Iterable[tuple[str, str | None]]) -> Learned:
    placed = list(placed)
    examples, out = _grouped(placed)
    taught = {normalise(task) for task, _ in placed}
    # what a user taught wins over what a model wrote: a generated equal to it goes
    made = {c: [t for t in ts if normalise(t) not in taught] for c, ts in learned.generated.items()}
    return replace(learned, examples=examples, out_of_scope=out).keeping_generated(made)


def line_of_example(
    path: Path, card: str, task: str, scrub: Callable[[str], str] = str
) -> int | None:
    """Return the line of `path` that teaches or generated `task` (`scrub`bed) for `card`."""
    for n, row in _rows_if_readable(path):
        said = row.get("task")  # read as the router reads it: blanks around it are no part
        if row.get("card") == card and isinstance(said, str) and scrub(said.strip()) == task:
            return n
    return None


def unknown_card(path: Path, card_ids: Collection[str]) -> ConfigError | None:
    """Return the error of `path`'s first line naming a card not in `card_ids`, if any."""
    for number, row in _rows_if_readable(path):
        card = row.get("card")
        if isinstance(card, str) and card not in card_ids and row.get("kind") != HEADER_KIND:
            return _at(path, number, f"card: no card {card!r} in the cards folder")
    return None


def _refuse_too_large(path: Path, text: str) -> None:
    size = len(text.encode())
    if size > MAX_LEARNED_BYTES:
        raise ConfigError(
            f"{path}: would be {size:,} bytes, past the {MAX_LEARNED_BYTES:,} "
            f"({MAX_LEARNED_BYTES // 2**20} MiB) tiny reads; nothing written (teach fewer or "
            "shorter tasks, or prune generated ones: `tiny learn --prune-generated`)",
            path=path,
        )


def _scrubbed(scrub: Scrubber, by_card: Mapping[str, Sequence[str]]) -> dict[str, tuple[str, ...]]:
    return {card: tuple(map(scrub.text, tasks)) for card, tasks in by_card.items()}


def _problem(path: Path, exc: ConfigError) -> Problem:
    """A learned file's error as `tiny validate` reports it: at its line, with its field."""
    where, _, why = str(exc).removeprefix(f"{path}:").partition(": ")
    if not where.isdigit():  # the file as a whole (a newer version)
        return Problem(str(path), None, "file", str(exc).removeprefix(f"{path}").lstrip(": "))
    field = exc.field or "file"
    return Problem(str(path), int(where), field, why.removeprefix(f"{field}: "))


def _rows_if_readable(path: Path) -> list[tuple[int, dict[str, Any]]]:
    try:
        return _read_rows(path)
    except ConfigError:
        return []


def _read(
    path: Path,
    strict: bool = True,
    problems: list[ConfigError] | None = None,
    check_generated: bool = True,
) -> tuple[dict, list[_Line]]:
    """Read `path`'s header ({} if none) and lines; `strict`: no field tiny would drop."""
    # given `problems`, a bad line's error goes there and the other lines are read
    rows = _read_rows(path, problems)
    has_header = bool(rows) and rows[0][1].get("kind") == HEADER_KIND
    number, header = rows.pop(0) if has_header else (0, {})
    version = header.get("version")
    if isinstance(version, int | float) and not isinstance(version, bool) and version > VERSION:
        raise ConfigError(
            f"{path}: version {version} is newer than this tiny reads ({VERSION}); upgrade tiny",
            path=path,
        )
    if strict and has_header:
        with _noted(problems):
            _known(path, number, header, HEADER_FIELDS)
    lines: list[_Line] = []
    first: dict[str, tuple[int, str]] = {}  # card -> the line and key of its first generated
    for number, row in rows:
        with _noted(problems):
            lines.append(_line(path, number, row, first, strict, check_generated))
    return header, lines


@contextmanager
def _noted(problems: list[ConfigError] | None) -> Iterator[None]:
    """Put a ConfigError raised inside into `problems` and go on; without a list, raise it."""
    try:
        yield
    except ConfigError as exc:
        if problems is None:
            raise
        problems.append(exc)


def _read_rows(
    path: Path, problems: list[ConfigError] | None = None
) -> list[tuple[int, dict[str, Any]]]:
    # bounded for pipes and devices too (`tiny learn /dev/zero`); lines split on "\n" only
    text = read_text(path, MAX_LEARNED_BYTES)
    rows = []
    for number, line in enumerate(jsonl_lines(text), 1):
        if line.strip():
            with _noted(problems):
                rows.append((number, _row(path, number, line)))
    return rows


def _row(path: Path, number: int, line: str) -> dict[str, Any]:
    """Line `number` of `path` read as a JSON object; ConfigError naming the line if not."""
    try:
        row = load_json(line, f"{path}:{number}")
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{number}: not JSON: {exc.msg}", path=path) from None
    except (ValueError, RecursionError):  # a 5,000-digit number, or nesting too deep
        raise ConfigError(f"{path}:{number}: not JSON tiny can read", path=path) from None
    if not isinstance(row, dict):
        raise ConfigError(
            f'{path}:{number}: expected an object like {{"task": ..., "card": ...}}', path=path
        )
    return row


_Line = tuple[int, str, str | None, str | None]  # number, task, card, a generated line's key
_Taught = tuple[int, str, str | None]  # number, task, card


def _line(
    path: Path,
    number: int,
    row: Mapping[str, Any],
    first: dict[str, tuple[int, str]],
    strict: bool,
    check_generated: bool,
) -> _Line:
    """Line `number` read: ConfigError for a line tiny would not write back as it is."""
    if strict:
        _known(path, number, row, LINE_FIELDS)
    task, card = _example(path, number, row)
    key = _key(path, number, row, card)
    if key is None or check_generated:
        _check_task(path, number, row["task"], key is not None, strict)
    if card is not None and key is not None:
        was, known = first.setdefault(card, (number, key))
        if known != key:
            why = f"key: {key!r}, where line {was} gives card {card!r} key {known!r}"
            raise _at(path, number, f"{why}: one key per card")
    return number, task, card, key


def _key(path: Path, number: int, row: Mapping[str, Any], card: str | None) -> str | None:
    """The key of a generated line, None for a taught one; ConfigError for a mark tiny drops."""
    if "source" not in row and "key" not in row:
        return None
    source, key = row.get("source"), row.get("key")
    if "source" not in row:
        why = f'key: only on a generated line ("source": "{GENERATED}")'
    elif source != GENERATED:
        why = f'source: expected "{GENERATED}" (the only source tiny writes), got {_shown(source)}'
    elif not isinstance(key, str):
        why = f"key: expected the text key of what the line was written from, got {_shown(key)}"
    elif card is None:
        why = "source: a generated line names its card (card null is a taught out-of-scope line)"
    else:
        return key
    raise _at(path, number, why)


def _at(path: Path, number: int, why: str, field: str | None = None) -> ConfigError:
    """The error of line `number` in `field`, by default the one `why` starts with."""
    field = field or why.partition(":")[0]
    return ConfigError(f"{path}:{number}: {why}", path=path, field=field)


def _shown(value: Any) -> str:
    """A JSON value as an error names it, cut: `none` when missing or null."""
    return "none" if value is None else printable(repr(value)[:60])


def _split(
    lines: Iterable[_Line],
) -> tuple[list[_Taught], dict[str, tuple[str, ...]], dict[str, str]]:
    """The taught lines; the generated ones' tasks by card, and each card's key."""
    taught: list[_Taught] = []
    made: dict[str, list[str]] = {}
    keys: dict[str, str] = {}
    for number, task, card, key in lines:
        if card is None or key is None:
            taught.append((number, task, card))
        else:
            made.setdefault(card, []).append(task)
            keys[card] = key
    return taught, {card: tuple(tasks) for card, tasks in made.items()}, keys


def _known(path: Path, number: int, row: Mapping[str, Any], known: Sequence[str]) -> None:
    unknown = [name for name in row if name not in known]
    if unknown:
        name = printable(unknown[0])
        why = (
            f"unknown field (fields: {', '.join(known)}); tiny rewrites this file and would drop it"
        )
        raise _at(path, number, f"{name}: {why}", name)


def _example(path: Path, number: int, row: Mapping[str, Any]) -> tuple[str, str | None]:
    task, card = row.get("task"), row.get("card", "<missing>")
    if not isinstance(task, str) or not task.strip():
        raise _at(path, number, "task: expected a non-empty string")
    if card is not None and (not isinstance(card, str) or not card or card == "<missing>"):
        raise _at(path, number, "card: expected a card id, or null for out of scope")
    return task.strip(), card


def _check_task(path: Path, number: int, task: str, generated: bool, learned: bool) -> None:
    """Refuse a task route refuses: learned, it would slow every route."""
    try:
        check_task(task)
    except ConfigError as exc:
        if not learned:
            raise _at(path, number, str(exc), "task") from None
        why = re.split(r": | \(", str(exc), maxsplit=1)[0]  # the fault, without the hint
        todo = (
            "`tiny learn --prune-generated` removes this generated line, or delete it"
            if generated
            else "edit this taught line or delete it"
        )
        why = f"task: {why} (this tiny no longer learns such a task); {todo}"
        raise _at(path, number, why) from None


_THRESHOLD_TYPES = {f.name: str(f.type) for f in fields(DerivedThreshold)}  # "float", "int"
# fields without a default: an older tiny learn did not write the others, and a header
# without them is read as it was written
_REQUIRED = {f.name for f in fields(DerivedThreshold) if f.default is MISSING}


def _threshold(data: Any) -> DerivedThreshold | None:
    """The header's threshold; None (stale: the default applies) when it is not as written."""
    if not isinstance(data, dict) or not _REQUIRED <= data.keys() <= _THRESHOLD_TYPES.keys():
        return None
    typed = all(_typed(value, _THRESHOLD_TYPES[name]) for name, value in data.items())
    return DerivedThreshold(**data) if typed else None


def _typed(value: Any, kind: str) -> bool:
    """Tell whether a header value has the type tiny learn writes (`kind`: the field's type)."""
    if kind == "str":
        return isinstance(value, str)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    return isinstance(value, int) if kind == "int" else math.isfinite(value)
