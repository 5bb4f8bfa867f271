"""Record and replay model exchanges: a run on a real endpoint, reproduced offline, bit for bit.

A recording is a JSONL file (docs/bench.md, "Record and replay"): one header line (format, tiny
version, model, endpoint host, tool mode, temperature, and a bench's making once it ends), then
one line per exchange: its run, the card that asked, its key, the body as sent and the answer
(or the provider error). A request's key hashes its ChatRequest's parts with the values that
change from run to run masked (tiny_cli.provider.volatile); answers are stored masked too, and
each (run, key) holds a FIFO of answers, so repeats and concurrent runs replay
deterministically. A replay opens no connection to any model server.

Every line goes through the secret scrubber (tiny_cli.secrets). A key is taken before
scrubbing; a request that held a secret is filed under its scrubbed form's key too, so a run
whose model echoed the key, replayed from the answer stored [redacted], matches as well.

`tiny bench --replay OLD [its flags] --upgrade` rewrites a recording made before tiny kept its
making: the header plus the making, each body as this replay sent it; nothing is written unless
every recorded exchange was asked for.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import re
import shutil
import stat
import threading
import time
from abc import ABC, abstractmethod
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self

from tiny_cli._version import __version__
from tiny_cli.errors import ConfigError, ProviderError, ProviderTimeout, ReplayError
from tiny_cli.provider.client import (
    MAX_TOKENS,
    ChatRequest,
    Completion,
    OpenAIProvider,
    Provider,
    ToolCall,
)
from tiny_cli.provider.volatile import NO_VOLATILE, Volatile, each_string
from tiny_cli.secrets import Scrubber, scrubber
from tiny_cli.userfiles import jsonl_lines, refuse_special

RECORDING_FORMAT = 1
INTERRUPTED_FOREIGN = (
    "--record keeps an interrupted run's exchanges under that name; move it, or record to "
    "another name"
)
MAX_RECORDING_BYTES = 1 << 30  # 1 GiB: the largest shipped one is 23 MB


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
    """Recordings replayed together must come from one model in one tool mode at one
    temperature: each shapes the requests, so another's answers would never match."""
    for key in ("model", "tool_mode", "temperature"):
        if any(h.get(key) != headers[0].get(key) for h in headers):
            shown = ", ".join(f"{p}: {h.get(key)!r}" for p, h in zip(paths, headers, strict=True))
            raise ConfigError(f"recordings of different {key.replace('_', ' ')}s: {shown}")


def _read_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Yield a recording's non-blank lines with their numbers; ConfigError if unreadable."""
    _bounded(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read the recording: {reason}") from exc
    for n, line in enumerate(jsonl_lines(text), 1):  # a U+2028 in an answer stays in its line
        if line.strip():
            yield n, line


def _header(path: Path, numbered: tuple[int, str] | None) -> dict[str, Any]:
    """Return the header from a recording's first line; ConfigError if it is not one."""
    if numbered is None:
        raise ConfigError(f"{path}: empty file, not a tiny recording")
    n, line = numbered
    data = _json_line(path, n, line)
    if data.get("tiny_recording") != RECORDING_FORMAT:
        raise ConfigError(
            f"{path}:{n}: not a tiny recording (format "
            f"{data.get('tiny_recording')!r}, expected {RECORDING_FORMAT})"
        )
    for key in ("model", "tool_mode"):  # compared across recordings replayed together
        if not isinstance(data.get(key), str | None):
            raise ConfigError(f"{path}:{n}: header {key!r} must be a string")
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
    """Return one exchange line, its types checked; ConfigError naming file and line."""
    data = _json_line(path, n, line)
    for name in ("run", "key"):
        if not isinstance(data.get(name), str):
            raise ConfigError(f"{path}:{n}: exchange without a {name!r}")
    if not isinstance(data.get("scrubbed_key", ""), str):
        raise ConfigError(f"{path}:{n}: 'scrubbed_key' must be a string")
    if not isinstance(data.get("completion"), dict) and not isinstance(data.get("error"), dict):
        raise ConfigError(f"{path}:{n}: exchange without a 'completion' or an 'error'")
    if "error" in data and not isinstance(data["error"], dict):  # replayed as the error it is
        raise ConfigError(f"{path}:{n}: 'error' must be an object")
    if "error" in data and _spent(data["error"].get("tokens", [0, 0])) is None:
        raise ConfigError(f"{path}:{n}: 'error.tokens' must be two token counts, [in, out]")
    problem = _completion_problem(data["completion"]) if "completion" in data else None
    if problem:
        raise ConfigError(f"{path}:{n}: {problem}")
    return data


def _spent(tokens: Any) -> tuple[int, int] | None:
    """An error's recorded `tokens` (what an unusable answer spent), or None if not two counts."""
    if not isinstance(tokens, list) or len(tokens) != 2:
        return None
    if not all(type(t) is int and t >= 0 for t in tokens):
        return None
    return tokens[0], tokens[1]


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
        reason = exc.msg.removesuffix(" at")  # "Unterminated string starting at"
        raise ConfigError(f"{path}:{n}: not JSON: {reason} at column {exc.colno}") from None
    except RecursionError:
        raise ConfigError(f"{path}:{n}: JSON nested too deeply") from None
    except ValueError:  # an integer longer than Python converts (sys.get_int_max_str_digits)
        raise ConfigError(f"{path}:{n}: a number with too many digits") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}:{n}: a recording line must be a JSON object")
    return data


