"""What a run shows on the terminal: the live view of the loop (on stderr, while a run works),
a write call to approve, the Digest after, and a correction's line.

Under a live view every stderr output goes through the view's own console (`console`): rich
stacks its displays (bench's progress bar) there, and a line printed beside it stays readable.
The runner calls observers on its own thread, rich `Live` redraws on its refresh thread: an
observer only updates plain state under a lock (no I/O), and the refresh thread draws it. The
view is transient, so the Digest printed after it reads cleanly. It shows the run that last
reported.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field, fields, replace
from typing import Any, cast

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from tiny_cli.cli.render import (
    Col,
    clipped,
    cut,
    escaped,
    marked,
    new_console,
    print_fitted,
    quoted,
    shown,
    titled,
)
from tiny_cli.events import (
    BudgetHit,
    Event,
    Finished,
    GhostCall,
    ModelReplied,
    ModeSwitched,
    Observer,
    RunStarted,
    ToolCalled,
    ToolFinished,
    TurnStarted,
)
from tiny_cli.runs.log import Correction
from tiny_cli.session import write_question
from tiny_cli.text import printable, write_call

STATUS_STYLE = {
    "ok": "green",
    "partial": "yellow",
    "refused": "magenta",
    "failed": "red",
    "abstain": "yellow",
    "needs_confirmation": "cyan",
}
TASK_CHARS = 60  # of a task in a correction's line
ARGUMENTS_SHOWN = 60  # characters of a call's arguments in its row
GOAL_SHOWN = 90  # characters of the task in the title line
ROWS_SHOWN = 14  # the latest steps; a long run keeps a compact panel
REFRESHES_PER_SECOND = 8
STEP_COLUMNS = 6 + 13 + 16 + 6 + 4 * 2 + 4  # the other columns, their gaps, the panel's edges
OUTCOME_STYLE = {
    "ok": "green",
    "ghost": "bold red",
    "bad_arguments": "bold yellow",
    "tool_error": "red",
    "timeout": "red",
    "declined": "magenta",
    "not_allowed": "magenta",
    None: "dim",  # not run: the budget was spent
}


@dataclass
class _Row:
    """One line of the panel: a model turn, a tool call, or a note (mode switch, budget hit)."""

    step: str
    what: str  # rich markup, already escaped
    size: str = ""
    outcome: str = ""  # rich markup
    seconds: str = ""


@dataclass
class _RunState:
    """What one run has reported so far; changed only under the view's lock."""

    label: str
    card: str = "?"
    model: str = "?"
    mode: str = ""
    goal: str = ""
    max_calls: int = 0
    wall: float = 0.0
    remaining: float | None = None  # seconds of wall budget left at `remaining_at`
    remaining_at: float = 0.0
    calls: int = 0
    ghosts: int = 0
    # those of the cards before a re-route: the counts shown are the whole task's, as the Digest's
    calls_before: int = 0
    ghosts_before: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    status: str | None = None
    rows: list[_Row] = field(default_factory=list)
    waiting: _Row | None = None  # the turn whose reply has not come yet
    pending: dict[str, _Row] = field(default_factory=dict)  # running calls by call id


_current: LiveView | None = None  # the view on screen, for `pause_current`
_current_lock = threading.Lock()


class LiveView:
    """A rich Live display of one run at a time on a terminal's stderr."""

    def __init__(
        self,
        console: Console,
        clock: Callable[[], float] = time.monotonic,
        scrub: Callable[[str], str] = str,
    ) -> None:
        """`scrub` takes the known secrets out of what the view shows (a model may copy a key
        a page held into a call)."""
        self.console = console
        self._clock = clock
        self._scrub = scrub
        self._lock = threading.Lock()
        self._run: _RunState | None = None
        self._live = self._new_live()

    def observer(self, run: str) -> Observer:
        """Return the observer that shows run `run`."""
        state = _RunState(run)

        def notify(event: Event) -> None:
            with self._lock:
                self._run = state  # the latest run to report is the one on screen
                _apply(state, _scrubbed(event, self._scrub), self._clock())

        return notify

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Take the display off the screen while a prompt is on it; show it again after."""
        was_on = self._live.is_started
        self._live.stop()
        try:
            yield
        finally:
            if was_on:
                # a new Live: a restarted one would move up over the prompt by its old height
                self._live = self._new_live()
                self._live.start()

    def _new_live(self) -> Live:
        return Live(
            console=self.console,
            get_renderable=self._render,
            refresh_per_second=REFRESHES_PER_SECOND,
            transient=True,  # gone when the run ends: the Digest follows on its own
            redirect_stdout=False,  # stdout may be a pipe: the Digest must stay on it
        )

    def __enter__(self) -> LiveView:
        global _current
        self._live.start()
        with _current_lock:
            _current = self
        return self

    def __exit__(self, *exc: object) -> None:
        global _current
        with _current_lock:
            if _current is self:
                _current = None
        self._live.stop()

    def _render(self) -> RenderableType:
        with self._lock:
            if self._run is None:
                return Text("starting…", style="dim")
            return _panel(self._run, self._clock(), self.console.width)


@contextmanager
def pause_current() -> Iterator[None]:
    """Pause the live view on screen, if any, for the duration (e.g. a [y/N] prompt)."""
    with _current_lock:
        view = _current
    with view.paused() if view is not None else nullcontext():
        yield


def console(stderr: bool = False) -> Console:
    """Return the console for stdout (or stderr): under a live view, the view's own."""
    with _current_lock:
        shared = _current.console if _current is not None and stderr else None
    return shared or new_console(stderr=stderr)


