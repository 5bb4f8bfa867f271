"""`tiny bench`: the task file as tiny agents and as one all-tools agent, side by side;
`tiny bench --scale`, tool selection as the tool count grows, table and page; and
`tiny bench --replay FILE` alone, run again with the options its recording holds."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from contextlib import nullcontext
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

import typer
from rich.console import Console

from tiny_cli.bench import (
    ARMS,
    DEFAULT_TASKS_FILE,
    Arm,
    BenchOptions,
    BenchReport,
    bench_from_settings,
)
from tiny_cli.bench.bench_html import write_bench_html
from tiny_cli.bench.gate import below, check_gates, parse_gates
from tiny_cli.bench.html import require_charts, write_html
from tiny_cli.bench.making import Place, Prompt, changed_since, recorded_options
from tiny_cli.bench.run import MAX_CONCURRENCY, MAX_REPEAT
from tiny_cli.bench.scale import (
    DEFAULT_CONTEXT_TOKENS,
    DEFAULT_HYBRID_MARGIN,
    DEFAULT_IRRELEVANCE,
    DEFAULT_SAMPLE,
    DEFAULT_TOP_K,
    SCALE_ARMS,
    ScaleArm,
    ScaleOptions,
    is_selection_file,
    scale_from_settings,
)
from tiny_cli.bench.scale_report import markdown_table
from tiny_cli.bench.tasks import default_tasks_path, pages_folder
from tiny_cli.bench.universe import CATALOGUE, size_label
from tiny_cli.cards.index import CARD_SUFFIXES
from tiny_cli.cli import render_bench
from tiny_cli.cli.common import (
    AllowHostOpt,
    BaseUrlOpt,
    BenchTemperatureOpt,
    CardsOpt,
    JsonOpt,
    LogOpt,
    ModelOpt,
    NoLogOpt,
    QuietOpt,
    RecordOpt,
    ResumeOpt,
    ToolModeOpt,
    ToolsOpt,
    WallScaleOpt,
    emit,
    parameter_source,
    wants_live,
    warn,
)
from tiny_cli.cli.live import console
from tiny_cli.cli.run import RunOptions, run_session, warn_unused
from tiny_cli.errors import ConfigError
from tiny_cli.provider.factory import recorded_temperature
from tiny_cli.provider.replay import read_header
from tiny_cli.routing.examples_file import LEARNED_FILENAME
from tiny_cli.routing.factory import build_router
from tiny_cli.secrets import scrubber
from tiny_cli.session import Session
from tiny_cli.setting_rules import check_temperature
from tiny_cli.settings import Settings
from tiny_cli.text import printable
from tiny_cli.tools.mcp_config import mcp_path
from tiny_cli.userfiles import check_writable, write_text
from tiny_cli.workspace import open_workspace

R = TypeVar("R")  # what a bench's run returns: its report

# what a replay that left recorded answers unasked ran differently
BENCH_UNUSED = (
    "fewer runs (other --repeat, --arm, sizes or sample) or shorter ones (a turn this tiny no "
    "longer takes, such as a repair) than when it was recorded"
)
BENCH_TEMPERATURE = 0.0  # greedy, as BFCL asks: the arms differ by what they offer, not by luck

TasksOpt = Annotated[
    Path | None,
    typer.Option(
        "--tasks", help="Task file, YAML list or JSONL [default: examples/bench/tasks.yaml]."
    ),
]
ArmOpt = Annotated[str, typer.Option("--arm", help="tiny, all-tools or both.")]
RepeatOpt = Annotated[
    int, typer.Option("--repeat", min=1, max=MAX_REPEAT, help="Runs per task and arm.")
]
ConcurrencyOpt = Annotated[
    int, typer.Option("--concurrency", min=1, max=MAX_CONCURRENCY, help="Runs at the same time.")
]
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
    Place | None,
    typer.Option(
        "--expected-tools", help="first or last: where all-tools lists the expected tools."
    ),
]
PromptOpt = Annotated[
    Prompt,
    typer.Option(
        "--prompt",
        help="same: every arm asks alike; card: one-card arms use the card's own prompt.",
    ),
]
HtmlOpt = Annotated[
    Path | None,
    typer.Option("--html", help="Also write the report as one HTML page (at scale: with charts)."),
]


OUTPUT_FLAGS = ("--record", "--out", "--html")  # the files a bench writes, in that order

ScaleModeOpt = Annotated[
    bool,
    typer.Option(
        "--scale",
        help="The bench at scale: tool selection as the tool count grows, on a selection "
        "task file (--tasks, JSONL); see --all-tools-sizes and the options after it.",
    ),
]


def bench(
    ctx: typer.Context,
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
    allow_hosts: AllowHostOpt = None,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    tool_mode: ToolModeOpt = None,
    wall_scale: WallScaleOpt = None,
    temperature: BenchTemperatureOpt = None,
    markdown: MarkdownOpt = False,
    quiet: QuietOpt = False,
    no_log: NoLogOpt = False,
    json_out: JsonOpt = False,
    scale: ScaleModeOpt = False,
    sizes: SizesOpt = None,
    sample: SampleOpt = DEFAULT_SAMPLE,
    irrelevance: IrrelevanceOpt = DEFAULT_IRRELEVANCE,
    seed: SeedOpt = 0,
    top_k: TopKOpt = DEFAULT_TOP_K,
    hybrid_margin: MarginOpt = DEFAULT_HYBRID_MARGIN,
    context_tokens: ContextOpt = DEFAULT_CONTEXT_TOKENS,
    html: HtmlOpt = None,
    expected_tools: PlaceOpt = None,
    prompt: PromptOpt = "same",
    fail_under: FailUnderOpt = None,
    upgrade: UpgradeOpt = False,
    log: LogOpt = False,
) -> None:
    """Run the task file as tiny agents and as one all-tools agent; compare them side by side."""
    options = RunOptions(cards=cards, tools=tools, base_url=base_url, model=model,
                         allow_hosts=allow_hosts, tool_mode=tool_mode, wall_scale=wall_scale,
                         temperature=temperature, record=record, replay=replay, no_log=no_log,
                         log=log)  # fmt: skip
    flags = BenchFlags(options, tasks=tasks, arm=arm, repeat=repeat, concurrency=concurrency,
                       resume=resume or (), out=out, html=html, markdown=markdown, quiet=quiet,
                       json_out=json_out, fail_under=fail_under or (), upgrade=upgrade)  # fmt: skip
    at_scale = ScaleFlags(sizes=sizes, sample=sample, irrelevance=irrelevance, seed=seed,
                          top_k=top_k, hybrid_margin=hybrid_margin, context_tokens=context_tokens,
                          expected_tools=expected_tools, prompt=prompt)  # fmt: skip
    _bench(ctx, flags, at_scale if at_scale_asked(scale, tasks, sizes) else None)


@dataclass(frozen=True)
class BenchFlags:
    """The options both benches read: the run's, the task file and arms, the outputs."""

    options: RunOptions
    tasks: Path | None
    arm: str
    repeat: int
    concurrency: int
    resume: Sequence[Path]
    out: Path | None
    html: Path | None
    markdown: bool
    quiet: bool
    json_out: bool
    fail_under: Sequence[str]
    upgrade: bool  # --upgrade: rewrite the --replay recording with its making


