"""Files a user gives or commits, read and written by one set of rules.

Reading: a byte bound that holds for pipes and devices too (their `st_size` is 0); a FIFO with
no writer reads as empty, not a hang; a folder is one ConfigError; a UTF-8 BOM is read past.
Parsers a hostile file can recurse to death (TOML, JSON) run under `parse_guarded`.

Writing: whole or not at all (a temporary file, then `os.replace`, keeping the permissions),
never over anything that is not a regular file (a FIFO, a device, a link such as
`/dev/stdout`), under a lock beside the file (`flock`; `msvcrt.locking` on Windows). JSON Lines
escape the separators `str.splitlines` would split on, and are split on "\n" only. Cache files
as JSON are read back only under the salt they were written with.

YAML a user wrote is read within bounds of size, depth and alias expansion: PyYAML's safe
loader expands aliases, and a 637-byte card of nine nested aliases is a billion values to
whatever walks it. Composing first and walking the node graph on a budget refuses it at once.
"""

from __future__ import annotations

import codecs
import contextlib
import errno
import json
import os
import re
import stat
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml

from tiny_cli.errors import ConfigError
from tiny_cli.text import half_pair

try:
    import fcntl
except ImportError:  # Windows has no fcntl: `_exclusive` locks with msvcrt there
    fcntl = None  # type: ignore[assignment]
if sys.platform == "win32":
    import msvcrt

__all__ = [
    "DEFAULT_MAX_BYTES",
    "MAX_YAML_BYTES",
    "MAX_YAML_DEPTH",
    "MAX_YAML_VALUES",
    "Sync",
    "check_writable",
    "compose_yaml",
    "escape_separators",
    "jsonl_line",
    "jsonl_lines",
    "load_json",
    "load_yaml",
    "load_yaml_list",
    "locked",
    "parse_guarded",
    "read_bytes",
    "read_json",
    "read_text",
    "read_yaml_text",
    "refuse_special",
    "unreadable",
    "write_json",
    "write_synced",
    "write_text",
    "yaml_as_written",
    "yaml_error_line",
    "yaml_error_message",
    "yaml_problem",
]


DEFAULT_MAX_BYTES = 16 * 2**20
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # Windows has none (nor FIFOs to wait on)
_CHUNK = 1 << 16
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_LINE_SEPARATORS = {"\u2028": "\\u2028", "\u2029": "\\u2029", "\u0085": "\\u0085"}
T = TypeVar("T")


def read_bytes(path: Path, limit: int = DEFAULT_MAX_BYTES) -> bytes:
    """At most `limit` bytes of `path`, from a file, pipe or device; ConfigError past that."""
    try:
        data = _read_within(path, limit)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file", path=path) from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a folder, not a file", path=path) from None
    except OSError as err:
        raise ConfigError(f"{path}: cannot be read ({err.strerror})", path=path) from None
    if data is None:
        raise ConfigError(f"{path}: larger than {_size(limit)}; not read", path=path)
    return data


def _read_within(path: Path, limit: int) -> bytes | None:
    """`path`'s bytes, None past `limit`; read a chunk at a time, so `/dev/zero` costs one."""
    fd = os.open(path, os.O_RDONLY | _NONBLOCK)  # a FIFO with no writer: no hang
    try:
        if sys.platform != "win32":  # opened O_NONBLOCK: reads wait for a writer again
            os.set_blocking(fd, True)
        data = bytearray()
        while chunk := os.read(fd, min(_CHUNK, limit + 1 - len(data))):  # a folder: EISDIR
            data += chunk
            if len(data) > limit:
                return None
        return bytes(data)
    finally:
        os.close(fd)


def read_text(path: Path, limit: int = DEFAULT_MAX_BYTES) -> str:
    """`read_bytes` decoded as UTF-8, less a leading BOM; else a ConfigError naming the line."""
    data = read_bytes(path, limit)
    # editors on Windows start a file with a BOM; YAML reads past it, and so does every file
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    try:
        return data[bom:].decode("utf-8")
    except UnicodeDecodeError as err:
        at = bom + err.start
        line = data.count(b"\n", 0, at) + 1
        raise ConfigError(f"{path}:{line}: not UTF-8 (byte {at})", path=path) from None