# --- state: one function per event -------------------------------------------------------


def _scrubbed(event: Event, scrub: Callable[[str], str]) -> Event:
    """The event with each of its texts scrubbed (a Digest's status holds none a model wrote)."""
    texts = {
        f.name: scrub(v) for f in fields(event) if isinstance(v := getattr(event, f.name), str)
    }
    return replace(cast(Any, event), **texts) if texts else event  # each kind its own fields


def _apply(state: _RunState, event: Event, now: float) -> None:
    if isinstance(event, RunStarted):
        _started(state, event, now)
    elif isinstance(event, TurnStarted):
        state.remaining, state.remaining_at = event.remaining, now
        state.calls = state.calls_before + event.calls_used
        state.waiting = _Row(f"turn {event.turn}", "[dim]waiting for the model…[/]")
        state.rows.append(state.waiting)
    elif isinstance(event, ModelReplied):
        _replied(state, event)
    elif isinstance(event, ToolCalled):
        _called(state, event)
    elif isinstance(event, ToolFinished):
        _tool_finished(state, event)
    elif isinstance(event, GhostCall):
        state.ghosts = state.ghosts_before + event.count
    elif isinstance(event, ModeSwitched):
        state.mode = event.to
        state.rows.append(_Row("mode", f"[cyan]→ {escaped(event.to)}: {escaped(event.why)}[/]"))
    elif isinstance(event, BudgetHit):
        state.rows.append(_Row("budget", f"[bold red]{escaped(event.limit)} reached[/]"))
    elif isinstance(event, Finished):
        state.status = event.digest.status
        if state.card == "?":  # delegate abstained: no run started
            state.card = event.digest.agent_id or "tiny"
        state.remaining = None


def _started(state: _RunState, event: RunStarted, now: float) -> None:
    """The run's card, model, task and budget: the panel's title and budget line."""
    if state.card != "?":  # a second start: delegate re-routed the task to another card
        moved = f"{shown(state.card)} → {shown(event.card_id)}"
        state.rows.append(_Row("route", f"[cyan]re-routed: {moved}[/]"))
        state.calls_before, state.ghosts_before = state.calls, state.ghosts
    state.card, state.model, state.mode = event.card_id, event.model, event.tool_mode
    state.goal = _short(event.goal, GOAL_SHOWN)
    # a re-routed card's limit counts on from the calls made before it: the task's limit
    state.max_calls = state.calls_before + event.max_tool_calls
    state.wall = event.max_wall_seconds
    state.remaining, state.remaining_at = event.max_wall_seconds, now


def _replied(state: _RunState, event: ModelReplied) -> None:
    row, state.waiting = state.waiting, None
    if row is None:  # a reply without its TurnStarted: still show it
        row = _Row(f"turn {event.turn}", "")
        state.rows.append(row)
    state.tokens_in += event.tokens_in
    state.tokens_out += event.tokens_out
    calls = f" · {event.tool_calls} tool call(s)" if event.tool_calls else ""
    row.what = f"{event.tokens_in} tokens in · {event.tokens_out} out{calls}"
    row.seconds = f"{event.seconds:.2f}"


def _called(state: _RunState, event: ToolCalled) -> None:
    name = shown(event.name)
    how = " [dim](from text)[/]" if event.recovered else ""
    what = f"[bold]{name}[/] {escaped(_short(event.arguments))}{how}"
    row = _Row("  call", what, outcome="[dim]running…[/]")
    state.pending[event.call_id] = row
    state.rows.append(row)