PREVIEW_CHARS = 80  # how much of the last message names a request in a ReplayError
# what an older tiny labelled a delegate's and a served run's exchanges with: no card's id
UNNAMED_AGENTS = ("routed card", "served card")
KEY_CHARS = 24  # hex digits of the sha256 kept as a request's key
TIME_PLACEHOLDER = "{time}"
ARTIFACT_HANDLE = re.compile(r"\bart_[0-9a-f]{10}\b")  # tools/artifacts.py's: new in every run
TIMESTAMP = re.compile(
    r"\b\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?\b"
)


def canonical_request(
    request: ChatRequest, volatile: Volatile, scrub: Scrubber | None = None
) -> str:
    """Return the request's parts as stable JSON text: sorted keys, run-specific values masked;
    with `scrub`, scrubbed as a recording stores them."""
    parts = request.parts() if scrub is None else scrub.document(request.parts())
    return _stable(parts, volatile, sort_keys=True, separators=(",", ":"))


def request_key(request: ChatRequest, volatile: Volatile, scrub: Scrubber | None = None) -> str:
    """Return the key a recording files a request under: a short sha256 of its canonical form
    (`scrub`: of its scrubbed form, the other key of a request that held a secret)."""
    canonical = canonical_request(request, volatile, scrub)
    return hashlib.sha256(canonical.encode()).hexdigest()[:KEY_CHARS]


def sent_body(request: ChatRequest, volatile: Volatile) -> dict[str, Any]:
    """Return the body as it went over the wire, in its order, run-specific values masked."""
    return dict(json.loads(_stable(request.body(), volatile)))


def _stable(data: Any, volatile: Volatile, **dumps: Any) -> str:
    """A request's JSON text, this run's values masked in its strings, and every timestamp."""
    text = json.dumps(each_string(data, volatile.key_mask), ensure_ascii=False, **dumps)
    return TIMESTAMP.sub(TIME_PLACEHOLDER, text)


