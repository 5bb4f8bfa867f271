"""The project file: settings written once for a folder, instead of flags in every shell.

tiny looks for `tiny.toml`, or a `[tool.tiny]` table in `pyproject.toml`, in the working
directory and then in each folder above it, as ruff and pytest do; the first folder that
has one wins (`tiny.toml` before `pyproject.toml` in the same folder). Paths in it are
relative to the file's folder. Precedence, highest first:

    CLI flag > environment variable > project file > card > default

A project file never holds a secret: keys stay in the environment, so a key name such as
`api_key` (or credentials inside `base_url`) is an error naming the file and the key.
"""

from __future__ import annotations

import difflib
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiny_cli.errors import ConfigError
from tiny_cli.settings import check_setting
from tiny_cli.userfiles import parse_guarded, read_text

__all__ = ["KEYS", "PROJECT_FILE", "Project", "find_project", "read_project"]

PROJECT_FILE = "tiny.toml"
PYPROJECT_FILE = "pyproject.toml"
# key → (the type TOML must hold, whether it is a path relative to the file's folder)
KEYS: dict[str, tuple[type | tuple[type, ...], bool]] = {
    "cards": (str, True),
    "tools": (str, False),  # a .py path (made relative to the file) or a dotted module name
    "docs": (str, True),
    "mcp": (str, True),
    "base_url": (str, False),
    "model": (str, False),
    "tool_mode": (str, False),
    "embedder": (str, False),
    "threshold": ((int, float), False),
    "allow_hosts": (list, False),
    "wall_scale": ((int, float), False),
    "log_runs": (bool, False),
    "ask_route": (bool, False),
    "tracing": (bool, False),  # OpenTelemetry spans over OTLP (tiny_cli.telemetry)
}
SECRET_WORDS = ("key", "token", "secret", "password", "credential")
TOOL_TABLE = "[tool.tiny]"
# a project file is a page of settings; a pyproject.toml a few pages: this bounds a pipe or
# /dev/zero named tiny.toml, and what TOML's parser is given
MAX_PROJECT_BYTES = 2**20
_NAME = re.compile(r"[A-Za-z0-9_-]{1,60}")  # a key an error shows as written
HOST_NOT = "/@ \t\x00"  # what no host[:port] entry holds
_HEADER = re.compile(r"^\s*\[+\s*([^\[\]]*?)\s*\]")
_ASSIGN = re.compile(r"""^\s*(["']?)([A-Za-z0-9_-]+)\1\s*=""")


@dataclass(frozen=True)
class Project:
    """A project file's settings, checked: `values` holds only known keys, paths resolved."""

    path: Path
    values: Mapping[str, Any] = field(default_factory=dict)

    @property
    def root(self) -> Path:
        """The folder the project file is in."""
        return self.path.parent


def find_project(start: Path) -> Project | None:
    """Return the nearest project file at or above `start`, read and checked; None if none."""
    for folder in (start, *start.parents):
        own = folder / PROJECT_FILE
        if own.is_file():
            return read_project(own)
        pyproject = folder / PYPROJECT_FILE
        if pyproject.is_file():
            text, data = _toml(pyproject)
            table = _tool_table(pyproject, data)
            if table is not None:
                return _checked(pyproject, table, TOOL_TABLE, text)
    return None


def read_project(path: Path) -> Project:
    """Read one project file (`tiny.toml`, or a pyproject.toml's `[tool.tiny]`)."""
    text, data = _toml(path)
    if path.name == PYPROJECT_FILE:
        return _checked(path, _tool_table(path, data) or {}, TOOL_TABLE, text)
    return _checked(path, data, "", text)


def _tool_table(path: Path, data: Mapping[str, Any]) -> dict[str, Any] | None:
    tool = data.get("tool")
    table = tool.get("tiny") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: {TOOL_TABLE} must be a table")
    return table


