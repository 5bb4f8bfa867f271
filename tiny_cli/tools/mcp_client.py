"""MCP servers running: start a server when a card needs it, list its tools, call them.

The runner is synchronous and runs on many threads (the bench); the `mcp` SDK is async. One
daemon thread runs an asyncio loop that owns every server session of the process; the runner's
threads submit calls to it and wait with a deadline. A server starts the first time a card that
names one of its tools runs and stays up until the process ends. This module imports the SDK at
its top, and is itself imported only where a server starts.
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import functools
import json
import logging
import os
import re
import threading
import warnings
from collections.abc import Callable, Coroutine, Iterable, Mapping
from dataclasses import replace
from typing import Any, TypeVar

import jsonschema
import mcp
import pydantic
from mcp import Client
from mcp.client import stdio
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED, REQUEST_TIMEOUT

from tiny_cli.errors import TinyWarning, ToolCallError, ToolServerError
from tiny_cli.secrets import MIN_SERVER_SECRET_CHARS, REDACTED, written_forms
from tiny_cli.text import cut_at_word
from tiny_cli.tools.args_check import dialect
from tiny_cli.tools.mcp_config import URL_PASSWORD, McpServer
from tiny_cli.tools.mcp_hosts import literal_secrets
from tiny_cli.tools.registry import Tool

T = TypeVar("T")

CALL_CEILING = 600.0  # a call the runner gave up on still ends, and frees its request, by then
STOP_SECONDS = 5.0  # at exit: how long every server together may take to stop
QUICK_STOP_SECONDS = 1.5  # Ctrl-C: the command line ends the process 2 s after it regardless
# Ctrl-C: the SDK's waits (flush, grace after stdin closes, SIGTERM to SIGKILL), cut short
QUICK_SDK_WAITS = {
    "_WRITER_FLUSH_TIMEOUT": 0.1,
    "PROCESS_TERMINATION_TIMEOUT": 0.2,
    "FORCE_KILL_TIMEOUT": 0.5,
}
LIST_PAGES = 100  # tools/list pages read at most: a paginator that never ends cannot hang a run
STDERR_CHARS = 200  # of a server's last stderr line, quoted when it fails
STDERR_TAIL_BYTES = 4096  # of its stderr kept to find that line (redacted before the cut)
STDERR_READ_BYTES = 65_536  # read from its stderr pipe at a time
STDERR_DRAIN_SECONDS = 1.0  # a gone server's last lines are waited for at most this long
# the SDK's own logger, its modules' (`mcp.client.stdio`, ...); its client session logs to the
# bare "client", an application's own name too: only the SDK's records are taken from that one
SDK_LOGGER = "mcp"
SHARED_LOGGER = "client"
SDK_FOLDER = os.path.join(os.path.dirname(os.path.abspath(mcp.__file__)), "")
SDK_WARNINGS = 5  # lines of the SDK's own logging shown per process; the rest are counted


def stop_servers(quick: bool = False) -> None:
    """Stop every server this process started (at exit, between tests; `quick`: on Ctrl-C)."""
    global _HOST
    with _HOST_LOCK:
        host, _HOST = _HOST, None
    _SDK_LOG.tell_the_rest()
    if host is None:
        return
    if not quick:
        host.close(STOP_SECONDS)
        return
    kept = {name: getattr(stdio, name) for name in QUICK_SDK_WAITS if hasattr(stdio, name)}
    try:  # module constants the SDK reads at each stop; put back for a later, polite stop
        for name in kept:
            setattr(stdio, name, QUICK_SDK_WAITS[name])
        host.close(QUICK_STOP_SECONDS)
    finally:
        for name, value in kept.items():
            setattr(stdio, name, value)


# --- the loop thread and its sessions -----------------------------------------------------

_HOST: _Host | None = None
_HOST_LOCK = threading.Lock()


class _SdkLog(logging.Handler):
    """The SDK's own logging as one-line TinyWarnings, the first SDK_WARNINGS only (a server's
    noise on stdout makes the SDK log a traceback a line)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.shown = self.hidden = 0

    def emit(self, record: logging.LogRecord) -> None:
        if self.shown >= SDK_WARNINGS:  # `handle` holds the handler's lock: threads agree
            self.hidden += 1
            return
        self.shown += 1
        try:
            line = _sdk_line(record)
        except Exception:  # logging would print its own traceback for a handler that raises
            line = f"MCP SDK: a {record.levelname} record from {record.name}"
        _warn(line)

    def tell_the_rest(self) -> None:
        """Say how many warnings were not shown (when the servers stop), and start over."""
        self.acquire()
        try:
            hidden, self.shown, self.hidden = self.hidden, 0, 0
        finally:
            self.release()
        if hidden:
            _warn(f"{hidden} more warning(s) from the MCP SDK not shown")


