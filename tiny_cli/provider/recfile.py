"""A recording file: reading it (bounded, its header, each exchange checked), answers as JSON."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from tiny_cli.errors import ConfigError
from tiny_cli.provider.client import MAX_TOKENS, Completion, ToolCall

RECORDING_FORMAT = 1
MAX_RECORDING_BYTES = 1 << 30  # 1 GiB: the largest shipped one is 23 MB


def read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield a recording's non-blank lines with their numbers; ConfigError if unreadable."""
    yield from _read_lines(path)


def header_of(path: Path, numbered: tuple[int, str] | None) -> dict[str, Any]:
    """Return the header from a recording's first line; ConfigError if it is not one."""
    return _header(path, numbered)


def entry_of(path: Path, n: int, line: str) -> dict[str, Any]:
    """Return one exchange line, its types checked; ConfigError naming file and line."""
    return _entry(path, n, line)


def completion_to_json(completion: Completion) -> dict[str, Any]:
    """Return a Completion as a JSON-ready dict."""
    return {
        "content": completion.content,
        "tool_calls": [[c.id, c.name, c.arguments] for c in completion.tool_calls],
        "tokens_in": completion.tokens_in,
        "tokens_out": completion.tokens_out,
        "finish_reason": completion.finish_reason,
        "raw": completion.raw,
    }


def completion_from_json(data: dict[str, Any]) -> Completion:
    """Rebuild a Completion from `completion_to_json`'s dict."""
    calls = tuple(ToolCall(str(i), str(n), str(a)) for i, n, a in data.get("tool_calls") or ())
    return Completion(
        data.get("content"),
        calls,
        int(data.get("tokens_in") or 0),
        int(data.get("tokens_out") or 0),
        data.get("finish_reason"),
        data.get("raw") or {},
    )


def same_endpoint(paths: Sequence[Path], headers: Sequence[dict[str, Any]]) -> None:
    """Recordings replayed together must come from one model in one tool mode."""
    for key in ("model", "tool_mode"):
        values = {h.get(key) for h in headers}
        if len(values) > 1:
            shown = ", ".join(f"{p}: {h.get(key)!r}" for p, h in zip(paths, headers, strict=True))
            raise ConfigError(f"recordings of different {key.replace('_', ' ')}s: {shown}")


def _read_lines(path: Path) -> Iterator[tuple[int, str]]:
    _bounded(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read the recording: {reason}") from exc
    for n, line in enumerate(text.splitlines(), 1):
        if line.strip():
            yield n, line


def _header(path: Path, numbered: tuple[int, str] | None) -> dict[str, Any]:
    if numbered is None:
        raise ConfigError(f"{path}: empty file, not a tiny recording")
    n, line = numbered
    data = _json_line(path, n, line)
    if data.get("tiny_recording") != RECORDING_FORMAT:
        raise ConfigError(
            f"{path}:{n}: not a tiny recording (format "
            f"{data.get('tiny_recording')!r}, expected {RECORDING_FORMAT})"
        )
    return data


def _bounded(path: Path) -> None:
    """A recording is a regular file of at most MAX_RECORDING_BYTES (not /dev/zero, a FIFO)."""
    try:
        info = path.stat()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the recording: {exc.strerror}") from exc
    if not stat.S_ISREG(info.st_mode):
        raise ConfigError(f"{path}: not a regular file, not a tiny recording")
    if info.st_size > MAX_RECORDING_BYTES:
        raise ConfigError(
            f"{path}: {info.st_size:,} bytes, over the {MAX_RECORDING_BYTES:,} a recording may hold"
        )


def _entry(path: Path, n: int, line: str) -> dict[str, Any]:
    data = _json_line(path, n, line)
    for name in ("run", "key"):
        if not isinstance(data.get(name), str):
            raise ConfigError(f"{path}:{n}: exchange without a {name!r}")
    if not isinstance(data.get("completion"), dict) and not isinstance(data.get("error"), dict):
        raise ConfigError(f"{path}:{n}: exchange without a 'completion' or an 'error'")
    if "error" in data and not isinstance(data["error"], dict):  # replayed as the error it is
        raise ConfigError(f"{path}:{n}: 'error' must be an object")
    problem = _completion_problem(data["completion"]) if "completion" in data else None
    if problem:
        raise ConfigError(f"{path}:{n}: {problem}")
    return data


def _completion_problem(data: Any) -> str | None:
    """Say what is wrong with a recorded completion's types (a file edited by hand)."""
    if not isinstance(data, dict):
        return "'completion' must be an object"
    calls = data.get("tool_calls") or []
    if not isinstance(calls, list) or not all(
        isinstance(c, list) and len(c) == 3 and all(isinstance(x, str) for x in c) for c in calls
    ):
        return "'tool_calls' must be a list of [id, name, arguments] strings"
    for name in ("tokens_in", "tokens_out"):
        value = data.get(name) or 0
        if not isinstance(value, int) or isinstance(value, bool):
            return f"{name!r} must be a whole number, got {value!r}"
        if not 0 <= value <= MAX_TOKENS:
            return f"{name!r} must be from 0 to {MAX_TOKENS:,}, got {value:,}"
    if not isinstance(data.get("content") or "", str):
        return "'content' must be a string or null"
    if not isinstance(data.get("raw") or {}, dict):
        return "'raw' must be an object"
    return None


def _json_line(path: Path, n: int, line: str) -> dict[str, Any]:
    try:
        data = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{n}: not JSON: {exc.msg} at column {exc.colno}") from None
    except RecursionError:
        raise ConfigError(f"{path}:{n}: JSON nested too deeply") from None
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        raise ConfigError(f"{path}:{n}: a number with too many digits") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:{n}: a recording line must be a JSON object")
    return data
