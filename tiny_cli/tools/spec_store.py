"""The built-in tools' specs, kept on disk: a run whose calls convert nothing never loads pydantic.

Building a tool's arguments model and schema imports pydantic and docstring_parser, which
costs more than all the rest of a `tiny invoke` of a card with two web tools (figures in
docs/overhead.md). The description, schema and plainness of each
built-in tool are written to one JSON file under the cache directory, and read there by the
next process; the arguments model is built only when a call's arguments need converting
(tiny_cli.tools.registry.Tool).

What a spec depends on goes into the salt: tiny's version and Python's, the files of the
tools package (a built-in's signature may read a bound from any of them), and the installed
pydantic and docstring_parser (their files' size and mtime). Another salt, another file
content: the specs are built again and the file rewritten.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

from tiny_cli._version import __version__
from tiny_cli.tools.specs import BuiltOnce, Spec, spec_of
from tiny_cli.userfiles import read_json, stamp, write_json

__all__ = ["SPEC_FILE", "stored_spec"]

SPEC_FILE = "tool-specs.json"
BUILDERS = ("pydantic", "docstring_parser")  # what builds a spec: another version, another salt

_LOCK = threading.Lock()
_LOADED: dict[Path, dict[str, Any]] = {}  # per file: its entries, read once per process


def stored_spec(method: Callable[..., Any], name: str, cache_dir: Path) -> Spec:
    """Return the spec of the method `method` (self is no argument) under `name`, from disk.

    A spec not on disk (or under another salt) is built with `spec_of` and written there.
    """
    file = cache_dir / SPEC_FILE
    key = f"{method.__module__}.{method.__qualname__} as {name}"
    with _LOCK:
        entries = _entries(file)
        entry = entries.get(key)
        if _valid(entry):
            return _spec(entry, method, name)
        spec = spec_of(method, name, bound=True)  # a ToolError here is the tool's, raised
        entries[key] = {
            "description": spec.description,
            "schema": spec.schema_json,
            "plain": spec.plain,
        }
        write_json(file, {"salt": _salt(), "specs": entries})
        return spec


def _entries(file: Path) -> dict[str, Any]:
    if file not in _LOADED:
        data = read_json(file, _salt())
        specs = data.get("specs") if data is not None else None
        _LOADED[file] = specs if isinstance(specs, dict) else {}
    return _LOADED[file]


def _valid(entry: Any) -> TypeGuard[dict[str, Any]]:
    """An entry as this module writes it (a file edited by hand is built again)."""
    if not isinstance(entry, dict):
        return False
    kinds = {"description": str, "schema": str, "plain": bool}
    return all(isinstance(entry.get(k), kind) for k, kind in kinds.items())


def _spec(entry: dict[str, Any], method: Callable[..., Any], name: str) -> Spec:
    slot = BuiltOnce(lambda: spec_of(method, name, bound=True).model)
    return Spec(name, entry["description"], entry["schema"], entry["plain"], slot)


@functools.cache
def _salt() -> str:
    """What the specs depend on, besides each method itself."""
    parts = [__version__, sys.version, *_stamps(Path(__file__).parent)]
    for module in BUILDERS:
        found = importlib.util.find_spec(module)  # finds the files without importing them
        parts.append(f"{module}:{stamp(found.origin) if found and found.origin else None}")
    return "|".join(parts)


def _stamps(folder: Path) -> list[str]:
    names = sorted(n for n in os.listdir(folder) if n.endswith(".py"))
    return [f"{n}:{stamp(folder / n)}" for n in names]
