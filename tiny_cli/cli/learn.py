"""`tiny learn`: teach the router labelled tasks and corrections; how a teaching reads.

Tasks come from people and models: every one is shown through `printable` (no terminal
control characters) and printed without markup.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tiny_cli.cli import UsageError
from tiny_cli.cli.common import CardsOpt, JsonOpt, ToolsOpt, emit, option_given, settings_from
from tiny_cli.errors import ConfigError
from tiny_cli.example_writer import (
    DEFAULT_PER_CARD,
    GENERATE_TEMPERATURE,
    MAX_PER_CARD,
    Generated,
    prune_generated,
)
from tiny_cli.example_writer import generate as run_generate
from tiny_cli.routing.examples_file import unknown_card
from tiny_cli.settings import Settings
from tiny_cli.teach import Taught, learn_from
from tiny_cli.text import printable
from tiny_cli.workspace import open_cards

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
# options only --generate reads (`--card`: --prune-generated too); elsewhere a usage error
GENERATE_ONLY = (
    ("per_card", "--per-card"),
    ("temperature", "--temperature"),
    ("regenerate", "--regenerate"),
)
OnlyOpt = Annotated[
    list[str] | None,
    typer.Option("--card", help="With --generate or --prune-generated: only this card."),
]


def learn(
    ctx: typer.Context,
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
    tools: ToolsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Teach the router: tasks into the cards folder's learned.jsonl, the threshold derived again.

    Without FILE or --from-runs, only the threshold is derived again from learned.jsonl.
    """
    _check_flags(ctx, file is not None, from_runs, generate, prune_generated)
    settings = settings_from(cards=cards, tools=tools, temperature=temperature)
    if prune_generated:
        return _prune(settings, card or [], json_out)
    if generate:
        return _generate(settings, per_card, regenerate, card or [], json_out)

    try:
        taught = learn_from(settings, file, from_runs)
    except ConfigError as exc:
        raise _located(settings, file, exc) from None
    emit(json_out, taught.to_json(), lambda: typer.echo("\n".join(taught_lines(taught))))


def _located(settings: Settings, file: Path | None, exc: ConfigError) -> ConfigError:
    """`exc` at FILE's line when it is a card the folder lacks: merge knows no line of FILE."""
    if file is None or exc.field != "card" or exc.path is not None:
        return exc  # a correction naming a card that is gone is skipped, never an error
    return unknown_card(file, set(open_cards(settings))) or exc


def _check_flags(
    ctx: typer.Context, file: bool, from_runs: bool, generate: bool, prune: bool
) -> None:
    """Refuse a combination one of whose parts would be ignored: a usage error naming them."""
    taught = [flag for flag, on in (("FILE", file), ("--from-runs", from_runs)) if on]
    modes = [flag for flag, on in (("--generate", generate), ("--prune-generated", prune)) if on]
    if len(modes) == 2:
        raise UsageError("--generate and --prune-generated: one at a time", ctx=ctx)
    if modes and taught:
        raise UsageError(
            f"{' and '.join(taught)} cannot go with {modes[0]} ({modes[0]} teaches nothing); "
            "run them as two `tiny learn` commands",
            ctx=ctx,
        )
    unused = [flag for name, flag in GENERATE_ONLY if option_given(ctx, name)]
    if unused and not generate:
        raise UsageError(f"{', '.join(unused)}: only with --generate", ctx=ctx)
    if option_given(ctx, "card") and not modes:
        raise UsageError("--card: only with --generate or --prune-generated", ctx=ctx)


def _prune(settings: Settings, only: list[str], json_out: bool) -> None:
    """--prune-generated: remove the generated examples; the threshold is derived again."""
    removed, report = prune_generated(settings, only)
    head = f"pruned {removed} generated example(s) from {printable(str(report.path))}"
    text = f"{head}\n  threshold: {printable(report.threshold_note)}"
    emit(json_out, {"removed": removed, "report": report.to_json()}, lambda: typer.echo(text))


def _generate(
    settings: Settings, per_card: int, force: bool, only: list[str], json_out: bool
) -> None:
    """--generate; exit 1 when some card's answer was unusable (a server no card can use
    stops the run: a ProviderError, exit 2)."""
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
    # as `tiny delegate` says it: a server that reports no usage is not one that cost nothing
    tokens = (
        f"{outcome.tokens_in} tokens in, {outcome.tokens_out} out"
        if outcome.tokens_in or outcome.tokens_out
        else "no model tokens reported"
    )
    lines.append(
        f"  cost: {outcome.card_requests} card request(s) (the provider's retries not counted) "
        f"to {printable(outcome.model)} at temperature {outcome.temperature:g}, {tokens}, "
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
        kept = f", {r.carried} of them kept as generated examples" if r.carried else ""
        sources.append(f"{taught.from_file} from {printable(str(taught.file))}{kept}")
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
        f"  the file holds {r.examples} taught example(s) for cards, {r.generated} generated, "
        f"{r.out_of_scope} out of scope"
    )
    lines.append(f"  threshold: {printable(r.threshold_note)}")
    return lines
