"""Human output of `tiny runs`: the recent runs, one transcript, the statistics.

Everything a model, a page or a task wrote is shown through `printable` (no terminal control
characters) and `escape` (no rich markup), or as a plain `Text`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from rich.box import SIMPLE_HEAD as COMPACT
from rich.console import Console
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from tiny_cli.cli.live import STATUS_STYLE
from tiny_cli.cli.render import (
    BAR_TABLE,
    BAR_WIDTH,
    Cell,
    Col,
    cut,
    figure,
    print_fitted,
    quoted,
    say_cut,
    shown,
    titled,
)
from tiny_cli.runs.query import GroupStats, RunRecord, RunStats, RunSummary
from tiny_cli.runs.store import REPAIR_MARK
from tiny_cli.text import printable, text_of

RUN_STYLE = {**STATUS_STYLE, "running": "blue", "interrupted": "bright_red"}
SHOWN_CHARS = 800  # of each message in `tiny runs show`; --full shows all of it
ARGUMENT_CHARS = 160  # of a tool call's arguments, in the transcript and the calls table
GOAL_LEAST, GOAL_LINES = 12, 3  # the goal's narrowest column, and its most lines, when narrow
RUN_COLUMNS = (
    Col("id", "right"),
    Col("started"),
    Col("command", gives="name"),
    Col("card", gives="name"),
    Col("model", gives="name"),
    Col("status", gives="name"),  # needs_confirmation gives way too
    Col("tokens", "right"),
    Col("calls (ghost)", "right", gives="header"),
    Col("s", "right"),
    Col("goal", gives="text", least=GOAL_LEAST, lines=GOAL_LINES),  # gives way first
)
NARROW_DROPS = ("command", "model")  # left out below WIDE columns: `--wide` shows them
WIDE = 110
STATS_COLUMNS = (
    "runs", "ok", "ghost", "repair", "tok in", "tok out", "caller", "compr", "p50 s", "p95 s"
)  # fmt: skip
STATS_NARROW_DROPS = ("tok out", "p50 s")
STATS_LEGEND = {  # what each column means, for the line under the tables (shown ones only)
    "ok": "share of runs ok",
    "ghost": "ghost calls per tool call",
    "repair": "finished runs that needed a repair",
    "tok in": "mean prompt tokens per finished run",
    "tok out": "mean completion tokens per finished run",
    "caller": "mean tokens back to the caller per finished run",
    "compr": "caller tokens / tokens the agent read",
    "p50 s": "50th-percentile wall seconds (nearest rank)",
    "p95 s": "95th-percentile wall seconds (nearest rank)",
}
# two spaces between columns, none at the edges (rich miscounts collapse_padding's first column)
COMPACT_TABLE: dict[str, Any] = {
    "box": COMPACT,
    "padding": (0, 1, 0, 0),
    "show_edge": False,
    "pad_edge": False,
}
BAR_COLUMNS = (
    Col("card", gives="name"),
    Col("bar"),
    Col("runs", "right"),
    Col("statuses", gives="text"),
)
GOAL_CHARS = 60  # of the goal in the runs table but --wide's (cut further to fit the terminal)
ROLE_STYLE = {"system": "dim", "user": "cyan", "assistant": "green", "tool": "magenta"}
OUTCOME_STYLE = {"ok": "green", "ghost": "bold red", "bad_arguments": "yellow"}
TEXT_RESULT = "Result of "  # how agent.reply.result_message begins (json mode, recovered)


def runs(
    console: Console,
    found: Sequence[RunSummary],
    path: Path,
    matching: str | None = None,
    wide: bool = False,
) -> None:
    """Print the runs as a table, newest first (no command or model when narrow, unless wide);
    `matching`: what they were searched by (`'giraffe' --card x`), for the empty case."""
    if not found:
        where = shown(str(path))
        said = f"no run in {where} matches {shown(matching)}" if matching else ""
        # soft wrap: a long path stays whole, one line to copy
        console.print(said or f"no runs recorded in {where}", highlight=False, soft_wrap=True)
        return
    narrow = console.width < WIDE and not wide
    cols = [c for c in RUN_COLUMNS if not (narrow and c.header in NARROW_DROPS)]
    rows = [[cells[c.header] for c in cols] for cells in (_run_cells(r, wide) for r in found)]
    title = f"{len(found)} run(s), newest first"
    was_cut = print_fitted(console, cols, rows, wide, title=title, **COMPACT_TABLE)
    say_cut(console, was_cut or (not wide and any(len(r.goal) > GOAL_CHARS for r in found)))


def _run_cells(r: RunSummary, wide: bool) -> dict[str, str]:
    ghosts = f" ([bold red]{r.ghost_calls}[/])" if r.ghost_calls else ""
    return {
        "id": str(r.id),
        "started": _local(r.started_at, "%m-%d %H:%M"),
        "command": shown(r.command),
        "card": shown(r.card or "—"),
        "model": shown(r.model or "—"),
        "status": _status(r.status),
        "tokens": f"{r.tokens_in}/{r.tokens_out}",
        "calls (ghost)": f"{r.tool_calls}{ghosts}",
        "s": _seconds(r.wall_seconds),
        "goal": shown(r.goal if wide else cut(r.goal, GOAL_CHARS)),
    }


def run(console: Console, record: RunRecord, full: bool = False) -> None:
    """Print one run: what it was, what it cost, then every message and every tool call."""
    _header(console, record.summary, record.routing)
    console.print(f"[bold]transcript[/] ({len(record.transcript)} message(s))")
    calls = list(record.calls)
    answered = iter(calls)  # results come in the order the calls were made
    by_id: dict[str, list[Mapping[str, Any]]] = {}  # a server may repeat ids: first in, first out
    for c in calls:
        if isinstance(c.get("id"), str):
            by_id.setdefault(c["id"], []).append(c)
    for number, message in enumerate(record.transcript, 1):
        _message(console, number, message, by_id, answered, full)
    _calls(console, calls)


def stats(
    console: Console, figures: RunStats, wide: bool = False, matching: str | None = None
) -> None:
    """Print the figures per card and per model, and a bar of each card's runs by status."""
    if not figures.total.runs:
        console.print(f"no run matches {shown(matching)}" if matching else "no runs recorded")
        return
    narrow = console.width < WIDE and not wide
    columns = [c for c in STATS_COLUMNS if not (narrow and c in STATS_NARROW_DROPS)]
    was_cut = _stats_table(console, "per card", "card", figures.by_card, columns, wide)
    was_cut |= _stats_table(console, "per model", "model", figures.by_model, columns, wide)
    legend = " · ".join(f"{c}: {STATS_LEGEND[c]}" for c in columns if c in STATS_LEGEND)
    console.print(legend, style="dim", highlight=False)
    was_cut |= _status_bars(console, figures.by_card, wide)
    say_cut(console, was_cut)
    moved = figures.reroutes
    if moved.rerouted:
        console.print(
            f"re-routed after a refusal: {moved.rerouted}, of which rescued "
            f"(final status ok or partial): {moved.rescued}",
            highlight=False,
        )


