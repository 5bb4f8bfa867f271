"""The example bench's report as one self-contained HTML page: the arms side by side, every task.

The bench at scale draws charts (`tiny_cli.bench.html`, matplotlib); this page needs none, so
`tiny bench --html` writes it with the base install. Every value from the report is escaped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tiny_cli.bench.html import BODY_CSS, esc, page, table, write_page
from tiny_cli.settings import sampling

__all__ = ["write_bench_html"]

# (label, how one arm's summary gives it); a share is shown with its count
_FIGURES: tuple[tuple[str, str], ...] = (
    ("runs", "runs"),
    ("right (on evidence)", "right"),
    ("status ok", "ok"),
    ("fabricated", "fabricated"),
    ("routing accuracy", "routing_accuracy"),
    ("fields correct (tool or task)", "fields_correct"),
    ("fields expected", "fields_expected"),
    ("ghost calls", "ghost_calls"),
    ("wrong-tool calls", "wrong_tool_calls"),
    ("unwanted writes", "unwanted_writes"),
    ("tool calls", "tool_calls"),
    ("prompt tokens", "tokens_in"),
    ("completion tokens", "tokens_out"),
    ("wall time, median per run", "wall_median"),
)
_CSS = (
    BODY_CSS
    + """.meta { color: #555; }
table { border-collapse: collapse; font-size: .9rem; font-variant-numeric: tabular-nums;
  margin: 1.5rem 0; }
caption { text-align: left; font-weight: 600; padding-bottom: .4rem; }
th, td { padding: .3rem .6rem; border-bottom: 1px solid #ddd; text-align: right; }
th { background: #f4f4f4; }
.text { text-align: left; }
"""
)


def write_bench_html(report: Mapping[str, Any], path: Path) -> None:
    """Write an example-bench report (its JSON document) to `path` as one HTML page, whole."""
    arms: Mapping[str, Mapping[str, Any]] = report.get("arms") or {}
    body = [
        f'<p class="meta">{_meta(report)}</p>',
        _arms_table(arms, replayed=bool(report.get("replayed"))),
        _tasks_table(report.get("tasks") or [], list(arms)),
    ]
    write_page(path, page(f"tiny bench: {esc(report.get('model', '?'))}", _CSS, body))


def _meta(report: Mapping[str, Any]) -> str:
    """The line under the title: endpoint host, tool mode, start, tiny version, live or replay."""
    run = "replay of a recording" if report.get("replayed") else "live run"
    return " · ".join(
        esc(part)
        for part in (
            f"host {report.get('base_url') or '?'}",
            f"tool mode {report.get('tool_mode') or 'each card its own'}",
            sampling(report.get("temperature")),
            f"started {report.get('started_at') or '?'}",
            f"tiny {report.get('tiny_version') or '?'}",
            run,
        )
    )


def _arms_table(arms: Mapping[str, Mapping[str, Any]], *, replayed: bool) -> str:
    """The arms side by side, one figure a row."""
    head = '<th class="text">figure</th>' + "".join(f"<th>{esc(a)}</th>" for a in arms)
    rows = []
    for label, key in _FIGURES:
        if key == "wall_median" and replayed:
            continue  # a replay's wall times are the replay's, not the model's
        cells = "".join(f"<td>{_figure(summary, key)}</td>" for summary in arms.values())
        rows.append(f'<tr><td class="text">{esc(label)}</td>{cells}</tr>')
    return table("arms", "The arms side by side", head, rows)


def _figure(summary: Mapping[str, Any], key: str) -> str:
    """One arm's figure as text: counts as they are, shares as a percentage."""
    if key == "ok":
        value: Any = (summary.get("outcomes") or {}).get("ok", 0)
    else:
        value = summary.get(key)
    if value is None:
        return "—"
    if key == "routing_accuracy":
        return f"{100 * value:.0f} %" if isinstance(value, int | float) else esc(value)
    if key == "wall_median" and isinstance(value, int | float):
        return f"{value:.1f} s"
    return f"{value:,}" if isinstance(value, int) else esc(value)


def _tasks_table(tasks: Sequence[Mapping[str, Any]], arms: Sequence[str]) -> str:
    """Every task: its expected card, and in each arm its statuses and how many runs were right."""
    head = '<th class="text">task</th><th class="text">expected card</th>'
    head += "".join(f'<th class="text">{esc(a)}</th>' for a in arms)
    rows = []
    for task in tasks:
        runs = task.get("runs") or {}
        cells = "".join(f'<td class="text">{_outcome(runs.get(a) or [])}</td>' for a in arms)
        agent = task.get("expected_agent") or "none (abstain)"
        rows.append(
            f'<tr><td class="text">{esc(task.get("id"))}</td>'
            f'<td class="text">{esc(agent)}</td>{cells}</tr>'
        )
    return table("tasks", "Every task: statuses of its runs, and right runs", head, rows)


def _outcome(runs: Sequence[Mapping[str, Any]]) -> str:
    """`ok 2x, failed · right 2/3` for one task's runs in one arm."""
    if not runs:
        return "—"
    statuses = Counter(str(r.get("status")) for r in runs)
    shown = ", ".join(f"{s} {n}x" if n > 1 else s for s, n in statuses.items())
    right = sum(bool(r.get("right")) for r in runs)
    return esc(f"{shown} · right {right}/{len(runs)}")
