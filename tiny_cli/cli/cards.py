"""`tiny init` and `tiny cards list / show / import / sync`: start a project, see its cards as
tiny does, make cards from MCP servers.

Card text comes from files people and models wrote: every value is shown through
`printable` and escaped before it reaches the terminal.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import ModuleType
from typing import Annotated, Any

import typer
from rich.markup import escape
from rich.table import Table

from tiny_cli.cards_view import card_detail, card_rows
from tiny_cli.cli import TinyGroup
from tiny_cli.cli.common import CardsOpt, JsonOpt, ToolsOpt, emit, settings_from, warn
from tiny_cli.cli.live import console
from tiny_cli.scaffold import STARTER_TOOLS, init_project
from tiny_cli.text import printable
from tiny_cli.workspace import open_workspace

cards_app = typer.Typer(
    cls=TinyGroup,
    help="The cards of this project: list them, or show one as the model gets it.",
    no_args_is_help=True,
    rich_markup_mode=None,
)
SUMMARY_CHARS = 60  # of a summary in `cards list`


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
    _mcp_cards().run_import(settings_from(cards=cards), source, check, json_out)


@cards_app.command("sync")
def cards_sync(cards: CardsOpt = None, json_out: JsonOpt = False) -> None:
    """Refresh the MCP tool lists routing reads (as validate --connect); show their age."""
    _mcp_cards().run_sync(settings_from(cards=cards), json_out)


def _mcp_cards() -> ModuleType:
    """`cards import` and `cards sync`, imported when one runs: tiny_cli.mcp_import loads the
    router (numpy), which listing or showing cards never needs."""
    from tiny_cli.cli import mcp_cards

    return mcp_cards


def _list_table(rows: list[dict[str, Any]]) -> None:
    table = Table(box=None, pad_edge=False)
    for name in ("id", "tools", "side effects", "summary"):
        table.add_column(name, overflow="fold")
    for row in rows:
        summary = row["summary"]
        short = summary if len(summary) <= SUMMARY_CHARS else summary[: SUMMARY_CHARS - 1] + "…"
        cells = (row["id"], ", ".join(row["tools"]) or "—", row["side_effects"], short)
        table.add_row(*(escape(printable(c)) for c in cells))
    console().print(table)


def _detail(detail: dict[str, Any]) -> None:
    """Print one card; never wrapped: piped, a long line stays one line (the JSON stays JSON)."""
    out = console()
    for key in ("id", "file", "summary", "tools", "side_effects", "returns_required", "first"):
        value = detail[key]
        shown = ", ".join(value) if isinstance(value, list) else str(value)
        _line(out, f"{key:17} {printable(shown)}")
    _line(out, f"{'budget':17} {json.dumps(detail['budget'])}")
    _line(out, "\nsystem prompt:")
    _line(out, printable(detail["system_prompt"], keep="\n"))
    _line(out, "\ntool schemas:")
    text = json.dumps(detail["tool_schemas"], ensure_ascii=False, indent=2)
    _line(out, printable(text, keep="\n"))


def _line(out: Any, text: str) -> None:
    """Print text as it is: no markup, no colour, no wrap (a terminal wraps it itself)."""
    out.print(text, markup=False, highlight=False, soft_wrap=True)