class ExchangeSource(ABC):
    """Gives each run its Provider; `host` and `model` describe the endpoint for reports."""

    host: str = ""
    model: str | None = None

    @abstractmethod
    def for_run(self, run: str, volatile: Volatile = NO_VOLATILE) -> Provider:
        """Return the Provider for one run (`run` names it in a recording, e.g. `t1/tiny/0`)."""

    def probe(self) -> None:  # noqa: B027 - a replay has no endpoint: nothing to probe
        """Raise ProviderError if the endpoint this source talks to is not there."""

    def close(self) -> None:  # noqa: B027 - sources holding nothing need no cleanup
        """Release what the source holds."""

    def answered_from(self) -> str | None:
        """Name the recordings any answer came from (None: every answer is the model's)."""
        return None

    def unused(self) -> int:
        """How many recorded answers nobody asked for (a replay that covered less)."""
        return 0

    def kept_on_interrupt(self) -> Path | None:
        """The file an interrupted recording's exchanges were kept in, once closed (or None)."""
        return None

    def recorded(self, part: str) -> Any:
        """A part of the replayed recording's header (e.g. `routes`); None when not a replay."""
        return None

    def note(self, part: str, value: Any) -> None:  # noqa: B027 - only a recording keeps notes
        """Keep `value` as `part` of the recording's header (a recording of a bench's making)."""

    def first_exchange(self, run: str) -> dict[str, Any] | None:
        """The replayed recording's first exchange of `run` (None: not a replay, or none)."""
        return None

    def written_to(self) -> Path | None:
        """The recording file this source writes (None: it writes none)."""
        return None

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


class LiveSource(ExchangeSource):
    """Every run talks to the endpoint; nothing is stored."""

    def __init__(self, provider: OpenAIProvider, host: str) -> None:
        self._provider, self.host = provider, host

    def for_run(self, run: str, volatile: Volatile = NO_VOLATILE) -> Provider:
        """Return the shared provider (httpx clients are thread-safe)."""
        return self._provider

    def probe(self) -> None:
        """Check that something listens at the endpoint."""
        self._provider.probe()

    def close(self) -> None:
        """Close the endpoint's connection pool."""
        self._provider.close()


