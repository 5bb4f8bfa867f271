"""Cache files as JSON: read back only under the salt they were written with, written atomically."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["read_json", "stamp", "write_json"]


def read_json(file: Path, salt: str) -> dict[str, Any] | None:
    """The JSON object in `file` if it was written with `salt`; None when not (or unreadable)."""
    try:
        data = json.loads(file.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("salt") == salt else None


def stamp(path: str | Path) -> tuple[int, int] | None:
    """A file's size and mtime (ns), what a cache compares; None when it cannot be read."""
    try:
        found = os.stat(path)  # not Path.stat: its overhead adds up over 10,000 files
    except OSError:
        return None
    return found.st_size, found.st_mtime_ns


def write_json(file: Path, data: Mapping[str, Any]) -> None:
    """Write `data` to `file` atomically; a failure only costs the next process time."""
    tmp = file.with_name(f".{file.name}.{os.getpid()}")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data), "utf-8")
        tmp.replace(file)
    except (OSError, TypeError, ValueError):  # a cache: not being able to write it is no error
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
