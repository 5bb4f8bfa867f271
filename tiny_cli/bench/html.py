"""The bench-at-scale report as one self-contained HTML page: two inline SVG charts and a table."""

from __future__ import annotations

import contextlib
import html
import io
import re
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from tiny_cli.errors import ConfigError
from tiny_cli.settings import sampling
from tiny_cli.userfiles import write_text

__all__ = ["BODY_CSS", "esc", "page", "require_charts", "table", "write_html", "write_page"]

Row = Mapping[str, Any]

# Okabe-Ito colours (safe for colour-blind readers); the oracle is the grey upper bound.
_STYLE: dict[str, tuple[str, str, str]] = {
    "oracle": ("#555555", "o", "--"),
    "tiny": ("#0072B2", "s", "-"),
    "top-k": ("#E69F00", "^", "-"),
    "hybrid": ("#009E73", "D", "-"),
    "all-tools": ("#D55E00", "v", "-"),
}
_SPARE = ("#CC79A7", "#56B4E9", "#F0E442", "#000000")
_NO_FIT_Y = -9.0  # the accuracy chart's "does not fit" strip, below 0 %
# the body rule both bench pages share (tiny_cli.bench.bench_html)
BODY_CSS = """
body { font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1a1a1a;
  max-width: 72rem; margin: 2rem auto; padding: 0 1rem; }
"""
_CSS = (
    BODY_CSS
    + """h1 { font-size: 1.6rem; margin-bottom: .2rem; }
.meta { color: #555; margin-top: 0; }
.headline { font-size: 1.2rem; font-weight: 600; border-left: 4px solid #0072B2;
  padding-left: .8rem; }
figure { margin: 2rem 0; }
figure svg { display: block; width: 100%; max-width: 56rem; height: auto; }
figcaption { color: #444; font-size: .95rem; max-width: 56rem; }
table { border-collapse: collapse; font-size: .82rem; font-variant-numeric: tabular-nums; }
caption { text-align: left; font-weight: 600; padding-bottom: .4rem; }
th, td { padding: .3rem .45rem; border-bottom: 1px solid #ddd; text-align: right;
  vertical-align: top; }
td { white-space: nowrap; }
th { background: #f4f4f4; vertical-align: bottom; }
td.text, th.text { text-align: left; }
tbody tr.first td { border-top: 2px solid #999; }
tr.nofit td { color: #777; font-style: italic; }
.ci { display: block; color: #777; font-size: .85em; }
.scroll { overflow-x: auto; }
"""
)
_COLUMNS = (
    ("size", "text"),
    ("tools", ""),
    ("arm", "text"),
    ("right tool", ""),
    ("right call (95 % CI)", ""),
    ("irrelevance right", ""),
    ("routing right", ""),
    ("top-k recall", ""),
    ("prompt tokens", ""),
    ("schema tokens", ""),
    ("completion tokens", ""),
    ("wall p50 / p95", ""),
    ("ghost calls", ""),
    ("failed runs", ""),
)


def write_html(report: Mapping[str, Any], path: Path) -> None:
    """Write a `kind: selection` bench report to `path` as one HTML page, atomically."""
    kind = report.get("kind", "selection")
    if kind != "selection":
        raise ConfigError(f"the HTML report draws a selection bench, not kind {kind!r}")
    new_figure = _figure_maker()
    rows: list[Row] = list(report.get("rows") or [])
    charts = (_accuracy_svg(rows, new_figure), _tokens_svg(rows, new_figure))
    write_page(Path(path), _page(report, rows, charts))


def require_charts() -> None:
    """Raise ConfigError now, before a bench runs for hours, if the page cannot be drawn."""
    _figure_maker()


def _figure_maker() -> Any:
    """A maker of matplotlib Figures on the Agg canvas, imported only now (an optional extra).

    No pyplot and no `matplotlib.use`: the caller's own backend and figures stay as they were.
    """
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise ConfigError(
            "the HTML report needs matplotlib: pip install 'tiny-cli[report]'"
        ) from exc

    def new_figure(**options: Any) -> Any:
        figure = Figure(**options)
        FigureCanvasAgg(figure)
        return figure

    return new_figure


def _arms(rows: Sequence[Row]) -> list[str]:
    """The arms in the order they first appear."""
    return list(dict.fromkeys(str(r["arm"]) for r in rows))


