"""Human output: cards, routes and evaluations as rich tables, and tables that fit the terminal.

A run's own output is drawn in `live`, the benches' in `render_bench`, the run log's in
`render_runs`. Every console tiny prints on is `new_console`'s: `:name:` is never an emoji.

Tables that fit the terminal: headers and free text fold, names are cut (with `…`, and the
command says that `--wide` prints them whole), numbers stay whole. No column narrows to nothing
and folded text loses the lines a fold leaves blank, so a table never shows a blank line.
"""

from __future__ import annotations

from collections.abc import Container, Sequence
from dataclasses import dataclass
from typing import IO, Any, Literal

from rich.console import Console, JustifyMethod
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from tiny_cli.cards.card import Card, Problem, shown_path
from tiny_cli.text import printable, quote_name
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
                # escaped as GitHub reads it, then as a terminal would (a file name's ESC)
                text = printable(f"::{level} {where}::{_gh_data(f'{p.field}: {p.message}')}")
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
        tools = ", ".join(shown(original(t)) for t in c.tools)  # as the card writes them
        budget = f"{b.max_tool_calls} / {b.max_output_tokens} / {b.max_wall_seconds:g}"
        returns = shown(", ".join(c.returns_required))
        rows.append([shown(c.id), tools, returns, shown(c.side_effects), budget])
    longest_tool = max((len(t) + 1 for c in cards for t in c.tools), default=1)  # and its comma
    cols = [
        Col("id", gives="name"),
        Col("tools", gives="text", least=longest_tool),
        Col("returns", gives="text"),
        Col("side effects", gives="header"),
        Col("budget (calls / tokens / s)", gives="header"),
    ]
    title = f"{len(cards)} card(s) OK"
    say_cut(console, print_fitted(console, cols, rows, wide, title=title))


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
        places = d.decimals(SCORE_DECIMALS)  # a score never prints as the threshold it missed
        table = titled(f"route: {shown(d.task)}", ("#", "card", "score"), {"#", "score"})
        for i, c in enumerate(d.candidates, 1):
            style = "bold green" if d.decision == "route" and c.agent_id == d.agent_id else None
            table.add_row(str(i), c.agent_id, f"{c.score:.{places}f}", style=style)
        console.print(table)
        taught = " (taught)" if getattr(d, "taught", False) else ""
        if d.decision == "route":
            verdict = f"[bold green]route[/] → {d.agent_id}{taught}"
        else:
            verdict = "[bold yellow]abstain[/]: " + (
                "taught out of scope" if taught else "no card fits"
            )
        console.print(
            f"{verdict}  (score {d.score:.{places}f}, threshold {d.threshold:.{places}f}, "
            f"embedder {shown(str(name))})\n"
        )


def explanations(console: Console, items: Sequence[Any], router: Any) -> None:
    """Print each decision with, per candidate, the card text and the words behind its score."""
    for e in items:
        decisions(console, [e.decision], router)
        places = e.decision.decimals(SCORE_DECIMALS)
        table = titled("why", ("card", "score", "driven by", "words"), {"score"})
        for r in e.reasons:
            source = escaped(f"tool {r.tool}" if r.tool else r.source)
            driver = f"{source} [dim](cosine {r.cosine:.3f})[/]\n{escaped(clipped(r.text))}"
            if r.nearest_example is not None:
                driver += (
                    f"\n[dim]nearest example ({r.nearest_example_cosine:.2f}):[/] "
                    f"{escaped(clipped(r.nearest_example))}"
                )
            words = f"{escaped(', '.join(r.words))} [dim](+{r.lexical:.3f})[/]" if r.words else "—"
            table.add_row(r.agent_id, f"{r.score:.{places}f}", driver, words)
        console.print(table)
        threshold, score = (f"{v:.{places}f}" for v in (e.decision.threshold, e.decision.score))
        console.print(f"threshold {threshold}: {shown(e.threshold_source)}")
        if e.score_source:  # a margin moved the score: over a card, or out-of-scope examples
            console.print(f"score {score}: {shown(e.score_source)}")
        if e.tools_source:
            console.print(f"tools: {shown(e.tools_source)}")
        console.print(SCORE_LEGEND)


SCORE_DECIMALS = 3  # of a route's scores; more where a score would print as the threshold
SCORE_LEGEND = (
    "[dim]score: z of (cosine + words) against generic text. cosine: the closest of the "
    "card's vectors (summary, each capability the summary lists, each tool it allows, "
    "summary + examples, the mean of its 3 nearest examples, its generated examples as "
    "one). words: the task's words found in the card's texts, and what they add.[/dim]"
)


