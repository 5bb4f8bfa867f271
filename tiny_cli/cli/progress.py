"""Progress of a long index build on a terminal: embedding thousands of new card texts."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

__all__ = ["index_progress"]


@contextmanager
def index_progress(stream: TextIO | None = None) -> Iterator[Callable[[int, int], None] | None]:
    """Yield a `progress(done, total)` that draws a bar on stderr, or None off a terminal.

    Nothing is drawn until the first batch reports: a cached router never shows a bar.
    """
    stream = sys.stderr if stream is None else stream
    if not stream.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import Progress, TaskID

    with Progress(console=Console(file=stream), transient=True) as bar:
        task: list[TaskID] = []

        def update(done: int, total: int) -> None:
            if not task:
                task.append(bar.add_task("embedding card texts", total=total))
            bar.update(task[0], completed=done)

        yield update
