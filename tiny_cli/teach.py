"""Teach the router: labelled tasks and run corrections into the cards folder's learned.jsonl.

`learn` merges labelled tasks into the file beside the cards, keeps each card under its cap
by dropping the most redundant example (the one nearest another of the same card), and
derives the threshold again. Nothing is written when nothing changed.

A correction says where a delegate run's task should have gone (a card, or nowhere). It is
kept in the run log (tiny_cli.runs) and taught here, at once (`tiny runs correct`) or later
(`tiny learn --from-runs`). A task that is another card's own example is refused, as `tiny
validate` would report it; the correction stays pending. Both teach under one lock beside the
run log: a correction taught late never undoes a newer one. `tiny learn FILE` with another
folder's learned.jsonl carries its generated lines over as generated, with their key.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

import httpx

from tiny_cli.cards.card import Card
from tiny_cli.errors import ConfigError
from tiny_cli.routing.embed import Embedder, VectorCache
from tiny_cli.routing.examples_file import (
    LEARNED_FILENAME,
    MAX_EXAMPLES_PER_CARD,
    MAX_OUT_OF_SCOPE,
    DerivedThreshold,
    Learned,
    Lesson,
    carry_generated,
    check_size,
    load_learned,
    load_lesson,
    merge,
    normalise,
    own_examples,
    write_learned,
)
from tiny_cli.routing.factory import (
    MIN_OUT_OF_SCOPE,
    derive_threshold,
    embedder_for,
    learned_folder,
)
from tiny_cli.routing.thinning import least_redundant
from tiny_cli.routing.tooltexts import gathered
from tiny_cli.runs.log import Correction, RunLog
from tiny_cli.secrets import scrubber
from tiny_cli.settings import Settings
from tiny_cli.text import check_task, printable
from tiny_cli.userfiles import locked
from tiny_cli.workspace import open_workspace

__all__ = ["Corrected", "LearnReport", "Taught", "correct_run", "learn", "learn_from"]

# `.corrections.lock` beside the run log: its corrections are recorded, taught and marked one
# command at a time, so a correction taught late cannot undo a newer one taught first
TEACHING_LOCK = "corrections"


@dataclass(frozen=True)
class LearnReport:
    """What one `tiny learn` did to the cards folder's learned examples."""

    path: Path
    status: Literal["learned", "unchanged"]
    added: int
    moved: int
    known: int
    dropped: int
    examples: int  # taught for cards
    out_of_scope: int
    threshold: DerivedThreshold | None
    threshold_note: str
    carried: int = 0  # generated lines of a learned FILE, kept as generated
    generated: int = 0  # the file's generated examples

    def to_json(self) -> dict[str, Any]:
        """Return the report as plain JSON types (`--json`)."""
        return {**asdict(self), "path": str(self.path)}

    def outcome(self) -> str:
        """Say where the examples went and the threshold after, terminal-safe."""
        where = "learned into" if self.status == "learned" else "already known in"
        note = printable(self.threshold_note)
        return f"{where} {printable(str(self.path))} (threshold: {note})"


def learn(
    settings: Settings,
    labelled: Sequence[tuple[str, str | None]] | Lesson,
    transport: httpx.BaseTransport | None = None,
) -> LearnReport:
    """Teach `labelled` (card id, or None for out of scope) or a Lesson; rewrite learned.jsonl."""
    # scrubbed of secrets first: the file is meant to be committed
    ws = open_workspace(settings, transport)
    cards = list(ws.cards.values())
    folder = learned_folder(settings, writing=True)
    scrub = scrubber(settings.api_key)
    lesson = labelled if isinstance(labelled, Lesson) else Lesson(tuple(labelled))
    lesson = lesson.scrubbed(scrub)
    _refuse_owned(cards, lesson)
    # the lock lives beside the file: two `tiny learn` with other homes still take turns
    with locked(folder / LEARNED_FILENAME):
        before = load_learned(folder)  # read inside the lock: another writer's lessons stay
        merged = merge(before.scrubbed(scrub), lesson.labelled, cards)
        learned, carried = carry_generated(merged.learned, lesson, cards)
        embedder = embedder_for(settings, transport)
        learned, dropped = _capped(learned, embedder, settings.cache_dir)
        check_size(learned)  # a file every reader would refuse is not written: said now
        texts = gathered(settings)  # the folds read the tools the real router reads
        derived = derive_threshold(cards, learned, embedder, settings.cache_dir, tool_texts=texts)
        learned = replace(learned, threshold=derived, damaged_header=False)
        changed = learned != before
        if changed:
            write_learned(learned)
    return LearnReport(
        path=learned.path,
        status="learned" if changed else "unchanged",
        added=merged.added,
        moved=merged.moved,
        known=merged.known,
        dropped=dropped,
        examples=learned.count(),
        out_of_scope=len(learned.out_of_scope),
        threshold=derived,
        threshold_note=_threshold_note(settings, learned, derived),
        carried=carried,
        generated=sum(map(len, learned.generated.values())),
    )


