"""Human output: the Digest, cards, routes and evaluations as rich tables and panels.

The benches draw in `render_bench`, the run log in `render_runs`; `render_fit` fits a table
to the terminal for all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from tiny_cli.cards.card import Card, Problem, shown_path
from tiny_cli.cli.render_fit import WIDE_HINT, Col, fitted, print_fitted
from tiny_cli.text import printable, write_call
from tiny_cli.tools.mcp_config import original


def validation(
    console: Console,
    cards: Sequence[Card],
    problems: Sequence[Problem],
    fmt: str,
    warnings: Sequence[Problem] = (),
    wide: bool = False,
) -> None:
    """Print problems and warnings (one line each, or GitHub annotations), else the card table."""
    for level, found in (("error", problems), ("warning", warnings)):
        for p in found:
            if fmt == "github":
                line = f",line={p.line}" if p.line else ""
                where = f"file={_gh_property(shown_path(p.file))}{line},title=tiny validate"
                text = f"::{level} {where}::{_gh_data(f'{p.field}: {p.message}')}"
            else:
                text = printable(str(p) if level == "error" else f"warning: {p}")
            console.print(text, markup=False, highlight=False, soft_wrap=True)
    if problems:
        console.print(f"{len(problems)} problem(s) found", style="bold red", highlight=False)
        return
    _card_table(console, cards, wide)


def _card_table(console: Console, cards: Sequence[Card], wide: bool) -> None:
    """Tabulate the cards: tool names fold (never cut), a card id is cut only to fit."""
    rows = []
    for c in cards:
        b = c.budget
        tools = [_shown(original(t)) for t in c.tools]  # as the card writes them
        rows.append(
            [
                _shown(c.id),
                ", ".join(tools),
                _shown(", ".join(c.returns_required)),
                _shown(c.side_effects),
                f"{b.max_tool_calls} / {b.max_output_tokens} / {b.max_wall_seconds:g}",
            ]
        )
    longest_tool = max((len(t) + 1 for c in cards for t in c.tools), default=1)  # and its comma
    cols = [
        Col("id", gives="name"),
        Col("tools", gives="text", least=longest_tool),
        Col("returns", gives="text"),
        Col("side effects", gives="header"),
        Col("budget (calls / tokens / s)", gives="header"),
    ]
    title = f"{len(cards)} card(s) OK"
    table, cut = fitted(console, cols, rows, wide, title=title, title_justify="left")
    print_fitted(console, table, wide)
    if cut:
        console.print(WIDE_HINT, style="dim", highlight=False)


def _gh_data(text: str) -> str:
    """Escape a workflow command's message, so a newline cannot start a new command."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_property(text: str) -> str:
    """Escape a workflow command's property value (a file name with ',' or ':')."""
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")


def decisions(console: Console, items: Sequence[Any], router: Any) -> None:
    """Print each routing decision: the candidates table, then the verdict."""
    name = getattr(getattr(router, "embedder", None), "name", "?")
    for d in items:
        table = Table(title=f"route: {escape(printable(d.task))}", title_justify="left")
        table.add_column("#", justify="right")
        table.add_column("card")
        table.add_column("score", justify="right")
        for i, c in enumerate(d.candidates, 1):
            style = "bold green" if d.decision == "route" and c.agent_id == d.agent_id else None
            table.add_row(str(i), c.agent_id, f"{c.score:.3f}", style=style)
        console.print(table)
        taught = " (taught)" if getattr(d, "taught", False) else ""
        if d.decision == "route":
            verdict = f"[bold green]route[/] → {d.agent_id}{taught}"
        else:
            verdict = "[bold yellow]abstain[/]: " + (
                "taught out of scope" if taught else "no card fits"
            )
        console.print(
            f"{verdict}  (score {d.score:.3f}, threshold {d.threshold:.3f}, "
            f"embedder {escape(name)})\n"
        )


