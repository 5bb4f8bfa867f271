"""`tiny learn`: teach the router labelled tasks and corrections; how a teaching reads.

Tasks come from people and models: every one is shown through `printable` (no terminal
control characters) and printed without markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tiny_cli.cli.common import CardsOpt, JsonOpt, emit, settings_from
from tiny_cli.example_writer import (
    DEFAULT_PER_CARD,
    GENERATE_TEMPERATURE,
    MAX_PER_CARD,
    Generated,
    prune_generated,
)
from tiny_cli.example_writer import generate as run_generate
from tiny_cli.settings import Settings
from tiny_cli.teach import Taught, learn_from
from tiny_cli.text import printable

GenerateOpt = Annotated[
    bool,
    typer.Option(
        "--generate",
        help="Ask the configured model for typical requests for each card (from its summary "
        "and tools), written as generated examples; cards done with the same inputs are skipped.",
    ),
]
PerCardOpt = Annotated[
    int, typer.Option("--per-card", help=f"Examples to generate per card (1 to {MAX_PER_CARD}).")
]
RegenerateOpt = Annotated[
    bool,
    typer.Option("--regenerate", "--force", help="With --generate: generate done cards again."),
]
PruneOpt = Annotated[
    bool, typer.Option("--prune-generated", help="Remove the generated examples; taught ones stay.")
]
GenerateTemperatureOpt = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        metavar="T",
        help="With --generate: the sampling temperature asked for, 0 (greedy) to 2 "
        f"[default: {GENERATE_TEMPERATURE:g}].",
    ),
]
OnlyOpt = Annotated[
    list[str] | None,
    typer.Option("--card", help="With --generate or --prune-generated: only this card."),
]


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
    generate: GenerateOpt = False,
    per_card: PerCardOpt = DEFAULT_PER_CARD,
    regenerate: RegenerateOpt = False,
    prune_generated: PruneOpt = False,
    temperature: GenerateTemperatureOpt = None,
    card: OnlyOpt = None,
    cards: CardsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Teach the router: tasks into the cards folder's learned.jsonl, the threshold derived again.

    Without FILE or --from-runs, only the threshold is derived again from learned.jsonl.
    """
    settings = settings_from(cards=cards, temperature=temperature)
    if generate or prune_generated:
        _generated(settings, generate, per_card, regenerate, card or [], json_out)
        return

    taught = learn_from(settings, file, from_runs)
    emit(json_out, taught.to_json(), lambda: typer.echo("\n".join(taught_lines(taught))))


def _generated(
    settings: Settings, generate: bool, per_card: int, force: bool, only: list[str], json_out: bool
) -> None:
    """Run --generate or --prune-generated; exit 1 when some card's answer was unusable."""
    if not generate:
        removed, report = prune_generated(settings, only)
        head = f"pruned {removed} generated example(s) from {printable(str(report.path))}"
        document = {"removed": removed, "report": report.to_json()}
        emit(
            json_out,
            document,
            lambda: typer.echo(f"{head}\n  threshold: {printable(report.threshold_note)}"),
        )
        return
    outcome = run_generate(
        settings, per_card, only, force, progress=lambda line: typer.echo(printable(line), err=True)
    )
    emit(json_out, outcome.to_json(), lambda: typer.echo("\n".join(generated_lines(outcome))))
    if outcome.failed:
        raise typer.Exit(1)


def generated_lines(outcome: Generated) -> list[str]:
    """Say what --generate wrote, what failed, and what it cost."""
    counts = {s: sum(c.status == s for c in outcome.cards) for s in ("generated", "skipped")}
    written = sum(c.written for c in outcome.cards)
    lines = [
        f"{outcome.status}: {printable(str(outcome.path))}: {written} example(s) for "
        f"{counts['generated']} card(s), {counts['skipped']} card(s) already done, "
        f"{len(outcome.failed)} failed, {outcome.overlapping} dropped as closer to another card"
    ]
    lines += [f"  failed {printable(c.card)}: {printable(c.problem)}" for c in outcome.cards
              if c.status == "failed"]  # fmt: skip
    lines.append(
        f"  cost: {outcome.requests} request(s) to {printable(outcome.model)} at temperature "
        f"{outcome.temperature:g}, {outcome.tokens_in} tokens in, {outcome.tokens_out} out, "
        f"{outcome.seconds:.1f} s"
    )
    if outcome.report is not None:
        lines.append(f"  threshold: {printable(outcome.report.threshold_note)}")
    return lines


def taught_lines(taught: Taught) -> list[str]:
    """Say what `tiny learn` did: the file, the counts, where they came from, the threshold."""
    r = taught.report
    counts = (
        f"{r.added} added, {r.moved} moved to another label, {r.known} already known, "
        f"{r.dropped} dropped by the cap"
    )
    head = "learned into" if r.status == "learned" else "unchanged:"
    lines = [f"{head} {printable(str(r.path))}: {counts}"]
    sources = []
    if taught.file is not None:
        sources.append(f"{taught.from_file} from {printable(str(taught.file))}")
    if taught.from_runs is not None:
        sources.append(f"{taught.from_runs} correction(s) from the run log")
    if sources:
        lines.append(f"  taught: {', '.join(sources)}")
    for c in taught.skipped:
        lines.append(
            f"  skipped run {c.run_id}: no card {printable(c.card or '')!r} in the cards folder "
            "any more; correct the run again (`tiny runs correct`)"
        )
    lines.append(
        f"  the file holds {r.examples} example(s) for cards, {r.out_of_scope} out of scope"
    )
    lines.append(f"  threshold: {printable(r.threshold_note)}")
    return lines
