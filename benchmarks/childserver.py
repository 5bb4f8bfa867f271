"""A scripted model server in its own process (it must not share the client's GIL).

The child prints its URL on its first line, answers one JSON stats line per line on its
stdin, and stops when stdin closes. benchmarks/overhead.py, runlog.py and throughput.py
start their servers through this.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent


class ChildServer:
    """Run `command` (a benchmark's own `--serve` mode) and talk to it over stdin/stdout."""

    def __init__(self, command: list[str]) -> None:
        self.proc = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO
        )
        assert self.proc.stdout is not None and self.proc.stdin is not None
        self.url = self.proc.stdout.readline().strip()
        if not self.url.startswith("http://"):
            self.close()
            raise SystemExit(f"scripted server did not start (exit {self.proc.returncode})")

    def stats(self) -> dict[str, Any]:
        """Ask the child for its stats line."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("stats\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def close(self) -> None:
        """Close stdin (the child stops) and wait for it."""
        with contextlib.suppress(OSError):
            if self.proc.stdin is not None:
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def __enter__(self) -> ChildServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
