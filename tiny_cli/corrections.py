"""Corrections as data: `tiny runs correct` and `tiny learn`, the run log and `learn` together.

A correction says where a delegate run's task should have gone (a card, or nowhere). It is
kept in the run log (tiny_cli.runs) and taught to the cards folder's learned.jsonl by
tiny_cli.learn, at once (`tiny runs correct`, the default) or later (`tiny learn
--from-runs`, which takes every correction not taught yet and marks it taught).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tiny_cli.learn import LearnReport, learn
from tiny_cli.routing.learned import load_labelled
from tiny_cli.runs.corrections import Correction
from tiny_cli.runs.log import RunLog
from tiny_cli.settings import Settings
from tiny_cli.workspace import open_workspace

if TYPE_CHECKING:
    import httpx

__all__ = ["Corrected", "Taught", "correct_run", "learn_from"]


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
    from_file: int  # labelled tasks read from it
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
    """Record where run `run_id`'s task should have gone (None: abstain); teach it unless not.

    The card must be one of the cards folder's (ConfigError listing the known ids). A
    correction whose teaching fails stays recorded, pending for `tiny learn --from-runs`.
    """
    if card is not None:
        open_workspace(settings, transport).card(card)
    with RunLog.open(settings.home) as log:
        correction = log.correct(run_id, card)
        if not teach:
            return Corrected(correction, None)
        report = learn(settings, [(correction.task, correction.card)], transport)
        log.mark_learned([correction.id])
        [taught] = [c for c in log.corrections(pending_only=False) if c.id == correction.id]
    return Corrected(taught, report)


def learn_from(
    settings: Settings,
    file: Path | None = None,
    from_runs: bool = False,
    transport: httpx.BaseTransport | None = None,
) -> Taught:
    """Teach FILE's labelled tasks and, with `from_runs`, the run log's pending corrections.

    With neither, the threshold is derived again from learned.jsonl as it stands. Taken
    corrections are marked taught; one naming a card that is no longer there is skipped and
    stays pending (correct that run again).
    """
    labelled = load_labelled(file) if file is not None else []
    if not from_runs:
        return Taught(learn(settings, labelled, transport), file, len(labelled), None)

    known = open_workspace(settings, transport).cards
    with RunLog.open(settings.home) as log:
        pending = log.corrections(pending_only=True)
        usable = [c for c in pending if c.card is None or c.card in known]
        taken = [(c.task, c.card) for c in usable]
        report = learn(settings, [*labelled, *taken], transport)
        log.mark_learned(c.id for c in usable)
    skipped = tuple(c for c in pending if c not in usable)
    return Taught(report, file, len(labelled), len(usable), skipped)