def _bench(ctx: typer.Context, flags: BenchFlags, scale: ScaleFlags | None) -> None:
    """Run the example bench, or the bench at scale when `scale` holds its options."""
    o, tasks = flags.options, _tasks_file(flags.tasks)
    outputs = (o.record, flags.out, flags.html)
    try:
        _refuse_header(ctx)
        _refuse_given(ctx, *(ONLY_AT_SCALE if scale is None else ONLY_PLAIN))
        settings = asked_at(o.settings(), o.replay, flags.resume)
        read = (*_task_files(tasks), *(o.replay or ()), *flags.resume, *_setup_files(settings))
        _outputs_apart(inputs=read, outputs=dict(zip(OUTPUT_FLAGS, outputs, strict=True)))
        _check_options(scale, flags.arm, flags.fail_under, outputs)
        _warn_changed(o.replay, tasks or DEFAULT_TASKS_FILE, settings, flags.upgrade)
        if scale is None:
            return _example_bench(settings, flags)
        if flags.tasks is None:
            raise typer.BadParameter("the bench at scale needs a selection task file: "
                                     "--tasks FILE", param_hint="--scale")  # fmt: skip
        return scale_bench(settings, flags.tasks, flags, scale)
    except typer.BadParameter as error:
        raise _blamed(ctx, error) from None