class Recorder(ExchangeSource):
    """Talk to the endpoint and append every exchange to a recording as it happens."""

    def __init__(
        self,
        inner: Provider,
        path: Path,
        model: str | None,
        host: str,
        tool_mode: str | None = None,
        wall_scale: float = 1.0,
        resume: Replayer | None = None,
        temperature: float | None = None,
    ) -> None:
        self._inner, self.path, self.model, self.host = inner, Path(path), model, host
        self._resume = resume  # earlier recordings: their answers are reused, not asked again
        self._scrub = scrubber()  # the environment's keys
        self.resumed = 0
        self._lock = threading.Lock()
        self._header: dict[str, Any] = {  # written again, with its notes, when closed
            "tiny_recording": RECORDING_FORMAT,
            "tiny_version": __version__,
            "model": model,
            "base_url": host,
            "created_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "tool_mode": tool_mode,  # None: each card's own (default auto)
            "wall_scale": wall_scale,
            "temperature": temperature,  # None: none sent, the server sampled at its default
        }
        if resume is not None:  # which answers came from where: the files, by name only
            self._header["resumed_from"] = [p.name for p in resume.paths]
        # written beside the target and renamed into place when the command ends with at
        # least one exchange: a run that fails early never truncates an older recording
        self._partial = self.path.with_name(f".{self.path.name}.{os.getpid()}.partial")
        self._exchanges = 0
        self._noted = False  # a bench's notes (its making): worth a recording without exchanges
        self._kept: Path | None = None  # where Ctrl-C's exchanges went, once closed
        self._failed: OSError | None = None  # a write the disk refused: nothing is kept
        self._file = self._open()
        self._write(self._header)  # a .partial left by a crash is a recording too (for --resume)

    def _open(self) -> IO[str]:
        """Open the partial file, once the target and its interrupted twin are ours to write."""
        if self.path.is_dir():  # found at the start, not as a traceback when the run ends
            raise ConfigError(f"{self.path}: is a folder; --record needs a file name")
        refuse_special(self.path)  # a FIFO, device or link there is never replaced at the end
        _refuse_foreign(self.path)
        # Ctrl-C writes there: a user's own file of that name is refused now, not replaced then
        refuse_special(self._interrupted())
        _refuse_foreign(self._interrupted(), INTERRUPTED_FOREIGN)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            return self._partial.open("w", encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"{self.path}: cannot write the recording: {exc.strerror}") from exc

    def for_run(self, run: str, volatile: Volatile = NO_VOLATILE) -> Provider:
        """Return a provider that forwards to the endpoint and records under `run`."""
        return _RunProvider(self.forward, _RunLabel(run, volatile))

    def probe(self) -> None:
        """Check that something listens at the endpoint being recorded."""
        probe = getattr(self._inner, "probe", None)
        if probe is not None:
            probe()

    def close(self, keep: bool = True, finished: bool = True) -> None:
        """Close the file, move it into place if it holds exchanges, close the endpoint; with
        `keep` false (Ctrl-C, SIGTERM) it goes to a free interrupted name (`_interrupted`)."""
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()
        with self._lock:
            self._file.close()
            # a bench whose every task abstained asked nothing, yet its replay needs the header's
            # notes: kept when the command `finished` (one that failed early never truncates)
            empty = not self._exchanges and not (keep and finished and self._noted)
            if empty or self._failed is not None:  # after a failed write no part is kept
                self._partial.unlink(missing_ok=True)
            elif keep:
                self._finish(self.path)
            else:
                free = (self._interrupted(n) for n in itertools.count(1))
                self._kept = next(p for p in free if not os.path.lexists(p))
                self._finish(self._kept)

    def kept_on_interrupt(self) -> Path | None:
        """The interrupted recording's file once closed after Ctrl-C, else None."""
        return self._kept

    def note(self, part: str, value: Any) -> None:
        """Keep `value` as `part` of the header, written when the recording is closed."""
        with self._lock:
            self._header[part] = value
            self._noted = True

    def written_to(self) -> Path | None:
        """The recording's file."""
        return self.path

    def _finish(self, target: Path) -> None:
        """Write the header as it is now, then the exchanges, to `target` (whole, then renamed)."""
        finished = self._partial.with_suffix(".finished")
        try:
            with (
                finished.open("w", encoding="utf-8") as out,
                self._partial.open(encoding="utf-8") as body,
            ):
                out.write(_scrubbed_line(self._scrub, self._header) + "\n")
                body.readline()  # the header as it was when the recording began
                shutil.copyfileobj(body, out)
            finished.replace(target)
        except OSError as exc:  # a full disk: `target` keeps what it held
            finished.unlink(missing_ok=True)
            raise self._drop(exc) from exc
        self._partial.unlink(missing_ok=True)

    def _interrupted(self, number: int = 1) -> Path:
        """Where an interrupted recording's exchanges are kept, beside the target, never on it:
        `NAME.interrupted.jsonl` (number 1), else `NAME.interrupted.NUMBER.jsonl`."""
        nth = "" if number == 1 else f".{number}"
        suffix = self.path.suffix or ".jsonl"
        return self.path.with_name(f"{self.path.stem}.interrupted{nth}{suffix}")

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close(keep=not isinstance(exc, KeyboardInterrupt), finished=exc is None)

    def forward(self, label: _RunLabel, request: ChatRequest, timeout: float | None) -> Completion:
        """Ask the endpoint, store the answer or the error, and pass it on."""
        key = request_key(request, label.volatile)
        scrubbed = request_key(request, label.volatile, self._scrub)
        entry = {
            "run": label.run,
            "agent": request.agent,
            "key": key,
            # held a secret: a replay's request holds the answers stored [redacted]
            **({"scrubbed_key": scrubbed} if scrubbed != key else {}),
            "body": sent_body(request, label.volatile),  # as sent: the key is order-blind
        }
        earlier = self._resume.reuse(label, request) if self._resume is not None else None
        if earlier is not None:
            self._write({**entry, "completion": earlier, "resumed": True})
            with self._lock:
                self.resumed += 1
            return completion_from_json(each_string(earlier, label.volatile.unmask))
        started = time.monotonic()
        try:
            completion = self._inner.complete(request, timeout=timeout)
        except ProviderError as exc:
            kind = "timeout" if isinstance(exc, ProviderTimeout) else "provider"
            error: dict[str, Any] = {"kind": kind, "message": label.volatile.mask(str(exc))}
            error["status"] = exc.status
            if exc.tokens_in or exc.tokens_out:  # an unusable answer's spent tokens replay too
                error["tokens"] = [exc.tokens_in, exc.tokens_out]
            self._write({**entry, "error": error})
            raise
        answer = each_string(completion_to_json(completion), label.volatile.mask)
        # kept so that a resumed run can say what it cost
        self._write({**entry, "completion": answer, "wall_s": round(time.monotonic() - started, 3)})
        return completion

    def answered_from(self) -> str | None:
        """The resumed recordings, when they answered anything: those answers took no time."""
        if self._resume is None or not self.resumed:
            return None
        return f"{self._resume.answered_from()}, resumed (the rest live)"

    def _write(self, entry: dict[str, Any]) -> None:
        line = _scrubbed_line(self._scrub, entry)
        with self._lock:
            try:
                if self._failed is not None:  # another run's write failed: the recording is gone
                    raise self._failed
                self._file.write(line + "\n")
                self._file.flush()  # a run that crashes still leaves what it recorded
            except OSError as exc:  # a full disk: the run ends, an older recording stays
                raise self._drop(exc) from exc
            self._exchanges += "run" in entry

    def _drop(self, exc: OSError) -> ConfigError:  # a full disk: none of it kept; the caller locks
        self._failed = self._failed or exc
        with contextlib.suppress(OSError):  # what it still buffers cannot be written either
            self._file.close()
        self._partial.unlink(missing_ok=True)
        return ConfigError(f"{self.path}: cannot write the recording: {exc.strerror} (unchanged)")


