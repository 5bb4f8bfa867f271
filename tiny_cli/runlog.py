"""The run log: every invocation recorded in SQLite under the data directory.

SCAFFOLD: being implemented (issue 10); today it records nothing.
"""

from __future__ import annotations

from pathlib import Path
from types import TracebackType

from tiny_cli.events import Observer, ignore


class RunLog:
    """The SQLite run log under TINY_HOME."""

    @classmethod
    def open(cls, home: Path) -> RunLog:
        """Open (creating or upgrading) the run log in `home`."""
        return cls()

    def observer(self, command: str, run: str, endpoint: str) -> Observer:
        """Return the observer that records one run of `command` (`run` labels it)."""
        return ignore

    def close(self) -> None:
        """Close the database."""

    def __enter__(self) -> RunLog:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
