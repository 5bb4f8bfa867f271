"""The report of the bench at scale: one row per size and arm, every run, and the table.

Accuracy is tool selection: the first call's tool and arguments against BFCL's accepted values,
counted over the selection tasks; irrelevance questions are counted apart. Each rate carries
a 95 % Wilson interval, so a small sample says how little it shows.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass, replace
from fractions import Fraction
from typing import Any

from tiny_cli.bench.universe import size_label

__all__ = [
    "COLUMNS",
    "Column",
    "RunRecord",
    "ScaleReport",
    "ScaleRow",
    "build_report",
    "count",
    "markdown_table",
    "rebuild",
    "wilson",
]

Z95 = 1.959964  # the normal quantile of a two-sided 95 % interval


@dataclass(frozen=True)
class RunRecord:
    """One task in one arm at one size: what was offered, what was called, what it cost."""

    task: str
    relevant: bool  # False: an irrelevance question (no call is right)
    size: int
    universe: str
    tools: int  # the universe's tool count
    arm: str
    status: str  # a CallVerdict status
    reason: str
    called: str | None
    card: str | None  # the card run (None: no request: abstained, or does not fit)
    offered_cards: tuple[str, ...]  # whose tools were offered (the generalist's: several)
    routed_right: bool | None  # tiny, hybrid: routing chose the expected card (abstained on none)
    in_top: bool | None  # top-k, hybrid: the expected card among the k best
    fits: bool
    offered: int  # tools offered to the model
    # as the server counted them; where nothing was sent, 0 (abstained) or the estimate of a
    # prompt that does not fit the context
    prompt_tokens: int
    schema_tokens: int  # estimated tokens of the offered tools' schemas
    completion_tokens: int
    wall_seconds: float
    ghost_calls: int
    digest_status: str


@dataclass(frozen=True)
class ScaleRow:
    """One size and arm: counts, rates with intervals, tokens and time per task."""

    size: int
    label: str
    tools: float
    arm: str
    fits: bool
    tasks: int
    right_tool: int | None
    right_call: int | None
    right_tool_ci: tuple[float, float] | None
    right_call_ci: tuple[float, float] | None
    irrelevance_tasks: int
    irrelevance_right: int | None
    routing_right: int | None
    topk_recall: int | None
    # per task: the exact mean rounded once to a whole token (JSON, tables and page alike)
    prompt_tokens: int
    schema_tokens: int
    completion_tokens: int
    wall_p50: float | None
    wall_p95: float | None
    ghost_calls: int
    failed: int  # runs that ended before the model chose (server error, timeout): not right


@dataclass(frozen=True)
class ScaleReport:
    """The whole run: its settings, a row per size and arm, and every run."""

    model: str
    tool_mode: str
    started_at: str
    seed: int
    top_k: int
    hybrid_margin: float
    catalogue_tools: int
    rows: tuple[ScaleRow, ...]
    runs: tuple[RunRecord, ...]
    replayed_from: str | None = None
    temperature: float | None = None  # sent with every request; None: none (server default)

    def to_json(self) -> dict[str, Any]:
        """Return the report as one JSON document (`--json`, `--out`, the HTML page)."""
        head = {k: v for k, v in asdict(self).items() if k not in ("rows", "runs")}
        relevant = {r.task for r in self.runs if r.relevant}
        return {
            "kind": "selection",
            **head,
            "tasks": len(relevant),
            "irrelevance_tasks": len({r.task for r in self.runs} - relevant),
            "rows": [asdict(r) for r in self.rows],
            "runs": [asdict(r) for r in self.runs],
        }


def build_report(
    records: Sequence[RunRecord],
    options: Any,
    model: str,
    started: str,
    catalogue_tools: int,
    tool_mode: str = "",
    temperature: float | None = None,
) -> ScaleReport:
    """Aggregate the runs into one row per size and arm, in the order they ran."""
    return ScaleReport(
        model,
        tool_mode,
        started,
        options.seed,
        options.top_k,
        options.hybrid_margin,
        catalogue_tools,
        _rows(records, timed=True),
        tuple(records),
        temperature=temperature,
    )


def rebuild(report: ScaleReport, replayed_from: str) -> ScaleReport:
    """The same runs as a replay: the report says so and shows no wall times."""
    return replace(report, rows=_rows(report.runs, timed=False), replayed_from=replayed_from)


def _rows(records: Sequence[RunRecord], *, timed: bool) -> tuple[ScaleRow, ...]:
    """One row per size and arm, in the order they ran (`timed` False: a replay's wall times
    are the replay's, not the model's)."""
    keys = list(dict.fromkeys((r.size, r.arm) for r in records))
    return tuple(_row([r for r in records if (r.size, r.arm) == key], timed) for key in keys)


@dataclass(frozen=True)
class Column:
    """One column of the bench-at-scale table: its name, a row's cell, where it is shown."""

    name: str
    cell: Callable[[ScaleRow], str]
    markdown: bool = True  # False: wall times, which a replay (each table in the docs) has not
    terminal: bool = True  # False: left out of the terminal's narrower table


def count(row: ScaleRow, n: int | None, d: int) -> str:
    """Show `n` of `d` for a row: "does not fit" where the prompt did not, a dash where n/a."""
    return "does not fit" if not row.fits else ("—" if n is None or not d else f"{n} / {d}")


def _of_tasks(n: int | None, row: ScaleRow) -> str:
    """`n` of the row's selection tasks, a dash where the arm does not measure it."""
    return "—" if n is None else f"{n} / {row.tasks}"