def _tool_finished(state: _RunState, event: ToolFinished) -> None:
    row = state.pending.pop(event.call_id, None)
    if row is None:  # a finish without its call (a model may send one call id twice)
        row = _Row("  call", f"[bold]{shown(event.name)}[/]")
        state.rows.append(row)
    label = event.outcome or "not run (budget)"
    row.outcome = f"[{OUTCOME_STYLE.get(event.outcome, 'red')}]{label}[/]"
    if event.outcome == "ghost":  # the name in red and quoted; the arguments stay as they were
        name = f"[bold]{shown(event.name)}[/]"
        row.what = row.what.replace(name, f"[bold red]{quoted(event.name)}[/]", 1)
        row.what += " [red](no such tool)[/]"
    row.size = f"{len(event.result):,} chars"
    row.seconds = f"{event.seconds:.2f}"
    if event.outcome is not None:
        state.calls += 1  # the meter counts every handled call, as TurnStarted will


# --- picture ------------------------------------------------------------------------------


def _panel(state: _RunState, now: float, width: int) -> Panel:
    """The run as a panel: title (card, model, task), steps, budget line."""
    title = f"[bold]{shown(state.card)}[/] · {shown(state.model)}"
    if state.mode:
        title += f" · {escaped(state.mode)}"
    if state.label not in ("invoke", "delegate"):
        title = f"{shown(state.label)} · {title}"
    body = Group(
        Text(state.goal, style="dim", overflow="ellipsis", no_wrap=True), _steps(state, width)
    )
    subtitle = marked(_budget(state, now))
    return Panel(body, title=marked(title), title_align="left", subtitle=subtitle)


def _steps(state: _RunState, width: int) -> Table:
    table = Table.grid(padding=(0, 2))
    # fixed widths: columns do not jump as rows come; the middle one gives way on a narrow screen
    table.add_column(min_width=6, no_wrap=True)
    table.add_column(max_width=max(20, width - STEP_COLUMNS), no_wrap=True, overflow="ellipsis")
    table.add_column(justify="right", min_width=13, no_wrap=True)
    table.add_column(min_width=16, no_wrap=True)
    table.add_column(justify="right", min_width=6, no_wrap=True)
    hidden = len(state.rows) - ROWS_SHOWN
    if hidden > 0:
        table.add_row("", f"[dim]… {hidden} earlier step(s)[/]", "", "", "")
    for row in state.rows[-ROWS_SHOWN:]:
        table.add_row(row.step, row.what, row.size, row.outcome, row.seconds)
    return table


def _budget(state: _RunState, now: float) -> str:
    """Tool calls used of the limit, seconds left of the wall budget, ghosts, tokens, status."""
    parts = [f"tool calls {state.calls}/{state.max_calls}"]
    if state.remaining is not None:
        left = max(0.0, state.remaining - (now - state.remaining_at))
        # one rounding for both: a re-routed card's wall is what the first card left, not whole
        places = 0 if state.wall >= 10 else 1
        parts.append(f"{left:.{places}f} s of {state.wall:.{places}f} s left")
    if state.ghosts:
        parts.append(f"[bold red]ghost calls {state.ghosts}[/]")
    parts.append(f"tokens {state.tokens_in} in / {state.tokens_out} out")
    if state.status is not None:
        style = STATUS_STYLE.get(state.status, "white")
        parts.append(f"[{style}]{escaped(state.status)}[/]")
    return " · ".join(parts)


def _short(text: str, limit: int = ARGUMENTS_SHOWN) -> str:
    """One line, control characters made visible, cut to `limit` characters."""
    return cut(printable(" ".join(text.split())), limit)


# --- the Digest, a write to approve, a correction ------------------------------------------


# on a narrow terminal the headers fold and a ghost's names fold; the numbers stay whole
COST_COLUMNS = [
    *(Col(h, "right", gives="header") for h in ("tokens in", "tokens out", "tool calls")),
    Col("ghost calls", "right", gives="text"),
    *(Col(h, "right", gives="header") for h in ("wall s", "caller tokens")),
]
PANEL_EDGES = 6  # cells of a panel's top line beside its title: `╭─ ` and ` ─╮`
ATTEMPT_WHY_CHARS = 120  # of a refused attempt's summary on its `re-routed:` line

# where a field's value was found; "tool args" (the model's own value, echoed in a call it
# made) and "model only" are the ones a reader should doubt
FIELD_SOURCE = {
    "tool": "tool result",
    "task": "the task",
    "args": "[yellow]tool args[/]",
    "model": "[yellow]model only[/]",
}