# --- one run --------------------------------------------------------------------------------


def _header(console: Console, r: RunSummary, routing: Mapping[str, Any] | None) -> None:
    title = f"run {r.id} · {shown(r.command)} · {shown(r.card or 'no card')} · {_status(r.status)}"
    console.print(title, highlight=False)
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for label, value in _facts(r, routing):
        grid.add_row(label, value)
    console.print(grid)


def _facts(r: RunSummary, routing: Mapping[str, Any] | None) -> Iterator[tuple[str, str]]:
    """Yield the label and the (escaped) value of each line of a run's header."""
    yield "run", shown(r.label)
    yield "started", f"{_local(r.started_at)} → {_local(r.ended_at) if r.ended_at else '…'}"
    yield "model", f"{shown(r.model or '—')} at {shown(r.endpoint or '—')}"
    yield "tool mode", shown(r.tool_mode or "—")
    yield "pid", str(r.pid)
    if routing:
        target = routing.get("agent_id") or "nobody"
        line = f"{routing.get('decision')} → {target} ({routing.get('score')})"
        if routing.get("rerouted_from"):
            line += f", re-routed after {routing['rerouted_from']} refused"
        yield "routing", shown(line)
    if r.reason:
        yield "reason", shown(r.reason)
    ghosts = f"[bold red]{r.ghost_calls} ghost call(s)[/]" if r.ghost_calls else "0 ghost calls"
    calls = f"{r.tool_calls} tool call(s), {ghosts}, {r.recovered_calls} recovered"
    tokens = f"{r.tokens_in} tokens in, {r.tokens_out} out"
    wall = _seconds(r.wall_seconds)
    yield "cost", f"{tokens}, {calls}, {r.caller_tokens} caller tokens, {wall} s"
    yield "goal", shown(r.goal or "—")