class Replayer(ExchangeSource):
    """Answer every request from a recording; a request it does not hold is a ReplayError."""

    def __init__(
        self, paths: Sequence[Path], header: dict[str, Any], entries: Iterable[dict[str, Any]]
    ) -> None:
        self.paths, self.path, self.header = tuple(paths), paths[0], header
        self.model, self.host = header.get("model"), header.get("base_url") or ""
        self._scrub = scrubber()  # the environment's keys, as a recording's default
        self._entries = list(entries)
        self._left = set(range(len(self._entries)))  # the exchanges no request has taken yet
        # (run, key) → its exchanges in order, under each key they were filed by
        self._answers: dict[tuple[str, str], deque[int]] = {}
        self._per_run = Counter(entry["run"] for entry in self._entries)
        self._first: dict[str, dict[str, Any]] = {}
        self._lock = threading.Lock()
        for index, entry in enumerate(self._entries):
            for key in (entry["key"], entry.get("scrubbed_key")):
                if key is not None:
                    self._answers.setdefault((entry["run"], key), deque()).append(index)
            self._first.setdefault(entry["run"], entry)

    @classmethod
    def load(cls, path: Path | Sequence[Path]) -> Self:
        """Read one recording or several of one model; raise ConfigError naming a bad file."""
        paths = [Path(path)] if isinstance(path, str | Path) else [Path(p) for p in path]
        if not paths:
            raise ConfigError("no recording to replay")
        headers, entries = [], []
        for one in paths:
            lines = list(_read_lines(one))
            headers.append(_header(one, lines[0] if lines else None))
            entries += [_entry(one, n, line) for n, line in lines[1:]]
        same_endpoint(paths, headers)
        return cls(paths, headers[0], entries)

    def recorded(self, part: str) -> Any:
        """A part of the (first) recording's header, e.g. `bench`, `digests` or `routes`."""
        return self.header.get(part)

    def first_exchange(self, run: str) -> dict[str, Any] | None:
        """The recording's first exchange of `run`: which agent it ran, what it was asked."""
        return self._first.get(run)

    def runs(self) -> tuple[str, ...]:
        """The runs the recording holds exchanges of, in file order."""
        return tuple(self._first)

    def unused(self) -> int:
        """Recorded answers not asked for: the replay ran other runs than the recording."""
        with self._lock:
            return len(self._left)

    def answered_from(self) -> str | None:
        """The recordings this replay answers from."""
        return ", ".join(str(p) for p in self.paths)

    def reuse(self, label: _RunLabel, request: ChatRequest) -> dict[str, Any] | None:
        """Pop this run's recorded answer to `request`, masked; a recorded error is asked again."""
        _, entry = self._take(label, request, answered=True)
        return None if entry is None else dict(entry["completion"])

    def for_run(self, run: str, volatile: Volatile = NO_VOLATILE) -> Provider:
        """Return a provider that answers `run`'s requests from the recording."""
        return _RunProvider(self.answer, _RunLabel(run, volatile))

    def answer(self, label: _RunLabel, request: ChatRequest, timeout: float | None) -> Completion:
        """Pop the next recorded answer for this run and request, or raise ReplayError."""
        return self.replayed(label, self.popped(label, request))

    def popped(self, label: _RunLabel, request: ChatRequest) -> dict[str, Any]:
        """Pop the recorded exchange for this run and request, or raise ReplayError."""
        key, entry = self._take(label, request)
        if entry is None:
            raise ReplayError(self._missing(label, key, request))
        return entry

    def _take(
        self, label: _RunLabel, request: ChatRequest, answered: bool = False
    ) -> tuple[str, dict[str, Any] | None]:
        """The request's key and this run's next exchange filed under it, else under the key of
        its scrubbed form (it holds a secret, as this replay's scrubber knows it)."""
        key = request_key(request, label.volatile)
        with self._lock:
            entry = self._pop(label.run, key, answered)
        if entry is None:
            scrubbed = request_key(request, label.volatile, self._scrub)
            with self._lock:
                entry = self._pop(label.run, scrubbed, answered) if scrubbed != key else None
        return key, entry

    def _pop(self, run: str, key: str, answered: bool) -> dict[str, Any] | None:
        """Take the next exchange of `run` under `key` (with `answered`, skip recorded errors:
        a resumed recording asks again what failed); None when none is left. The caller locks."""
        queue = self._answers.get((run, key)) or deque()
        while queue:
            index = queue.popleft()
            if index in self._left:  # else taken under its other key
                self._left.discard(index)
                if not answered or "completion" in self._entries[index]:
                    return self._entries[index]
        return None

    def replayed(self, label: _RunLabel, entry: dict[str, Any]) -> Completion:
        """Return a recorded exchange's answer with this run's values, or raise its error."""
        if "error" in entry:
            error = entry["error"]
            kind = ProviderTimeout if error.get("kind") == "timeout" else ProviderError
            status = error.get("status")  # an int where the endpoint refused with one
            message = label.volatile.unmask(str(error.get("message")))
            status = status if type(status) is int else None
            raise kind(message, status=status, tokens=_spent(error.get("tokens", [0, 0])) or (0, 0))
        return completion_from_json(each_string(entry["completion"], label.volatile.unmask))

    def _missing(self, label: _RunLabel, key: str, request: ChatRequest) -> str:
        held = self._per_run[label.run]
        last = request.messages[-1] if request.messages else {}
        # scrubbed whole, then cut: a cut secret would no longer match the scrubber
        said = self._scrub.for_caller().text(str(last.get("content") or ""))
        preview = " ".join(said.split())[:PREVIEW_CHARS]
        return (
            f"replay {self.path}: no recorded answer for run {label.run} "
            f"(agent {request.agent or '?'}), request {key[:12]}, last {last.get('role', '?')} "
            f"message {preview!r}; the recording holds {held} exchange(s) for this run"
            f"{self._hint(label.run)}{self._other_card(label.run, request.agent)}"
        )

    def _other_card(self, run: str, asked: str) -> str:
        """Say which card the run was recorded for when this run asked another (a delegate
        routed elsewhere: the cards or the router changed since)."""
        recorded = (self._first.get(run) or {}).get("agent")
        if recorded in (None, "", asked, *UNNAMED_AGENTS):
            return ""
        return f"; it was recorded for card {recorded}, this run asked {asked}"

    def _hint(self, run: str) -> str:
        """Say which options a bench's recording was made with, or that they matter."""
        options = self.header.get("bench")
        if "/" not in run:  # `invoke`, `delegate`: no bench options to name
            return ""
        if isinstance(options, dict):
            shown = " ".join(
                f"--{k.replace('_', '-')} {v}" for k, v in options.items() if v is not None
            )
            return (
                f"; it was recorded with {shown} (paths from the recording's folder; "
                "`--replay FILE` alone uses them)"
            )
        return (
            "; replay with the options it was recorded with (--tasks, --cards, --arm, "
            "--repeat, --all-tools-sizes, --sample, --irrelevance, --seed, --prompt)"
        )