def _toml(path: Path) -> tuple[str, dict[str, Any]]:
    """The file's text and its TOML, read with a bound (a pipe or device too) and a depth limit."""
    text = read_text(path, MAX_PROJECT_BYTES)
    try:
        return text, parse_guarded(tomllib.loads, text, path)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {str(exc).splitlines()[0]}") from None


def _checked(path: Path, table: Mapping[str, Any], where: str, text: str) -> Project:
    """Check every key and value; resolve paths against the file's folder."""
    lines = _key_lines(text, where)
    values: dict[str, Any] = {}
    for key, value in table.items():
        line = f":{lines[key]}" if key in lines else ""
        name = f"{path}{line}: {where + '.' if where else ''}{_shown_key(key)}"
        _no_secret(name, key)
        if key not in KEYS:
            raise ConfigError(f"{name}: unknown setting{_did_you_mean(key)}; known: {_known()}")
        kind, is_path = KEYS[key]
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            raise ConfigError(f"{name}: expected {_kind_name(kind)}, got {_shown(value)}")
        if "\x00" in str(value):  # no path, URL or name holds one; the OS refuses it
            raise ConfigError(f"{name}: holds a NUL character")
        if isinstance(value, str) and not value.strip():  # cards = "" would be the folder itself
            raise ConfigError(f"{name}: empty; give a value or leave the key out")
        if key == "allow_hosts":
            _hosts(name, value)
        value = check_setting(name, key, value)
        values[key] = (
            _resolved(path.parent, key, str(value)) if is_path or key == "tools" else value
        )
    return Project(path, values)


def _no_secret(name: str, key: str) -> None:
    """Keys live in the environment; a project file is committed and shared."""
    if any(word in key.lower() for word in SECRET_WORDS):
        raise ConfigError(
            f"{name}: a project file never holds a secret; set TINY_API_KEY in the environment"
        )


def _hosts(name: str, hosts: Any) -> None:
    """allow_hosts: a list of host[:port] strings (the web tools parse each one further)."""
    for host in hosts:
        if not isinstance(host, str) or not host.strip() or any(c in host for c in HOST_NOT):
            raise ConfigError(f"{name}: expected a list of host[:port] strings")


def _key_lines(text: str, where: str) -> dict[str, int]:
    """The line of each key `key = ...` in the table `where` ("" for the top level)."""
    lines: dict[str, int] = {}
    inside = not where
    for number, line in enumerate(text.split("\n"), 1):
        header = _HEADER.match(line)
        if header:
            inside = header.group(1).replace(" ", "") == where.strip("[]")
            continue
        assigned = _ASSIGN.match(line) if inside else None
        if assigned:
            lines.setdefault(assigned.group(2), number)
    return lines


def _shown(value: Any) -> str:
    """A wrong value as an error shows it: numbers and switches as written, the rest by kind
    only (a string or list may hold a key, pasted into the wrong place)."""
    if isinstance(value, bool | int | float):
        return repr(value)
    kinds: dict[type, str] = {str: "a string", list: "a list", dict: "a table"}
    return kinds.get(type(value), "a date or time")


def _shown_key(key: str) -> str:
    """A key as an error shows it: a setting-like name as written; anything else (a pasted URL,
    a terminal escape) is not shown, as it may hold a secret."""
    return key if _NAME.fullmatch(key) else "(a quoted key, not shown)"


def _resolved(root: Path, key: str, value: str) -> str:
    """Make a path relative to the project file's folder (a dotted module name stays)."""
    if key == "tools" and not value.endswith(".py") and "/" not in value:
        return value
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else root / path)


def _did_you_mean(key: str) -> str:
    close = difflib.get_close_matches(key, list(KEYS), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _known() -> str:
    return ", ".join(KEYS)


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", bool: "true or false", list: "a list", int: "a number"}
    first = kind[0] if isinstance(kind, tuple) else kind
    return names.get(first, first.__name__)