def _refuse_given(ctx: typer.Context, names: tuple[str, ...], why: str) -> None:
    """Refuse a flag of `names` given to a bench that does not read it (it would change
    nothing, unsaid)."""
    for param in ctx.command.params:
        if param.name in names and parameter_source(ctx, str(param.name)) == "COMMANDLINE":
            raise typer.BadParameter(why, param_hint=param.opts[0])


def asked_at(
    settings: Settings, replay: Sequence[Path] | None, resume: Sequence[Path] = ()
) -> Settings:
    """The bench asks greedy (BENCH_TEMPERATURE) unless --temperature, the replayed recording
    or the resumed one says otherwise: sampling adds noise to every arm it compares."""
    if replay or settings.temperature is not None:
        return settings  # a replay sends what its recording sent (RunOptions.settings)
    # a resumed recording's answers match only at its own temperature (none sent: the server's)
    asked = recorded_temperature(read_header(resume[0]), resume[0]) if resume else BENCH_TEMPERATURE
    return replace(settings, temperature=asked)


def at_scale_asked(scale: bool, tasks: Path | None, sizes: str | None) -> bool:
    """Whether --scale (or --all-tools-sizes) asks for the bench at scale; the old spelling,
    a selection task file alone, still does, with a note naming the new one."""
    if scale or sizes is not None:
        return True
    if tasks is None or not is_selection_file(tasks):  # reads the file: a bad path stops here
        return False
    shown = printable(str(tasks))
    warn(f"{shown} runs at scale: spell it `tiny bench --scale --tasks {shown}` (a selection "
         "task file without --scale is the old spelling, to be dropped)")  # fmt: skip
    return True


def _example_bench(settings: Settings, f: BenchFlags) -> None:
    """Run the example bench (tasks with Digest expectations) and show it: a progress bar on
    stderr where a person watches, the live view too when one run is at a time."""
    options = BenchOptions(_arms(f.arm), f.repeat, f.concurrency)
    watched = wants_live(f.quiet, f.json_out)

    def run(session: Session) -> BenchReport:
        shown = render_bench.BenchProgress(console(stderr=True)) if watched else nullcontext()
        with shown as progress:
            return bench_from_settings(
                settings, session, lambda ws: build_router(ws.settings, ws.cards.values()),
                tasks_path=f.tasks, options=options, on_progress=progress,
            )  # fmt: skip

    report = _recorded(settings, f, f.concurrency == 1 and watched, run)
    _publish(f, report, write_bench_html, render_bench.bench_markdown, render_bench.bench)


def _recorded(settings: Settings, f: BenchFlags, live: bool, run: Callable[[Session], R]) -> R:
    """Run a bench in its session; warn of answers the replay left and of an --upgrade."""
    o = f.options
    with run_session(
        settings, "bench", o, live=live, resume=f.resume, upgrade=f.upgrade, resumable=True
    ) as session:
        report = run(session)
        warn_unused(session.exchanges, BENCH_UNUSED)
    if f.upgrade and o.replay:
        warn(f"upgraded {o.replay[0]}: its header holds its options, digests and routing now")
    return report