_SDK_LOG = _SdkLog()


class _SdkRecords(logging.Filter):
    """On a logger the SDK shares with the application: only the SDK's records go to _SDK_LOG."""

    def filter(self, record: logging.LogRecord) -> bool:
        if not os.path.abspath(record.pathname).startswith(SDK_FOLDER):
            return True
        if record.levelno >= _SDK_LOG.level:
            _SDK_LOG.handle(record)
        return False


@functools.cache
def _once_per_process() -> None:
    """When a server first starts: stop the servers at exit; the SDK's logging to _SDK_LOG only."""
    atexit.register(stop_servers)
    logger = logging.getLogger(SDK_LOGGER)
    logger.addHandler(_SDK_LOG)
    logger.propagate = False  # not to the root, or Python's last resort: a traceback each
    logging.getLogger(SHARED_LOGGER).addFilter(_SdkRecords())


def _sdk_line(record: logging.LogRecord) -> str:
    """One line for a record: its message and the type of its exception, secrets redacted."""
    try:
        text = record.getMessage()
    except Exception:  # a bad format string in a library's call: its template still says much
        text = str(record.msg)
    error = record.exc_info[1] if record.exc_info else None
    text += f" ({type(error).__name__})" if error is not None else ""
    host = _HOST
    for session in list(host.sessions.values()) if host is not None else []:
        text = session.redact(text)
    return "MCP SDK: " + " ".join(text.split())[:STDERR_CHARS]


def _warn(message: str) -> None:
    warnings.warn(message, TinyWarning, stacklevel=2)  # the face decides how it shows


def open_session(server: McpServer, seconds: float, environ: Mapping[str, str] | None) -> _Session:
    """Return `server`'s running session in this process, starting it (once) within `seconds`."""
    return _host().session(server, seconds, environ)


def _host() -> _Host:
    global _HOST
    with _HOST_LOCK:
        if _HOST is None:
            _HOST = _Host()
        return _HOST