def evaluation(console: Console, report: Any) -> None:
    """Print routing quality: ranking vs the abstain rule, each card, confusions, the sweep."""
    figures = titled(f"routing quality on {report.n} tasks", ("metric", "value"), {"value"})
    ranks = tuple(
        (f"a right card among the first {k} (ranking alone)", share)
        for k, share in report.topk_never_abstain
    )
    for label, value in (
        ("top-1 never abstaining (ranking alone)", report.top1_never_abstain),
        *ranks,
        ("top-1 in scope, at the threshold", report.top1_in_scope),
        ("abstain recall", report.abstain_recall),
        ("abstain precision", report.abstain_precision),
        ("overall accuracy", report.accuracy),
    ):
        figures.add_row(label, figure(value))
    figures.add_row("threshold", f"{report.threshold:.3f}")
    best = report.best_at_target
    if best is not None:
        figures.add_row(
            "best top-1 in scope at abstain recall ≥ 0.80",
            f"{best.in_scope_accuracy:.3f} / {best.abstain_recall:.3f} at {best.threshold:.3f}",
        )
    console.print(figures)
    if report.several_right:
        console.print(
            f"[dim]{report.several_right} in-scope task(s) have more than one right card (the "
            "line's `acceptable` cards, or every card allowing its expected tool): routing to "
            "any of them counts as right.[/dim]"
        )
    _per_card(console, report.per_card)
    _confusions(console, report.confusions)
    columns = ("threshold", "in-scope accuracy", "abstain recall")
    sweep = titled("threshold sweep", columns, set(columns))
    for p in report.sweep:
        mark = "bold" if abs(p.threshold - report.threshold) < 1e-9 else None
        point = (p.threshold, p.in_scope_accuracy, p.abstain_recall)
        sweep.add_row(*map(figure, point), style=mark)
    console.print(sweep)


def figure(value: float | None, spec: str = ".3f") -> str:
    """A figure in the format `spec`; "—" where there was nothing to measure it on."""
    return "—" if value is None else format(value, spec)


def _per_card(console: Console, rows: Sequence[Any]) -> None:
    rows = [r for r in rows if r.tasks or r.routed]
    if not rows:
        return
    columns = ("card", "tasks", "recall", "precision", "lost to abstain")
    table = titled("per card", columns, set(columns[1:]))
    # a card no task expects (recall "—") after those with a recall, worst first
    for r in sorted(rows, key=lambda r: (r.recall is None, r.recall or 0.0, r.agent_id)):
        figures = (figure(r.recall), figure(r.precision), str(r.lost_to_abstain))
        table.add_row(r.agent_id, str(r.tasks), *figures)
    console.print(table)


def _confusions(console: Console, confusions: Sequence[tuple[str, str, int]]) -> None:
    if not confusions:
        return
    table = titled("worst confusions", ("expected", "got", "count"), {"count"})
    for expected, got, count in confusions[:10]:
        table.add_row(expected, got, str(count))
    console.print(table)


BAR_WIDTH = 32  # characters of the longest bar in the terminal charts
BAR_TABLE: dict[str, Any] = {"box": None, "show_header": False, "pad_edge": False}  # a chart's rows
CLIPPED_CHARS = 90  # of a text `clipped` shows, unless told otherwise
MIN_WIDTH = 20  # cells a console is at least: a narrower COLUMNS (or terminal) is raised to it
EMPTY_TAG = "[none][/none]"  # markup that styles nothing: backslashes before it are its escapes


def new_console(stderr: bool = False, file: IO[str] | None = None) -> Console:
    """The console tiny prints on (stdout, stderr or `file`): every console tiny makes is one."""
    # rich turns `:one:` into an emoji, even with markup off: a write to approve would show
    # characters the tool never receives, so text prints as written
    console = Console(stderr=stderr, file=file, emoji=False)
    if console.width < MIN_WIDTH:  # COLUMNS=0 would print nothing, COLUMNS=1 a cell a line
        console.width = MIN_WIDTH
    return console


def marked(markup: str) -> Text:
    """Rich markup as a Text, `:name:` kept as written (a Panel's str title reads emoji codes)."""
    return Text.from_markup(markup, emoji=False)