def _style(arm: str, arms: Sequence[str]) -> dict[str, str]:
    """Colour, marker and line style of one arm, as plot keywords; unknown arms take spares."""
    if arm in _STYLE:
        colour, marker, line = _STYLE[arm]
    else:
        unknown = [a for a in arms if a not in _STYLE]
        colour, marker, line = _SPARE[unknown.index(arm) % len(_SPARE)], "P", "-"
    return {"color": colour, "marker": marker, "linestyle": line}


def _dodge(arm: str, arms: Sequence[str]) -> float:
    """A small factor on x per arm, so error bars at one tool count do not hide each other."""
    middle = (len(arms) - 1) / 2
    return float(10 ** ((arms.index(arm) - middle) * 0.02))


def _fits(row: Row) -> bool:
    """Whether the row's prompt fitted the model's context (its accuracies are measured)."""
    return bool(row.get("fits", True)) and row.get("right_call") is not None


def _accuracy(row: Row) -> tuple[float, float, float]:
    """Right calls as % of tasks, and the distance down and up to its 95 % interval."""
    value = 100.0 * row["right_call"] / row["tasks"] if row.get("tasks") else 0.0
    low, high = row.get("right_call_ci") or (value / 100, value / 100)
    return value, max(0.0, value - 100 * low), max(0.0, 100 * high - value)


def _accuracy_svg(rows: Sequence[Row], new_figure: Any) -> str:
    """Chart 1: right call / tasks against tool count, one line per arm, 95 % error bars."""
    fig = new_figure(figsize=(9, 5), layout="constrained")
    ax = fig.add_subplot()
    arms = _arms(rows)
    for arm in arms:
        style = _style(arm, arms)
        mine = _rows_of(rows, arm)
        measured = [r for r in mine if _fits(r)]
        points = [_accuracy(r) for r in measured]
        xs = [float(r["tools"]) * _dodge(arm, arms) for r in measured]
        bars = [[p[1] for p in points], [p[2] for p in points]]
        ax.errorbar(xs, [p[0] for p in points], yerr=bars, capsize=3, label=arm, **style)
        lost = [float(r["tools"]) * _dodge(arm, arms) for r in mine if not _fits(r)]
        _hollow(ax, lost, [_NO_FIT_Y] * len(lost), style, f"{arm}: does not fit")
    if any(not _fits(r) for r in rows):
        ax.axhspan(-16, -2, color="#f1f1f1", zorder=0)
    ax.set_ylim(-16, 104)
    ax.set_yticks(range(0, 101, 20), [f"{v} %" for v in range(0, 101, 20)])
    ax.set_ylabel("right call (% of tasks)")
    _tool_axis(ax, rows)
    return _svg(fig, "acc")


def _tokens_svg(rows: Sequence[Row], new_figure: Any) -> str:
    """Chart 2: prompt tokens per task against tool count, both axes log, one line per arm."""
    from matplotlib import ticker

    fig = new_figure(figsize=(9, 5), layout="constrained")
    ax = fig.add_subplot()
    arms = _arms(rows)
    for arm in arms:
        style = _style(arm, arms)
        mine = [r for r in _rows_of(rows, arm) if r.get("prompt_tokens")]
        xs = [float(r["tools"]) for r in mine]
        ys = [float(r["prompt_tokens"]) for r in mine]
        fitting = [i for i, r in enumerate(mine) if r.get("fits", True)]
        ax.plot([xs[i] for i in fitting], [ys[i] for i in fitting], label=arm, **style)
        lost = [i for i in range(len(mine)) if i not in fitting]
        for i in (i for i in lost if i):  # a dotted line from the point before to the estimate
            ax.plot(xs[i - 1 : i + 1], ys[i - 1 : i + 1], color=style["color"], linestyle=":")
        _hollow(ax, [xs[i] for i in lost], [ys[i] for i in lost], style, "estimate: does not fit")
    ax.set_yscale("log")
    ax.margins(y=0.12)  # room above the top marker's label
    ax.yaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(ticker.StrMethodFormatter("{x:,.0f}"))
    ax.set_ylabel("prompt tokens per task (log scale)")
    _tool_axis(ax, rows)
    return _svg(fig, "tok")


def _rows_of(rows: Sequence[Row], arm: str) -> list[Row]:
    """One arm's rows, fewest tools first."""
    return sorted((r for r in rows if r["arm"] == arm), key=lambda r: float(r["tools"]))