class _Host:
    """The event loop thread that owns every session; one per process."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.sessions: dict[tuple, _Session] = {}
        self.locks: dict[tuple, threading.Lock] = {}
        self.lock = threading.Lock()
        thread = threading.Thread(target=self.loop.run_forever, name="tiny-mcp", daemon=True)
        thread.start()
        _once_per_process()

    def session(
        self, server: McpServer, seconds: float, environ: Mapping[str, str] | None
    ) -> _Session:
        """Return the running session of `server`, starting it (once) within `seconds`."""
        key = server.key()
        with self.lock:
            lock = self.locks.setdefault(key, threading.Lock())
        if not lock.acquire(timeout=max(0.0, seconds)):  # another run is starting it
            raise ToolServerError(_no_answer(server.name, seconds), server=server.name)
        try:
            current = self.sessions.get(key)
            if current is None or current.dead:
                if current is not None:
                    current.cleanup()  # the dead one's stderr pipe: one per restart otherwise
                current = _Session(server, environ, self)
                self.sessions[key] = current
                current.begin(seconds)
            return current
        finally:
            lock.release()

    def run(self, coro: Coroutine[Any, Any, T], seconds: float | None) -> T:
        """Run `coro` on the loop; cancel it and raise TimeoutError after `seconds`."""
        future = asyncio.run_coroutine_threadsafe(coro, self.loop)
        try:
            return future.result(timeout=seconds)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError from None

    def close(self, seconds: float = STOP_SECONDS) -> None:
        """Stop every session, waiting at most `seconds`, then the loop."""
        sessions = list(self.sessions.values())
        with contextlib.suppress(Exception):  # at exit: nothing left to tell
            self.run(_stop_all(sessions), seconds)
        for session in sessions:
            session.cleanup()
        self.loop.call_soon_threadsafe(self.loop.stop)


async def _stop_all(sessions: Iterable[_Session]) -> None:
    await asyncio.gather(*(s.stop() for s in sessions), return_exceptions=True)


class _Session:
    """One running server: its client session, its published tools, how it ended."""

    def __init__(self, server: McpServer, environ: Mapping[str, str] | None, host: _Host) -> None:
        self.server = server
        self.resolved, found = server.resolved(environ)  # ConfigError: a variable unset
        self.secrets = found | _written_secrets(server)
        # each secret as written and as JSON text holds it (a dict result is sent as JSON)
        self.forms = written_forms(s for s in self.secrets if len(s) >= MIN_SERVER_SECRET_CHARS)
        self.host = host
        self.tools: dict[str, Any] = {}
        self.twice: frozenset[str] = frozenset()  # names it lists more than once: refused
        self.client: Any = None
        self.dead = False
        self.answered = False  # the handshake was answered: a failure after it is the listing's
        self.failure: BaseException | None = None
        self.errlog: _StderrTail | None = None
        self.task: asyncio.Task[None] | None = None
        self.stopping = asyncio.Event()  # bound to the loop on first use

    def begin(self, seconds: float) -> None:
        """Start the server and read its tools; ToolServerError when it fails or is silent."""
        try:
            self.host.run(self._start(), seconds)
        except TimeoutError:
            self.dead = True
            raise self.failed(_no_answer(self.server.name, seconds)) from None
        if self.dead:
            raise self.failed(
                self._why("failed to list its tools" if self.answered else "did not start")
            )

    def call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call `tool` and return its result as text (waits; the runner bounds the wait)."""
        if self.dead or self.client is None:
            raise self.failed(self._why("is not running"))
        return self.redact(self.host.run(self._call(tool, arguments), None))

    def tool(self, wire: str, name: str, published: Any) -> Tool | str:
        """The registry's Tool for a published tool, or why it cannot be (mcp_tools never imports
        this module, the SDK's, itself: it asks the session)."""
        tool = _tool(wire, name, published, self.server)
        if isinstance(tool, str):
            return tool
        # a description may quote a value from the environment (a token): never kept or shown
        return replace(tool, description=self.redact(tool.description))

    def descriptions(self, names: Iterable[str]) -> dict[str, str]:
        """Map each of `names` the server listed (`server.tool`) to its redacted description."""
        return {
            f"{self.server.name}.{name}": self.redact(description_of(self.tools[name]))
            for name in sorted(names)
            if name in self.tools
        }

    def failed(self, why: str) -> ToolServerError:
        """The error that this server cannot be used, `why` redacted (its URL's password too)."""
        hidden = re.sub(URL_PASSWORD, rf"\1{REDACTED}", self.redact(why))
        return ToolServerError(hidden, server=self.server.name)

    def redact(self, text: str) -> str:
        """Hide every value that came from an environment variable, as written or JSON-escaped."""
        for form in self.forms:  # longest first: a secret inside another goes with it
            text = text.replace(form, REDACTED)
        return text

    def cleanup(self) -> None:
        """Close our end of the server's stderr pipe."""
        if self.errlog is not None:
            self.errlog.close()

    async def stop(self) -> None:
        """Ask the owner task to leave its session (closing it stops the server); one still
        starting is cancelled: it waits on the server, not on `stopping`."""
        self.stopping.set()
        if self.task is not None:
            if self.client is None:
                self.task.cancel()
            with contextlib.suppress(BaseException):
                await self.task

    async def _start(self) -> None:
        """Start the owner task and wait until the tools are listed or the server is gone."""
        ready = asyncio.Event()
        self.task = asyncio.get_running_loop().create_task(self._own(ready))
        try:
            await ready.wait()
        except asyncio.CancelledError:  # the caller's time is up: the server goes too
            self.task.cancel()
            raise

    async def _own(self, ready: asyncio.Event) -> None:
        """Hold the session open until told to stop (anyio scopes end in the task they began)."""
        try:
            async with self._client() as client:
                self.answered = True
                self.tools, self.twice = await listing(client)
                self.client = client
                ready.set()
                await self.stopping.wait()
        except BaseException as exc:  # ends this task only; the reason is read by `_why`
            self.failure = exc
        finally:
            self.dead = True
            self.cleanup()  # the server is gone: its stderr ends once what it wrote is read
            ready.set()

    def _client(self) -> Any:
        server = self.resolved
        if server.command is not None:
            params = StdioServerParameters(
                command=server.command, args=list(server.args), env=dict(server.env), cwd=server.cwd
            )
            self.errlog = _StderrTail(self.forms)
            return Client(stdio_client(params, errlog=self.errlog.file))
        return Client(_http_transport(server))

    async def _call(self, tool: str, arguments: dict[str, Any]) -> str:
        """Call the tool; a gone server is ToolServerError, a failing call ToolCallError."""
        try:
            result = await self.client.call_tool(tool, arguments, read_timeout_seconds=CALL_CEILING)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED or self.dead:
                self.dead = True
                raise self.failed(self._why(f"stopped during a call of {tool}")) from None
            if exc.code == REQUEST_TIMEOUT:
                raise self.failed(_no_answer(self.server.name, CALL_CEILING, tool)) from None
            message = self.redact(f"the server answered with an error: {exc.error.message}")
            raise ToolCallError(message) from None
        except Exception as exc:  # a result the SDK cannot read: the model may try otherwise
            message = f"the server's answer could not be read ({type(exc).__name__})"
            raise ToolCallError(message) from None
        text = _text(result)
        if result.is_error:  # its words go to the model and the log: no secret in them
            raise ToolCallError(self.redact(text) or "the tool reported an error")
        return text

    def _why(self, what: str) -> str:
        """Say why the server is gone: its failure, or the last line it wrote to stderr."""
        tail = self.errlog.last_line() if self.errlog is not None else ""
        detail = tail or _failure(self.failure, self.redact)
        suffix = f": {detail}" if detail else ""
        return f"MCP server {self.server.name!r} {what}{suffix}"


