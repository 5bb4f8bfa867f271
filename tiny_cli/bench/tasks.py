"""The bench's task file: each task, what its answer must hold, and where the file lives."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any

from tiny_cli.cards.card import Card
from tiny_cli.digest import field_names
from tiny_cli.errors import ConfigError
from tiny_cli.text import check_task, kind_of, printable, text_of
from tiny_cli.userfiles import jsonl_lines, load_json, load_yaml_list, parse_guarded, read_text

__all__ = [
    "DEFAULT_TASKS_FILE",
    "EXPECT_FORMS",
    "PAGES_FOLDER",
    "SITE",
    "TASK_FIELDS",
    "TASK_SOURCE",
    "TOOL_SOURCE",
    "BenchTask",
    "Expect",
    "check_agents",
    "check_finite",
    "default_tasks_path",
    "is_jsonl",
    "load_tasks",
    "pages_folder",
]

DEFAULT_TASKS_FILE = Path("examples/bench/tasks.yaml")
PAGES_FOLDER = "pages"  # next to the tasks file: what `{site}` serves
SITE = "{site}"
TASK_FIELDS = ("id", "task", "expected_agent", "must_return", "expect", "writes")
# Digest.field_sources values that can count: a tool call supplied the value, or the task did
TOOL_SOURCE = "tool"
TASK_SOURCE = "task"
EXPECT_FORMS = (
    "write an exact value, or {regex: PATTERN}, or {value: VALUE}; "
    "the last two may add from_task: true"
)


@dataclass(frozen=True)
class Expect:
    """What one field must hold: an exact value, or a regex searched in its text.

    `from_task`: the value may honestly be copied from the task text, so a field the runner
    found only in the task counts; otherwise its value must come from a tool call.
    """

    value: Any = None
    regex: str | None = None
    from_task: bool = False

    def matches(self, actual: Any) -> bool:
        """Tell whether `actual` (with `{site}` for the page server) is what was expected."""
        if actual is None or actual == "":
            return False
        if self.regex is not None:
            return re.search(self.regex, text_of(actual)) is not None
        return text_of(actual).strip() == text_of(self.value).strip()

    def sourced(self, source: str | None) -> bool:
        """Tell whether a field from `source` (Digest.field_sources) may count as correct."""
        return source == TOOL_SOURCE or (self.from_task and source == TASK_SOURCE)

    def to_json(self) -> Any:
        """Return the expectation as written in a task file."""
        if not self.from_task:
            return {"regex": self.regex} if self.regex is not None else self.value
        key, value = ("regex", self.regex) if self.regex is not None else ("value", self.value)
        return {key: value, "from_task": True}


@dataclass(frozen=True)
class BenchTask:
    """One task of the task file; `expected_agent` None means abstaining is right."""

    id: str
    task: str
    expected_agent: str | None
    must_return: tuple[str, ...] = ()
    expect: Mapping[str, Expect] = field(default_factory=dict)
    writes: bool = False
    # the entry as an error names it (`task 3 (web-blog)`, `line 3 (web-blog)`); "": not read
    where: str = field(default="", compare=False)

    def text(self, site: str | None) -> str:
        """Return the task with `{site}` replaced by the page server's base URL."""
        return self.task.replace(SITE, site) if site else self.task

    def asked_fields(self) -> tuple[str, ...]:
        """Return must_return plus every field `expect` checks: both arms are asked for them."""
        return tuple(dict.fromkeys((*self.must_return, *self.expect)))


def load_tasks(path: Path) -> list[BenchTask]:
    """Read a task file (YAML list, or JSONL); raise ConfigError naming file, entry and field."""
    entries = _read_entries(path)
    if not entries:
        raise ConfigError(f"{path}: no tasks in the file")
    tasks, seen = [], set()
    for where, entry in entries:
        task = _task(f"{path}: {where}", entry)
        where = f"{where} ({printable(task.id)})"
        if task.id in seen:
            raise ConfigError(f"{path}: {where}: id: duplicate task id {task.id!r}")
        seen.add(task.id)
        tasks.append(replace(task, where=where))
    return tasks


def check_agents(path: Path, tasks: Iterable[BenchTask], cards: Mapping[str, Card]) -> None:
    """Raise ConfigError if a task expects a card that is not loaded."""
    for t in tasks:
        if t.expected_agent is not None and t.expected_agent not in cards:
            known = ", ".join(sorted(cards)) or "none"
            where = t.where or f"task {printable(t.id)}"
            raise ConfigError(
                f"{path}: {where}: expected_agent: no card {t.expected_agent!r} (known: {known})"
            )


def default_tasks_path(cwd: Path) -> Path:
    """Return ./examples/bench/tasks.yaml, else the repository's copy next to the package."""
    for base in (cwd, Path(__file__).resolve().parents[2]):
        if (base / DEFAULT_TASKS_FILE).is_file():
            return base / DEFAULT_TASKS_FILE
    raise ConfigError(f"no task file {DEFAULT_TASKS_FILE} here; pass --tasks FILE")


def pages_folder(tasks_path: Path) -> Path | None:
    """Return the `pages/` folder next to a task file, if there is one."""
    folder = tasks_path.parent / PAGES_FOLDER
    return folder if folder.is_dir() else None


