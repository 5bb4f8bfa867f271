"""YAML a user wrote, read with hard bounds: size, nesting depth and alias expansion.

PyYAML's safe loader still expands aliases: a 637-byte card of nine nested aliases is a
billion values to anything that walks it (the schema check, line indexing). Composing
first and walking the node graph with a budget refuses such a file in microseconds.
"""

from __future__ import annotations

import errno
import re
from pathlib import Path
from typing import Any

import yaml

from tiny_cli.errors import ConfigError
from tiny_cli.userfiles import parse_guarded

__all__ = [
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_VALUES",
    "as_written",
    "compose",
    "error_line",
    "error_message",
    "load",
    "load_list",
    "problem_of",
    "read_bounded",
]

MAX_YAML_BYTES = 256 * 1024
MAX_YAML_DEPTH = 32
MAX_YAML_VALUES = 20_000  # scalars, lists and mappings, every alias counted as expanded


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's safe loader when PyYAML was built with it (much faster: docs/overhead.md),
    every bound below checked on the node graph it composes; a date or time is the text the
    user wrote (YAML 1.2 has no timestamps): `expect: 2024-01-01` is the answer "2024-01-01",
    not a `date` no answer equals and no JSON report can write. So is a number only YAML 1.1
    reads (`_written_if_11`)."""


# YAML 1.1 alone reads these as numbers: base 60 (`12:30` is 750), octal by a leading zero
# (the ZIP code `02134` is 1116), binary (`0b101`) and digits with underscores (`1_000`);
# YAML 1.2 has none of them, and nobody writing a time or a code means them
_ONLY_11 = re.compile(r"[-+]?(?:[0-9]+(?::[0-5]?[0-9])+(?:\.[0-9]*)?|0[0-7]+|0b[01]+)|.*_.*")


def _written_if_11(loader: Any, node: yaml.ScalarNode) -> Any:
    """A number only YAML 1.1 reads is the text as written; any other, the number."""
    if _ONLY_11.fullmatch(node.value):
        return node.value
    if node.tag.endswith(":int"):
        return loader.construct_yaml_int(node)
    return loader.construct_yaml_float(node)


_Loader.add_constructor("tag:yaml.org,2002:timestamp", _Loader.construct_yaml_str)
_Loader.add_constructor("tag:yaml.org,2002:int", _written_if_11)
_Loader.add_constructor("tag:yaml.org,2002:float", _written_if_11)
_LOADER: Any = _Loader
MERGE_TAG = "tag:yaml.org,2002:merge"
NULL_TAG = "tag:yaml.org,2002:null"
_TOO_DEEP = f"nested deeper than {MAX_YAML_DEPTH} levels"


def read_bounded(path: Path) -> str:
    """Read a user's file as UTF-8, at most one byte past the bound (so a huge file is cheap).

    Raises OSError or UnicodeDecodeError as reading does; a FIFO or device is refused, and a
    file past the bound is an OSError with errno EFBIG.
    """
    if path.exists() and not path.is_file():
        raise OSError(f"{path} is not a regular file")
    with path.open("rb") as handle:
        data = handle.read(MAX_YAML_BYTES + 1)
    # counted before decoding: a cut inside a character must not read as a file not UTF-8
    if len(data) > MAX_YAML_BYTES:
        raise OSError(errno.EFBIG, f"more than {MAX_YAML_BYTES} bytes (the bound for YAML)")
    return data.decode("utf-8")


def load_list(path: Path, text: str, not_a_list: str) -> list[Any]:
    """A task file in YAML: a list, within the bounds, no key twice in a mapping; one
    ConfigError naming `path` else.

    A task file may be as long as its reader allows, so its bound on values grows with its
    length: only aliases can make more values than the text has characters.
    """
    bound = max(MAX_YAML_VALUES, len(text))
    try:
        node = parse_guarded(
            lambda t: compose(t, max_bytes=None, max_values=bound, unique=True), text, path
        )
        data = None if node is None else _LOADER("").construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, list):
        raise ConfigError(f"{path}: {not_a_list}")
    return data


def load(text: str, *, unique: bool = False) -> tuple[yaml.Node | None, Any]:
    """Compose and construct `text` within the bounds; raise a YAMLError if past them.

    `unique`: a key twice in one mapping is a YAMLError too (cards report it themselves).
    """
    node = compose(text, unique=unique)
    if node is None:
        return None, None
    return node, _LOADER("").construct_document(node)


def as_written(node: yaml.Node) -> Any:
    """The data of `node` with every scalar the text the user wrote (null stays None): for
    values that are text to their reader, where YAML 1.1 reads `12:30` as 750, the ZIP code
    `02134` as the octal 1116 and `yes` as True."""
    if isinstance(node, yaml.ScalarNode):
        return None if node.tag == NULL_TAG else node.value
    if isinstance(node, yaml.SequenceNode):
        return [as_written(item) for item in node.value]
    return {as_written(key): as_written(value) for key, value in node.value}


def compose(
    text: str,
    *,
    max_bytes: int | None = MAX_YAML_BYTES,
    max_values: int = MAX_YAML_VALUES,
    unique: bool = False,
) -> yaml.Node | None:
    """Return the node graph of `text`, refusing oversized, too deep or alias-bomb input.

    `max_bytes=None` leaves the size to the caller, who read the text within its own bound;
    `unique` refuses a key written twice in one mapping, which YAML would silently drop.
    """
    if max_bytes is not None and (size := len(text.encode("utf-8", errors="replace"))) > max_bytes:
        raise _limit(f"{size} bytes is more than the {max_bytes} allowed")
    line = _too_deep(text)
    if line is not None:  # before PyYAML: its scanner is quadratic in bracket depth
        mark = yaml.Mark("<text>", 0, line, 0, None, 0)
        raise _limit(_TOO_DEEP, mark)
    try:
        node = yaml.compose(text, Loader=_LOADER)
    except RecursionError:
        raise _limit(_TOO_DEEP) from None
    if node is not None:
        _check_bounds(node, max_values, unique)
    return node


def _check_bounds(root: yaml.Node, max_values: int, unique: bool = False) -> None:
    """Walk the graph as a consumer would see it (aliases expanded), within a budget."""
    stack: list[tuple[yaml.Node, int]] = [(root, 1)]
    seen = 0
    while stack:
        node, depth = stack.pop()
        seen += 1
        if seen > max_values:
            raise _limit(
                f"expands to more than {max_values} values (nested YAML aliases?)",
                node.start_mark,
            )
        if depth > MAX_YAML_DEPTH:
            raise _limit(_TOO_DEEP, node.start_mark)
        if isinstance(node, yaml.MappingNode):
            if unique:
                _check_unique(node)
            stack.extend((part, depth + 1) for pair in node.value for part in pair)
        elif isinstance(node, yaml.SequenceNode):
            stack.extend((item, depth + 1) for item in node.value)


def _check_unique(mapping: yaml.MappingNode) -> None:
    """Refuse a scalar key that names, as Python reads it, a key before it in `mapping`, at
    its line: `1` and `'1'` are two keys, `~` and `null` (or `1` and `true`) one."""
    seen: set[Any] = set()
    for key, _ in mapping.value:
        if not isinstance(key, yaml.ScalarNode) or key.tag == MERGE_TAG:  # `<<` merges, twice too
            continue
        value = _LOADER("").construct_object(key)
        if value in seen:
            problem = f"key {key.value!r} appears twice; YAML would keep only the last one"
            raise _limit(problem, key.start_mark)
        seen.add(value)


def _too_deep(text: str) -> int | None:
    """Return the 0-based line where [ and { outside quotes nest past the bound, if any."""
    depth = line = 0
    quote = ""
    escaped = False
    for char in text:
        if char == "\n":
            line += 1
            quote = ""  # a stray apostrophe in plain text ("it's") must not hide the rest
        elif quote:
            escaped = char == "\\" and not escaped and quote == '"'
            if char == quote and not escaped:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char in "[{":
            depth += 1
            if depth > MAX_YAML_DEPTH:
                return line
        elif char in "]}":
            depth = max(0, depth - 1)
    return None


def _limit(problem: str, mark: Any = None) -> yaml.MarkedYAMLError:
    """A bound was passed: a YAML error like PyYAML's own, so every caller reports it alike."""
    return yaml.MarkedYAMLError(problem=problem, problem_mark=mark)


def problem_of(exc: yaml.YAMLError) -> tuple[str, str | None]:
    """What PyYAML (or a bound here) found wrong, and while doing what: its first line alone
    is the context ("while scanning a plain scalar"), not the problem."""
    return getattr(exc, "problem", None) or str(exc).splitlines()[0], getattr(exc, "context", None)


def error_message(exc: yaml.YAMLError) -> str:
    """Say what PyYAML (or a yamlsafe bound) found wrong, with its context if any."""
    problem, context = problem_of(exc)
    moved = _opened_before(exc)
    if context and moved:
        context += f" opened on this line; noticed on line {moved[1]}"
    return f"invalid YAML: {problem}" + (f" ({context})" if context else "")


def error_line(exc: yaml.YAMLError) -> int | None:
    """The line to fix: for a `[` or `{` left open, the line that opened it.

    PyYAML notices an unclosed flow collection at the next line's token (one line late, or
    more); its context mark is where the collection began.
    """
    moved = _opened_before(exc)
    if moved:
        return moved[0]
    mark = getattr(exc, "problem_mark", None)
    return mark.line + 1 if mark else None


def _opened_before(exc: Any) -> tuple[int, int] | None:
    """(line opened, line noticed) of an error in a [ ] or { } opened on an earlier line."""
    mark, opened = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    if mark is None or opened is None or opened.line >= mark.line:
        return None
    flow = (getattr(exc, "context", None) or "").startswith("while parsing a flow")
    return (opened.line + 1, mark.line + 1) if flow else None