def _interval(row: ScaleRow) -> str:
    """The right calls' 95 % interval, each bound rounded once from its exact value."""
    ci = row.right_call_ci
    return f"{ci[0]:.2f}-{ci[1]:.2f}" if ci else "—"


# The one column order of the table, in every rendering (Markdown, terminal; the HTML page
# keeps it too, with the interval inside the right-call cell): `routing right` is the routed
# card's, `top-k recall` the k best's, never one shown for the other.
COLUMNS = (
    Column("size", lambda r: r.label),
    Column("tools", lambda r: f"{r.tools:g}"),
    Column("arm", lambda r: r.arm),
    Column("right tool", lambda r: count(r, r.right_tool, r.tasks)),
    Column("right call", lambda r: count(r, r.right_call, r.tasks)),
    Column("95 % interval", _interval, terminal=False),
    Column("irrelevance right", lambda r: count(r, r.irrelevance_right, r.irrelevance_tasks)),
    Column("routing right", lambda r: _of_tasks(r.routing_right, r)),
    Column("top-k recall", lambda r: _of_tasks(r.topk_recall, r)),
    Column("prompt tokens / task", lambda r: f"{r.prompt_tokens:,}"),
    Column("schema tokens / task", lambda r: f"{r.schema_tokens:,}", terminal=False),
    Column("completion tokens / task", lambda r: f"{r.completion_tokens:,}", terminal=False),
    Column(
        "wall p50 s", lambda r: "—" if r.wall_p50 is None else f"{r.wall_p50:.1f}", markdown=False
    ),
    Column("ghost calls", lambda r: str(r.ghost_calls), terminal=False),
    Column("failed runs", lambda r: str(r.failed), terminal=False),
)
MARKDOWN_COLUMNS = tuple(c for c in COLUMNS if c.markdown)
TERMINAL_COLUMNS = tuple(c for c in COLUMNS if c.terminal)


def markdown_table(report: ScaleReport) -> str:
    """Return the rows as a Markdown table (the shape docs/bench.md shows); no wall times."""
    lines = [_md([c.name for c in MARKDOWN_COLUMNS]), _md(["---"] * len(MARKDOWN_COLUMNS))]
    lines += [_md([c.cell(row) for c in MARKDOWN_COLUMNS]) for row in report.rows]
    return "\n".join(lines) + "\n"


def _md(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


# the expected function was called, whatever its arguments (a wrong value, or no object)
RIGHT_TOOL = ("right", "right_tool", "bad_arguments")


def _row(runs: Sequence[RunRecord], timed: bool = True) -> ScaleRow:
    relevant = [r for r in runs if r.relevant]
    irrelevant = [r for r in runs if not r.relevant]
    fits = all(r.fits for r in runs)
    tool = sum(r.status in RIGHT_TOOL for r in relevant)
    call = sum(r.status == "right" for r in relevant)
    sent = [r.wall_seconds for r in runs if r.card is not None and r.fits and timed]
    answered = [r for r in runs if r.status != "failed" or r.prompt_tokens]
    first = runs[0]
    return ScaleRow(
        size=first.size,
        label=size_label(first.size),
        tools=round(statistics.fmean(r.tools for r in runs), 1),
        arm=first.arm,
        fits=fits,
        tasks=len(relevant),
        right_tool=tool if fits else None,
        right_call=call if fits else None,
        right_tool_ci=wilson(tool, len(relevant)) if fits and relevant else None,
        right_call_ci=wilson(call, len(relevant)) if fits and relevant else None,
        irrelevance_tasks=len(irrelevant),
        irrelevance_right=sum(r.status == "right" for r in irrelevant) if fits else None,
        routing_right=_count(relevant, "routed_right"),
        topk_recall=_count(relevant, "in_top"),
        # a run that failed before any answer has no token count: left out, not counted as 0
        prompt_tokens=_mean(r.prompt_tokens for r in answered),
        schema_tokens=_mean(r.schema_tokens for r in runs),
        completion_tokens=_mean(r.completion_tokens for r in answered),
        wall_p50=round(statistics.median(sent), 2) if sent else None,
        wall_p95=round(_percentile(sent, 0.95), 2) if sent else None,
        ghost_calls=sum(r.ghost_calls for r in runs),
        failed=sum(r.status == "failed" for r in runs),
    )


def wilson(hits: int, n: int) -> tuple[float, float]:
    """The 95 % Wilson score interval of `hits` out of `n`, exact: round it only to show it."""
    if n == 0:
        return (0.0, 1.0)
    p = hits / n
    centre = p + Z95 * Z95 / (2 * n)
    spread = Z95 * math.sqrt(p * (1 - p) / n + Z95 * Z95 / (4 * n * n))
    denominator = 1 + Z95 * Z95 / n
    # clamped: at 0 or n hits a bound is 0 or 1 but for the float's last bit ("-0.00")
    return (max(0.0, (centre - spread) / denominator), min(1.0, (centre + spread) / denominator))


def _count(runs: Sequence[RunRecord], attribute: str) -> int | None:
    values = [getattr(r, attribute) for r in runs]
    return None if any(v is None for v in values) or not values else sum(values)


def _mean(values: Iterable[int]) -> int:
    """The mean of token counts rounded once, from its exact value, to a whole token, half
    away from zero: no float's last bit, nor a second rounding, moves the number shown."""
    counts = list(values)
    if not counts:
        return 0
    return math.floor(Fraction(sum(counts), len(counts)) + Fraction(1, 2))  # counts are >= 0


def _percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, math.ceil(q * len(ordered)) - 1)]
