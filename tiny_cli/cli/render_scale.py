"""Human output of the bench at scale: the table of every size and arm, and a small chart."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tiny_cli.bench.scale_report import ScaleReport, ScaleRow, count
from tiny_cli.cli.render import BAR_WIDTH
from tiny_cli.text import printable

ARM_STYLE = {
    "oracle": "dim",
    "tiny": "green",
    "top-k": "cyan",
    "hybrid": "yellow",
    "all-tools": "magenta",
}


def scale(console: Console, report: ScaleReport) -> None:
    """Print the tool-selection table, then right calls per arm and size as bars."""
    console.print(_table(report))
    if any(row.right_call for row in report.rows):
        _chart(console, report)
    else:  # a chart of zeros says nothing
        console.print("no right calls in any arm and size: chart left out", highlight=False)
    if report.replayed_from:
        console.print("[dim]replayed: no wall times (they would be the replay's)[/dim]")


def _table(report: ScaleReport) -> Table:
    title = f"tool selection · {escape(printable(report.model))} · {report.tool_mode} mode"
    table = Table(title=title, title_justify="left")
    for column in ("size", "tools", "arm", "right call", "right tool", "irrelevance", "routing"):
        table.add_column(column, justify="right" if column != "arm" else "left")
    for column in ("prompt tok", "p50 s"):
        table.add_column(column, justify="right")
    for row in report.rows:
        table.add_row(*_cells(row), style=ARM_STYLE.get(row.arm))
    return table


def _cells(row: ScaleRow) -> list[str]:
    def part(n: int | None, d: int) -> str:
        return count(row, n, d, cut="no fit", sep="/")

    routing = row.routing_right if row.routing_right is not None else row.topk_recall
    return [
        row.label,
        f"{row.tools:g}",
        row.arm,
        part(row.right_call, row.tasks),
        part(row.right_tool, row.tasks),
        part(row.irrelevance_right, row.irrelevance_tasks),
        count(row, routing, row.tasks, cut="—", sep="/"),
        f"{row.prompt_tokens:,.0f}",
        "—" if row.wall_p50 is None else f"{row.wall_p50:.1f}",
    ]


def _chart(console: Console, report: ScaleReport) -> None:
    console.print("right calls (first call: the expected tool with accepted arguments)")
    for row in report.rows:
        if not row.tasks:
            continue
        share = (row.right_call or 0) / row.tasks
        bar = "█" * round(share * BAR_WIDTH) if row.fits else "does not fit"
        style = ARM_STYLE.get(row.arm, "")
        console.print(f"{row.label:>4} {row.arm:<9} [{style}]{bar}[/] {share:.0%}")
