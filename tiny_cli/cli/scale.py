"""`tiny bench --scale`: tool selection as the tool count grows, table and page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, cast

import typer

from tiny_cli.bench.gate import below, parse_gates
from tiny_cli.bench.html import write_html
from tiny_cli.bench.scale import (
    DEFAULT_SIZES,
    SCALE_ARMS,
    ScaleArm,
    ScaleOptions,
    scale_from_settings,
)
from tiny_cli.bench.scale_report import ScaleReport, markdown_table
from tiny_cli.cli.common import console, emit, run_session, warn_unused
from tiny_cli.secrets import scrubber
from tiny_cli.settings import Settings

if TYPE_CHECKING:  # cli.bench imports this module
    from tiny_cli.cli.bench import BenchFlags

SizesOpt = Annotated[
    str | None,
    typer.Option(
        "--all-tools-sizes",
        "--sizes",
        help="The bench at scale's tool counts, e.g. 10,30,100,all (all = every card); "
        "given, it names the bench at scale as --scale does. [default: 10,30,100,all]",
    ),
]
SampleOpt = Annotated[int, typer.Option("--sample", min=1, help="Selection tasks drawn.")]
IrrelevanceOpt = Annotated[
    int, typer.Option("--irrelevance", min=0, help="Irrelevance questions drawn.")
]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed of the sample and the distractors.")]
TopKOpt = Annotated[int, typer.Option("--top-k", min=1, help="Cards the top-k arm offers.")]
MarginOpt = Annotated[
    float,
    typer.Option("--hybrid-margin", help="Routing margin (z) over which hybrid offers one card."),
]
ContextOpt = Annotated[
    int,
    typer.Option(
        "--context-tokens", min=1, help="The model's context; a larger prompt does not fit."
    ),
]
PlaceOpt = Annotated[
    Literal["first", "last"] | None,
    typer.Option(
        "--expected-tools", help="first or last: where all-tools lists the expected tools."
    ),
]
PromptOpt = Annotated[
    Literal["same", "card"],
    typer.Option(
        "--prompt",
        help="same: every arm asks alike; card: one-card arms use the card's own prompt.",
    ),
]
HtmlOpt = Annotated[
    Path | None,
    typer.Option("--html", help="Also write the report as one HTML page (at scale: with charts)."),
]


@dataclass(frozen=True)
class ScaleFlags:
    """The options only the bench at scale reads, as given (defaults: the options' own)."""

    sizes: str | None = None
    sample: int = 60
    irrelevance: int = 30
    seed: int = 0
    top_k: int = 3
    hybrid_margin: float = 1.0
    context_tokens: int = 32_768
    expected_tools: str | None = None
    prompt: str = "same"


def scale_bench(settings: Settings, tasks: Path, bench: BenchFlags, flags: ScaleFlags) -> None:
    """Run the bench at scale and show it: table and chart, Markdown, JSON; --html, --out."""
    from tiny_cli.cli.bench import upgraded, write_report  # bench's module imports this one

    options = scale_options(flags, bench.arm, bench.concurrency, settings.wall_scale)
    run = bench.options
    with run_session(
        settings,
        "bench",
        record=run.record,
        replay=run.replay,
        resume=bench.resume,
        no_log=run.no_log,
        live=False,
        log_replay=run.log,
        upgrade=bench.upgrade,
    ) as s:
        report = scale_from_settings(settings, s, tasks, options)
        warn_unused(s.exchanges)
    upgraded(bench.upgrade, run.replay)
    document = report.to_json()
    if bench.out is not None:
        write_report(bench.out, document)
    if bench.html is not None:
        _write_html(report, bench.html)
    if bench.markdown and not bench.json_out:
        typer.echo(markdown_table(report), nl=False)
    else:
        emit(bench.json_out, document, lambda: _show_scale(report))
    fail_below(document, bench.fail_under)


def fail_below(document: dict, specs: Sequence[str]) -> None:
    """Exit 1, a line each on stderr, where the report falls below a --fail-under bar."""
    misses = below(document, parse_gates(specs)) if specs else []
    for line in misses:
        typer.echo(f"tiny: below --fail-under: {line}", err=True)
    if misses:
        raise typer.Exit(1)


def _show_scale(report: ScaleReport) -> None:
    """Print the tables and the chart."""
    from tiny_cli.cli.render_bench import scale as render_scale  # rich: a person's output

    render_scale(console(), report)


def scale_options(flags: ScaleFlags, arm: str, concurrency: int, wall_scale: float) -> ScaleOptions:
    """Turn the flags into ScaleOptions; a bad size or arm is a usage error naming it."""
    sizes = tuple(_size(s) for s in flags.sizes.split(",")) if flags.sizes else DEFAULT_SIZES
    return ScaleOptions(
        sizes=sizes,
        arms=cast("tuple[ScaleArm, ...]", scale_arms(arm)),
        sample=flags.sample,
        irrelevance=flags.irrelevance,
        seed=flags.seed,
        top_k=flags.top_k,
        hybrid_margin=flags.hybrid_margin,
        context_tokens=flags.context_tokens,
        concurrency=concurrency,
        wall_scale=wall_scale,
        expected_tools=_place(flags.expected_tools),
        prompt=_prompt(flags.prompt),
    )


def scale_arms(arm: str) -> tuple[str, ...]:
    """The arms `--arm` names at scale (both: every arm); an unknown one is a usage error."""
    arms = SCALE_ARMS if arm == "both" else tuple(a.strip() for a in arm.split(","))
    for name in arms:
        if name not in SCALE_ARMS:
            raise typer.BadParameter(
                f"{name!r} is not one of {', '.join(SCALE_ARMS)}", param_hint="--arm"
            )
    return arms


def _prompt(value: str) -> Literal["same", "card"]:
    if value in ("same", "card"):
        return cast("Literal['same', 'card']", value)
    raise typer.BadParameter(f"{value!r} is not same or card", param_hint="--prompt")


def _place(value: str | None) -> Literal["first", "last"] | None:
    if value in (None, "first", "last"):
        return cast("Literal['first', 'last'] | None", value)
    raise typer.BadParameter(f"{value!r} is not first or last", param_hint="--expected-tools")


def _size(text: str) -> int:
    text = text.strip()
    if text == "all":
        return 0
    if not text.isdigit() or int(text) < 1:
        raise typer.BadParameter(
            f"{text!r} is not a tool count or 'all'", param_hint="--all-tools-sizes"
        )
    return int(text)


def _write_html(report: ScaleReport, path: Path) -> None:
    write_html(scrubber().document(report.to_json()), path)
