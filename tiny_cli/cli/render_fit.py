"""Tables that fit the terminal: headers and free text fold, names are cut, numbers stay whole.

A value cut to fit ends in `…`, and the command says that `--wide` prints it whole: a wide
table keeps its natural width (its lines as long as they need), nothing cut. No column narrows
to nothing and folded text loses the lines a fold leaves blank, so a table never shows a blank
line.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from rich.console import Console, JustifyMethod
from rich.table import Table
from rich.text import Text

Gives = Literal["header", "text", "name"]
FOLD_MIN = 16  # free text keeps a column at least this wide before a name is cut
CUT_MIN = 8  # a cut name keeps at least this many cells
SQUEEZED = 4  # text and names on a terminal too narrow for the rest, before all else narrows
GIVES: tuple[Gives, ...] = ("header", "text", "name")  # what gives way first, when too wide
# the kinds whose values show cut (not folded) when their column narrows
WHOLE: tuple[Gives | None, ...] = (None, "name")
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


def fitted(
    console: Console,
    cols: Sequence[Col],
    rows: Sequence[Sequence[Cell]],
    wide: bool = False,
    **options: Any,
) -> tuple[Table, bool]:
    """Return the table sized to the console (whole when `wide`), and whether a value was cut.

    Print it with `print_fitted`, which leaves a wide table's long lines uncropped.
    """
    table = Table(**options)
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
        for i, col in enumerate(cols):
            if col.gives == "text":
                columns[i] = [_folded(console, cell, widths[i], col.lines) for cell in columns[i]]
    for column, width in zip(table.columns, widths, strict=True):
        column.width = width
    for row in zip(*columns, strict=True):
        table.add_row(*row)
    whole = [(w, n) for w, n, c in zip(widths, natural, cols, strict=True) if c.gives in WHOLE]
    return table, any(w < n for w, n in whole)


def print_fitted(console: Console, table: Table, wide: bool) -> None:
    """Print a fitted table: a wide one uncropped, as long as its lines are."""
    console.print(table, crop=not wide)


def _fit(
    cols: Sequence[Col], natural: Sequence[int], leasts: Sequence[int], budget: int
) -> list[int]:
    """Narrow the columns to `budget`: each kind that gives way in turn, the widest first.

    Past every column's least width (a narrow terminal and long values), text and names
    narrow further, then every column, never below one cell.
    """
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


def _folded(console: Console, cell: Cell, width: int, most: int | None) -> Text:
    """Fold a cell to `width` as rich would, without the blank lines rich's fold can leave."""
    text = cell if isinstance(cell, Text) else Text.from_markup(cell)
    lines = [line for line in text.wrap(console, width, overflow="fold") if line.plain.strip()]
    if most is not None and len(lines) > most:
        lines = lines[:most]
        last = lines[-1]
        last.rstrip()
        last.truncate(width - 1)
        last.append("…")
    for line in lines:
        line.rstrip()
    return Text("\n").join(lines)


def _natural(cells: Sequence[Cell]) -> int:
    """Return the widest line of these cells, in terminal cells."""
    widest = 0
    for cell in cells:
        text = cell if isinstance(cell, Text) else Text.from_markup(cell)
        widest = max([widest, *(line.cell_len for line in text.split("\n"))])
    return widest
