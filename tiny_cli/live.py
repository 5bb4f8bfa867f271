"""The live view: the loop as it happens, on stderr, while a run works.

SCAFFOLD: being implemented (issue 10); today it shows nothing.
"""

from __future__ import annotations

from types import TracebackType

from rich.console import Console

from tiny_cli.events import Observer, ignore


class LiveView:
    """A rich Live display of one run at a time on a terminal's stderr."""

    def __init__(self, console: Console) -> None:
        self.console = console

    def observer(self, run: str) -> Observer:
        """Return the observer that shows run `run`."""
        return ignore

    def __enter__(self) -> LiveView:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        return None