def shown(text: str, keep: str = "") -> str:
    """Text from a model, a page or a file, safe for rich markup and for the terminal."""
    return escaped(printable(text, keep))


def quoted(name: str) -> str:
    """A name as markup, quoted as the Digest's notes quote it: `"docs_search "` or `""`."""
    # the notes' JSON string, its bidi and C1 characters then made visible for the terminal
    return escaped(printable(quote_name(name)))


def escaped(text: str) -> str:
    """`text` as rich markup that prints it as it is, whatever markup follows it."""
    body = text.rstrip("\\")
    if body == text:
        return escape(text)
    # rich reads backslashes as escapes only before a tag: escape's doubled trailing one
    # prints twice where none follows. Doubled before an empty tag, they print once always.
    return escape(body) + "\\" * 2 * (len(text) - len(body)) + EMPTY_TAG


def cut(text: str, limit: int, strip: bool = False) -> str:
    """`text` cut to `limit` characters, the cut marked with `…` (`strip`: no space before it)."""
    if len(text) <= limit:
        return text
    kept = text[: limit - 1]
    return (kept.rstrip() if strip else kept) + "…"


def clipped(text: str, limit: int = CLIPPED_CHARS) -> str:
    """`text` made printable and cut to `limit` characters, the cut marked with `…`."""
    return cut(printable(text), limit, strip=True)


def titled(title: str, columns: Sequence[str], right: Container[str] = (), **options: Any) -> Table:
    """A table titled on the left, with these columns: those in `right` justified right."""
    table = Table(title=title, title_justify="left", **options)
    for column in columns:
        table.add_column(column, justify="right" if column in right else "left")
    return table


def bare(*columns: str) -> Table:
    """A table with no box and no title: each column folds what is too long for it."""
    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    return table


# --- tables that fit the terminal ---------------------------------------------------------

Gives = Literal["header", "text", "name"]
FOLD_MIN = 16  # free text keeps a column at least this wide before a name is cut
CUT_MIN = 8  # a cut name keeps at least this many cells
SQUEEZED = 4  # text and names on a terminal too narrow for the rest, before all else narrows
GIVES: tuple[Gives, ...] = ("header", "text", "name")  # what gives way first, when too wide
# the kinds whose values show cut (not folded) when their column narrows
WHOLE: tuple[Gives | None, ...] = (None, "name")
NUMBERS: tuple[Gives | None, ...] = (None, "header")  # the kinds whose values stay whole
MEASURE_WIDTH = 10_000  # wide enough to measure any table at its natural width
WIDE_HINT = "cut to fit (…): --wide prints the table whole"

Cell = str | Text  # rich markup (what came from outside already escaped), or a Text


@dataclass(frozen=True)
class Col:
    """A column of a fitted table: its header, its justification and what gives way in it."""

    header: str
    justify: JustifyMethod = "left"
    gives: Gives | None = None  # header: it folds; text: its cells fold; name: cut; None: whole
    least: int | None = None  # the narrowest it gets before the next kind gives way
    lines: int | None = None  # text: at most this many lines, the last one cut with …


def print_fitted(
    console: Console,
    cols: Sequence[Col],
    rows: Sequence[Sequence[Cell]],
    wide: bool = False,
    lines: bool = False,
    **options: Any,
) -> bool:
    """Print the table sized to the console (`wide`: at its natural width); return whether a
    value was cut to fit. `lines`: where the numbers would not fit whole, each row prints as
    a line of `header value` pairs instead."""
    table = Table(title_justify="left", **options)
    columns = [[row[i] for row in rows] for i in range(len(cols))]
    natural = [_natural([c.header, *cells]) for c, cells in zip(cols, columns, strict=True)]
    for col, width in zip(cols, natural, strict=True):
        folds = col.gives in ("header", "text")
        table.add_column(
            col.header,
            justify=col.justify,
            width=width,
            no_wrap=not folds,
            overflow="fold" if folds else "ellipsis",
        )
    frame = console.measure(table, options=console.options.update_width(MEASURE_WIDTH))
    overhead = frame.maximum - sum(natural)  # rules and padding between the columns
    if wide:
        table.width = sum(natural) + overhead
        widths = natural
    else:
        leasts = [_least(c, n, cs) for c, n, cs in zip(cols, natural, columns, strict=True)]
        widths = _fit(cols, natural, leasts, console.width - overhead)
        if lines and _numbers_broken(cols, widths, leasts, columns):
            _as_lines(console, cols, rows, options.get("title"))
            return False
    lost_lines = not wide and _fold_text(console, cols, columns, widths)
    for column, width in zip(table.columns, widths, strict=True):
        column.width = width
    for row in zip(*columns, strict=True):
        table.add_row(*row)
    console.print(table, crop=not wide)
    whole = [(w, n) for w, n, c in zip(widths, natural, cols, strict=True) if c.gives in WHOLE]
    return lost_lines or any(w < n for w, n in whole)


