"""`tiny bench`: the task file as tiny agents and as one all-tools agent, side by side."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tiny_cli.cli.common import (
    console,
    emit,
    model_settings,
    picked,
    run_session,
    wants_live,
    warn,
    warn_unused,
)
from tiny_cli.cli.options import (
    AllowHostOpt,
    BaseUrlOpt,
    CardsOpt,
    JsonOpt,
    ModelOpt,
    NoLogOpt,
    QuietOpt,
    RecordOpt,
    ResumeOpt,
    ToolModeOpt,
    ToolsOpt,
    WallScaleOpt,
)
from tiny_cli.cli.replay_opts import BenchReplayOpt, LogOpt, UpgradeOpt, warn_changed
from tiny_cli.cli.scale import (
    ContextOpt,
    HtmlOpt,
    IrrelevanceOpt,
    MarginOpt,
    PlaceOpt,
    PromptOpt,
    SampleOpt,
    ScaleFlags,
    SeedOpt,
    SizesOpt,
    TopKOpt,
    fail_below,
    scale_arms,
    scale_bench,
    wants_scale,
)
from tiny_cli.errors import ConfigError

if TYPE_CHECKING:
    from tiny_cli.bench import Arm, BenchReport

TasksOpt = Annotated[
    Path | None,
    typer.Option(
        "--tasks", help="Task file, YAML list or JSONL [default: examples/bench/tasks.yaml]."
    ),
]
ArmOpt = Annotated[str, typer.Option("--arm", help="tiny, all-tools or both.")]
RepeatOpt = Annotated[int, typer.Option("--repeat", min=1, help="Runs per task and arm.")]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", min=1, help="Runs at the same time.")]
OutOpt = Annotated[Path | None, typer.Option("--out", help="Also write the JSON report to FILE.")]
FailUnderOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--fail-under",
        metavar="ARM.METRIC=SHARE",
        help="Exit 1 when a metric falls below SHARE (0-1), e.g. tiny.right=0.8 or, at scale, "
        "tiny.right_call=0.5 (every size); repeatable. Metrics: right, ok, routing; at scale "
        "right_call, right_tool, irrelevance, routing.",
    ),
]
MarkdownOpt = Annotated[
    bool, typer.Option("--markdown", help="Print the comparison as a Markdown table.")
]


def bench(
    tasks: TasksOpt = None,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    arm: ArmOpt = "both",
    repeat: RepeatOpt = 1,
    concurrency: ConcurrencyOpt = 1,
    out: OutOpt = None,
    record: RecordOpt = None,
    replay: BenchReplayOpt = None,
    resume: ResumeOpt = None,
    allow_host: AllowHostOpt = None,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    tool_mode: ToolModeOpt = None,
    wall_scale: WallScaleOpt = None,
    markdown: MarkdownOpt = False,
    quiet: QuietOpt = False,
    no_log: NoLogOpt = False,
    json_out: JsonOpt = False,
    sizes: SizesOpt = None,
    sample: SampleOpt = 60,
    irrelevance: IrrelevanceOpt = 30,
    seed: SeedOpt = 0,
    top_k: TopKOpt = 3,
    hybrid_margin: MarginOpt = 1.0,
    context_tokens: ContextOpt = 32_768,
    html: HtmlOpt = None,
    expected_tools: PlaceOpt = None,
    prompt: PromptOpt = "same",
    fail_under: FailUnderOpt = None,
    upgrade: UpgradeOpt = False,
    log: LogOpt = False,
) -> None:
    """Run the task file as tiny agents and as one all-tools agent; compare them side by side."""
    from tiny_cli.bench import DEFAULT_TASKS_FILE

    _outputs_apart(inputs=(tasks or DEFAULT_TASKS_FILE, *(replay or ()), *(resume or ())),
                   outputs=(record, out, html))  # fmt: skip
    scale = _check_options(tasks, sizes, arm, fail_under or (), (record, out, html))
    settings = model_settings(cards, tools, base_url, model, record, replay, allow_host,
                              tool_mode, wall_scale)  # fmt: skip
    _changed(replay, tasks or DEFAULT_TASKS_FILE, settings, upgrade)
    if scale and tasks is not None:  # (wants_scale: never without a task file)
        flags = ScaleFlags(sizes, arm, sample, irrelevance, seed, top_k, hybrid_margin,
                           context_tokens, concurrency, html, record, replay, out, not no_log,
                           markdown, json_out, expected_tools, prompt, resume,
                           tuple(fail_under or ()), upgrade, log)  # fmt: skip
        return scale_bench(settings, tasks, flags)
    return _example_bench(settings, ExampleFlags.pick(locals()))


@dataclass(frozen=True)
class ExampleFlags:
    """The options of the example bench (not at scale), as given."""

    tasks: Path | None
    arm: str
    repeat: int
    concurrency: int
    record: Path | None
    replay: list[Path] | None
    resume: list[Path] | None
    quiet: bool
    no_log: bool
    json_out: bool
    out: Path | None
    markdown: bool
    fail_under: list[str] | None
    html: Path | None
    upgrade: bool
    log: bool

    @classmethod
    def pick(cls, options: dict[str, Any]) -> ExampleFlags:
        """Take the flags from the command's options (its `locals()`)."""
        return picked(cls, options)


