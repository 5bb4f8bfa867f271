"""Test your cards offline: a real OpenAI-compatible server on 127.0.0.1 that plays scripted turns.

The server records every request, answers each from a script, and answers a request it has
no turn for (or cannot play: another method, a turn that breaks) with an HTTP error while
noting it in `errors`; the `scripted_server` fixture, or `assert_done`, then fails the test.
Enable the fixture with `pytest_plugins = ["tiny_cli.testing"]`::

    import json
    from typer.testing import CliRunner
    from tiny_cli.cli import app
    from tiny_cli.testing import reply, tool_call

    def test_docs_finder_answers_from_the_handbook(scripted_server, tmp_path):
        scripted_server.add(tool_call("docs_search", {"query": "onboarding"}),
                            reply('{"status": "ok", "summary": "Two weeks, with a buddy.",'
                                  ' "source": "onboarding.md"}'))
        env = {"TINY_BASE_URL": scripted_server.url, "TINY_HOME": str(tmp_path)}
        args = ["invoke", "docs-finder", "how does onboarding work", "--cards", "cards", "--json"]
        digest = json.loads(CliRunner().invoke(app, args, env=env).stdout)
        assert digest["status"] == "ok"
        tools = [t["function"]["name"] for t in scripted_server.requests[0]["tools"]]
        assert tools == ["docs_search"]  # the card's allowlist, nothing else
        scripted_server.assert_done()  # every scripted turn was played

Turns: `reply`, `tool_call`, `tool_calls`, `http_error`, `raw_response`, `hang_up`, and
`respond(fn)` for an answer computed from the request. `on(match, ...)` gives concurrent
runs their own scripts.
"""

from __future__ import annotations

import copy
import itertools
import json
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from tiny_cli.bench.pages import LoopbackServer
from tiny_cli.errors import ConfigError

try:
    import pytest
except ImportError:  # pytest is a dev dependency; the server works without it
    pytest = None  # type: ignore[assignment]

CHAT_PATH = "/v1/chat/completions"
MODELS_PATH = "/v1/models"
DEFAULT_TOKENS_IN = 10
DEFAULT_TOKENS_OUT = 5
SERVER_POLL_SECONDS = 0.05  # how often serve_forever checks for shutdown: stop() waits this long
LISTEN_BACKLOG = 64  # concurrent benches open many connections at once
PREVIEW_CHARS = 60  # how much of the last message names a request in `errors`


@dataclass(frozen=True)
class Turn:
    """One scripted answer: a chat completion, or a raw status/body, after an optional delay."""

    message: dict | None = None  # the assistant message of a 200 chat completion
    finish_reason: str = "stop"
    tokens_in: int = DEFAULT_TOKENS_IN
    tokens_out: int = DEFAULT_TOKENS_OUT
    status: int = 200
    body: dict | str | None = None  # sent as is instead of a completion (errors, broken answers)
    headers: Mapping[str, str] = field(default_factory=dict)
    delay: float = 0.0  # seconds the handler sleeps before answering
    compute: Callable[[dict], Turn] | None = None  # respond(): the turn comes from the request
    hang_up: bool = False  # close the connection without answering


def reply(
    content: str,
    *,
    tokens_in: int = DEFAULT_TOKENS_IN,
    tokens_out: int = DEFAULT_TOKENS_OUT,
    delay: float = 0.0,
    finish_reason: str = "stop",
) -> Turn:
    """Answer with an assistant message holding `content` and no tool calls."""
    message = {"role": "assistant", "content": content}
    return Turn(message, finish_reason, tokens_in, tokens_out, delay=delay)


def tool_call(
    name: str,
    arguments: dict | str,
    *,
    call_id: str | None = None,
    delay: float = 0.0,
    tokens_in: int = DEFAULT_TOKENS_IN,
    tokens_out: int = DEFAULT_TOKENS_OUT,
) -> Turn:
    """Answer with one tool call; a str `arguments` is sent verbatim (broken JSON included)."""
    return tool_calls(
        (name, arguments, call_id), delay=delay, tokens_in=tokens_in, tokens_out=tokens_out
    )