def _publish(
    f: BenchFlags,
    report: Any,
    write_page: Callable[[Any, Path], None],
    markdown: Callable[[Any], str],
    draw: Callable[[Console, Any], None],
) -> None:
    """Write --out and --html, print the report (JSON, Markdown or tables); exit 1, a line each
    on stderr, where it falls below a --fail-under bar."""
    document = scrubber().for_caller().document(report.to_json())  # stdout: the key redacted
    if f.out is not None:  # whole or not at all, never over a folder, a FIFO or a link
        f.out.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(scrubber().document(document), ensure_ascii=False, indent=2)
        write_text(f.out, text + "\n")
    if f.html is not None:  # scrubbed of secrets like the JSON report
        write_page(scrubber().document(report.to_json()), f.html)
    if f.markdown and not f.json_out:
        typer.echo(markdown(report), nl=False)
    else:
        emit(f.json_out, document, lambda: draw(console(), report))
    misses = below(document, parse_gates(f.fail_under)) if f.fail_under else []
    for line in misses:
        typer.echo(f"tiny: below --fail-under: {line}", err=True)
    if misses:
        raise typer.Exit(1)


def _check_options(
    scale: ScaleFlags | None, arm: str, specs: Sequence[str], targets: tuple[Path | None, ...]
) -> None:
    """Check what a bench uses only at its end (bars, files to write) before any model time."""
    arms = scale_arms(arm) if scale else _arms(arm)
    unmeasured = {}  # the metrics the options leave without a figure, and the option that says so
    if scale is not None and scale.irrelevance == 0:
        unmeasured = {"irrelevance": "--irrelevance 0 asks no irrelevance question"}
    check_gates(parse_gates(specs), "selection" if scale else "bench", arms, unmeasured)
    for path in (p for p in targets if p is not None):
        check_writable(path)
    if scale and targets[-1] is not None:  # the page at scale draws charts: matplotlib
        require_charts()


def _arms(arm: str) -> tuple[Arm, ...]:
    """Return the arms --arm names: one of them, or both."""
    if arm not in (*ARMS, "both"):
        raise typer.BadParameter(f"{arm!r} is not tiny, all-tools or both", param_hint="--arm")
    return ARMS if arm == "both" else tuple(a for a in ARMS if a == arm)


def _tasks_file(tasks: Path | None) -> Path | None:
    """The task file the bench reads: --tasks, else the default where the bench finds it."""
    if tasks is not None:
        return tasks
    try:
        return default_tasks_path(Path.cwd())
    except ConfigError:  # no default anywhere: the bench says so where it reads it
        return None


def _task_files(tasks: Path | None) -> list[Path]:
    """The task file and the pages its `{site}` serves: what the bench reads of its tasks."""
    if tasks is None:
        return []
    pages = pages_folder(tasks)
    return [tasks, *(p for p in pages.rglob("*") if p.is_file())] if pages else [tasks]


def _setup_files(settings: Settings) -> list[Path]:
    """The files the bench reads to set up its agents: cards, their learned examples, the MCP
    servers' file, the tool modules and the project file (a report written over one would
    end the project)."""
    cards = settings.cards_dir  # a folder of cards, or one card file (`--cards x.yaml`)
    found = [p for p in cards.glob("*") if p.suffix in CARD_SUFFIXES] if cards.is_dir() else [cards]
    specs = (s.strip() for s in (settings.tools_spec or "").split(","))
    modules = [Path(s) for s in specs if s.endswith(".py")]  # a dotted name is no file here
    named = (
        cards / LEARNED_FILENAME,
        mcp_path(cards, settings.mcp_file, settings.origin("mcp_file")),
        settings.project_file,
    )
    return found + modules + [p for p in named if p is not None]


def _outputs_apart(inputs: Sequence[Path], outputs: dict[str, Path | None]) -> None:
    """Refuse to write over a file this command reads, or to write one file twice."""
    read = {p.resolve() for p in inputs}
    written: dict[Path, str] = {}
    for flag, path in outputs.items():
        if path is None:
            continue
        key, shown = path.resolve(), printable(str(path))
        if key in read:
            raise ConfigError(f"{shown}: used as input and output; name another file to write")
        if key in written:
            raise ConfigError(f"{shown}: {written[key]} and {flag} name the same file; "
                              "name another file for one of them")  # fmt: skip
        written[key] = flag