def _message(
    console: Console,
    number: int,
    message: Mapping[str, Any],
    by_id: dict[str, list[Mapping[str, Any]]],
    answered: Iterator[Mapping[str, Any]],
    full: bool,
) -> None:
    """Print one message: a header with its role and size, its content, its tool calls."""
    role = str(message.get("role") or "?")
    content = "" if message.get("content") is None else text_of(message["content"])
    calls = _mappings(message.get("tool_calls"))
    tags = _tags(role, content, answered)
    size = len(content) + sum(len(_arguments(c)) for c in calls)
    style = ROLE_STYLE.get(role, "white")
    console.print(f"[{style}]#{number} {shown(role)}[/] · {size:,} chars{tags}", highlight=False)
    if content:
        text = content if full else cut(content, SHOWN_CHARS)
        more = "" if text == content else f"\n… [{len(content):,} chars in all; --full shows all]"
        console.print(Padding(Text(printable(text, keep="\n") + more), (0, 0, 0, 2)))
    for call in calls:
        _native_call(console, call, by_id)


def _tags(role: str, content: str, answered: Iterator[Mapping[str, Any]]) -> str:
    """Name what a message is: a tool result (and its outcome), or the repair request."""
    if role == "tool" or (role == "user" and content.startswith(TEXT_RESULT)):
        call = next(answered, None)
        if call is None:
            return " · tool result"
        return f" · result of {_name(call)} · {_outcome(call.get('outcome'))}"
    if role == "user" and content.startswith(REPAIR_MARK):
        return " · [bold yellow]repair request[/]"
    return ""


def _native_call(
    console: Console, call: Mapping[str, Any], by_id: dict[str, list[Mapping[str, Any]]]
) -> None:
    """Print one tool call of an assistant message, its outcome highlighted."""
    function = _mapping(call.get("function"))
    called = call.get("id")
    same_id = by_id.get(called, []) if isinstance(called, str) else []
    outcome = _mapping(same_id.pop(0) if same_id else None).get("outcome")
    name = _name({"name": function.get("name"), "outcome": outcome})
    arguments = shown(cut(_arguments(call), ARGUMENT_CHARS))
    console.print(f"  → call {name} {arguments} · {_outcome(outcome)}", highlight=False)


def _calls(console: Console, calls: Sequence[Mapping[str, Any]]) -> None:
    """Print every tool call of the run, ghosts in red."""
    if not calls:
        return
    columns = ("#", "tool", "outcome", "s", "result chars", "arguments")
    table = titled("tool calls", columns, {"#", "s", "result chars"})
    for i, c in enumerate(calls, 1):
        name = _name(c)
        table.add_row(
            str(i),
            f"[bold red]{name}[/]" if c.get("outcome") == "ghost" else name,
            _outcome(c.get("outcome"), short=True) + (" (recovered)" if c.get("recovered") else ""),
            _seconds(c.get("seconds")),
            _count(c.get("result_chars")),
            shown(cut(str(c.get("arguments") or ""), ARGUMENT_CHARS)),
        )
    console.print(table)


def _name(call: Mapping[str, Any]) -> str:
    """A call's tool name as markup; a ghost's quoted ("docs_search ", ""): not the card's."""
    name = str(call.get("name"))
    return quoted(name) if call.get("outcome") == "ghost" else shown(name)


def _arguments(call: Mapping[str, Any]) -> str:
    return str(_mapping(call.get("function")).get("arguments") or "")