def tool_calls(
    *calls: tuple[str, dict | str] | tuple[str, dict | str, str | None],
    content: str | None = None,
    delay: float = 0.0,
    tokens_in: int = DEFAULT_TOKENS_IN,
    tokens_out: int = DEFAULT_TOKENS_OUT,
) -> Turn:
    """Answer with several tool calls in one message: (name, arguments[, call_id]) each."""
    entries = []
    for name, arguments, *rest in calls:
        text = arguments if isinstance(arguments, str) else json.dumps(arguments)
        call_id = rest[0] if rest else None  # None: the server numbers it when it plays
        entries.append(
            {"id": call_id, "type": "function", "function": {"name": name, "arguments": text}}
        )
    message = {"role": "assistant", "content": content, "tool_calls": entries}
    return Turn(message, "tool_calls", tokens_in, tokens_out, delay=delay)


def http_error(
    status: int, body: str = "", headers: dict | None = None, *, delay: float = 0.0
) -> Turn:
    """Answer with an HTTP error; without a body, an OpenAI-style JSON error is sent."""
    payload: dict | str = body or {
        "error": {"message": f"scripted HTTP {status}", "type": "scripted", "code": status}
    }
    return Turn(status=status, body=payload, headers=dict(headers or {}), delay=delay)


def raw_response(
    body: dict | str, *, status: int = 200, headers: dict | None = None, delay: float = 0.0
) -> Turn:
    """Answer with exactly this body (e.g. a malformed completion) and status.

    A str goes as application/json if it reads as JSON, else text/plain, unless `headers` say.
    """
    return Turn(status=status, body=body, headers=dict(headers or {}), delay=delay)


def hang_up(*, delay: float = 0.0) -> Turn:
    """Close the connection without answering, as a crashed server would."""
    return Turn(hang_up=True, delay=delay)


def respond(fn: Callable[[dict], Turn]) -> Turn:
    """Answer with the turn `fn` builds from the request body (e.g. echo the last message)."""
    return Turn(compute=fn)