# --- the bench at scale ---------------------------------------------------------------------


@dataclass(frozen=True)
class ScaleFlags:
    """The options only the bench at scale reads, as given."""

    sizes: str | None
    sample: int
    irrelevance: int
    seed: int
    top_k: int
    hybrid_margin: float
    context_tokens: int
    expected_tools: Place | None  # typer checks the choice
    prompt: Prompt


# the flags only one bench reads, and what giving one to the other says (--all-tools-sizes
# names the bench at scale)
ONLY_AT_SCALE = (
    tuple(f.name for f in fields(ScaleFlags) if f.name != "sizes"),
    "only the bench at scale reads it: add --scale (with a selection task file)",
)
ONLY_PLAIN = (
    ("repeat",),
    "only the plain bench reads it: the bench at scale runs each task once per arm and size",
)


def scale_bench(settings: Settings, tasks: Path, bench: BenchFlags, flags: ScaleFlags) -> None:
    """Run the bench at scale and show it: table and chart, Markdown, JSON; --html, --out."""
    options = scale_options(flags, bench.arm, bench.concurrency, settings.wall_scale)
    report = _recorded(
        settings, bench, False, lambda s: scale_from_settings(settings, s, tasks, options)
    )
    _publish(bench, report, write_html, markdown_table, render_bench.scale)


def scale_options(flags: ScaleFlags, arm: str, concurrency: int, wall_scale: float) -> ScaleOptions:
    """Turn the flags into ScaleOptions; a bad size or arm is a usage error naming it."""
    listed = flags.sizes  # given empty (`--sizes ""`), it is refused, not read as the default
    # not given: the default sizes, as many as the catalogue holds (ScaleOptions.sizes)
    sizes = None if listed is None else tuple(_size(s) for s in listed.split(","))
    _once([size_label(s) for s in sizes or ()], "--all-tools-sizes")
    if not math.isfinite(flags.hybrid_margin):  # nan: hybrid could never offer one card
        raise typer.BadParameter(
            f"{flags.hybrid_margin}: must be a finite number", param_hint="--hybrid-margin"
        )
    arms = cast("tuple[ScaleArm, ...]", scale_arms(arm))
    given = {**asdict(flags), "sizes": sizes}  # ScaleFlags' options are ScaleOptions' own
    return ScaleOptions(**given, arms=arms, concurrency=concurrency, wall_scale=wall_scale)


def scale_arms(arm: str) -> tuple[str, ...]:
    """The arms `--arm` names at scale (both: every arm); an unknown one is a usage error."""
    arms = SCALE_ARMS if arm == "both" else tuple(a.strip() for a in arm.split(","))
    for name in arms:
        if name not in SCALE_ARMS:
            raise typer.BadParameter(
                f"{name!r} is not one of {', '.join(SCALE_ARMS)}", param_hint="--arm"
            )
    _once(arms, "--arm")
    return arms


def _once(values: Sequence[str], flag: str) -> None:
    """A usage error when a value is given twice: its runs would count twice in one row."""
    twice = [v for i, v in enumerate(values) if v in values[:i]]
    if twice:
        raise typer.BadParameter(f"'{twice[0]}' is given twice; give each once", param_hint=flag)


def _size(text: str) -> int:
    text = text.strip()
    if text == "all":
        return CATALOGUE
    if not text.isdigit() or int(text) < 1:
        raise typer.BadParameter(
            f"{text!r} is not a tool count or 'all'", param_hint="--all-tools-sizes"
        )
    return int(text)


# --- --replay FILE alone: the recording's own options, --upgrade ---------------------------
#
# A recording made by this tiny holds the bench's options in its header (tiny_cli.bench.making).
# The `--replay` option is eager: it reads that header first and makes those options the
# defaults of the command, so a flag given on the command line still wins.