def _hollow(
    ax: Any, xs: Sequence[float], ys: Sequence[float], style: Mapping[str, str], text: str
) -> None:
    """Hollow markers, each labelled on its left: points whose prompt did not fit."""
    if not xs:
        return
    colour = style["color"]
    ax.plot(xs, ys, linestyle="none", marker=style["marker"], markersize=9,
            markerfacecolor="white", markeredgecolor=colour, markeredgewidth=1.8)  # fmt: skip
    for x, y in zip(xs, ys, strict=True):
        ax.annotate(text, (x, y), xytext=(-10, 0), textcoords="offset points", ha="right",
                    va="center", fontsize=9, color=colour)  # fmt: skip


def _tool_axis(ax: Any, rows: Sequence[Row]) -> None:
    """The shared x axis (tools, log scale, ticks at the bench's sizes) and the legend."""
    ticks: dict[str, list[float]] = {}
    for row in rows:
        ticks.setdefault(str(row["label"]), []).append(float(row["tools"]))
    places = [sum(v) / len(v) for v in ticks.values()]
    names = [
        f"{name}\n({place:,.0f} tools)" if name == "all" else f"{name}\n({place:g})"
        for name, place in zip(ticks, places, strict=True)
    ]
    ax.set_xscale("log")
    if places:
        ax.set_xticks(places, names)
        ax.set_xlim(min(places) / 1.6, max(places) * 1.6)
    ax.minorticks_off()
    ax.set_xlabel("tools the agent could choose from: size (mean tools), log scale")
    ax.grid(True, which="major", axis="y", color="#e5e5e5")
    ax.spines[["top", "right"]].set_visible(False)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=5, frameon=False)


def _svg(fig: Any, prefix: str) -> str:
    """The figure as an `<svg>` element to inline: no prologue, metadata or namespace URLs.

    Ids get `prefix`, so two charts in one page never share an id.
    """
    import matplotlib

    buffer = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": prefix, "svg.fonttype": "path"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    text = text[text.index("<svg") :]
    text = re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.DOTALL)
    text = re.sub(r'\s+xmlns(:\w+)?="[^"]*"', "", text)
    text = re.sub(r'\bid="', f'id="{prefix}-', text)
    text = re.sub(r'(url\(#|href="#)', rf"\g<1>{prefix}-", text)
    return text.replace("<svg ", '<svg role="img" ', 1).strip()


def _page(report: Mapping[str, Any], rows: Sequence[Row], charts: tuple[str, str]) -> str:
    """The whole HTML document."""
    title = f"Tool selection at scale: {esc(report.get('model', '?'))}"
    headline = report.get("headline")
    accuracy, tokens = charts
    body = [
        f'<p class="meta">{_meta(report)}</p>',
        f'<p class="headline">{esc(headline)}</p>' if headline else "",
        f"<p>{_setup(report)}</p>",
        _figure("accuracy-chart", accuracy, _ACCURACY_CAPTION),
        _figure("tokens-chart", tokens, _TOKENS_CAPTION),
        _table(rows),
    ]
    viewport = '<meta name="viewport" content="width=device-width, initial-scale=1">'
    return page(title, _CSS, body, head=viewport)


def page(title: str, css: str, body: Sequence[str], head: str = "") -> str:
    """A whole HTML document: `title` (escaped) as its title and heading, then `body`."""
    parts = [
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">',
        head,
        f"<title>{title}</title>\n<style>{css}</style>\n</head>\n<body>",
        f"<h1>{title}</h1>",
        *body,
        "</body>\n</html>\n",
    ]
    return "\n".join(p for p in parts if p)


_ACCURACY_CAPTION = (
    "Tool-selection accuracy: the share of tasks whose first call names the right tool with "
    "the right arguments, against how many tools the agent could choose from. Bars are 95 % "
    "intervals. A hollow marker in the grey strip is an arm whose prompt did not fit the "
    "model's context: it was not run, which is not the same as 0 %."
)
_TOKENS_CAPTION = (
    "Prompt tokens per task against the number of tools, both axes log. A hollow marker "
    "is the estimate for a prompt that did not fit the model's context."
)


def _meta(report: Mapping[str, Any]) -> str:
    """The line under the title: tool mode, date, and live run or replay."""
    started = str(report.get("started_at") or "")
    with contextlib.suppress(ValueError):
        started = datetime.fromisoformat(started).strftime("%Y-%m-%d %H:%M %Z").strip()
    replayed = report.get("replayed_from")
    run = f"replay of {esc(replayed)}" if replayed else "live run"
    mode = esc(report.get("tool_mode", "?"))
    asked = esc(sampling(report.get("temperature")))
    return f"tool mode <b>{mode}</b> · {asked} · started {esc(started or '?')} · {run}"