def explanation(console: Console, e: Any, router: Any) -> None:
    """Print a decision with, per candidate, the card text and the words behind its score."""
    decisions(console, [e.decision], router)
    table = Table(title="why", title_justify="left")
    for col in ("card", "score", "driven by", "words"):
        table.add_column(col, justify="right" if col == "score" else "left")
    for r in e.reasons:
        source = f"tool {r.tool}" if r.tool else r.source
        driver = f"{escape(source)} [dim](cosine {r.cosine:.3f})[/]\n{escape(_short(r.text))}"
        if r.nearest_example is not None:
            driver += (
                f"\n[dim]nearest example ({r.nearest_example_cosine:.2f}):[/] "
                f"{escape(_short(r.nearest_example))}"
            )
        words = f"{escape(', '.join(r.words))} [dim](+{r.lexical:.3f})[/]" if r.words else "—"
        table.add_row(r.agent_id, f"{r.score:.3f}", driver, words)
    console.print(table)
    console.print(f"threshold {e.decision.threshold:.3f}: {escape(printable(e.threshold_source))}")
    if e.tools_source:
        console.print(f"tools: {escape(printable(e.tools_source))}")
    console.print(
        "[dim]score: z of (cosine + words) against generic text. cosine: the closest of the "
        "card's vectors (summary, each capability the summary lists, each tool it allows, "
        "summary + examples, the mean of its 3 nearest examples). words: the task's words "
        "found in the card's texts, and what they add.[/dim]"
    )