# the header names an option as its flag reads; the command's parameter is named otherwise
HEADER_PARAMETERS = {"all_tools_sizes": "sizes"}
HEADER_REFUSED = "tiny.header_refused"  # ctx.meta: the header's values the command would refuse


def _recorded_defaults(ctx: typer.Context, value: list[Path] | None) -> list[Path] | None:
    """Make the first recording's options the command's defaults (flags given still win).

    A value the command would refuse is kept out, and refused by `_refuse_header` unless a
    flag given replaces it: the header is to blame, not the flag the user never gave.
    """
    if value:
        options = recorded_options(read_header(value[0]), value[0])
        named = {HEADER_PARAMETERS.get(k, k): v for k, v in options.items()}
        refused = {n: why for n, v in named.items() if (why := _refused(ctx, value[0], n, v))}
        ctx.meta[HEADER_REFUSED] = refused
        kept = {k: v for k, v in named.items() if k not in refused}
        ctx.default_map = {**(ctx.default_map or {}), **kept}
    return value


def _refuse_header(ctx: typer.Context) -> None:
    """Raise the first bad value of the replayed header that no flag given replaced."""
    for name, line in ctx.meta.get(HEADER_REFUSED, {}).items():
        if parameter_source(ctx, name) != "COMMANDLINE":
            raise ConfigError(line)


def _blamed(ctx: typer.Context, error: typer.BadParameter) -> Exception:
    """A bad value the recording's header gave is the header's: name its field, not the flag."""
    replay = ctx.params.get("replay")
    for param in ctx.command.params:
        gave = parameter_source(ctx, param.name) if param.name else None
        if error.param_hint in param.opts and gave == "DEFAULT_MAP" and replay:
            return ConfigError(f"{_where(replay[0], str(param.name))}: {error.message}")
    return error


def _refused(ctx: typer.Context, path: Path, name: str, value: object) -> str | None:
    """The line refusing a header's value as the command would (its option's range or
    choice, the settings' temperature, a cards path that is there); None when it is good."""
    where = _where(path, name)
    param = next((p for p in ctx.command.params if p.name == name), None)
    try:
        if param is not None:
            param.process_value(ctx, value)
        if name == "temperature":
            check_temperature(where, value)
    except typer.BadParameter as error:
        return f"{where}: {error.message}"
    except ConfigError as error:
        return str(error)
    if name == "cards" and not Path(str(value)).exists():
        return f"{where}: no cards folder or card file {printable(str(value))}"
    return None


def _where(path: Path, name: str) -> str:
    """The header field that gave the parameter `name`, with its file."""
    field = {v: k for k, v in HEADER_PARAMETERS.items()}.get(name, name)
    return f"{printable(str(path))}: header bench.{field}"


BenchReplayOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--replay",
        help="Answer from a --record FILE instead of the model server; repeatable "
        "(recordings of one model). A recording holds its options: FILE alone replays it.",
        callback=_recorded_defaults,
        is_eager=True,
    ),
]
UpgradeOpt = Annotated[
    bool,
    typer.Option(
        "--upgrade",
        help="With --replay of an older recording and its options: rewrite it in place with "
        "its options, digests and routing decisions in the header (answers unchanged).",
    ),
]


def _warn_changed(
    replay: Sequence[Path] | None, tasks: Path, settings: Settings, upgrade: bool
) -> None:
    """Warn in one line of the tasks, cards or learned examples changed since the recording;
    --upgrade needs a --replay."""
    if upgrade and not replay:
        raise ConfigError("--upgrade rewrites a recording: name it with --replay")
    if not replay or not tasks.is_file():
        return
    recorded = read_header(replay[0]).get("digests")
    cards = recorded.get("cards", {}) if isinstance(recorded, dict) else {}
    if not isinstance(cards, dict) or not all(isinstance(v, str) for v in cards.values()):
        raise ConfigError(f"{replay[0]}: the header's digests.cards must map card files to digests")
    line = None if recorded is None else changed_since(recorded, tasks, open_workspace(settings))
    if line is not None:
        warn(line)