def parse_guarded(parse: Callable[[str], T], text: str, path: Path) -> T:
    """`parse(text)`, with nesting too deep for the parser turned into one ConfigError."""
    try:
        return parse(text)
    except (RecursionError, MemoryError):
        raise ConfigError(f"{path}: nested too deeply to read", path=path) from None


def load_json(text: str, where: str, keys_once: bool = True) -> Any:
    """`json.loads` of a user's text; ConfigError at `where` for half a UTF-16 pair, and for a
    key twice (`keys_once`): Python would keep the last, and a rewrite would lose the first."""
    repeated: list[str] = []

    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for key, value in pairs:
            if key in found and not repeated:
                repeated.append(key)  # the first one said; the object is read on regardless
            found[key] = value
        return found

    data = json.loads(text, object_pairs_hook=unique)
    if repeated and keys_once:
        said = repr(repeated[0][:64])  # repr: a key's control characters stay escaped
        raise ConfigError(f"{where}: key {said} appears twice; JSON readers keep only the last")
    if _SURROGATE_ESCAPE.search(text):  # a pair is one character; half of one is none
        _check_surrogates(data, where, None)
    return data


def _check_surrogates(value: Any, where: str, field: str | None) -> None:
    """ConfigError for a string holding half a UTF-16 pair (`"\\ud83d"`): no file can hold it."""
    if isinstance(value, dict):
        for key, item in value.items():
            _check_surrogates(key, where, field)
            _check_surrogates(item, where, key if field is None else field)
    elif isinstance(value, list):
        for item in value:
            _check_surrogates(item, where, field)
    elif isinstance(value, str) and (half := half_pair(value)):
        at = f"{where}: {field}" if field else where
        raise ConfigError(
            f"{at}: holds half of a UTF-16 pair ({half!a}), "
            "no character; write the character itself",
            field=field,
        )


def jsonl_line(record: Any) -> str:
    """One JSON Lines record with its line separators escaped, ending in "\\n"."""
    return escape_separators(json.dumps(record, ensure_ascii=False)) + "\n"


def escape_separators(text: str) -> str:
    """JSON text with U+2028, U+2029 and U+0085 written as escapes (the same JSON value)."""
    for raw, escaped in _LINE_SEPARATORS.items():
        text = text.replace(raw, escaped)
    return text


def jsonl_lines(text: str) -> list[str]:
    """The lines of a JSON Lines text, split on "\\n" only (U+2028 inside a value stays)."""
    return [line.rstrip("\r") for line in text.split("\n")]


def refuse_special(path: Path) -> None:
    """Raise when `path` exists and is not a regular file: a write would replace it."""
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as err:  # a plain file where a folder of the path should be, a denied folder
        raise ConfigError(f"{path}: cannot be written there ({err.strerror})", path=path) from None
    if stat.S_ISLNK(mode):
        raise ConfigError(
            f"{path}: is a link; tiny writes only regular files, not through links", path=path
        )
    if not stat.S_ISREG(mode):
        raise ConfigError(f"{path}: exists and is not a regular file; not replaced", path=path)


def check_writable(path: Path) -> None:
    """Raise now where a later write to `path` would fail (folder, special file, unwritable)."""
    if path.is_dir() and not path.is_symlink():
        raise ConfigError(f"{path}: is a folder; name a file to write", path=path)
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise ConfigError(f"{path}: {folder} is not a folder; cannot write there", path=path)
    if not os.access(folder, os.W_OK | os.X_OK):
        raise ConfigError(f"{path}: the folder {folder} is not writable", path=path)
    refuse_special(path)  # after the folder: under a plain file, lstat fails otherwise


