"""`tiny cards import` and `tiny cards sync` run and shown: cards made from MCP servers.

The `tiny cards` group (cli/cards.py) imports this module only when one of these two runs:
`tiny_cli.mcp_import` loads the router (numpy), which listing or showing cards never needs.

Server names, tool names and reasons come from host configs and MCP servers: every value is
shown through `printable` (no terminal control characters) and `escape` (no rich markup).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tiny_cli.cli import EXIT_PROBLEMS
from tiny_cli.cli.common import emit
from tiny_cli.cli.live import console
from tiny_cli.mcp_import import ImportReport, SyncReport, import_cards, sync_tool_lists
from tiny_cli.settings import Settings
from tiny_cli.text import printable

STATUS_STYLE = {"ok": "green", "unreachable": "red", "skipped": "yellow", "new": "cyan"}
ACTION_STYLE = {"added": "green", "updated": "cyan", "removed": "red", "kept": "yellow"}


def run_import(settings: Settings, source: Path | None, check: bool, json_out: bool) -> None:
    """Make (or with `check`, compare) the cards, show the report; exit 1 unless all is ok."""
    report = import_cards(settings, source, check=check)
    emit(json_out, report.to_json(), lambda: import_report(console(), report))
    if report.status != "ok":
        raise typer.Exit(EXIT_PROBLEMS)


def run_sync(settings: Settings, json_out: bool) -> None:
    """Refresh the MCP tool lists, show their age; exit 1 unless every server answered."""
    report = sync_tool_lists(settings)
    emit(json_out, report.to_json(), lambda: sync_report(console(), report))
    if report.status != "ok":
        raise typer.Exit(EXIT_PROBLEMS)


def _cell(value: object) -> str:
    return escape(printable(str(value)))


def _table(*columns: str) -> Table:
    table = Table(box=None, pad_edge=False)
    for name in columns:
        table.add_column(name, overflow="fold")
    return table


def import_report(out: Console, report: ImportReport) -> None:
    """The servers (tools, writers, or why not), the cards, the variables to set."""
    servers = _table("server", "status", "tools", "writers", "cards", "why")
    for s in report.servers:
        made = sum(c.server == s.server for c in report.cards if c.action != "removed")
        style = STATUS_STYLE.get(s.status, "")
        status = f"[{style}]{s.status}[/]" if style else s.status
        servers.add_row(
            _cell(s.server), status, str(s.tools), str(s.writers), str(made), _cell(s.why)
        )
    out.print(servers)
    cards = _table("card", "action", "tools", "writes", "note")
    for c in report.cards:
        action = (
            f"[{ACTION_STYLE.get(c.action, '')}]{c.action}[/]"
            if c.action in ACTION_STYLE
            else c.action
        )
        writes = "write (needs approval)" if c.writes else "read-only"
        cards.add_row(_cell(c.card_id), action, str(len(c.tools)), writes, _cell(c.note))
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
            f"behind: {len(changed)} card(s) would change; run tiny cards import"
            if report.status == "behind"
            else "cards are up to date with the servers"
            if report.status == "ok"
            else "cannot tell: a server could not be read"
        )
    else:
        yield f"{len(changed)} card file(s) changed; at most {report.card_tools} tools a card"


def sync_report(out: Console, report: SyncReport) -> None:
    """Each server's tool count and how old its list is; problems after."""
    table = _table("server", "tools", "listed")
    for s in report.servers:
        age = "never" if s.age_seconds is None else f"{_age(s.age_seconds)} ago"
        table.add_row(_cell(s.server), str(s.tools), age)
    out.print(table)
    _lines(out, (str(p) for p in report.problems))


def _lines(out: Console, lines: Iterable[str]) -> None:
    for line in lines:
        out.print(printable(line), markup=False, highlight=False, soft_wrap=True)


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"