def _threshold_note(settings: Settings, learned: Learned, derived: DerivedThreshold | None) -> str:
    """Say which threshold applies after teaching, and why."""
    note = (
        derived.describe()
        if derived is not None
        else f"default threshold: {len(learned.out_of_scope)} out-of-scope examples, "
        f"deriving one needs {MIN_OUT_OF_SCOPE}"
    )
    if settings.threshold is not None:
        given_by = settings.origin("threshold") or "the settings"
        note = f"threshold {settings.threshold:g} given by {given_by} applies; {note}"
    return note


def _refuse_owned(cards: Sequence[Card], lesson: Lesson) -> None:
    """ConfigError at the first labelled task that is another card's own example."""
    own = own_examples(cards)
    for index, (task, card) in enumerate(lesson.labelled):
        owner = own.get(normalise(task))
        if owner is not None and owner != card:
            raise ConfigError(
                f"{lesson.where(index)}: task: {_owned_by(owner, card)}; teach it to {owner} "
                "or leave it out",
                path=lesson.path,
                field="task",
            )


def _owned_by(owner: str, card: str | None) -> str:
    """Say that a task labelled `card` is an example of card `owner`."""
    label = "out of scope" if card is None else repr(card)
    return f"an example of card {owner!r} in its own file, labelled {label} here"


def _capped(learned: Learned, embedder: Embedder, cache_dir: Path) -> tuple[Learned, int]:
    """Drop the most redundant examples of every card (and out of scope) past its cap."""
    cache = VectorCache(cache_dir)
    examples = dict(learned.examples)
    dropped = 0
    for card, tasks in learned.examples.items():
        if len(tasks) > MAX_EXAMPLES_PER_CARD:
            vectors = cache.embed(embedder, list(tasks))
            examples[card] = least_redundant(tasks, vectors, MAX_EXAMPLES_PER_CARD)
            dropped += len(tasks) - MAX_EXAMPLES_PER_CARD
    out = learned.out_of_scope
    if len(out) > MAX_OUT_OF_SCOPE:
        dropped += len(out) - MAX_OUT_OF_SCOPE
        out = least_redundant(out, cache.embed(embedder, list(out)), MAX_OUT_OF_SCOPE)
    return replace(learned, examples=examples, out_of_scope=out), dropped


@dataclass(frozen=True)
class Corrected:
    """What `tiny runs correct` did: the correction recorded, and what teaching it did."""

    correction: Correction
    report: LearnReport | None  # None: recorded only (--no-learn)

    def to_json(self) -> dict[str, Any]:
        """Return the outcome as a JSON object."""
        learned = self.report.to_json() if self.report is not None else None
        return {"correction": self.correction.to_json(), "learned": learned}


@dataclass(frozen=True)
class Taught:
    """What `tiny learn` did: where the examples came from, and what learning them did."""

    report: LearnReport
    file: Path | None  # the FILE read, if any
    from_file: int  # lines read from it (labelled tasks and generated lines)
    from_runs: int | None  # corrections taken from the run log, now taught (None: not asked)
    skipped: tuple[Correction, ...] = ()  # corrections naming a card that is gone: still pending

    def to_json(self) -> dict[str, Any]:
        """Return the outcome as a JSON object."""
        return {
            **self.report.to_json(),
            "file": str(self.file) if self.file is not None else None,
            "from_file": self.from_file,
            "from_runs": self.from_runs,
            "skipped": [c.to_json() for c in self.skipped],
        }


