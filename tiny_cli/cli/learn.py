"""`tiny learn`: teach the router labelled tasks and corrections; how a teaching reads.

Tasks come from people and models: every one is shown through `printable` (no terminal
control characters) and printed without markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from tiny_cli.cli.common import emit, settings_from
from tiny_cli.cli.options import CardsOpt, JsonOpt
from tiny_cli.text import printable

if TYPE_CHECKING:
    from tiny_cli.corrections import Taught
    from tiny_cli.learn import LearnReport
    from tiny_cli.runs.corrections import Correction

TASK_CHARS = 60  # of a task in a correction's line


def learn(
    file: Annotated[
        Path | None,
        typer.Argument(
            metavar="FILE", help='JSONL of {"task": ..., "card": ID or null for out of scope}.'
        ),
    ] = None,
    from_runs: Annotated[
        bool,
        typer.Option(
            "--from-runs",
            help="Also teach the run log's corrections not taught yet (`tiny runs correct "
            "--no-learn`, the question after `tiny delegate`), and mark them taught.",
        ),
    ] = False,
    cards: CardsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Teach the router: tasks into the cards folder's learned.jsonl, the threshold derived again.

    Without FILE or --from-runs, only the threshold is derived again from learned.jsonl.
    """
    from tiny_cli.corrections import learn_from

    taught = learn_from(settings_from(cards=cards), file, from_runs)
    emit(json_out, taught.to_json(), lambda: typer.echo("\n".join(taught_lines(taught))))


def taught_lines(taught: Taught) -> list[str]:
    """Say what `tiny learn` did: the file, the counts, where they came from, the threshold."""
    r = taught.report
    counts = (
        f"{r.added} added, {r.moved} moved to another label, {r.known} already known, "
        f"{r.dropped} dropped by the cap"
    )
    head = "learned into" if r.status == "learned" else "unchanged:"
    lines = [f"{head} {_shown(str(r.path))}: {counts}"]
    sources = []
    if taught.file is not None:
        sources.append(f"{taught.from_file} from {_shown(str(taught.file))}")
    if taught.from_runs is not None:
        sources.append(f"{taught.from_runs} correction(s) from the run log")
    if sources:
        lines.append(f"  taught: {', '.join(sources)}")
    for c in taught.skipped:
        lines.append(
            f"  skipped run {c.run_id}: no card {_shown(c.card or '')!r} in the cards folder "
            "any more; correct the run again (`tiny runs correct`)"
        )
    lines.append(
        f"  the file holds {r.examples} example(s) for cards, {r.out_of_scope} out of scope"
    )
    lines.append(f"  threshold: {_shown(r.threshold_note)}")
    return lines


def correction_line(correction: Correction, report: LearnReport | None) -> str:
    """Say in one line what a correction said and whether it was taught."""
    c = correction
    task = c.task if len(c.task) <= TASK_CHARS else c.task[: TASK_CHARS - 1].rstrip() + "…"
    to, was = c.card or "abstain", c.routed or "abstain"
    line = f'run {c.run_id}: "{_shown(task)}" → {_shown(to)} (was: {_shown(was)})'
    if report is None:
        return f"{line}; recorded: `tiny learn --from-runs` teaches it"
    where = "learned into" if report.status == "learned" else "already known in"
    note = _shown(report.threshold_note)
    return f"{line}; {where} {_shown(str(report.path))} (threshold: {note})"


def _shown(text: str) -> str:
    return printable(text)
