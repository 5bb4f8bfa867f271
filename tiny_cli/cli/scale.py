"""`tiny bench --all-tools-sizes …`: tool selection as the tool count grows, table and page."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, TypeGuard, cast

import typer

from tiny_cli.cli.common import console, emit, run_session, warn_unused
from tiny_cli.secrets import scrubber

if TYPE_CHECKING:
    from tiny_cli.bench.scale import ScaleOptions
    from tiny_cli.bench.scale_report import ScaleReport
    from tiny_cli.settings import Settings

SizesOpt = Annotated[
    str | None,
    typer.Option(
        "--all-tools-sizes",
        "--sizes",
        help="Tool counts to compare at, e.g. 10,30,100,all (a selection task file: the bench "
        "at scale; all = every card). [default for a selection file: 10,30,100,all]",
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
    """The bench-at-scale options of `tiny bench`, as given."""

    sizes: str | None
    arm: str
    sample: int
    irrelevance: int
    seed: int
    top_k: int
    hybrid_margin: float
    context_tokens: int
    concurrency: int
    html: Path | None
    record: Path | None
    replay: list[Path] | None
    out: Path | None
    log: bool
    markdown: bool
    json_out: bool
    expected_tools: str | None = None
    prompt: str = "same"
    resume: list[Path] | None = None
    fail_under: tuple[str, ...] = ()
    upgrade: bool = False
    log_replay: bool = False


def wants_scale(tasks: Path | None, sizes: str | None) -> TypeGuard[Path]:
    """Whether `tiny bench` runs at scale: sizes were given, or the task file is a selection one."""
    from tiny_cli.bench.scale import is_selection_file

    return tasks is not None and (sizes is not None or is_selection_file(tasks))


def scale_bench(settings: Settings, tasks: Path, flags: ScaleFlags) -> None:
    """Run the bench at scale and show it: table and chart, Markdown, JSON; --html, --out."""
    from tiny_cli.bench.scale import scale_from_settings
    from tiny_cli.bench.scale_report import markdown_table
    from tiny_cli.cli.bench import upgraded, write_report  # bench's module imports this one

    options = scale_options(flags, settings.wall_scale)
    with run_session(
        settings,
        "bench",
        record=flags.record,
        replay=flags.replay,
        resume=flags.resume or (),
        no_log=not flags.log,
        live=False,
        log_replay=flags.log_replay,
        upgrade=flags.upgrade,
    ) as s:
        report = scale_from_settings(settings, s, tasks, options)
        warn_unused(s.exchanges)
    upgraded(flags.upgrade, flags.replay)
    document = report.to_json()
    if flags.out is not None:
        write_report(flags.out, document)
    if flags.html is not None:
        _write_html(report, flags.html)
    if flags.markdown and not flags.json_out:
        typer.echo(markdown_table(report), nl=False)
    else:
        emit(flags.json_out, document, lambda: _show_scale(report))
    fail_below(document, flags.fail_under)


def fail_below(document: dict, specs: Sequence[str]) -> None:
    """Exit 1, a line each on stderr, where the report falls below a --fail-under bar."""
    from tiny_cli.bench.gate import below, parse_gates

    misses = below(document, parse_gates(specs)) if specs else []
    for line in misses:
        typer.echo(f"tiny: below --fail-under: {line}", err=True)
    if misses:
        raise typer.Exit(1)


def _show_scale(report: ScaleReport) -> None:
    """Print the tables and the chart (rich is imported for a person's output only)."""
    from tiny_cli.cli.render_scale import scale as render_scale

    render_scale(console(), report)


def scale_options(flags: ScaleFlags, wall_scale: float) -> ScaleOptions:
    """Turn the flags into ScaleOptions; a bad size or arm is a usage error naming it."""
    from tiny_cli.bench.scale import DEFAULT_SIZES, ScaleArm, ScaleOptions

    sizes = tuple(_size(s) for s in flags.sizes.split(",")) if flags.sizes else DEFAULT_SIZES
    arms = scale_arms(flags.arm)
    return ScaleOptions(
        sizes,
        cast("tuple[ScaleArm, ...]", arms),
        flags.sample,
        flags.irrelevance,
        flags.seed,
        flags.top_k,
        flags.hybrid_margin,
        flags.context_tokens,
        flags.concurrency,
        wall_scale,
        _place(flags.expected_tools),
        _prompt(flags.prompt),
    )


def scale_arms(arm: str) -> tuple[str, ...]:
    """The arms `--arm` names at scale (both: every arm); an unknown one is a usage error."""
    from tiny_cli.bench.scale import SCALE_ARMS

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
    from tiny_cli.bench.html import write_html

    write_html(scrubber().document(report.to_json()), path)