# --- reading the file ---------------------------------------------------------------------


def _read_entries(path: Path) -> list[tuple[str, Any]]:
    """Return (where, entry) pairs: JSONL lines by number, YAML list items by index."""
    text = read_text(path)  # bounded: a folder, FIFO or device is one line
    if is_jsonl(path):
        return [
            (f"line {n}", _json(path, n, line))
            for n, line in enumerate(jsonl_lines(text), 1)
            if line.strip()
        ]
    data = load_yaml_list(path, text, "a task file is a YAML list of tasks (or JSONL)")
    return [(f"task {i + 1}", entry) for i, entry in enumerate(data)]


def is_jsonl(path: Path) -> bool:
    """Whether a task file is read as JSONL: its suffix, in any case (`.JSONL` too)."""
    return path.suffix.lower() == ".jsonl"


def _json(path: Path, n: int, line: str) -> Any:
    try:
        return parse_guarded(partial(load_json, where=f"{path}:{n}"), line, Path(f"{path}:{n}"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{n}: not JSON: {exc.msg} at column {exc.colno}") from None


# --- checking one entry -------------------------------------------------------------------


def _task(where: str, entry: Any) -> BenchTask:
    """Check one entry and build its BenchTask; the first wrong field is the one named."""
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: a task must be a mapping with id, task, expected_agent")
    task_id = entry.get("id")
    if isinstance(task_id, str) and task_id:
        where = f"{where} ({printable(task_id)})"  # one line, whatever the file holds
    unknown = sorted(set(entry) - set(TASK_FIELDS))
    if unknown:
        fields = ", ".join(TASK_FIELDS)
        raise ConfigError(f"{where}: {printable(unknown[0])}: unknown field (fields: {fields})")
    # checked in this order, so an entry with several faults always names the same one
    name, text, agent = _task_id(where, task_id), _text(where, entry), _agent(where, entry)
    writes = _writes(where, entry.get("writes", False))
    must_return = _must_return(where, entry.get("must_return"))
    expect = _expect(where, entry.get("expect"))
    try:  # what the run will ask for, checked as its Brief will check it: before any request
        field_names([*must_return, *expect], "must_return and expect")
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return BenchTask(name, text, agent, must_return, expect, writes)


def _task_id(where: str, task_id: Any) -> str:
    if not isinstance(task_id, str) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*", task_id):
        raise ConfigError(f"{where}: id: must be a name of letters, digits, '-', '_' or '.'")
    return task_id


def _text(where: str, entry: dict[str, Any]) -> str:
    text = entry.get("task")
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{where}: task: must be the task's text")
    check_task(text, where)
    return text.strip()


def _agent(where: str, entry: dict[str, Any]) -> str | None:
    if "expected_agent" not in entry:
        raise ConfigError(f"{where}: expected_agent: missing (a card id, or null to abstain)")
    agent = entry["expected_agent"]
    if agent is not None and not (isinstance(agent, str) and agent.strip()):
        raise ConfigError(f"{where}: expected_agent: must be a card id or null")
    return agent


def _writes(where: str, writes: Any) -> bool:
    if not isinstance(writes, bool):
        raise ConfigError(f"{where}: writes: must be true or false, got {kind_of(writes)}")
    return writes


def _must_return(where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where}: must_return: must be a list of field names")
    return tuple(dict.fromkeys(v.strip() for v in value))


def _expect(where: str, value: Any) -> dict[str, Expect]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expect: must map field names to expectations ({EXPECT_FORMS})")
    blank = [name for name in value if not str(name).strip()]
    if blank:  # a run drops a blank name from what it asks for, so it could never be right
        raise ConfigError(f"{where}: expect: a field name must not be blank, got {blank[0]!r}")
    return {str(name): _one_expect(f"{where}: expect.{name}", v) for name, v in value.items()}


def _one_expect(where: str, value: Any) -> Expect:
    if not isinstance(value, dict):
        return Expect(value=_exact(where, value))
    keys = set(value) - {"from_task"}
    from_task = value.get("from_task", False)
    if len(keys) != 1 or not keys <= {"regex", "value"} or not isinstance(from_task, bool):
        raise ConfigError(f"{where}: {EXPECT_FORMS}")
    if "value" in value:
        return Expect(value=_exact(where, value["value"]), from_task=from_task)
    return Expect(regex=_regex(where, value["regex"]), from_task=from_task)


def _regex(where: str, pattern: Any) -> str:
    if not isinstance(pattern, str):
        raise ConfigError(f"{where}: {EXPECT_FORMS}")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"{where}: regex {pattern!r}: {exc}") from None
    return pattern


def _exact(where: str, value: Any) -> Any:
    if value is None or isinstance(value, list | dict):
        raise ConfigError(f"{where}: an exact value must be a string, number or boolean")
    return check_finite(where, value)


def check_finite(where: str, value: Any) -> Any:
    """`value`; a float no answer's JSON holds (nan, infinity) is one ConfigError at `where`."""
    if isinstance(value, float) and not math.isfinite(value):  # no JSON report can hold it
        raise ConfigError(f"{where}: {value} is no number an answer holds; quote it as text")
    return value