def read_header(path: Path) -> dict[str, Any]:
    """Return a recording's header line (format, tiny version, model, endpoint host)."""
    return _header(Path(path), next(_read_lines(Path(path)), None))


def _refuse_foreign(path: Path, why: str = "--record does not replace it") -> None:
    """A file there that holds something and is no recording is the user's: never replaced."""
    if not path.is_file() or path.stat().st_size == 0:
        return
    try:
        read_header(path)
    except ConfigError:
        raise ConfigError(f"{path}: is there and is no tiny recording; {why}") from None


@dataclass(frozen=True)
class _RunLabel:
    run: str
    volatile: Volatile


class _RunProvider:
    """One run's provider: a recorder's `forward` or a replayer's `answer`, with its label."""

    def __init__(
        self, handle: Callable[[_RunLabel, ChatRequest, float | None], Completion], label: _RunLabel
    ) -> None:
        self._handle, self._label = handle, label

    def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        return self._handle(_with_handles(self._label, request), request, timeout)


def _with_handles(label: _RunLabel, request: ChatRequest) -> _RunLabel:
    """`label` masking the artifact handles in `request` too, numbered as they first appear."""
    found = dict.fromkeys(ARTIFACT_HANDLE.findall(json.dumps(request.parts())))
    handles = {f"{{artifact{n}}}": handle for n, handle in enumerate(found, 1)}
    return replace(label, volatile=label.volatile.plus(handles)) if handles else label