def _setup(report: Mapping[str, Any]) -> str:
    """One sentence on what was run: catalogue, tasks, seed, top-k, hybrid margin."""
    return esc(
        f"{report.get('tasks', '?')} tasks (and {report.get('irrelevance_tasks', '?')} "
        f"irrelevance tasks, where the right answer is no call) drawn from a catalogue of "
        f"{report.get('catalogue_tools', '?')} tools; seed {report.get('seed', '?')}, "
        f"top-k {report.get('top_k', '?')}, hybrid margin {report.get('hybrid_margin', '?')}."
    )


def _figure(figure_id: str, svg: str, caption: str) -> str:
    """One chart in a `<figure>` with its caption."""
    return f'<figure id="{figure_id}">\n{svg}\n<figcaption>{esc(caption)}</figcaption>\n</figure>'


def _table(rows: Sequence[Row]) -> str:
    """Every row of the report, one table row each."""
    head = "".join(f'<th scope="col" class="{c}">{esc(n)}</th>' for n, c in _COLUMNS)
    body = []
    for i, row in enumerate(rows):
        first = i == 0 or rows[i - 1]["label"] != row["label"]
        classes = " ".join(c for c, on in (("first", first), ("nofit", not _fits(row))) if on)
        opening = f'<tr class="{classes}">' if classes else "<tr>"
        body.append(opening + "".join(_cells(row)) + "</tr>")
    caption = "Every arm at every size: counts are right/asked"
    return f'<div class="scroll">\n{table("rows", caption, head, body)}\n</div>'


def table(table_id: str, caption: str, head: str, rows: Sequence[str]) -> str:
    """A `<table>`: its caption (escaped), the header row's cells `head`, then `rows`."""
    return (
        f'<table id="{table_id}">\n<caption>{esc(caption)}</caption>\n'
        f"<thead><tr>{head}</tr></thead>\n<tbody>\n" + "\n".join(rows) + "\n</tbody>\n</table>"
    )


def _cells(row: Row) -> list[str]:
    """The `<td>`s of one row, every value escaped, in `_COLUMNS` order."""
    tasks = row.get("tasks")
    prompt = _number(row.get("prompt_tokens"))
    if _fits(row):
        counts = [
            _count(row.get("right_tool"), tasks),
            _count(row.get("right_call"), tasks) + _ci(row.get("right_call_ci")),
            _count(row.get("irrelevance_right"), row.get("irrelevance_tasks")),
            _count(row.get("routing_right"), tasks),
            _count(row.get("topk_recall"), tasks),
        ]
        measured = [f"<td>{c}</td>" for c in counts]
    else:
        measured = ['<td colspan="5" class="text">does not fit the context: not run</td>']
        prompt = prompt if prompt == "—" else f"≈{prompt} (estimate)"
    walls = [_number(row.get(k), "{:.1f} s") for k in ("wall_p50", "wall_p95")]
    wall = "—" if walls == ["—", "—"] else " / ".join(walls)
    tail = (
        prompt,
        _number(row.get("schema_tokens")),
        _number(row.get("completion_tokens")),
        wall,
        _number(row.get("ghost_calls")),
        _number(row.get("failed")),
    )
    return [
        f'<td class="text">{esc(row.get("label", row.get("size")))}</td>',
        f"<td>{_number(row.get('tools'), '{:,g}')}</td>",
        f'<td class="text">{esc(row.get("arm"))}</td>',
        *measured,
        *(f"<td>{v}</td>" for v in tail),
    ]


def _count(part: Any, whole: Any) -> str:
    """`n/d (p %)`, or a dash when the arm does not measure it."""
    if part is None or not whole:
        return "—"
    return f"{part:,}/{whole:,} ({100 * part / whole:.0f} %)"


def _ci(interval: Any) -> str:
    """A 95 % interval as a small `[lo-hi %]` after the count (an en dash on the page)."""
    if not interval:
        return ""
    low, high = interval
    return f' <span class="ci">[{100 * low:.0f}&ndash;{100 * high:.0f} %]</span>'


def _number(value: Any, pattern: str = "{:,.0f}") -> str:
    """A number formatted with `pattern`, a dash for null, anything else escaped as text."""
    if value is None:
        return "—"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return pattern.format(value)
    return esc(value)


def esc(value: Any) -> str:
    """Any value from the report as HTML-escaped text."""
    return html.escape(str(value), quote=True)


def write_page(path: Path, text: str) -> None:
    """Write `text` whole (a temp file moved into place); never over a folder or special file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text(path, text)
