"""`tiny serve` on stdio: a relay between the host's pipes and the SDK's, so no request is dropped.

The SDK cancels the calls in flight when its stdin ends: a host that writes its requests and
closes its end would get none of their answers. So the SDK reads and writes pipes of the
relay's, which tells it that stdin ended only once every request the host sent is answered.
A line the SDK cannot read (it answers none) the relay answers itself, with a JSON-RPC error.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import Any, cast

from mcp.types import (
    CONNECTION_CLOSED,
    INVALID_REQUEST,
    PARSE_ERROR,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCRequest,
    JSONRPCResponse,
    jsonrpc_message_adapter,
)

from tiny_cli.text import half_pair

CHUNK_BYTES = 65536
FINISH_SECONDS = 1.0  # the relay's last lines after the server returned (Ctrl-C: 2 s in all)
NEWLINES = re.compile(r"\r\n|\r|\n")  # the SDK reads stdin in universal-newline mode


@contextmanager
def answering_stdio() -> Iterator[Callable[[Callable[[], object], float], float]]:
    """Keep the host's stdin and stdout for the protocol alone for the duration.

    Meanwhile fd 0 reads the null device and fd 1 writes to stderr, so nothing a tool prints
    reaches the host. Gives `relay(run, drain_seconds)`, which calls `run` (the SDK's stdio
    server) with a _Relay's pipes as fds 0 and 1 and returns the drain time left.
    """
    try:
        host_in, host_out = os.dup(0), os.dup(1)
    except OSError:  # no stdin or stdout at all: nothing to relay, the SDK copes as it does
        yield _unrelayed
        return
    _divert()
    try:
        yield lambda run, drain_seconds: _relayed(run, host_in, host_out, drain_seconds)
    finally:
        sys.stdout.flush()  # what a tool printed goes to stderr, as it would have at once
        os.dup2(host_in, 0)
        os.dup2(host_out, 1)


def _divert() -> None:
    """Point fd 0 at the null device and fd 1 at stderr (the null device, without one)."""
    try:
        out = os.dup(2)
    except OSError:
        out = os.open(os.devnull, os.O_WRONLY)
    for end, fd in ((os.open(os.devnull, os.O_RDONLY), 0), (out, 1)):
        os.dup2(end, fd)
        os.close(end)
    # only now: what sys.stdout holds was printed while fd 1 was not the host's
    sys.stdout.flush()


def _unrelayed(run: Callable[[], object], drain_seconds: float) -> float:
    run()
    return drain_seconds


def _relayed(run: Callable[[], object], host_in: int, host_out: int, drain_seconds: float) -> float:
    """Call `run` with the pipes of a _Relay as fds 0 and 1; return the drain time left."""
    sdk_in, to_sdk = os.pipe()
    from_sdk, sdk_out = os.pipe()
    relay = _Relay(to_sdk, host_out, os.dup(sdk_out), drain_seconds)
    for end, fd in ((sdk_in, 0), (sdk_out, 1)):
        os.dup2(end, fd)
        os.close(end)
    relay.start(host_in, from_sdk)
    try:
        run()
    finally:
        _divert()  # first: the SDK gave fd 1 back to the relay's pipe, which reaches the host
        relay.finish()
    return relay.drain_left()


class _Relay:
    """Carry the protocol between the host's pipes and the SDK's, so every request is answered.

    The SDK's stdin ends only once each request the host sent is answered (or cancelled),
    within `drain_seconds`. A request the server sends a gone host (a write question) is
    answered "connection closed": the write is declined.
    """

    def __init__(
        self,
        to_sdk: int,
        host_out: int,
        marker: int,
        drain_seconds: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._to_sdk = open(to_sdk, "wb")  # noqa: SIM115 -- closing it ends the SDK's stdin
        self._host = open(host_out, "wb", closefd=False)  # noqa: SIM115 -- the process's own
        self._marker = marker  # a write end of the SDK's stdout, for the line that ends the pump
        self._last = f"tiny-relay-end-{secrets.token_hex(8)}\n".encode()
        self._drain_seconds = drain_seconds
        self._asked: Counter[Any] = Counter()  # the host's requests not answered yet, by id
        self._questions: set[Any] = set()  # the server's requests the host has not answered
        self._gone = False  # the host closed stdin
        self._gone_at: float | None = None  # when, by `clock`
        self._clock = clock
        self._changed = threading.Condition()
        self._sending = threading.Lock()
        self._telling = threading.Lock()  # both pumps write to the host: whole lines each
        self._out: threading.Thread | None = None

    def start(self, host_in: int, from_sdk: int) -> None:
        """Pump both ways, each in a daemon thread (a blocked read must not keep us alive)."""
        inward = threading.Thread(target=self._pump_in, args=(host_in,), daemon=True)
        inward.start()
        self._out = threading.Thread(target=self._pump_out, args=(from_sdk,), daemon=True)
        self._out.start()

    def drain_left(self) -> float:
        """The drain time not yet spent: all of it until the host goes, then what is left."""
        if self._gone_at is None:
            return self._drain_seconds
        return max(0.0, self._drain_seconds - (self._clock() - self._gone_at))

    def finish(self) -> None:
        """The server returned: pass on what it wrote last, then stop (bounded: Ctrl-C too)."""
        # from a thread: a full pipe (a host that stopped reading) must not block the way out
        threading.Thread(target=self._end_pump_out, daemon=True).start()
        if self._out is not None:
            self._out.join(timeout=FINISH_SECONDS)

    def _end_pump_out(self) -> None:
        with suppress(OSError):
            os.write(self._marker, self._last)

    def _pump_in(self, host_in: int) -> None:
        """Pass the host's lines on; at their end, wait for the answers, then end the SDK's."""
        rest = b""
        with suppress(OSError), open(host_in, "rb", buffering=0, closefd=False) as host:
            while chunk := host.read(CHUNK_BYTES):
                cut = max(chunk.rfind(b"\n"), chunk.rfind(b"\r")) + 1
                if cut:  # whole lines only, each counted before the SDK can answer it
                    lines, rest = rest + chunk[:cut], chunk[cut:]
                    self._note(lines, self._from_host, self._refuse)
                    self._send(lines)
                else:
                    rest += chunk
        if rest:  # a host's last line is a whole message: the SDK reads lines to their end
            rest += b"\n"
        self._note(rest, self._from_host, self._refuse)
        self._send(rest)
        with self._changed:
            self._gone, self._gone_at = True, self._clock()
            questions = list(self._questions)
        for request_id in questions:
            self._decline(request_id)
        with self._changed:
            self._changed.wait_for(lambda: not self._asked, timeout=self._drain_seconds)
        with self._sending:
            self._to_sdk.close()

    def _pump_out(self, from_sdk: int) -> None:
        """Pass the SDK's lines on to the host, each noted once the host has it."""
        with open(from_sdk, "rb") as sdk:
            for line in sdk:
                if line == self._last:
                    return
                self._tell_host(line)
                self._note(line, self._from_server)

    def _tell_host(self, line: bytes) -> None:
        with self._telling, suppress(OSError):  # a host that stopped reading: answers are lost
            self._host.write(line)
            self._host.flush()

    def _note(
        self,
        data: bytes,
        apply: Callable[[JSONRPCMessage], bool],
        unreadable: Callable[[str], None] = lambda text: None,
    ) -> None:
        """Read the line(s) as the SDK does and keep count; decline what a gone host was asked."""
        for text in NEWLINES.split(data.decode("utf-8", "replace")):
            if not text.strip():
                continue
            message = _message(text)
            if message is None:
                unreadable(text)
                continue
            with self._changed:
                unanswerable = apply(message)
                self._changed.notify_all()
            if unanswerable:
                self._decline(getattr(message, "id", None))

    def _from_host(self, message: JSONRPCMessage) -> bool:
        if isinstance(message, JSONRPCRequest):
            self._asked[_key(message.id)] += 1
        elif isinstance(message, JSONRPCResponse | JSONRPCError):
            self._questions.discard(_key(message.id))
        elif message.method == "notifications/cancelled":  # the SDK never answers those
            self._settle((message.params or {}).get("requestId"))
        return False

    def _from_server(self, message: JSONRPCMessage) -> bool:
        """Count an answer off; True for a question the host, gone, can never answer."""
        if isinstance(message, JSONRPCRequest):
            self._questions.add(_key(message.id))
            return self._gone
        if isinstance(message, JSONRPCResponse | JSONRPCError):
            self._settle(message.id)
        return False

    def _settle(self, request_id: Any) -> None:
        key = _key(request_id)
        if self._asked[key] > 1:
            self._asked[key] -= 1
        else:
            self._asked.pop(key, None)

    def _refuse(self, text: str) -> None:
        """Answer a host's line the SDK cannot read, which it would leave unanswered."""
        self._tell_host(json.dumps(_refusal(text)).encode() + b"\n")

    def _decline(self, request_id: Any) -> None:
        """Answer the server's request for the host: the connection is closed."""
        closed = _error(request_id, CONNECTION_CLOSED, "Connection closed: the host closed stdin")
        self._send(json.dumps(closed).encode() + b"\n")

    def _send(self, data: bytes) -> None:
        with self._sending, suppress(OSError, ValueError):  # ValueError: closed, all answered
            self._to_sdk.write(data)
            self._to_sdk.flush()