def _scrubbed_line(scrub: Scrubber, entry: dict[str, Any]) -> str:
    """One JSONL line, scrubbed; keys in the order written (a body's order is the wire's)."""
    return json.dumps(scrub.document(entry), ensure_ascii=False)


# written first, then the body, then the rest as recorded
KEPT = ("run", "agent", "key", "scrubbed_key")
DROPPED = ("request", "body")  # the old copy of the request: replaced by the body as sent


class Upgrader(Replayer):
    """A Replayer that writes its recording again, with the making noted during the run."""

    def __init__(self, paths: Sequence[Path], header: dict[str, Any], entries: Any) -> None:
        super().__init__(paths, header, entries)
        self._notes: dict[str, Any] = {}
        self._rewritten: list[dict[str, Any]] = []

    @classmethod
    def open(cls, path: Path) -> Upgrader:
        """Read the one recording to upgrade (a link is not written through: refused now)."""
        refuse_special(Path(path))
        return cls.load(path)

    def answer(self, label: _RunLabel, request: ChatRequest, timeout: float | None) -> Completion:
        """Answer from the recording and keep the exchange with the body as sent."""
        entry = self.popped(label, request)
        first = {k: entry[k] for k in KEPT if k in entry}
        rest = {k: v for k, v in entry.items() if k not in (*KEPT, *DROPPED)}
        with self._lock:
            self._rewritten.append({**first, "body": sent_body(request, label.volatile), **rest})
        return self.replayed(label, entry)

    def note(self, part: str, value: Any) -> None:
        """Keep `value` as `part` of the upgraded header."""
        with self._lock:
            self._notes[part] = value

    def written_to(self) -> Path | None:
        """The recording, rewritten in place."""
        return self.path

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self._write()

    def _write(self) -> None:
        """Replace the recording with the upgraded one, whole; refuse a partial replay."""
        left = self.unused()
        if left:
            first = self._entries[min(self._left)]["run"]
            raise ConfigError(
                f"{self.path}: not upgraded: this replay left {left} recorded exchange(s) "
                f"unasked (first of run {first}): other options than it was recorded with, or "
                "turns this tiny no longer asks (an older repair turn); an upgrade keeps every "
                "exchange, so the file is left as it is"
            )
        header = {**self.header, **self._notes}
        lines = [_scrubbed_line(self._scrub, e) for e in (header, *self._rewritten)]
        partial = self.path.with_name(f".{self.path.name}.upgrade")
        partial.write_text("\n".join(lines) + "\n", encoding="utf-8")
        partial.replace(self.path)