def _mapping(value: Any) -> Mapping[str, Any]:
    """A value as a mapping: a row edited by hand may hold anything where one belongs."""
    return value if isinstance(value, Mapping) else {}


def _mappings(value: Any) -> list[Mapping[str, Any]]:
    """The mappings of a list (a message's tool calls); anything else holds none."""
    return [v for v in value if isinstance(v, Mapping)] if isinstance(value, list) else []


def _outcome(outcome: Any, short: bool = False) -> str:
    if outcome is None:
        return "[dim]not run[/]"
    if outcome == "ghost":
        return "[bold red]ghost call" + ("" if short else ": not a tool of this card") + "[/]"
    return f"[{OUTCOME_STYLE.get(str(outcome), 'yellow')}]{shown(str(outcome))}[/]"


# --- statistics -----------------------------------------------------------------------------


def _stats_table(
    console: Console,
    title: str,
    key: str,
    groups: Sequence[GroupStats],
    columns: Sequence[str],
    wide: bool,
) -> bool:
    """Print one table of figures, a row per group; return whether a name was cut to fit."""
    cols = [Col(key, gives="name"), *(Col(c, "right") for c in columns)]
    rows = [_stats_row(g, columns) for g in groups]
    return print_fitted(console, cols, rows, wide, title=title, **COMPACT_TABLE)


def _stats_row(g: GroupStats, columns: Sequence[str]) -> list[Cell]:
    cells = {
        "runs": str(g.runs),
        "ok": figure(g.statuses.get("ok", 0) / g.runs, ".1%"),
        "ghost": figure(g.ghost_rate, ".1%"),
        "repair": figure(g.repair_rate, ".1%"),
        "tok in": figure(g.mean_tokens_in, ",.0f"),
        "tok out": figure(g.mean_tokens_out, ",.0f"),
        "caller": figure(g.mean_caller_tokens, ",.0f"),
        "compr": figure(g.compression, ".1%"),
        "p50 s": _seconds(g.wall_p50),
        "p95 s": _seconds(g.wall_p95),
    }
    return [shown(g.name or "—"), *(cells[c] for c in columns)]


def _status_bars(console: Console, groups: Sequence[GroupStats], wide: bool) -> bool:
    """Draw each card's runs as one bar, a colored segment per status; return whether cut."""
    top = max(g.runs for g in groups)
    rows: list[list[Cell]] = []
    for g in groups:
        bar, ordered = Text(), _ordered(g.statuses)
        for status, count in ordered:
            bar.append("█" * max(1, round(BAR_WIDTH * count / top)), RUN_STYLE.get(status, "white"))
        counts = " · ".join(f"{shown(s)} {n}" for s, n in ordered)
        rows.append([shown(g.name or "—"), bar, str(g.runs), f"[dim]{counts}[/]"])
    title = "runs per card, by status"
    was_cut = print_fitted(console, BAR_COLUMNS, rows, wide, title=title, **BAR_TABLE)
    seen = dict(_ordered({s: 0 for g in groups for s in g.statuses}))
    console.print("  ".join(f"[{RUN_STYLE.get(s, 'white')}]█[/] {shown(s)}" for s in seen))
    return was_cut


def _ordered(statuses: Mapping[str, int]) -> list[tuple[str, int]]:
    """Statuses from the best to the worst, as RUN_STYLE lists them; unknown ones last."""
    rank = {s: i for i, s in enumerate(RUN_STYLE)}
    return sorted(statuses.items(), key=lambda item: (rank.get(item[0], len(rank)), item[0]))


# --- small helpers --------------------------------------------------------------------------


def _status(status: str) -> str:
    return f"[{RUN_STYLE.get(status, 'white')}]{shown(status)}[/]"


def _local(stamp: str, form: str = "%Y-%m-%d %H:%M:%S") -> str:
    """Show a stored UTC time in local time."""
    try:
        return datetime.fromisoformat(stamp).astimezone().strftime(form)
    except (ValueError, OverflowError, OSError):  # not a time, or out of the local range
        return shown(stamp)


def _seconds(value: Any) -> str:
    return f"{value:.2f}" if _is_number(value) else "—"


def _count(value: Any) -> str:
    return f"{value:,}" if _is_number(value) else "0"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