def _numbers_broken(
    cols: Sequence[Col],
    widths: Sequence[int],
    leasts: Sequence[int],
    columns: Sequence[Sequence[Cell]],
) -> bool:
    """Tell whether a column of numbers got narrower than its values or its headers' words."""
    floors = [max(_natural(cells), least) for cells, least in zip(columns, leasts, strict=True)]
    narrowed = zip(cols, widths, floors, strict=True)
    return any(w < floor for c, w, floor in narrowed if c.gives in NUMBERS)


def _as_lines(
    console: Console, cols: Sequence[Col], rows: Sequence[Sequence[Cell]], title: str | None
) -> None:
    """Print each row as one line of `header value` pairs, wrapped between words."""
    for row in rows:
        pairs = [Text(f"{c.header} ").append_text(_text(v)) for c, v in zip(cols, row, strict=True)]
        console.print(Text(f"{title}: " if title else "").append_text(Text(" · ").join(pairs)))


def say_cut(console: Console, cut: bool) -> None:
    """Under tables with a value `cut` to fit, say that --wide prints them whole."""
    if cut:
        console.print(WIDE_HINT, style="dim", highlight=False)


def _fit(
    cols: Sequence[Col], natural: Sequence[int], leasts: Sequence[int], budget: int
) -> list[int]:
    """Narrow the columns to `budget`: each kind that gives way in turn, the widest first;
    past every least width text and names, then every column, down to one cell."""
    widths = list(natural)
    excess = sum(widths) - budget
    some: tuple[Gives, ...] = ("text", "name")
    passes: list[tuple[tuple[Gives | None, ...], Sequence[int]]] = [
        *(((kind,), leasts) for kind in GIVES),
        (some, [min(n, SQUEEZED) for n in natural]),
        ((*GIVES, None), [1] * len(cols)),
    ]
    for kinds, floors in passes:
        while excess > 0:
            narrowable = [
                i for i, c in enumerate(cols) if c.gives in kinds and widths[i] > floors[i]
            ]
            if not narrowable:
                break
            widest = max(narrowable, key=widths.__getitem__)
            widths[widest] -= 1
            excess -= 1
    return widths


def _least(col: Col, natural: int, cells: Sequence[Cell]) -> int:
    """Return how narrow a column may get before the next kind of column gives way."""
    if col.least is not None:
        return min(col.least, natural)
    if col.gives == "header":  # its cells whole, its header folded between words
        return max(_natural(cells), *map(len, col.header.split()))
    return min(natural, FOLD_MIN if col.gives == "text" else CUT_MIN)


def _fold_text(
    console: Console, cols: Sequence[Col], columns: list[list[Cell]], widths: Sequence[int]
) -> bool:
    """Fold each text column's cells to its width, in place; return whether one lost lines."""
    shortened = False
    for i, col in enumerate(cols):
        if col.gives == "text":
            folded = [_folded(console, cell, widths[i], col.lines) for cell in columns[i]]
            columns[i] = [text for text, _ in folded]
            shortened |= any(lost for _, lost in folded)
    return shortened


def _folded(console: Console, cell: Cell, width: int, most: int | None) -> tuple[Text, bool]:
    """Fold a cell to `width` without the blank lines rich's fold can leave; and tell whether
    it was cut to `most` lines."""
    folded = _text(cell).wrap(console, width, overflow="fold")
    lines = [line for line in folded if line.plain.strip()]
    shortened = most is not None and len(lines) > most
    if shortened:
        lines = lines[:most]
        last = lines[-1]
        last.rstrip()
        last.truncate(width - 1)
        last.append("…")
    for line in lines:
        line.rstrip()
    return Text("\n").join(lines), shortened


def _natural(cells: Sequence[Cell]) -> int:
    """The widest line of these cells, in terminal cells."""
    return max((line.cell_len for c in cells for line in _text(c).split("\n")), default=0)


def _text(cell: Cell) -> Text:
    return cell if isinstance(cell, Text) else marked(cell)