def _short(text: str, limit: int = 90) -> str:
    text = printable(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def evaluation(console: Console, report: Any) -> None:
    """Print routing quality: ranking vs the abstain rule, each card, confusions, the sweep."""
    figures = Table(title=f"routing quality on {report.n} tasks", title_justify="left")
    figures.add_column("metric")
    figures.add_column("value", justify="right")
    for label, value in (
        ("top-1 never abstaining (ranking alone)", report.top1_never_abstain),
        ("top-1 in scope, at the threshold", report.top1_in_scope),
        ("abstain recall", report.abstain_recall),
        ("abstain precision", report.abstain_precision),
        ("overall accuracy", report.accuracy),
    ):
        figures.add_row(label, f"{value:.3f}")
    figures.add_row("threshold", f"{report.threshold:.3f}")
    best = report.best_at_target
    if best is not None:
        figures.add_row(
            "best top-1 in scope at abstain recall ≥ 0.80",
            f"{best.in_scope_accuracy:.3f} / {best.abstain_recall:.3f} at {best.threshold:.3f}",
        )
    console.print(figures)
    _per_card(console, report.per_card)
    _confusions(console, report.confusions)
    sweep = Table(title="threshold sweep", title_justify="left")
    for col in ("threshold", "in-scope accuracy", "abstain recall"):
        sweep.add_column(col, justify="right")
    for p in report.sweep:
        mark = "bold" if abs(p.threshold - report.threshold) < 1e-9 else None
        sweep.add_row(
            f"{p.threshold:.3f}",
            f"{p.in_scope_accuracy:.3f}",
            f"{p.abstain_recall:.3f}",
            style=mark,
        )
    console.print(sweep)


def _per_card(console: Console, rows: Sequence[Any]) -> None:
    rows = [r for r in rows if r.tasks or r.routed]
    if not rows:
        return
    table = Table(title="per card", title_justify="left")
    for col in ("card", "tasks", "recall", "precision", "lost to abstain"):
        table.add_column(col, justify="left" if col == "card" else "right")
    for r in sorted(rows, key=lambda r: (r.recall, r.agent_id)):
        table.add_row(
            r.agent_id,
            str(r.tasks),
            f"{r.recall:.3f}",
            f"{r.precision:.3f}",
            str(r.lost_to_abstain),
        )
    console.print(table)


def _confusions(console: Console, confusions: Sequence[tuple[str, str, int]]) -> None:
    if not confusions:
        return
    table = Table(title="worst confusions", title_justify="left")
    for col in ("expected", "got", "count"):
        table.add_column(col, justify="right" if col == "count" else "left")
    for expected, got, count in confusions[:10]:
        table.add_row(expected, got, str(count))
    console.print(table)


STATUS_STYLE = {
    "ok": "green",
    "partial": "yellow",
    "refused": "magenta",
    "failed": "red",
    "abstain": "yellow",
    "needs_confirmation": "cyan",
}


ATTEMPT_WHY_CHARS = 120  # of a refused attempt's summary on its `re-routed:` line

# where a field's value was found; "tool args" (the model's own value, echoed in a call it
# made) and "model only" are the ones a reader should doubt
FIELD_SOURCE = {
    "tool": "tool result",
    "task": "the task",
    "args": "[yellow]tool args[/]",
    "model": "[yellow]model only[/]",
}


def digest(console: Console, d: Any) -> None:
    """Print a Digest: routing, a panel with the summary, fields, writes, artifacts, notes, cost."""
    if d.routing is not None:
        target = d.routing.agent_id or "nobody"
        console.print(
            f"routing: {d.routing.decision} → {escape(target)} (score {d.routing.score:.3f})"
        )
    for a in d.attempts:  # the cards that had the task first (delegate re-routed after each)
        why = _short(a.summary or a.reason or "no reason given", ATTEMPT_WHY_CHARS)
        console.print(
            f"re-routed: {_shown(a.agent_id)} {escape(a.status)} ({escape(why)}) → "
            f"{_shown(d.agent_id or 'tiny')}",
            highlight=False,
            soft_wrap=True,
        )
    style = STATUS_STYLE.get(d.status, "white")
    title = f"{escape(d.agent_id or 'tiny')} · [{style}]{d.status}[/]"
    reason = f"[{style}]reason:[/] {_shown(d.reason)}" if d.reason else ""
    # no summary (a failed run): the box holds the reason, rather than standing empty
    summary = _shown(d.summary, keep="\n") if d.summary else reason or "(no summary, no reason)"
    console.print(Panel(summary, title=title, title_align="left"))
    if d.summary and reason:
        console.print(reason)
    if d.fields:
        console.print(_fields(d.fields, d.field_sources))
    if d.missing:  # a partial taken with the fields it has: say which it lacks
        console.print(f"missing: {_shown(', '.join(d.missing))}", style="yellow", highlight=False)
    for label, calls in (
        ("approved write", d.approved_writes()),
        ("declined write", d.declined_writes()),
    ):
        for c in calls:
            result = "" if c.outcome in ("ok", "declined") else f" ({c.outcome})"
            text = escape(write_call(c.name, c.arguments or {}))
            console.print(f"{label}: {text}{escape(result)}", highlight=False, soft_wrap=True)
    for a in d.artifacts:  # kept whole: `tiny artifacts show HANDLE` prints one
        console.print(
            f"artifact: {_shown(a.handle)} · {_shown(a.tool)} · {a.chars:,} characters · "
            f"{_shown(a.preview)}",
            highlight=False,
            soft_wrap=True,
        )
    for note in d.notes_for_caller:
        console.print(f"note: {_shown(note)}", style="dim")
    _cost(console, d.cost)


def _fields(fields: Mapping[str, Any], sources: Mapping[str, str]) -> Table:
    """Tabulate the returned fields, each with where its value was found (docs/runner.md)."""
    table = Table(title="fields", title_justify="left")
    for column in ("field", "value", "from") if sources else ("field", "value"):
        table.add_column(column)
    for name, value in fields.items():
        row = [_shown(name), _shown(str(value), keep="\n")]
        if sources:
            row.append(FIELD_SOURCE.get(sources.get(name, ""), "—"))
        table.add_row(*row)
    return table


def write_request(console: Console, card_id: str, tool: str, arguments: Mapping[str, Any]) -> None:
    """Show one write call, exactly and escaped, before the user approves or declines it."""
    console.print(
        f"[bold]{escape(printable(card_id))}[/] wants to write: "
        f"[bold]{escape(write_call(tool, arguments))}[/]",
        highlight=False,
        soft_wrap=True,
    )


def _shown(text: str, keep: str = "") -> str:
    """Text from a model, a page or a file, safe for rich markup and for the terminal."""
    return escape(printable(text, keep))


def _cost(console: Console, c: Any) -> None:
    """Tabulate what the run spent; one line when it spent no tokens and called no tool."""
    if not (c.tokens_in or c.tokens_out or c.tool_calls or c.ghost_calls):
        spent = f"cost: no model tokens, no tool calls · {c.wall_seconds:.2f} s"
        console.print(f"{spent} · {c.caller_tokens} caller tokens", style="dim", highlight=False)
        return
    table = Table(title="cost", title_justify="left")
    for col in ("tokens in", "tokens out", "tool calls", "ghost calls", "wall s", "caller tokens"):
        table.add_column(col, justify="right")
    ghosts = str(c.ghost_calls) + (f" ({', '.join(c.ghost_names)})" if c.ghost_names else "")
    table.add_row(
        str(c.tokens_in),
        str(c.tokens_out),
        str(c.tool_calls),
        escape(ghosts),
        f"{c.wall_seconds:.2f}",
        str(c.caller_tokens),
    )
    console.print(table)


BAR_WIDTH = 32  # characters of the longest bar in the terminal charts
