"""`tiny init` and `tiny cards list / show / import / sync`: start a project, see its cards as
tiny does, make cards from MCP servers.

Card text comes from files people and models wrote, server names, tool names and reasons from
host configs and MCP servers: every value is shown through `printable` and escaped before it
reaches the terminal.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from tiny_cli.cards_view import card_detail, card_rows
from tiny_cli.cli import EXIT_PROBLEMS, TinyGroup
from tiny_cli.cli.common import CardsOpt, JsonOpt, ToolsOpt, emit, settings_from, warn
from tiny_cli.cli.render import bare, cut, new_console, shown
from tiny_cli.scaffold import STARTER_TOOLS, init_project
from tiny_cli.text import age, printable
from tiny_cli.workspace import open_workspace

if TYPE_CHECKING:
    from tiny_cli.mcp_import import ImportReport, SyncReport

cards_app = typer.Typer(
    cls=TinyGroup,
    help="The cards of this project: list them, or show one as the model gets it.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
SUMMARY_CHARS = 60  # of a summary in `cards list`
STATUS_STYLE = {"ok": "green", "unreachable": "red", "skipped": "yellow", "new": "cyan"}
ACTION_STYLE = {"added": "green", "updated": "cyan", "removed": "red", "kept": "yellow"}


def init(
    folder: Annotated[Path, typer.Argument(help="Where to start the project.")] = Path("."),
    json_out: JsonOpt = False,
) -> None:
    """Start a project: tiny.toml, a starter card and a tool module (existing files are kept).

    Then edit cards/word-counter.yaml, and run tiny validate and tiny route "count my words".
    """
    report = init_project(folder)
    # the folder is the user's argument: an ESC or a bidi override in it must not reach the terminal
    lines = [f"{status:8} {printable(str(folder / path))}" for path, status in report.files]
    emit(json_out, report.to_json(), lambda: typer.echo("\n".join(lines)))
    if (STARTER_TOOLS, "kept") in report.files:  # a file of the user's, now tiny's tool module
        warn(
            f"kept {folder / STARTER_TOOLS}, which was already there; tiny.toml names it as "
            "your tool module, so it must define the @tool functions your cards name "
            "(the starter card's count_words)"
        )


@cards_app.command("list")
def cards_list(cards: CardsOpt = None, tools: ToolsOpt = None, json_out: JsonOpt = False) -> None:
    """List the cards: id, tools, side effects, summary."""
    rows = card_rows(open_workspace(settings_from(cards=cards, tools=tools)))
    emit(json_out, rows, lambda: _list_table(rows))


@cards_app.command("show")
def cards_show(
    card_id: Annotated[str, typer.Argument(metavar="ID", help="The card's id.")],
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Show one card: its fields, the system prompt the model gets, and its tools' schemas."""
    detail = card_detail(open_workspace(settings_from(cards=cards, tools=tools)), card_id)
    emit(json_out, detail, lambda: _detail(detail))


@cards_app.command("import")
def cards_import(
    source: Annotated[
        Path | None,
        typer.Option("--from", help="A host's MCP config (.mcp.json, .vscode/mcp.json, ...)."),
    ] = None,
    check: Annotated[
        bool, typer.Option("--check", help="Write nothing; exit 1 if the cards are behind.")
    ] = False,
    cards: CardsOpt = None,
    json_out: JsonOpt = False,
) -> None:
    """Make cards from MCP servers (mcp.yaml's, or a host config's carried into it).

    Again later: new tools added, removed ones dropped, cards you edited kept. Exit 1 when a
    server could not be read, or with --check when the cards are behind.
    """
    from tiny_cli.mcp_import import import_cards  # the router (numpy): list and show need none

    report = import_cards(settings_from(cards=cards), source, check=check)
    _show_mcp(report, _import_report, json_out)


@cards_app.command("sync")
def cards_sync(cards: CardsOpt = None, json_out: JsonOpt = False) -> None:
    """Refresh the MCP tool lists routing reads (as validate --connect); show their age."""
    from tiny_cli.mcp_import import sync_tool_lists  # the router (numpy), as import

    _show_mcp(sync_tool_lists(settings_from(cards=cards)), _sync_report, json_out)


def _list_table(rows: list[dict[str, Any]]) -> None:
    table = bare("id", "tools", "side effects", "summary")
    for row in rows:
        short = cut(row["summary"], SUMMARY_CHARS)
        cells = (row["id"], ", ".join(row["tools"]) or "—", row["side_effects"], short)
        table.add_row(*(shown(c) for c in cells))
    new_console().print(table)