def _example_bench(settings: Any, f: ExampleFlags) -> None:
    """Run the example bench (tasks with Digest expectations) and show it."""
    from tiny_cli.bench import BenchOptions

    options = BenchOptions(_arms(f.arm), f.repeat, f.concurrency)
    live = f.concurrency == 1 and wants_live(f.quiet, f.json_out)  # one run at a time: watched
    with run_session(
        settings, "bench", record=f.record, replay=f.replay, no_log=f.no_log, live=live,
        resume=f.resume or (), log_replay=f.log, upgrade=f.upgrade,
    ) as s:  # fmt: skip
        report = _run_bench(settings, s, f.tasks, options)
        warn_unused(s.exchanges)
    if f.html is not None:
        _write_page(report, f.html)
    upgraded(f.upgrade, f.replay)
    _show_report(report, f.out, f.markdown, f.json_out)
    fail_below(report.to_json(), f.fail_under or ())


def _run_bench(settings: Any, session: Any, tasks: Path | None, options: Any) -> BenchReport:
    """Run the example bench with a progress bar on stderr."""
    from tiny_cli.bench import bench_from_settings
    from tiny_cli.cli import render
    from tiny_cli.routing.factory import build_router

    def router(ws: Any) -> Any:
        return build_router(ws.settings, ws.cards.values())

    with render.BenchProgress(console(stderr=True)) as progress:
        return bench_from_settings(
            settings, session, router, tasks_path=tasks, options=options, on_progress=progress
        )


def _changed(replay: list[Path] | None, tasks: Path, settings: Any, upgrade: bool) -> None:
    """Say in one line what changed since the recording; --upgrade needs a --replay."""
    if upgrade and not replay:
        raise ConfigError("--upgrade rewrites a recording: name it with --replay")
    line = warn_changed(replay, tasks, settings)
    if line is not None:
        warn(line)


def upgraded(upgrade: bool, replay: list[Path] | None) -> None:
    """Say which recording --upgrade rewrote."""
    if upgrade and replay:
        warn(f"upgraded {replay[0]}: its header holds its options, digests and routing now")


def _check_options(
    tasks: Path | None,
    sizes: str | None,
    arm: str,
    specs: Sequence[str],
    targets: tuple[Path | None, ...],
) -> bool:
    """Check what a bench uses only at its end (bars, files to write) before any model time.

    Returns whether this is the bench at scale (which reads the task file: a bad path stops here).
    """
    from tiny_cli.bench.gate import check_gates, parse_gates
    from tiny_cli.userfiles import check_writable

    scale = wants_scale(tasks, sizes)

    arms = scale_arms(arm) if scale else _arms(arm)
    check_gates(parse_gates(specs), "selection" if scale else "bench", arms)
    for path in (p for p in targets if p is not None):
        check_writable(path)
    if scale and targets[-1] is not None:  # the page at scale draws charts: matplotlib
        from tiny_cli.bench.html import require_charts

        require_charts()
    return scale


def _arms(arm: str) -> tuple[Arm, ...]:
    """Return the arms --arm names: one of them, or both."""
    from tiny_cli.bench import ARMS

    if arm not in (*ARMS, "both"):
        raise typer.BadParameter(f"{arm!r} is not tiny, all-tools or both", param_hint="--arm")
    return ARMS if arm == "both" else tuple(a for a in ARMS if a == arm)


def _show_report(report: BenchReport, out: Path | None, markdown: bool, json_out: bool) -> None:
    """Write the report to --out if given; print it as JSON, Markdown or tables."""
    from tiny_cli.cli import render

    document = report.to_json()
    if out is not None:
        write_report(out, document)
    if markdown and not json_out:
        typer.echo(render.bench_markdown(report), nl=False)
        return
    emit(json_out, document, lambda: render.bench(console(), report))


def _write_page(report: BenchReport, path: Path) -> None:
    """Write the example bench's HTML page, scrubbed of secrets like the JSON report."""
    from tiny_cli.bench.bench_html import write_bench_html
    from tiny_cli.secrets import scrubber

    write_bench_html(scrubber().document(report.to_json()), path)


def _outputs_apart(inputs: tuple[Path | None, ...], outputs: tuple[Path | None, ...]) -> None:
    """Refuse to write over a file this command reads, or to write one file twice."""
    read = {p.resolve(): p for p in inputs if p is not None}
    written: dict[Path, Path] = {}
    for path in (p for p in outputs if p is not None):
        key = path.resolve()
        if key in read or key in written:
            raise ConfigError(f"{path}: used as input and output; name another file to write")
        written[key] = path


def write_report(path: Path, document: Any) -> None:
    """Write the JSON report whole or not at all, scrubbed of secrets (tiny_cli.secrets)."""
    from tiny_cli.secrets import scrubber
    from tiny_cli.userfiles import write_text

    document = scrubber().document(document)  # the keys settings read: the environment's
    path.parent.mkdir(parents=True, exist_ok=True)
    # whole or not at all, and never over a folder, a FIFO or a link (tiny_cli.userfiles)
    write_text(path, json.dumps(document, ensure_ascii=False, indent=2) + "\n")
