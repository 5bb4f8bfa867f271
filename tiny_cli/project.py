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
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tiny_cli.errors import ConfigError

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
}
SECRET_WORDS = ("key", "token", "secret", "password", "credential")


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
            table = _tool_table(pyproject)
            if table is not None:
                return _checked(pyproject, table, "[tool.tiny]")
    return None


def read_project(path: Path) -> Project:
    """Read one project file (`tiny.toml`, or a pyproject.toml's `[tool.tiny]`)."""
    if path.name == PYPROJECT_FILE:
        return _checked(path, _tool_table(path) or {}, "[tool.tiny]")
    return _checked(path, _toml(path), "")


def _tool_table(path: Path) -> dict[str, Any] | None:
    tool = _toml(path).get("tool")
    table = tool.get("tiny") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.tiny] must be a table")
    return table


def _toml(path: Path) -> dict[str, Any]:
    import tomllib  # here: most commands run where no project file is, and it costs ~4 ms

    try:
        return tomllib.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read the project file: {reason}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


def _checked(path: Path, table: Mapping[str, Any], where: str) -> Project:
    """Check every key and value; resolve paths against the file's folder."""
    values: dict[str, Any] = {}
    for key, value in table.items():
        name = f"{path}: {where + '.' if where else ''}{key}"
        _no_secret(name, key, value)
        if key not in KEYS:
            raise ConfigError(f"{name}: unknown setting{_did_you_mean(key)}; known: {_known()}")
        kind, is_path = KEYS[key]
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            raise ConfigError(f"{name}: expected {_kind_name(kind)}, got {value!r}")
        values[key] = (
            _resolved(path.parent, key, str(value)) if is_path or key == "tools" else value
        )
    if "allow_hosts" in values and not all(isinstance(h, str) for h in values["allow_hosts"]):
        raise ConfigError(f"{path}: allow_hosts: expected a list of host[:port] strings")
    return Project(path, values)


def _no_secret(name: str, key: str, value: Any) -> None:
    """Keys live in the environment; a project file is committed and shared."""
    if any(word in key.lower() for word in SECRET_WORDS):
        raise ConfigError(
            f"{name}: a project file never holds a secret; set TINY_API_KEY in the environment"
        )
    if key == "base_url" and isinstance(value, str) and (urlsplit(value).password is not None):
        raise ConfigError(
            f"{name}: credentials in the URL; keep them out of the file (TINY_API_KEY)"
        )


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