def correct_run(
    settings: Settings,
    run_id: int,
    card: str | None,
    *,
    teach: bool = True,
    transport: httpx.BaseTransport | None = None,
) -> Corrected:
    """Record where run `run_id`'s task should have gone (None: abstain); teach it unless not."""
    if card is not None:
        open_workspace(settings, transport).card(card)
    with RunLog.open(settings.home) as log, locked(settings.home / TEACHING_LOCK):
        correction = log.correct(run_id, card)
        if not teach:
            return Corrected(correction, None)
        # refused: recorded and pending, never taught (`tiny runs delete` drops it)
        _check_teachable([correction], open_workspace(settings, transport).cards.values())
        report = _taught_or_pending(settings, correction, transport)
        log.mark_learned([correction.id])
        taught = [c for c in log.corrections(pending_only=False) if c.id == correction.id]
        if not taught:
            raise _superseded(log, correction, report.path)
    return Corrected(taught[0], report)


def _taught_or_pending(
    settings: Settings, correction: Correction, transport: httpx.BaseTransport | None
) -> LearnReport:
    """Teach a recorded correction; a ConfigError says that it stays recorded, pending."""
    try:
        return learn(settings, [(correction.task, correction.card)], transport)
    except ConfigError as exc:
        pending = (
            f"; the correction of run {correction.run_id} is recorded, not taught: "
            "`tiny learn --from-runs` teaches it once that is fixed"
        )
        raise ConfigError(f"{exc}{pending}", path=exc.path, field=exc.field) from None


def _superseded(log: RunLog, correction: Correction, learned: Path) -> ConfigError:
    """The error of a correction replaced or deleted while it was taught: what stands now."""
    run_id, to = correction.run_id, _label(correction.card)
    kept = f"{printable(str(learned))} teaches its task as {to}"
    now = [c for c in log.corrections(pending_only=False) if c.run_id == run_id]
    if not now:
        return ConfigError(
            f"run {run_id} was deleted while its correction was taught: {kept} (edit that file "
            "to take it out)"
        )
    again = _label(now[0].card)
    if now[0].learned_at is None:
        todo = f"`tiny learn --from-runs` teaches it ({again}) instead"
    else:
        flag = "--abstain" if now[0].card is None else f"--card {printable(now[0].card)}"
        todo = f"`tiny runs correct {run_id} {flag}` teaches the newer one ({again}) again"
    return ConfigError(f"run {run_id} was corrected again while it was taught: {kept}; {todo}")


def _label(card: str | None) -> str:
    """Say where a correction sends its task, terminal-safe."""
    return "out of scope (abstain)" if card is None else f"card {printable(card)!r}"


def learn_from(
    settings: Settings,
    file: Path | None = None,
    from_runs: bool = False,
    transport: httpx.BaseTransport | None = None,
) -> Taught:
    """Teach FILE's labelled tasks and, with `from_runs`, the run log's pending corrections."""
    # one naming a card that is gone is skipped and stays pending (correct that run again)
    lesson = load_lesson(file) if file is not None else Lesson(())
    read = len(lesson.labelled) + sum(map(len, lesson.generated.values()))
    if not from_runs:
        return Taught(learn(settings, lesson, transport), file, read, None)

    known = open_workspace(settings, transport).cards
    with RunLog.open(settings.home) as log, locked(settings.home / TEACHING_LOCK):
        pending = log.corrections(pending_only=True)
        usable = [c for c in pending if c.card is None or c.card in known]
        _check_teachable(usable, known.values())
        taken = tuple((c.task, c.card) for c in usable)
        report = learn(settings, replace(lesson, labelled=lesson.labelled + taken), transport)
        log.mark_learned(c.id for c in usable)
    skipped = tuple(c for c in pending if c not in usable)
    return Taught(report, file, read, len(usable), skipped)


def _check_teachable(corrections: Sequence[Correction], cards: Iterable[Card]) -> None:
    """ConfigError naming the run of a task route would refuse, or another card's example."""
    own = own_examples(list(cards))
    for c in corrections:
        try:
            check_task(c.task)
        except ConfigError as exc:
            raise ConfigError(
                f"run {c.run_id}: {exc}; `tiny runs delete {c.run_id}` drops its correction"
            ) from None
        owner = own.get(normalise(c.task))
        if owner is not None and owner != c.card:
            raise ConfigError(
                f"run {c.run_id}: task: {_owned_by(owner, c.card)}; the correction stays "
                f"pending: `tiny runs correct {c.run_id} --card {owner}` teaches it, "
                f"`tiny runs delete {c.run_id}` drops it",
                field="task",
            )