class ScriptedServer:
    """A real OpenAI-compatible HTTP server on 127.0.0.1 that plays scripted turns."""

    def __init__(self, turns: Iterable[Turn] = ()) -> None:
        self.requests: list[dict] = []  # every chat request body, in arrival order
        self.headers: list[dict] = []  # their headers, names lower-cased
        self.errors: list[str] = []  # every request the script could not answer, described
        self._default: deque[Turn] = deque(_turns(turns))
        self._rules: list[tuple[Callable[[dict], bool], deque[Turn]]] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._call_ids = itertools.count(1)
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self._port: int | None = None  # of the last start: its URL stays readable after stop

    @property
    def url(self) -> str:
        """Return the base URL to point a provider at (after `stop`, the one it served at)."""
        if self._port is None:
            raise RuntimeError("ScriptedServer is not started: call start() or use `with`")
        return f"http://127.0.0.1:{self._port}/v1"

    def add(self, *turns: Turn) -> None:
        """Append turns to the default script, played in order."""
        with self._lock:
            self._default.extend(_turns(turns))

    def on(self, match: Callable[[dict], bool], *turns: Turn) -> None:
        """Play `turns` in order for requests where match(body) is true; first match wins."""
        with self._lock:
            self._rules.append((match, deque(_turns(turns))))

    def start(self) -> ScriptedServer:
        """Listen on a free loopback port and serve in a daemon thread."""
        if self._httpd is not None:
            raise RuntimeError("ScriptedServer is already started")
        # a fresh event: a handler of an earlier start, asleep on a delay, keeps the old (set) one
        self._stopping = threading.Event()
        self._httpd = _HTTPServer(("127.0.0.1", 0), _Handler)
        self._httpd.scripted = self
        self._port = self._httpd.server_address[1]
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": SERVER_POLL_SECONDS},
            name=f"scripted-server-{self._port}",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving now (handlers asleep on a delay answer nothing); it may start again."""
        if self._httpd is None or self._stopping.is_set():
            return
        self._stopping.set()
        self._httpd.shutdown()
        self._httpd.server_close()
        if self._thread is not None:
            self._thread.join()
        self._httpd, self._thread = None, None

    def assert_done(self) -> None:
        """Raise AssertionError if a request went unanswered or a scripted turn was never played."""
        with self._lock:
            problems = list(self.errors)
            if self._default:
                problems.append(f"{len(self._default)} turn(s) of the default script never played")
            for i, (_, turns) in enumerate(self._rules):
                if turns:
                    problems.append(f"{len(turns)} turn(s) of on() rule #{i} never played")
        if problems:
            raise AssertionError("scripted server:\n  " + "\n  ".join(problems))

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = self.url if self._httpd is not None else "stopped" if self._port else "not started"
        return f"ScriptedServer({state}, requests={len(self.requests)}, errors={len(self.errors)})"

    def _handle_post(self, handler: _Handler) -> None:
        """Answer one POST: record it, pick its turn, play it, or fail loudly."""
        path = handler.path.split("?", 1)[0]
        raw = handler.rfile.read(int(handler.headers.get("Content-Length") or 0))
        if path != CHAT_PATH:
            return self._refuse(handler, 404, f"POST {path}: only {CHAT_PATH} is scripted")
        try:
            request = json.loads(raw)
        except ValueError:
            request = None
        if not isinstance(request, dict):
            preview = raw[:PREVIEW_CHARS].decode("utf-8", "replace")
            return self._refuse(
                handler, 400, f"POST {path}: body is not a JSON object: {preview!r}"
            )
        headers = {name.lower(): value for name, value in handler.headers.items()}
        turn, problem = self._next_turn(request, headers)
        if turn is None:
            return handler.answer(500, _error_body(problem))
        self._play(handler, turn, request)

    def _handle_get(self, handler: _Handler) -> None:
        """Answer GET /v1/models; any other GET is a loud error."""
        if handler.path.split("?", 1)[0] != MODELS_PATH:
            return self._refuse(handler, 404, f"GET {handler.path}: only {MODELS_PATH} is served")
        model = {"id": "scripted", "object": "model", "created": 0, "owned_by": "tiny_cli.testing"}
        handler.answer(200, {"object": "list", "data": [model]})

    def _next_turn(self, request: dict, headers: dict) -> tuple[Turn | None, str]:
        """Record the request and take its turn: the first matching rule's, else the default's."""
        with self._lock:
            self.requests.append(request)
            self.headers.append(headers)
            turn, problem = self._pick(request)
            if turn is not None:
                return turn, ""
            described = f"request #{len(self.requests)} ({_describe(request)}): {problem}"
            self.errors.append(described)
            return None, described

    def _pick(self, request: dict) -> tuple[Turn | None, str]:
        """Return the turn for a request, or why there is none (called under the lock)."""
        for i, (match, turns) in enumerate(self._rules):
            try:
                matched = match(request)
            except Exception as exc:  # a broken matcher is the test's bug: report, don't hang
                return None, f"on() rule #{i} raised {type(exc).__name__}: {exc}"
            if matched:
                if turns:
                    return turns.popleft(), ""
                return None, f"on() rule #{i} matched but its turns are used up"
        if self._default:
            return self._default.popleft(), ""
        return None, "no turn left in the default script"

    def _play(self, handler: _Handler, turn: Turn, request: dict) -> None:
        """Wait out the turn's delay, then send it (or hang up)."""
        while turn.compute is not None:
            try:
                turn = turn.compute(request)
            except Exception as exc:
                problem = f"respond() function raised {type(exc).__name__}: {exc}"
                return self._refuse(handler, 500, f"request ({_describe(request)}): {problem}")
            if not isinstance(turn, Turn):
                return self._refuse(handler, 500, f"respond() function returned {turn!r}")
        if self._stopping.wait(turn.delay) or turn.hang_up:
            return  # stopped while sleeping, or told to: the connection closes unanswered
        body = turn.body if turn.body is not None else self._completion(turn, request)
        try:
            data, kind = _encoded(body, turn.headers)
        except (TypeError, ValueError, RecursionError) as exc:  # the test's bug: say it, loudly
            problem = f"its body cannot be sent: {type(exc).__name__}: {exc}"
            return self._refuse(handler, 500, f"request ({_describe(request)}): {problem}")
        handler.send(turn.status, data, kind, turn.headers)

    def _completion(self, turn: Turn, request: dict) -> dict:
        """Build the chat.completion JSON for a turn, numbering tool calls that have no id."""
        message = copy.deepcopy(turn.message) or {"role": "assistant", "content": ""}
        for call in message.get("tool_calls", []):
            if call["id"] is None:
                call["id"] = f"call_{next(self._call_ids)}"
        usage = {
            "prompt_tokens": turn.tokens_in,
            "completion_tokens": turn.tokens_out,
            "total_tokens": turn.tokens_in + turn.tokens_out,
        }
        return {
            "id": f"chatcmpl-scripted-{len(self.requests)}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "finish_reason": turn.finish_reason,
                    "logprobs": None,
                }
            ],
            "usage": usage,
        }

    def _refuse(self, handler: _Handler, status: int, problem: str) -> None:
        """Record a request the script cannot answer and tell the client why."""
        self._note(problem)
        handler.answer(status, _error_body(problem))

    def _note(self, problem: str) -> None:
        """Record a request the server could not answer as scripted: the test must fail."""
        with self._lock:
            self.errors.append(problem)