Sync = Callable[[int], None]
"""What makes a written file's bytes durable (`os.fsync`): a parameter, so a test can stop there."""


def write_text(path: Path, text: str, sync: Sync = os.fsync) -> None:
    """Write `text` to `path` whole, in the mode the file had; special files refused."""
    refuse_special(path)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        write_synced(temp, text, _mode_of(path), sync)
        os.replace(temp, path)
    except OSError as err:
        _discard(temp)
        raise ConfigError(f"{path}: cannot be written ({err.strerror})", path=path) from None
    except BaseException:
        _discard(temp)  # Ctrl-C mid-write: no temporary file left beside the user's
        raise


def _mode_of(path: Path) -> int | None:
    """The permission bits of the file at `path`; None when there is none yet."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        return None


def write_synced(path: Path, text: str, mode: int | None = None, sync: Sync = os.fsync) -> None:
    """Write `text` to a new file at `path` with `mode` (else the default) and `sync` it."""
    with open(path, "w", encoding="utf-8", newline="") as handle:
        if mode is not None and hasattr(os, "fchmod"):  # Windows (before 3.13) has none
            os.fchmod(handle.fileno(), mode)
        handle.write(text)
        handle.flush()
        sync(handle.fileno())


def _discard(temp: Path) -> None:
    with contextlib.suppress(OSError):
        temp.unlink(missing_ok=True)


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold an exclusive lock on `.NAME.lock` beside `path` for the block."""
    lock = path.with_name(f".{path.name}.lock")
    try:
        handle = open(lock, "a")  # noqa: SIM115 - held for the block
    except OSError as err:
        raise ConfigError(f"{lock}: cannot take the lock ({err.strerror})", path=lock) from None
    with handle, _exclusive(handle.fileno()):
        yield


@contextlib.contextmanager
def _exclusive(fd: int) -> Iterator[None]:
    """Hold the lock on the open file `fd`: `flock`, or on Windows msvcrt's on its first byte."""
    if sys.platform == "win32":
        os.lseek(fd, 0, os.SEEK_SET)  # msvcrt locks bytes from the file's position
        while True:
            with contextlib.suppress(OSError):  # LK_LOCK gives up after ten tries a second apart
                msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
                break
        try:
            yield
        finally:
            os.lseek(fd, 0, os.SEEK_SET)
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)  # unlocked before the close, as Windows asks
    else:
        fcntl.flock(fd, fcntl.LOCK_EX)  # released when the file is closed
        yield


def _size(limit: int) -> str:
    """A byte bound as people write it."""
    return f"{limit // 2**20} MiB" if limit >= 2**20 else f"{limit:,} bytes"


def read_json(file: Path, salt: str) -> dict[str, Any] | None:
    """The JSON object in `file` if it was written with `salt`; None when not (or unreadable)."""
    try:
        data = json.loads(file.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) and data.get("salt") == salt else None


def write_json(file: Path, data: Mapping[str, Any]) -> None:
    """Write `data` to `file` atomically; a failure only costs the next process time."""
    tmp = file.with_name(f".{file.name}.{os.getpid()}")
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
        tmp.write_text(json.dumps(data), "utf-8")
        tmp.replace(file)
    except (OSError, TypeError, ValueError):  # a cache: not being able to write it is no error
        _discard(tmp)


# YAML a user wrote: the bounds
MAX_YAML_BYTES = 256 * 1024
MAX_YAML_DEPTH = 32
MAX_YAML_VALUES = 20_000  # scalars, lists and mappings, every alias counted as expanded


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's safe loader when PyYAML was built with it (much faster: docs/overhead.md),
    every bound below checked on the node graph it composes; a date or time is the text the
    user wrote (YAML 1.2 has no timestamps): `expect: 2024-01-01` is the answer "2024-01-01",
    not a `date` no answer equals and no JSON report can write. So is a number only YAML 1.1
    reads (`_written_if_11`)."""


# YAML 1.1 alone reads these as numbers (YAML 1.2 has none, nobody writing a time or a code means
# them): base 60 (`12:30` is 750), a leading zero's octal (`02134`), `0b101` and `1_000`
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


def read_yaml_text(path: Path) -> str:
    """A user's file as UTF-8 within MAX_YAML_BYTES (else OSError EFBIG); no FIFO or device."""
    if path.exists() and not path.is_file():
        raise OSError(f"{path} is not a regular file")
    data = _read_within(path, MAX_YAML_BYTES)
    if data is None:
        raise OSError(errno.EFBIG, f"more than {MAX_YAML_BYTES} bytes (the bound for YAML)")
    return data.decode("utf-8")