def _message(text: str) -> JSONRPCMessage | None:
    """Read a line as the SDK reads it; None for a line it cannot read (and never answers)."""
    try:
        return cast("JSONRPCMessage", jsonrpc_message_adapter.validate_json(text, by_name=False))
    except ValueError:  # pydantic's ValidationError, deep nesting included
        return None


def _refusal(text: str) -> dict[str, Any]:
    """The JSON-RPC error for a line the SDK cannot read: to its request's id, where readable."""
    try:
        line = json.loads(text)  # Python's parser reads what pydantic's refuses: "\\ud800"
    except (ValueError, RecursionError):
        return _error(None, PARSE_ERROR, "Parse error: the line is not JSON")
    request_id = line.get("id") if isinstance(line, dict) and "method" in line else None
    if isinstance(request_id, bool) or not isinstance(request_id, str | int):
        request_id = None
    if half_pair(json.dumps(line, ensure_ascii=False)):  # JSON allows "\\ud800"; UTF-8 not
        why = "a string holds a lone surrogate (\\ud800-\\udfff), which is not Unicode"
        return _error(request_id, PARSE_ERROR, f"Parse error: {why}")
    return _error(request_id, INVALID_REQUEST, "Invalid Request: not a JSON-RPC message it reads")


def _error(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _key(request_id: Any) -> Any:
    """Correlate "7" with 7, as the SDK does."""
    if isinstance(request_id, str):
        with suppress(ValueError):
            return int(request_id)
    return request_id