def _detail(detail: dict[str, Any]) -> None:
    """Print one card; never wrapped: piped, a long line stays one line (the JSON stays JSON)."""
    out = new_console()
    for key in ("id", "file", "summary", "tools", "side_effects", "returns_required", "first"):
        value = detail[key]
        text = ", ".join(value) if isinstance(value, list) else str(value)
        _line(out, f"{key:17} {printable(text)}")
    _line(out, f"{'budget':17} {json.dumps(detail['budget'])}")
    _line(out, "\nsystem prompt:")
    _line(out, printable(detail["system_prompt"], keep="\n"))
    _line(out, "\ntool schemas:")
    text = json.dumps(detail["tool_schemas"], ensure_ascii=False, indent=2)
    _line(out, printable(text, keep="\n"))


def _line(out: Console, text: str) -> None:
    """Print text as it is: no markup, no colour, no wrap (a terminal wraps it itself)."""
    out.print(text, markup=False, highlight=False, soft_wrap=True)


# --- cards made from MCP servers ---------------------------------------------------------


def _show_mcp(report: Any, draw: Callable[[Console, Any], None], json_out: bool) -> None:
    """Show an import's or a sync's report; exit 1 unless all is ok."""
    emit(json_out, report.to_json(), lambda: draw(new_console(), report))
    if report.status != "ok":
        raise typer.Exit(EXIT_PROBLEMS)


def _import_report(out: Console, report: ImportReport) -> None:
    """The servers (tools, writers, or why not), the cards, the variables to set."""
    servers = bare("server", "status", "tools", "writers", "cards", "why")
    for s in report.servers:
        made = sum(c.server == s.server for c in report.cards if c.action != "removed")
        status = _styled(s.status, STATUS_STYLE)
        servers.add_row(
            shown(s.server), status, str(s.tools), str(s.writers), str(made), shown(s.why)
        )
    out.print(servers)
    cards = bare("card", "action", "tools", "writes", "note")
    for c in report.cards:
        action = _styled(c.action, ACTION_STYLE)
        writes = "write (needs approval)" if c.writes else "read-only"
        cards.add_row(shown(c.card_id), action, str(len(c.tools)), writes, shown(c.note))
    if report.cards:
        out.print()
        out.print(cards)
    _lines(out, _footer(report))


def _footer(report: ImportReport) -> Iterable[str]:
    for name in report.carried:
        yield f"added server {name} to {report.mcp_file}"
    for lifted in report.lifted:
        yield (
            f"set {lifted.variable}: servers.{lifted.server}.{lifted.where} held a literal "
            f"secret; {report.mcp_file.name} now reads it from ${{{lifted.variable}}}"
        )
    changed = [c for c in report.cards if c.action in ("added", "updated", "removed")]
    if report.checked:
        yield (
            f"behind: {_behind(report, len(changed))}; run tiny cards import"
            if report.status == "behind"
            else "cards are up to date with the servers"
            if report.status == "ok"
            else "cannot tell: a server could not be read"
        )
    else:
        yield f"{len(changed)} card file(s) changed; at most {report.card_tools} tools a card"


def _behind(report: ImportReport, changed: int) -> str:
    """What puts the cards behind, counted apart: cards, servers to add, tools gone."""
    new = sum(s.status == "new" for s in report.servers)
    gone = sum(bool(c.missing) for c in report.cards)
    parts = [
        f"{new} server(s) to add to {report.mcp_file.name} and their cards" if new else "",
        f"{changed} card(s) would change" if changed or not (new or gone) else "",
        f"{gone} edited card(s) list tools the server no longer has" if gone else "",
    ]
    return ", ".join(p for p in parts if p)


def _sync_report(out: Console, report: SyncReport) -> None:
    """Each server's tool count and how old its list is; problems after."""
    table = bare("server", "tools", "listed")
    for s in report.servers:
        listed = "never" if s.age_seconds is None else f"{age(s.age_seconds)} ago"
        table.add_row(shown(s.server), str(s.tools), listed)
    out.print(table)
    _lines(out, (str(p) for p in report.problems))


def _styled(word: str, styles: dict[str, str]) -> str:
    return f"[{styles[word]}]{word}[/]" if word in styles else word


def _lines(out: Console, lines: Iterable[str]) -> None:
    for line in lines:
        _line(out, printable(line))