def unreadable(exc: OSError | UnicodeDecodeError, what: str, cannot: str = "cannot read") -> str:
    """Why `read_yaml_text` did not read `what` (a card, a brief), without errno or file name."""
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return f"more than {MAX_YAML_BYTES} bytes (the bound for {what})"
    return f"{cannot}: {getattr(exc, 'strerror', None) or exc}"


def load_yaml_list(path: Path, text: str, not_a_list: str) -> list[Any]:
    """A task file in YAML: a list within the bounds, no key twice; else a ConfigError."""
    # its length is its reader's bound: only aliases make more values than it has characters
    bound = max(MAX_YAML_VALUES, len(text))
    try:
        node = parse_guarded(
            lambda t: compose_yaml(t, max_bytes=None, max_values=bound, unique=True), text, path
        )
        data = None if node is None else _LOADER("").construct_document(node)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, list):
        raise ConfigError(f"{path}: {not_a_list}")
    return data


def load_yaml(text: str, *, unique: bool = False) -> tuple[yaml.Node | None, Any]:
    """Compose and construct `text` within the bounds (and `unique` keys); else a YAMLError."""
    node = compose_yaml(text, unique=unique)
    return node, None if node is None else _LOADER("").construct_document(node)


def yaml_as_written(node: yaml.Node) -> Any:
    """The data of `node`, each scalar but null as written (YAML 1.1 reads `yes` as True)."""
    if isinstance(node, yaml.ScalarNode):
        return None if node.tag == NULL_TAG else node.value
    if isinstance(node, yaml.SequenceNode):
        return [yaml_as_written(item) for item in node.value]
    return {yaml_as_written(key): yaml_as_written(value) for key, value in node.value}


def compose_yaml(
    text: str,
    *,
    max_bytes: int | None = MAX_YAML_BYTES,
    max_values: int = MAX_YAML_VALUES,
    unique: bool = False,
) -> yaml.Node | None:
    """The node graph of `text`; a YAMLError if too large, too deep, an alias bomb, or a key
    twice in one mapping (`unique`: YAML would drop one unsaid)."""
    if max_bytes is not None and (size := len(text.encode("utf-8", errors="replace"))) > max_bytes:
        raise _limit(f"{size} bytes is more than the {max_bytes} allowed")
    line = _too_deep(text)
    if line is not None:  # before PyYAML: its scanner is quadratic in bracket depth
        raise _limit(_TOO_DEEP, yaml.Mark("<text>", 0, line, 0, None, 0))
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


def yaml_problem(exc: yaml.YAMLError) -> tuple[str, str | None]:
    """What PyYAML (or a bound here) found wrong, and while doing what (its context)."""
    return getattr(exc, "problem", None) or str(exc).splitlines()[0], getattr(exc, "context", None)


def yaml_error_message(exc: yaml.YAMLError) -> str:
    """Say what PyYAML (or one of the bounds above) found wrong, with its context if any."""
    problem, context = yaml_problem(exc)
    moved = _opened_before(exc)
    if context and moved:
        context += f" opened on this line; noticed on line {moved[1]}"
    return f"invalid YAML: {problem}" + (f" ({context})" if context else "")


def yaml_error_line(exc: yaml.YAMLError) -> int | None:
    """The line to fix: for a `[` or `{` left open (noticed lines later), where it opened."""
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
