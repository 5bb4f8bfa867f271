"""`tiny runs` and `tiny artifacts`: the run log, its corrections, the stored tool results."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Annotated, Literal

import typer

from tiny_cli.cli import EXAMPLES, EXIT_PROBLEMS, TinyGroup, UsageError
from tiny_cli.cli.common import (
    CardsOpt,
    JsonOpt,
    ToolsOpt,
    WideOpt,
    confirm,
    draw,
    emit,
    option_given,
    settings_from,
    stdin_is_terminal,
)
from tiny_cli.runs.log import DB_NAME, Deletion, RunLog, RunQuery, parse_since
from tiny_cli.text import printable
from tiny_cli.tools.artifacts import ArtifactStore

runs_app = typer.Typer(
    cls=TinyGroup,
    help="The run log: every invoke, delegate and bench run, kept under the data directory.",
    rich_markup_mode=None,
)
artifacts_app = typer.Typer(
    cls=TinyGroup,
    help="Tool results too long for an agent's context, kept whole under a handle.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
RunCardOpt = Annotated[str | None, typer.Option("--card", help="Only this card's runs.")]
RunModelOpt = Annotated[str | None, typer.Option("--model", help="Only this model's runs.")]
SinceOpt = Annotated[
    str | None,
    typer.Option("--since", help="Only runs started since an ISO date or time, or an age: 2h, 3d."),
]
StatusOpt = Annotated[
    str | None, typer.Option("--status", help="Only runs with this status, e.g. failed.")
]
LimitOpt = Annotated[int, typer.Option("--limit", min=1, help="How many runs to list.")]
SHOWN_IDS = 10  # a confirmation names this many of the runs it would delete


@runs_app.callback(invoke_without_command=True)
def runs(
    ctx: typer.Context,
    card: RunCardOpt = None,
    status: StatusOpt = None,
    model: RunModelOpt = None,
    since: SinceOpt = None,
    limit: LimitOpt = 20,
    wide: WideOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """List the recent runs, newest first; `tiny runs show ID` shows one, `stats` sums them."""
    if ctx.invoked_subcommand is not None:
        _refuse_listing_options(ctx, ctx.invoked_subcommand)
        return
    _list(RunQuery(card, status, model, _since(since), limit), wide, json_out)


def _refuse_listing_options(ctx: typer.Context, name: str) -> None:
    """The listing's options before a subcommand would go unread: say where they belong."""
    given = [p for p in ctx.command.params if p.name and option_given(ctx, p.name)]
    if not given:
        return
    flag = given[0].opts[0]
    command = ctx.command.get_command(ctx, name) if isinstance(ctx.command, TinyGroup) else None
    if command is not None and any(flag in p.opts for p in command.params):
        where = f"put it after the subcommand: tiny runs {name} {flag} …"
    else:
        where = f"`tiny runs {name}` has no {flag} (it is the listing's: `tiny runs {flag} …`)"
    raise UsageError(f"{flag} before `{name}`: {where}", ctx=ctx)


@runs_app.command("show")
def runs_show(
    run_id: Annotated[int, typer.Argument(metavar="ID", help="The run's id (`tiny runs`).")],
    full: Annotated[
        bool, typer.Option("--full", help="Show every message whole, not shortened.")
    ] = False,
    json_out: JsonOpt = False,
) -> None:
    """Show one run: the transcript with each message's size, tool calls and ghost calls."""
    with _run_log() as log:
        record = log.run(run_id)
    emit(json_out, record.to_json(), lambda: draw("render_runs.run", record, full))