class _HTTPServer(LoopbackServer):
    """Threads per request, never waited for: stop() must not hang on a sleeping handler."""

    request_queue_size = LISTEN_BACKLOG
    scripted: ScriptedServer


class _Handler(BaseHTTPRequestHandler):
    """Hand every request to the ScriptedServer that owns this HTTP server."""

    server: _HTTPServer
    server_version = "tiny-scripted/1"

    def do_POST(self) -> None:
        self._handled(self.server.scripted._handle_post)

    def do_GET(self) -> None:
        self._handled(self.server.scripted._handle_get)

    def _handled(self, handle: Callable[[_Handler], None]) -> None:
        """Answer with `handle`; anything it raises is the test's bug, noted in `errors`."""
        try:
            handle(self)
        except Exception as exc:  # else a traceback on stderr, a disconnect, and a passing test
            problem = f"{self.command} {self.path}: {type(exc).__name__}: {exc}"
            self.server.scripted._refuse(self, 500, problem)

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """Note a request the server cannot take (a PUT, a bad line) in `errors`, then answer."""
        asked = (self.command, getattr(self, "path", None))  # unset on a malformed request line
        said = " ".join(filter(None, asked)) or "a malformed request"
        self.server.scripted._note(f"{said}: HTTP {code} {message or ''}".rstrip())
        super().send_error(code, message, explain)

    def answer(self, status: int, body: dict | str) -> None:
        """Send status and a body of the server's own (always encodable)."""
        self.send(status, *_encoded(body, {}), {})

    def send(self, status: int, data: bytes, kind: str, headers: Mapping[str, str]) -> None:
        """Send status, headers and body; a client that already left is not an error."""
        try:
            self.send_response(status)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                if name.lower() != "content-type":  # sent above, the turn's own if it named one
                    self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except OSError:
            pass

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: test output is for the test."""


def _turns(turns: Iterable[Turn]) -> tuple[Turn, ...]:
    """The turns, each a Turn: anything else would fail only when played, out of sight."""
    if not isinstance(turns, Iterable):  # one Turn, say
        raise ConfigError(
            "turns: must be a list of scripted turns (reply(), tool_call(), …), got a "
            f"{type(turns).__name__}; one turn goes in a list: ScriptedServer([turn])",
            field="turns",
        )
    checked = tuple(turns)
    for i, turn in enumerate(checked, 1):
        if not isinstance(turn, Turn):
            raise ConfigError(
                f"turn #{i}: must be a scripted turn (reply(), tool_call(), http_error(), …), "
                f"got a {type(turn).__name__}"
            )
    return checked


def _describe(request: dict) -> str:
    """Name a request by its model and the start of its last message."""
    messages = request.get("messages") or [{}]
    last = messages[-1] if isinstance(messages[-1], dict) else {}
    text = " ".join(str(last.get("content") or "").split())[:PREVIEW_CHARS]
    return f"model={request.get('model')!r}, last {last.get('role', '?')} message: {text!r}"


def _error_body(problem: str) -> dict:
    """Return an OpenAI-style error body."""
    return {"error": {"message": problem, "type": "scripted_server_error", "code": None}}


def _encoded(body: dict | str, headers: Mapping[str, str]) -> tuple[bytes, str]:
    """Return a body's bytes and Content-Type: the turn's own if it names one, else guessed."""
    data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    given = [value for name, value in headers.items() if name.lower() == "content-type"]
    if given:
        return data, given[-1]
    return data, "application/json" if not isinstance(body, str) or _is_json(body) else "text/plain"


def _is_json(text: str) -> bool:
    """Tell whether a scripted string body is JSON (for its Content-Type)."""
    try:
        json.loads(text)
    except RecursionError:  # nested deeper than the parser goes: it opens as JSON does
        return True
    except ValueError:
        return False
    return True


if pytest is not None:

    @pytest.fixture
    def scripted_server() -> Iterator[ScriptedServer]:
        """Yield a started ScriptedServer; fail the test if it got a request it had no turn for."""
        with ScriptedServer() as server:
            yield server
        if server.errors:
            pytest.fail(
                "scripted server got requests it had no turn for:\n  " + "\n  ".join(server.errors),
                pytrace=False,
            )
