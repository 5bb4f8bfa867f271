"""Human output: rich tables and panels for every command's result (JSON is printed by the CLI)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from operator import attrgetter
from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table

from tiny_cli.cards.card import Card, Problem, shown_path
from tiny_cli.cli.render_fit import WIDE_HINT, Col, fitted, print_fitted
from tiny_cli.text import printable, write_call
from tiny_cli.tools.mcp_names import original


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
        said = f"cost: no model tokens, no tool calls · {c.wall_seconds:.2f} s"
        console.print(f"{said} · {c.caller_tokens} caller tokens", style="dim", highlight=False)
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


# --- bench ----------------------------------------------------------------------------------

BAR_WIDTH = 32  # characters of the longest bar in the terminal charts
BENCH_ARM_STYLE = {"tiny": "green", "all-tools": "magenta"}


def bench(console: Console, report: Any) -> None:
    """Print a bench report: arms side by side with the better one, disagreements, two charts."""
    _bench_table(console, report)
    _bench_disagreements(console, report)
    _bench_bars(console, report, "ghost calls per task", lambda r: r.ghost_calls)
    _bench_bars(
        console,
        report,
        "tokens per task (prompt + completion)",
        lambda r: r.tokens_in + r.tokens_out,
    )


class BenchProgress:
    """A progress bar on `console` (stderr) while runs finish; call it with (done, total)."""

    def __init__(self, console: Console) -> None:
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
        )

        columns = (TextColumn("bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        self._progress = Progress(*columns, console=console, transient=True)
        self._task = self._progress.add_task("bench", total=None)

    def __enter__(self) -> BenchProgress:
        self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._progress.stop()

    def __call__(self, done: int, total: int) -> None:
        self._progress.update(self._task, completed=done, total=total)


# what a claimed answer lacked (bench.EVIDENCE), as the table words it
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
    ("fields correct (from a tool)", "fields_correct", "up"),
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
BenchRow = tuple[str, Any, str | None]  # label, an arm's figure, which way is better


def _bench_rows(report: Any) -> list[BenchRow]:
    """Return the comparison's rows: a label, how to read an arm's figure, which way is better."""
    arms = report.arms.values()
    rows: list[BenchRow] = [("runs", lambda s: s.runs, None)]
    shown = [st for st in STATUS_STYLE if any(s.outcomes.get(st) for s in arms)]
    rows += [
        (f"  status {st}", lambda s, st=st: s.outcomes.get(st, 0), STATUS_BETTER.get(st))
        for st in shown
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
    return rows


def _bench_title(report: Any) -> str:
    where = f"model {escape(report.model)} @ {escape(report.base_url or '?')}"
    if report.tool_mode:
        where += f" · tool mode {escape(report.tool_mode)}"
    if not report.replayed:
        return f"tiny bench · {where}"
    source = f"replayed from {escape(printable(report.replay_file))}" if report.replay_file else ""
    return f"tiny bench · {source or 'replay'} · {where}"


def _bench_table(console: Console, report: Any) -> None:
    arms = list(report.arms)
    table = Table(title=_bench_title(report), title_justify="left")
    table.add_column("metric")
    for arm in arms:
        table.add_column(arm, justify="right", style=BENCH_ARM_STYLE.get(arm))
    both = arms == ["tiny", "all-tools"]
    if both:
        table.add_column(BETTER, justify="right")
    for label, values, better in _bench_values(report):
        said = [_bench_better(values, better, styled=True)] if both else []
        table.add_row(label, *map(_bench_number, values), *said)
    console.print(table)
    if both:
        console.print(BETTER_LEGEND, style="dim", highlight=False)
    if report.replayed:
        console.print(REPLAY_WALL_NOTE, style="dim", highlight=False)
    for arm in arms:
        names = report.arms[arm].ghost_names
        if names:
            listed = ", ".join(f"{n} x{c}" for n, c in names.items())
            console.print(f"ghost calls in {arm}: {escape(listed)}", highlight=False)


def _bench_values(report: Any) -> list[tuple[str, list[Any], str | None]]:
    """Return each row's label, its figure in each arm, and which way is better."""
    rows = _bench_rows(report)
    return [(label, [get(s) for s in report.arms.values()], b) for label, get, b in rows]


def bench_markdown(report: Any) -> str:
    """Return the bench's comparison table as Markdown (docs/bench.md is made of these)."""
    both = list(report.arms) == ["tiny", "all-tools"]
    head = ["metric", *report.arms, *([BETTER] if both else [])]
    lines = [_md_row(head), _md_row(["---", *["---:"] * (len(head) - 1)])]
    for label, values, better in _bench_values(report):
        said = [_bench_better(values, better)] if both else []
        lines.append(_md_row([label.strip(), *map(_bench_number, values), *said]))
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
    table = Table(title=f"{len(tasks)} task(s) where the arms disagree", title_justify="left")
    for col in ("task", "expected", "tiny", "all-tools"):
        table.add_column(col)
    for t in tasks:
        cells = [_bench_outcome(report, t.id, arm) for arm in ("tiny", "all-tools")]
        table.add_row(escape(t.id), escape(t.expected_agent or "abstain"), *cells)
    console.print(table)


def _bench_outcome(report: Any, task_id: str, arm: str) -> str:
    """Describe a task's runs in one arm: the usual status, the agent, ghosts and writes."""
    runs = report.runs_of(task_id, arm)
    status = report.outcome(task_id, arm)
    text = f"[{STATUS_STYLE.get(status, 'white')}]{status}[/]"
    agents = sorted({r.agent_id for r in runs if r.agent_id and r.agent_id != "all-tools"})
    if arm == "tiny" and agents:
        text += f" → {escape(', '.join(agents))}"
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
    table = Table(title=title, title_justify="left", box=None, show_header=False, pad_edge=False)
    table.add_column("task")
    table.add_column("arm")
    table.add_column("bar")
    table.add_column("value", justify="right")
    for i, (task_id, arm, v) in enumerate(rows):
        width = round(BAR_WIDTH * v / top) if top else 0
        bar = "█" * width if width or not v else "▏"
        label = escape(task_id) if i % len(report.arms) == 0 else ""
        table.add_row(label, arm, f"[{BENCH_ARM_STYLE.get(arm, 'white')}]{bar}[/]", str(v))
    console.print(table)


def _bench_number(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 10 else f"{value:.1f}"
    return str(value)


def _bench_better(values: Sequence[Any], better: str | None, styled: bool = False) -> str:
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