@runs_app.command("search", epilog=EXAMPLES["runs search"])
def runs_search(
    text: Annotated[
        str, typer.Argument(metavar="TEXT", help="Words each run must hold; `word*`: a prefix.")
    ],
    card: RunCardOpt = None,
    status: StatusOpt = None,
    limit: LimitOpt = 20,
    wide: WideOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Find runs by the words of their task, summary, fields, tool calls and results."""
    _list(RunQuery(card, status, limit=limit, text=text), wide, json_out)


def _list(query: RunQuery, wide: bool, json_out: bool) -> None:
    """List the runs `query` finds (the empty case names its text: `tiny runs search`)."""
    with _run_log() as log:
        found = log.runs(query)
    rows = [r.to_json() for r in found]
    emit(json_out, rows, lambda: draw("render_runs.runs", found, log.path, _matching(query), wide))


@runs_app.command("stats")
def runs_stats(
    card: RunCardOpt = None,
    model: RunModelOpt = None,
    since: SinceOpt = None,
    wide: WideOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Per card and per model: runs, statuses, ghost and repair rates, tokens, wall time."""
    query = RunQuery(card, model=model, since=_since(since), limit=None)
    with _run_log() as log:
        figures = log.stats(query)
    matching = _matching(query)
    emit(json_out, figures.to_json(), lambda: draw("render_runs.stats", figures, wide, matching))


@runs_app.command("path")
def runs_path() -> None:
    """Print where the run log is (an SQLite file: `sqlite3 "$(tiny runs path)"` opens it)."""
    path = settings_from().home / DB_NAME
    if sys.stdout.isatty():  # an ESC in TINY_HOME is shown, never obeyed
        typer.echo(printable(str(path)))
        return
    sys.stdout.flush()  # exactly the file's bytes: echo would strip what reads as a colour
    sys.stdout.buffer.write(os.fsencode(path) + b"\n")


@runs_app.command("correct")
def runs_correct(
    run_id: Annotated[int, typer.Argument(metavar="ID", help="The delegate run's id.")],
    card: Annotated[
        str | None, typer.Option("--card", metavar="ID", help="The card it should have gone to.")
    ] = None,
    abstain: Annotated[
        bool, typer.Option("--abstain", help="No card should have taken it: abstain.")
    ] = False,
    learn: Annotated[
        bool,
        typer.Option(
            "--learn/--no-learn",
            help="Teach it now (learned.jsonl beside the cards), or only record it for "
            "`tiny learn --from-runs`.",
        ),
    ] = True,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Say where a delegate run's task should have gone, and teach the router that."""
    if abstain == (card is not None):
        raise typer.BadParameter("give one of --card ID or --abstain", param_hint="--card")

    from tiny_cli.teach import correct_run  # the router (numpy), for this command only

    done = correct_run(settings_from(cards=cards, tools=tools), run_id, card, teach=learn)
    taught = done.report.outcome() if done.report is not None else None

    def human() -> None:
        from tiny_cli.cli.live import correction_line  # rich: only for a person, never --json

        typer.echo(correction_line(done.correction, taught))

    emit(json_out, done.to_json(), human)


@runs_app.command("delete", epilog=EXAMPLES["runs delete"])
def runs_delete(
    ids: Annotated[
        list[int] | None, typer.Argument(metavar="ID", help="The runs' ids (`tiny runs`).")
    ] = None,
    older_than: Annotated[
        str | None,
        typer.Option("--older-than", help="Every run started before an age (2h, 3d) or a date."),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking.")] = False,
    json_out: JsonOpt = False,
) -> None:
    """Delete runs, with their corrections, by id or by age; asks first unless --yes."""
    if bool(ids) == (older_than is not None):
        both = ", not both" if ids else ""
        raise typer.BadParameter(f"give run IDs or --older-than AGE{both}", param_hint="ID")
    before = None if older_than is None else parse_since(older_than, option="--older-than")
    ask = None if yes else _confirm_deletion if stdin_is_terminal() else _no_terminal
    with _run_log() as log:  # the ids and the age are checked before anyone is asked
        done = log.delete(ids or (), before, confirm=ask)
    emit(json_out, done.to_json(), lambda: _show_deletion(done))
    if done.declined:
        raise typer.Exit(EXIT_PROBLEMS)


@runs_app.command("export", epilog=EXAMPLES["runs export"])
def runs_export(
    fmt: Annotated[
        Literal["jsonl"], typer.Option("--format", help="jsonl: one JSON object per line.")
    ] = "jsonl",
    card: RunCardOpt = None,
    since: SinceOpt = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write this file (whole, or not at all); else stdout."),
    ] = None,
) -> None:
    """Write every matching run, oldest first, as `tiny runs show ID --json` prints it."""
    del fmt  # jsonl is the one format yet: the flag lets a script say so, and fails on others
    with _run_log() as log:
        count = log.export(RunQuery(card, since=_since(since), limit=None), out, sys.stdout)
    if out is not None:
        # the name is the user's: an ESC or a bidi override in it must not reach the terminal
        typer.echo(f"{count} run(s) written to {printable(str(out))}", err=True)


def _matching(query: RunQuery) -> str | None:
    """What an empty answer was searched and filtered by: `'giraffe' --card x`, or None."""
    said = [repr(query.text)] if query.text is not None else []
    given = (("--card", query.card), ("--status", query.status), ("--model", query.model))
    said += [f"{flag} {value}" for flag, value in given if value is not None]
    said += [f"--since {query.since.isoformat()}"] if query.since is not None else []
    return " ".join(said) or None


def _no_terminal(ids: Sequence[int]) -> bool:
    """No one to ask: say how to delete without asking, and stop."""
    typer.echo("tiny: error: no terminal to confirm the deletion on: add --yes", err=True)
    raise typer.Exit(EXIT_PROBLEMS)


def _confirm_deletion(ids: Sequence[int]) -> bool:
    """Name the runs a deletion takes on stderr and ask [y/N]; the default is no."""
    named = ", ".join(map(str, ids[:SHOWN_IDS])) + (", …" if len(ids) > SHOWN_IDS else "")
    return confirm(f"Delete {len(ids)} run(s) ({named}) and their corrections?")


def _show_deletion(done: Deletion) -> None:
    if done.declined:
        typer.echo("nothing deleted", err=True)
        return
    typer.echo(f"deleted {len(done.runs)} run(s) and {done.corrections} correction(s)")


def _run_log() -> RunLog:
    return RunLog.open(settings_from().home, logging_runs=False)  # it has no --no-log


def _since(since: str | None) -> datetime | None:
    return None if since is None else parse_since(since)  # "" is refused, as a blank is


@artifacts_app.command("show")
def artifacts_show(
    handle: Annotated[str, typer.Argument(help="The handle, e.g. art_3f9c2a1b7d.")],
    json_out: JsonOpt = False,
) -> None:
    """Print a stored tool result whole (escaped at a terminal, exact when piped)."""
    store = ArtifactStore(settings_from().home)
    found = store.get(handle)
    text = store.text(found)
    emit(json_out, {**found.metadata(), "text": text}, lambda: _show_text(text))


def _show_text(text: str) -> None:
    """Print the text escaped at a terminal (a page must not steer it), exactly when piped."""
    if sys.stdout.isatty():
        typer.echo(printable(text, keep="\n\t"))
    else:
        sys.stdout.write(text)  # exactly the artifact, for a pipe or a file
