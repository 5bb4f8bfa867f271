"""The benches' output: the example bench's comparison (terminal, Markdown, progress bar) and
the bench at scale's table and chart, in the columns `tiny_cli.bench.scale_report` names."""

from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from tiny_cli.bench.scale_report import TERMINAL_COLUMNS, ScaleReport
from tiny_cli.cli.live import STATUS_STYLE
from tiny_cli.cli.render import BAR_TABLE, BAR_WIDTH, escaped, quoted, shown, titled
from tiny_cli.settings import sampling

# --- the example bench ----------------------------------------------------------------------

BENCH_ARM_STYLE = {"tiny": "green", "all-tools": "magenta"}


def bench(console: Console, report: Any) -> None:
    """Print a bench report: arms side by side with the better one, disagreements, two charts."""
    _bench_table(console, report)
    _bench_disagreements(console, report)
    _bench_bars(console, report, "ghost calls per task", lambda r: r.ghost_calls)
    tokens = "tokens per task (prompt + completion)"
    _bench_bars(console, report, tokens, lambda r: r.tokens_in + r.tokens_out)


class BenchProgress(Progress):
    """A progress bar on `console` (stderr) while runs finish; call it with (done, total)."""

    def __init__(self, console: Console) -> None:
        columns = (TextColumn("bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        super().__init__(*columns, console=console, transient=True)
        self._task = self.add_task("bench", total=None)

    def __enter__(self) -> BenchProgress:
        self.start()
        return self

    def __call__(self, done: int, total: int) -> None:
        self.update(self._task, completed=done, total=total)


# what a claimed answer lacked (bench.scoring.EVIDENCE), as the table words it
BENCH_EVIDENCE_LABEL = {
    "tool_call": "claimed, no successful tool call",
    "field_source": "claimed, a field not from a tool",
    "crm_record": "claimed, no record in the CRM",
}
REPLAY_WALL_NOTE = (
    "replay: wall times are not shown; they are the replay's, not the model's (the JSON keeps them)"
)


# which way a figure is better: "up" (more is better), "down" (less is), None (neither)
BENCH_FIGURES: tuple[tuple[str, str, str | None], ...] = (
    ("routing accuracy", "routing_accuracy", "up"),
    ("fields correct (tool or task)", "fields_correct", "up"),
    ("fields matching on their face", "fields_matching", None),  # fabricated ones match too
    ("fields filled", "fields_filled", None),
    ("fields expected", "fields_expected", None),
    ("ghost calls", "ghost_calls", "down"),
    ("wrong-tool calls", "wrong_tool_calls", "down"),
    ("unwanted writes", "unwanted_writes", "down"),
    ("tool calls", "tool_calls", None),
    ("  recovered from text", "recovered_calls", None),
    ("prompt tokens", "tokens_in", "down"),
    ("completion tokens", "tokens_out", "down"),
    ("1st request: system prompt", "first_request.system", "down"),
    ("1st request: tool schemas", "first_request.tools", "down"),
    ("1st request: task", "first_request.task", "down"),
    ("tokens back to the caller", "caller_tokens", "down"),
)
BENCH_WALL = (
    ("wall seconds (sum)", "wall_seconds", "down"),
    ("wall seconds (median)", "wall_median", "down"),
)
STATUS_BETTER = {"ok": "up", "failed": "down"}  # a partial, refusal or abstention may be right
BETTER = "better"  # the column naming the arm with the better figure, and by what factor
BETTER_LEGEND = (
    "better: the arm with the better figure, by how many times (more is better for status ok, "
    "right outcomes, routing and correct fields; less for the rest); blank: neither way is "
    "better by nature"
)


def _bench_values(report: Any) -> list[tuple[str, list[Any], str | None]]:
    """Return each row's label, its figure in each arm, and which way is better."""
    arms = report.arms.values()
    # label, an arm's figure, which way is better
    rows: list[tuple[str, Any, str | None]] = [("runs", lambda s: s.runs, None)]
    seen = [st for st in STATUS_STYLE if any(s.outcomes.get(st) for s in arms)]
    rows += [
        (f"  status {st}", lambda s, st=st: s.outcomes.get(st, 0), STATUS_BETTER.get(st))
        for st in seen
    ]
    rows += [
        ("right outcome (on evidence)", lambda s: s.right, "up"),
        ("fabricated (looks right, no evidence)", lambda s: s.fabricated, "down"),
    ]
    missing = [e for e in BENCH_EVIDENCE_LABEL if any(s.missing_evidence.get(e) for s in arms)]
    rows += [
        (f"  {BENCH_EVIDENCE_LABEL[e]}", lambda s, e=e: s.missing_evidence.get(e, 0), "down")
        for e in missing
    ]
    # a replay's wall times measure the replay, not the model
    figures = BENCH_FIGURES + (() if report.replayed else BENCH_WALL)
    rows += [(label, attrgetter(name), better) for label, name, better in figures]
    return [(label, [get(s) for s in arms], better) for label, get, better in rows]


def _bench_title(report: Any) -> str:
    # a replay's header is a file's text: shown, never obeyed
    where = f"model {shown(report.model)} @ {shown(report.base_url or '?')}"
    if report.tool_mode:
        where += f" · tool mode {shown(report.tool_mode)}"
    where += f" · {sampling(report.temperature)}"
    if not report.replayed:
        return f"tiny bench · {where}"
    source = f"replayed from {shown(report.replay_file)}" if report.replay_file else ""
    return f"tiny bench · {source or 'replay'} · {where}"


def _comparison(report: Any, styled: bool) -> tuple[bool, list[list[str]]]:
    """Whether the two arms are compared (a `better` column), and each row's cells."""
    both = list(report.arms) == ["tiny", "all-tools"]
    rows = []
    for label, values, better in _bench_values(report):
        verdict = [_bench_better(values, better, styled)] if both else []
        rows.append([label, *map(_bench_number, values), *verdict])
    return both, rows


def _bench_table(console: Console, report: Any) -> None:
    both, rows = _comparison(report, styled=True)
    table = Table(title=_bench_title(report), title_justify="left")
    table.add_column("metric")
    for arm in report.arms:
        table.add_column(arm, justify="right", style=BENCH_ARM_STYLE.get(arm))
    if both:
        table.add_column(BETTER, justify="right")
    for row in rows:
        table.add_row(*row)
    console.print(table)
    if both:
        console.print(BETTER_LEGEND, style="dim", highlight=False)
    if report.replayed:
        console.print(REPLAY_WALL_NOTE, style="dim", highlight=False)
    for arm, figures in report.arms.items():
        if figures.ghost_names:
            listed = ", ".join(f"{quoted(n)} x{c}" for n, c in figures.ghost_names.items())
            console.print(f"ghost calls in {arm}: {listed}", highlight=False)


def bench_markdown(report: Any) -> str:
    """Return the bench's comparison table as Markdown (docs/bench.md is made of these)."""
    both, rows = _comparison(report, styled=False)
    head = ["metric", *report.arms, *([BETTER] if both else [])]
    lines = [_md_row(head), _md_row(["---", *["---:"] * (len(head) - 1)])]
    lines += [_md_row([label.strip(), *cells]) for label, *cells in rows]
    legend = ["", BETTER_LEGEND] if both else []
    return "\n".join([*lines, *legend]) + "\n"


def _md_row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def _bench_disagreements(console: Console, report: Any) -> None:
    tasks = report.disagreements()
    if len(report.arms) < 2:
        return
    if not tasks:
        console.print("both arms ended every task the same way", style="dim")
        return
    columns = ("task", "expected", "tiny", "all-tools")
    table = titled(f"{len(tasks)} task(s) where the arms disagree", columns)
    for t in tasks:
        cells = [_bench_outcome(report, t.id, arm) for arm in ("tiny", "all-tools")]
        table.add_row(escaped(t.id), escaped(t.expected_agent or "abstain"), *cells)
    console.print(table)


def _bench_outcome(report: Any, task_id: str, arm: str) -> str:
    """Describe a task's runs in one arm: the usual status, the agent, ghosts and writes."""
    runs = report.runs_of(task_id, arm)
    status = report.outcome(task_id, arm)
    text = f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"
    agents = sorted({r.agent_id for r in runs if r.agent_id and r.agent_id != "all-tools"})
    if arm == "tiny" and agents:
        text += f" → {escaped(', '.join(agents))}"
    ghosts = sum(r.ghost_calls for r in runs)
    unwanted = sum(r.unwanted_writes for r in runs)
    fabricated = sum(r.fabricated for r in runs)
    if fabricated:
        text += f", [red]{fabricated} fabricated[/]"
    if ghosts:
        text += f", {ghosts} ghost call(s)"
    if unwanted:
        text += f", [red]{unwanted} unwanted write(s)[/]"
    return text


def _bench_bars(console: Console, report: Any, title: str, value: Any) -> None:
    """Draw one horizontal bar per task and arm, scaled to the largest value."""
    rows = [
        (t.id, arm, sum(value(r) for r in report.runs_of(t.id, arm)))
        for t in report.tasks
        for arm in report.arms
    ]
    top = max((v for *_, v in rows), default=0)
    if not top:  # a chart of zeros says nothing
        console.print(f"{title}: 0 in every task and arm, chart left out", highlight=False)
        return
    table = titled(title, ("task", "arm", "bar", "value"), {"value"}, **BAR_TABLE)
    for i, (task_id, arm, v) in enumerate(rows):
        width = round(BAR_WIDTH * v / top)
        bar = "█" * width if width or not v else "▏"
        label = escaped(task_id) if i % len(report.arms) == 0 else ""
        table.add_row(label, arm, f"[{BENCH_ARM_STYLE.get(arm, 'white')}]{bar}[/]", str(v))
    console.print(table)


def _bench_number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return str(value)


def _bench_better(values: Sequence[Any], better: str | None, styled: bool) -> str:
    """Name the arm whose figure is better and by what factor (tiny's first in `values`).

    Blank where neither way is better, — where an arm has no figure, `same` when they tie;
    no factor when the worse figure is 0 (more is better) or the better one is (less is).
    """
    if better is None:
        return ""
    tiny, other = values
    if tiny is None or other is None:
        return "—"
    if tiny == other:
        return "same"
    tiny_wins = (tiny > other) == (better == "up")
    arm = "tiny" if tiny_wins else "all-tools"
    high, low = max(tiny, other), min(tiny, other)
    factor = f" {high / low:.2f}x" if low else ""
    return (f"[{BENCH_ARM_STYLE[arm]}]{arm}[/]" if styled else arm) + factor


# --- the bench at scale ---------------------------------------------------------------------

SCALE_ARM_STYLE = {
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
    """The rows in the report's column order and names (those the terminal has room for)."""
    title = (
        f"tool selection · {shown(report.model)} · "
        f"{shown(str(report.tool_mode))} mode"
        f" · {sampling(report.temperature)}"
    )
    names = [column.name for column in TERMINAL_COLUMNS]
    table = titled(title, names, set(names) - {"arm"})
    for row in report.rows:
        table.add_row(*(c.cell(row) for c in TERMINAL_COLUMNS), style=SCALE_ARM_STYLE.get(row.arm))
    return table


def _chart(console: Console, report: ScaleReport) -> None:
    console.print("right calls (first call: the expected tool with accepted arguments)")
    for row in report.rows:
        if not row.tasks:
            continue
        share = (row.right_call or 0) / row.tasks
        bar = "█" * round(share * BAR_WIDTH) if row.fits else "does not fit"
        style = SCALE_ARM_STYLE.get(row.arm, "")
        console.print(f"{row.label:>4} {row.arm:<9} [{style}]{bar}[/] {share:.0%}")