class _StderrTail:
    """A server's stderr: a pipe a thread drains, keeping the last bytes (no full pipe holds up
    a chatty server)."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        readable, writable = os.pipe()
        self.file = os.fdopen(writable, "w", encoding="utf-8", errors="replace")  # the server's
        self._tail = bytearray()
        self._secrets = [s.encode("utf-8", errors="replace") for s in secrets]
        self._lock = threading.Lock()
        self._reader = threading.Thread(
            target=self._drain, args=(readable,), name="tiny-mcp-stderr", daemon=True
        )
        self._reader.start()

    def _drain(self, readable: int) -> None:
        """Read until every writer has closed the pipe, keeping the last bytes."""
        with open(readable, "rb", buffering=0) as pipe:
            while chunk := pipe.read(STDERR_READ_BYTES):
                with self._lock:
                    self._tail += chunk
                    # before the cut: a secret cut in two is redacted by nobody
                    for secret in self._secrets:
                        self._tail = self._tail.replace(secret, REDACTED.encode())
                    del self._tail[:-STDERR_TAIL_BYTES]

    def last_line(self) -> str:
        """Return the last line the server wrote, cut short (once closed: all it wrote)."""
        if self.file.closed:
            self._reader.join(STDERR_DRAIN_SECONDS)
        with self._lock:
            text = self._tail.decode("utf-8", errors="replace")
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        return lines[-1][:STDERR_CHARS] if lines else ""

    def close(self) -> None:
        """Close our end: the reader ends when the server's copy closes too."""
        with contextlib.suppress(OSError):
            self.file.close()


@contextlib.asynccontextmanager
async def _http_transport(server: McpServer) -> Any:
    """The streamable HTTP transport, on our own client with the server's headers (the SDK's
    default one cannot carry them), closed after it (the SDK leaves a given one open)."""
    async with (
        create_mcp_http_client(dict(server.headers)) as client,
        streamable_http_client(server.url or "", http_client=client) as streams,
    ):
        yield streams