def digest_panel(console: Console, d: Any) -> None:
    """Print a Digest: routing, a panel with the summary, fields, writes, artifacts, notes, cost."""
    if d.routing is not None:
        target = d.routing.agent_id or "nobody"
        console.print(
            f"routing: {d.routing.decision} → {escaped(target)} (score {d.routing.score:.3f})"
        )
    for a in d.attempts:  # the cards that had the task first (delegate re-routed after each)
        why = clipped(a.summary or a.reason or "no reason given", ATTEMPT_WHY_CHARS)
        to = shown(d.agent_id or "tiny")
        _line(
            console, f"re-routed: {shown(a.agent_id)} {escaped(a.status)} ({escaped(why)}) → {to}"
        )
    style = STATUS_STYLE.get(d.status, "white")
    reason = f"[{style}]reason:[/] {shown(d.reason)}" if d.reason else ""
    # no summary (a failed run): the box holds the reason, rather than standing empty
    summary = shown(d.summary, keep="\n") if d.summary else reason or "(no summary, no reason)"
    console.print(Panel(summary, title=_digest_title(d, console.width), title_align="left"))
    if d.summary and reason:
        console.print(reason)
    if d.fields:
        console.print(_fields(d.fields, d.field_sources))
    if d.missing:  # a partial taken with the fields it has: say which it lacks
        console.print(f"missing: {shown(', '.join(d.missing))}", style="yellow", highlight=False)
    for verdict, calls in (("approved", d.approved_writes()), ("declined", d.declined_writes())):
        for c in calls:
            result = "" if c.outcome in ("ok", "declined") else escaped(f" ({c.outcome})")
            call = escaped(write_call(c.name, c.arguments or {}))
            _line(console, f"{verdict} write: {call}{result}")
    for a in d.artifacts:  # kept whole: `tiny artifacts show HANDLE` prints one
        kept = f"{shown(a.handle)} · {shown(a.tool)} · {a.chars:,} characters"
        _line(console, f"artifact: {kept} · {shown(a.preview)}")
    for note in d.notes_for_caller:
        console.print(f"note: {shown(note)}", style="dim")
    _cost(console, d.cost)


def _digest_title(d: Any, width: int) -> Text:
    """The Digest panel's title: the card id cut with `…` so that the status shows whole."""
    room = width - PANEL_EDGES
    status = f" · {d.status}"
    name = cut(d.agent_id or "tiny", max(1, room - len(status)))
    title = marked(f"{escaped(name)} · [{STATUS_STYLE.get(d.status, 'white')}]{d.status}[/]")
    title.truncate(room, overflow="ellipsis")
    return title


def _fields(fields: Mapping[str, Any], sources: Mapping[str, str]) -> Table:
    """Tabulate the returned fields and where each value was found; a value folds, never cut."""
    table = titled("fields", ("field", "value", "from") if sources else ("field", "value"))
    for column in table.columns:
        column.overflow = "fold"
    for name, value in fields.items():
        row = [shown(name), shown(str(value), keep="\n")]
        if sources:
            row.append(FIELD_SOURCE.get(sources.get(name, ""), "—"))
        table.add_row(*row)
    return table


def write_request(
    console: Console,
    card_id: str,
    tool: str,
    arguments: Mapping[str, Any],
    scrub: Callable[[str], str] = str,
) -> None:
    """Show one write call's question, escaped, before the user approves or declines it."""
    # a card id has no spaces: the first " wants to write: " ends it
    card, asks, call = write_question(card_id, tool, arguments, scrub).partition(
        " wants to write: "
    )
    _line(console, f"[bold]{escaped(card)}[/]{asks}[bold]{escaped(call)}[/]")


def _line(console: Console, markup: str) -> None:
    """Print one line of markup as it is: no highlighting, no wrap (a terminal wraps it)."""
    console.print(markup, highlight=False, soft_wrap=True)


def _cost(console: Console, c: Any) -> None:
    """Tabulate what the run spent; one line when it spent no tokens and called no tool."""
    if not (c.tokens_in or c.tokens_out or c.tool_calls or c.ghost_calls):
        spent = f"cost: no model tokens reported, no tool calls · {c.wall_seconds:.2f} s"
        console.print(f"{spent} · {c.caller_tokens} caller tokens", style="dim", highlight=False)
        return
    # a ghost's name is the model's, quoted: "docs_search " is not the card's docs_search
    names = ", ".join(map(quoted, c.ghost_names))
    ghosts = str(c.ghost_calls) + (f" ({names})" if names else "")
    counts = [str(n) for n in (c.tokens_in, c.tokens_out, c.tool_calls)]
    row = [*counts, ghosts, f"{c.wall_seconds:.2f}", str(c.caller_tokens)]
    print_fitted(console, COST_COLUMNS, [row], lines=True, title="cost")


def correction_line(correction: Correction, taught: str | None = None) -> str:
    """Say in one line what a correction said and how it was `taught` (None: only recorded)."""
    c = correction
    task = cut(c.task, TASK_CHARS, strip=True)
    to, was = c.card or "abstain", c.routed or "abstain"
    line = f'run {c.run_id}: "{printable(task)}" → {printable(to)} (was: {printable(was)})'
    return f"{line}; {taught or 'recorded: `tiny learn --from-runs` teaches it'}"