async def listing(client: Any) -> tuple[dict[str, Any], frozenset[str]]:
    """Read every page of tools/list (never the SDK's cache: it may hold an old list); return
    the tools by name (the first of a name) and the names listed more than once."""
    tools: dict[str, Any] = {}
    twice: set[str] = set()
    cursor = None
    for _ in range(LIST_PAGES):
        page = await client.list_tools(cursor=cursor, cache_mode="refresh")
        for tool in page.tools:
            if tools.setdefault(tool.name, tool) is not tool:
                twice.add(tool.name)
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools, frozenset(twice)


# --- helpers ------------------------------------------------------------------------------


def _tool(wire: str, name: str, published: Any, server: McpServer) -> Tool | str:
    """Build the registry's Tool from a published MCP tool, or say why it cannot be offered."""
    schema = published.input_schema
    try:
        dialect(schema).check_schema(schema)  # the one it declares; MCP's default without
    except jsonschema.SchemaError as exc:
        return f"tool {name!r} publishes an inputSchema that is not a JSON Schema: {exc.message}"
    # none published: none sent (as for a declared function without one), none invented;
    # not description_of: the model reads the description with its line breaks
    description = published.description or published.title or ""
    func = functools.partial(_call, server, published.name)
    return Tool(wire, description, schema, func, writes=writes(published))


def description_of(published: Any) -> str:
    """A published tool's description (else its title) on one line; '' when it has neither."""
    return " ".join((published.description or published.title or "").split())


def _written_secrets(server: McpServer) -> frozenset[str]:
    """The literal secrets of a server's settings (`--api-key VALUE`), as `tiny cards import`
    lifts them: what tiny says of the server never shows them."""
    spec: dict[str, Any] = (
        {"command": server.command, "args": list(server.args), "env": dict(server.env)}
        if server.command is not None
        else {"url": server.url or "", "headers": dict(server.headers)}
    )
    return literal_secrets(server.name, spec)


def writes(published: Any) -> bool:
    """Whether a published tool writes: no readOnlyHint (or no annotations), or destructiveHint."""
    hints = published.annotations
    return hints is None or hints.read_only_hint is not True or hints.destructive_hint is True


def _call(server: McpServer, tool: str, /, **arguments: Any) -> str:  # any argument name is free
    """Call `tool` on the running session of `server` (one started by `bind`)."""
    session = _host().sessions.get(server.key())
    if session is None:
        raise ToolServerError(f"MCP server {server.name!r} is not running", server=server.name)
    return session.call(tool, arguments)


def _text(result: Any) -> str:
    """Return a call result as text: its text blocks, else its structured content as JSON."""
    parts = []
    for block in result.content:
        text = getattr(block, "text", None) or getattr(
            getattr(block, "resource", None), "text", None
        )
        parts.append(text if isinstance(text, str) else f"[{block.type} content not shown]")
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "\n".join(parts)


def _no_answer(name: str, seconds: float, tool: str | None = None) -> str:
    what = f"a call of {tool}" if tool else "starting"
    return f"MCP server {name!r} did not answer within {seconds:.1f}s ({what})"


def _failure(exc: BaseException | None, redact: Callable[[str], str]) -> str:
    """Name the innermost cause of a failure (the SDK wraps them in exception groups),
    redacted whole before it is cut (a secret cut in two is redacted by nobody)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if exc is None or isinstance(exc, asyncio.CancelledError):
        return ""
    said = str(exc)
    if isinstance(exc, pydantic.ValidationError):  # its first fault, not the whole answer's dump
        first = exc.errors()[0]
        said = f"{'.'.join(map(str, first['loc'])) or 'the answer'}: {first['msg']}"
    text = cut_at_word(" ".join(redact(said).split()), STDERR_CHARS)  # no URL cut in two
    if isinstance(exc, pydantic.ValidationError):  # an answer the SDK refused
        return f"the MCP SDK refused its answer: {text}"
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
