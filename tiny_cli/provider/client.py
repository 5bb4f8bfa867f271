"""The model provider: one chat completion from any OpenAI-compatible endpoint, over httpx.

`OpenAIProvider.complete()` retries 429/5xx and connection errors a bounded number of times
(honouring `Retry-After`) within the caller's time budget, and turns every failure into a
one-line ProviderError. The API key travels only in the Authorization header: never in a
message, a repr or a log line.
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass
from email.utils import parsedate_to_datetime
from types import TracebackType
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from tiny_cli.errors import ConfigError, DeadlineExceeded, ProviderError, ProviderTimeout
from tiny_cli.secrets import scrubber
from tiny_cli.setting_rules import check_api_key, check_base_url, is_number
from tiny_cli.text import check_transport, endpoint, printable, redact_url, unsurrogated
from tiny_cli.threads import call_within

DEFAULT_TIMEOUT = 60.0
MAX_TIMEOUT = 86_400.0  # a day per request: sockets refuse waits past the platform's time_t
DEFAULT_PROBE_TIMEOUT = 5.0  # seconds per request when the caller gives no budget
DEFAULT_RETRIES = 3  # retries after the first try: 4 requests at most
DEFAULT_BACKOFF = 0.5  # seconds before the first retry, doubled for each next one
DEFAULT_MAX_BACKOFF = 8.0  # cap of the doubled backoff
DEFAULT_MAX_RETRY_AFTER = 30.0  # cap of a Retry-After with no deadline: no server parks us
MAX_RESPONSE_BYTES = 16 * 1024 * 1024  # a chat completion is kilobytes; more is a broken server
SHORT_BODY_CHARS = 200  # how much of an error body goes into a message
RETRY_STATUSES = frozenset({408, 429})  # plus every 5xx
# the endpoint refused the key, its rights, the URL or the model: no request would pass, so
# it is the caller's configuration to fix (the run loop raises it before any tool ran)
CONFIG_STATUSES = frozenset({401, 403, 404})
# the variables httpx reads a proxy from, in any case (urllib.request.getproxies)
PROXY_VARIABLES = frozenset({"http_proxy", "https_proxy", "all_proxy"})
# no answer holds more; a bigger count would overflow the run log's INTEGER column at exit
MAX_TOKENS = 10**9

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ToolCall:
    """One tool call the model asked for; `arguments` is the raw JSON text it sent."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Completion:
    """One model answer: text and/or tool calls, token usage, and the response as received."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    tokens_in: int
    tokens_out: int
    finish_reason: str | None
    raw: dict


@dataclass(frozen=True)
class ChatRequest:
    """One chat completion to ask for (its lists are the caller's, not copies): `body()` goes
    over the wire, a recording keys `parts()`."""

    model: str
    messages: list[dict]
    tools: list[dict]
    max_tokens: int
    response_format: dict | None = None  # a json_schema constraint (json tool mode)
    tool_choice: str | None = None  # e.g. "required"; sent only with tools
    temperature: float | None = None  # None: none sent, the server samples at its own default
    # the card that asks: a recording labels the exchange with it; neither sent nor keyed
    agent: str = ""

    def body(self) -> dict[str, Any]:
        """Return the chat-completions body in the order sent; optional parts only when set."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self.messages,
            "max_tokens": self.max_tokens,
        }
        if self.temperature is not None:
            body["temperature"] = self.temperature
        if self.tools:
            body["tools"] = self.tools
            if self.tool_choice is not None:  # without tools a tool_choice is an error on most
                body["tool_choice"] = self.tool_choice
        if self.response_format is not None:
            body["response_format"] = self.response_format
        return unsurrogated(body)  # a lone surrogate (from a tool's text): no encoder takes one

    def parts(self) -> dict[str, Any]:
        """Return what identifies the request: every field, the optional ones only when set."""
        parts: dict[str, Any] = {
            "model": self.model,
            "messages": self.messages,
            "tools": self.tools,
            "max_tokens": self.max_tokens,
        }
        optional = {
            "response_format": self.response_format,
            "tool_choice": self.tool_choice,
            "temperature": self.temperature,  # absent when unset: older recordings keep their keys
        }
        return unsurrogated({**parts, **{k: v for k, v in optional.items() if v is not None}})


class Provider(Protocol):
    """Anything that turns a ChatRequest into one Completion."""

    def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        """Return the model's one answer to `request` within `timeout` seconds."""
        ...


def checked_complete(provider: Provider, request: ChatRequest, timeout: float | None) -> Completion:
    """Call `provider.complete`; a reply breaking the Provider contract is a ConfigError (a bug)."""
    reply: Any = provider.complete(request, timeout=timeout)
    problem = _broken(reply)
    if problem is not None:
        name = type(provider).__name__
        raise ConfigError(f"provider {name}: complete() returned {problem}", field="provider")
    return reply


def _broken(reply: Any) -> str | None:
    """What breaks the Completion contract in `reply`, as an error says it; None if nothing."""
    if not isinstance(reply, Completion):
        return f"{_kind(reply)}, not a tiny_cli.Completion"
    whose = "a Completion whose"
    if not isinstance(reply.content, str | None):
        return f"{whose} content is {_kind(reply.content)}, not a str or None"
    for name in ("tokens_in", "tokens_out"):
        count = getattr(reply, name)
        if not _token_count(count):
            return f"{whose} {name} is {count!r:.40}, not a token count (an int, 0 or more)"
    if not isinstance(reply.tool_calls, tuple | list):
        return f"{whose} tool_calls is {_kind(reply.tool_calls)}, not a tuple of ToolCall"
    problems = (_broken_call(call) for call in reply.tool_calls)
    return next((f"{whose} tool_calls[{i}]{p}" for i, p in enumerate(problems) if p), None)


def _broken_call(call: Any) -> str | None:
    """What breaks a ToolCall's contract, after its place (`.arguments is …`); None if nothing."""
    if not isinstance(call, ToolCall):
        return f" is {_kind(call)}, not a tiny_cli.ToolCall"
    for name in ("id", "name"):
        if not isinstance(getattr(call, name), str):
            return f".{name} is {_kind(getattr(call, name))}, not a str"
    if not isinstance(call.arguments, str):  # a dict too: the record keeps the text as sent
        return f".arguments is {_kind(call.arguments)}, not JSON text (json.dumps(arguments))"
    return None


def _kind(value: Any) -> str:
    """A Python value's kind as an error names it: None, or `a dict`."""
    return "None" if value is None else f"a {type(value).__name__}"


def _token_count(value: Any) -> bool:
    """Whether `value` is a token count: an int (not a bool) from 0 to MAX_TOKENS."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_TOKENS


class OpenAIProvider:
    """A Provider for OpenAI-compatible `/chat/completions` endpoints (OpenAI, Ollama, vLLM, …).

    `timeout` bounds one request of a `complete` called without a deadline; with one (a run's
    budget), a request may take all the time left.
    """

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        *,
        transport: httpx.BaseTransport | None = None,
        retries: int = DEFAULT_RETRIES,
        backoff: float = DEFAULT_BACKOFF,
        timeout: float = DEFAULT_TIMEOUT,
        max_retry_after: float = DEFAULT_MAX_RETRY_AFTER,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_base_url(base_url)
        check_transport(transport)
        _check_options(retries=retries, backoff=backoff, timeout=timeout, sleep=sleep,
                       max_retry_after=max_retry_after, clock=clock)  # fmt: skip
        self.base_url = base_url.rstrip("/")
        self._shown_url = redact_url(self.base_url)
        self._api_key = check_api_key(api_key, "api_key") if api_key else None
        self._server = _Server(self._shown_url, self._api_key)
        self._retries, self._backoff, self._timeout = retries, backoff, timeout
        self._max_retry_after = max_retry_after
        self._sleep, self._clock = sleep, clock
        self._client = http_client(self.base_url, transport)

    def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        """Return the model's answer, retrying transient failures within `timeout` seconds."""
        body, model = request.body(), request.model
        deadline = None if timeout is None else self._clock() + timeout
        tries = self._retries + 1
        for attempt in range(tries):
            answer = self._attempt(body, deadline)
            if isinstance(answer, _Answer) and answer.status == 200:
                return _parse(answer.content, self._server)
            failure = answer if isinstance(answer, _Failure) else self._server.judge(answer, model)
            if not failure.retryable or attempt == tries - 1:
                raise self._server.failed(failure, attempt + 1)
            delay = self._delay(attempt, failure.retry_after, deadline)
            if deadline is not None and self._clock() + delay >= deadline:
                # a server that answered keeps its status; one never reached was not slow
                if failure.status is None:
                    raise self._server.failed(failure, attempt + 1)
                raise self._out_of_budget(failure, delay)
            log.info("retrying %s in %.2fs: %s", self._shown_url, delay, failure.detail)
            self._sleep(delay)
        raise AssertionError("unreachable: the loop returns or raises")

    def probe(self, timeout: float = DEFAULT_PROBE_TIMEOUT) -> None:
        """Raise ProviderError now if nothing listens at the base URL (any HTTP answer is fine)."""
        try:
            self._client.get(endpoint(self.base_url, "models"), timeout=timeout)
        except httpx.DecodingError:  # a body its encoding cannot decode: still an answer
            return
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise self._server.failed(_unreached(exc), 1) from None
        except httpx.TransportError:  # connected, then slow or cut off: something listens
            return
        except (httpx.InvalidURL, UnicodeError) as exc:
            raise self._server.bad_host(exc) from None

    def close(self) -> None:
        """Close the connection pool."""
        self._client.close()

    def __enter__(self) -> OpenAIProvider:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def __repr__(self) -> str:  # never show the key
        key = "set" if self._api_key else "unset"
        return f"OpenAIProvider(base_url={self._shown_url!r}, api_key={key})"

    def _out_of_budget(self, failure: _Failure, delay: float) -> ProviderTimeout:
        """Return the give-up of a retry whose wait the time budget cannot hold, after an error
        answer; it keeps the HTTP status, so the caller can tell a wait asked from a slow one."""
        after = failure.retry_after
        asked = "" if after is None else f" (its Retry-After: {after:g}s)"
        return ProviderTimeout(
            f"gave up on {self._shown_url} within the time budget "
            f"(HTTP {failure.status}; next retry in {delay:g}s{asked})",
            status=failure.status,
            url=self._shown_url,
        )

    def _delay(self, attempt: int, retry_after: float | None, deadline: float | None) -> float:
        """Seconds to wait before retry number `attempt + 1`."""
        if retry_after is None:
            return min(self._backoff * 2**attempt, DEFAULT_MAX_BACKOFF)
        # with a deadline, a wait past it ends the request (a capped one would retry too early);
        # without one, the cap keeps a server from parking us
        return retry_after if deadline is not None else min(retry_after, self._max_retry_after)

    def _attempt(self, body: dict, deadline: float | None) -> _Answer | _Failure:
        """Send one request; return what came back or why nothing usable did."""
        remaining = None if deadline is None else deadline - self._clock()
        if remaining is not None and remaining <= 0:
            raise ProviderTimeout(
                f"no answer from {self._shown_url} within the time budget", url=self._shown_url
            )
        # with a deadline the time left is the request's timeout (docs/runner.md): a slow
        # server may take all of it; the per-request timeout serves callers that give none
        limit = self._timeout if remaining is None else min(remaining, MAX_TIMEOUT)
        try:
            if remaining is None:
                return self._send(body, limit, deadline)
            return call_within(remaining, lambda: self._send(body, limit, deadline))
        except DeadlineExceeded:
            raise ProviderTimeout(
                f"{self._shown_url} was still answering when the time budget ran out "
                f"({remaining:.1f}s): the server is slow or stalled",
                url=self._shown_url,
            ) from None
        except httpx.TimeoutException as exc:
            if remaining is not None:  # the time left was the limit: the caller's budget ran out
                raise ProviderTimeout(
                    f"no answer from {self._shown_url} within the time budget ({remaining:.1f}s)",
                    url=self._shown_url,
                ) from exc
            return _Failure("timeout", f"no answer within {limit:g}s", retryable=True)
        except httpx.ConnectError as exc:
            return _unreached(exc)
        except httpx.TransportError as exc:  # dropped connection, protocol error: transient
            return _Failure("transport", str(exc) or type(exc).__name__, retryable=True)
        except (httpx.InvalidURL, UnicodeError) as exc:  # a host name no resolver takes
            raise self._server.bad_host(exc) from None

    def _send(self, body: dict, limit: float, deadline: float | None) -> _Answer:
        """POST the body and read the whole response, giving up at the deadline."""
        headers = {"Authorization": f"Bearer {self._api_key}"} if self._api_key else {}
        url = endpoint(self.base_url, "chat/completions")
        with self._client.stream(
            "POST", url, json=body, headers=headers, timeout=httpx.Timeout(limit)
        ) as response:
            try:
                content = self._read(response, deadline)
            except httpx.DecodingError as exc:  # a RequestError, yet no transport's fault
                raise self._server.undecodable(response, exc) from None
            return _Answer(response.status_code, response.headers, content)

    def _read(self, response: httpx.Response, deadline: float | None) -> bytes:
        """Read the whole (decoded) body, giving up at the deadline or past the size limit."""
        chunks, size = [], 0
        # httpx's read timeout is per read: check the deadline between chunks too, so a
        # server that trickles bytes cannot hold us past the budget
        for chunk in response.iter_bytes():
            chunks.append(chunk)
            size += len(chunk)
            if deadline is not None and self._clock() >= deadline:
                raise ProviderTimeout(
                    f"{self._shown_url} was still sending its answer when the time budget ran out",
                    url=self._shown_url,
                )
            if size > MAX_RESPONSE_BYTES:
                raise ProviderError(
                    f"{self._shown_url} sent more than "
                    f"{MAX_RESPONSE_BYTES // 2**20} MiB; not a chat completion",
                    url=self._shown_url,
                )
        return b"".join(chunks)


# each option of OpenAIProvider → its rule, and what it must be: else the first request (or
# the first retry) would fail with a TypeError of its own
OPTIONS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "retries": (
        lambda v: is_number(v) and isinstance(v, int) and v >= 0,
        "a whole number, 0 or more",
    ),
    "backoff": (lambda v: is_number(v) and v >= 0, "a number of seconds, 0 or more"),
    "timeout": (
        lambda v: is_number(v) and 0 < v <= MAX_TIMEOUT,
        f"a number of seconds above 0, at most {MAX_TIMEOUT:g}",
    ),
    "max_retry_after": (lambda v: is_number(v) and v >= 0, "a number of seconds, 0 or more"),
    "sleep": (callable, "a function (seconds) -> None, such as time.sleep"),
    "clock": (callable, "a function () -> seconds, such as time.monotonic"),
}


def _check_options(**given: Any) -> None:
    """Refuse an option of OpenAIProvider it cannot use: a ConfigError naming it."""
    for name, value in given.items():
        ok, what = OPTIONS[name]
        if not ok(value):
            shown = repr(value) if isinstance(value, int | float) else _kind(value)
            raise ConfigError(f"{name}: must be {what}, got {shown}", field=name)


def _check_base_url(base_url: Any) -> None:
    """ConfigError unless `base_url` is an http(s) URL with no credentials in it."""
    # refused as load_settings refuses them: user:password@ (httpx would send it as Basic auth
    # in place of the key) and a key in the query, which logs and errors would show
    if not isinstance(base_url, str):
        raise ConfigError(
            f"base_url: must be a URL string, got {type(base_url).__name__}", field="base_url"
        )
    try:
        urlsplit(base_url).port  # noqa: B018 - parses host and port, or raises
    except ValueError as exc:  # the URL may hold a key: name the problem, not the URL
        raise ConfigError(
            f"base URL is not a usable URL ({exc}); set TINY_BASE_URL", field="base_url"
        ) from None
    check_base_url("base_url", base_url, key_goes="api_key")


def http_client(url: str, transport: httpx.BaseTransport | None, **options: Any) -> httpx.Client:
    """An httpx client for `url`: no redirects, TLS verified, proxies from the environment.

    Set headers afterwards, not in `options`: one httpx cannot encode is a ValueError too."""
    verify = _tls(url)
    try:
        return httpx.Client(transport=transport, follow_redirects=False, verify=verify, **options)
    except OSError as exc:  # ssl.SSLError too: httpx loads SSL_CERT_FILE here
        raise _ca_file_error(exc) from None
    except ImportError:  # httpx imports socksio only for a socks5:// proxy
        raise _proxy_error(
            "a SOCKS proxy needs the socksio package: pip install 'httpx[socks]'"
        ) from None
    except (ValueError, httpx.InvalidURL):  # a scheme httpx has no proxy for (ftp://)
        raise _proxy_error("not an http://, https:// or socks5:// URL") from None


def _ca_file_error(exc: OSError) -> ConfigError:
    """The error for a CA file TLS cannot load: missing, a folder, or no PEM certificate in it."""
    # SSL_CERT_DIR is read lazily, at a handshake: only SSL_CERT_FILE fails here
    why = "no PEM certificate in it" if isinstance(exc, ssl.SSLError) else exc.strerror or exc
    return ConfigError(
        f"SSL_CERT_FILE ({printable(os.environ.get('SSL_CERT_FILE', ''))}) cannot be used "
        f"({why}); set it to your CA's PEM file, or unset it",
        field="SSL_CERT_FILE",
    )


def _proxy_error(why: str) -> ConfigError:
    """The error for a proxy httpx cannot use, naming the variables that set one (not their
    values: a proxy URL may hold a password)."""
    names = sorted(n for n, v in os.environ.items() if n.lower() in PROXY_VARIABLES and v)
    said = " or ".join(names) or "the system's proxy setting"
    return ConfigError(
        f"the proxy in {said} cannot be used ({why}); fix it, or unset it",
        field=names[0] if names else None,
    )


def _tls(base_url: str) -> ssl.SSLContext | bool:
    """Verify https:// with the CA bundle; http:// (no TLS: no redirects) gets a context that
    parses no bundle and trusts no CA, so it could never pass unverified."""
    if urlsplit(base_url).scheme == "https":  # the parser lower-cases it: HTTPS:// too
        return True
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname, no CAs


@dataclass(frozen=True)
class _Answer:
    """A response that arrived, whatever its status."""

    status: int
    headers: httpx.Headers
    content: bytes


@dataclass(frozen=True)
class _Failure:
    """Why one try gave nothing usable, and whether another try may help."""

    kind: str  # connect | tls | timeout | transport | status
    detail: str  # the short body for a retryable status, else the whole story
    retryable: bool
    retry_after: float | None = None
    status: int | None = None


class _Server:
    """One server as a person reads about it: its URL with any secret cut, and its failures; it
    holds the API key only to mask it where a server echoes it back."""

    def __init__(self, shown_url: str, api_key: str | None) -> None:
        self.url = shown_url
        self._api_key = api_key

    def judge(self, answer: _Answer, model: str) -> _Failure:
        """Classify a non-200 answer: retryable or not, and what to tell a person."""
        status, short = answer.status, self.short_body(answer.content)
        if status in RETRY_STATUSES or status >= 500:
            return _Failure("status", short, True, _retry_after(answer.headers), status)
        if status in (401, 403):  # the key may be the settings' or a library caller's own
            detail = (
                f"{self.url} rejected the API key (HTTP {status}); check the key where it was "
                "given (TINY_API_KEY, OPENAI_API_KEY or api_key)"
                if self._api_key
                else f"{self.url} requires an API key (HTTP {status}); set TINY_API_KEY or pass "
                "api_key"
            )
        elif 300 <= status < 400:
            detail = (
                f"{self.url} redirected the request (HTTP {status}) to "
                f"{self._location(answer.headers)}; redirects are not followed: check the "
                "scheme and path of TINY_BASE_URL"
            )
        elif status == 404:
            detail = (
                f"{self.url}/chat/completions answered HTTP 404: check TINY_BASE_URL "
                f"(usually ends in /v1) and that model {model!r} exists there: {short}"
            )
        else:
            detail = f"{self.url} refused the request (HTTP {status}): {short}"
        return _Failure("status", detail, False, None, status)

    def failed(self, failure: _Failure, tries: int) -> ProviderError:
        """Return the error of a request that failed for good, with the HTTP status it got."""
        message = self.final_message(failure, tries)
        return ProviderError(message, status=failure.status, url=self.url)

    def final_message(self, failure: _Failure, tries: int) -> str:
        """Say, in one line, why the request failed for good."""
        n = f"{tries} {'try' if tries == 1 else 'tries'}"
        if failure.kind == "connect":
            return f"cannot reach {self.url} — is the server running? set TINY_BASE_URL"
        if failure.kind == "tls":
            return f"TLS with {self.url} failed: {failure.detail}"
        if failure.kind == "timeout":
            return f"{self.url} gave no answer after {n}: {failure.detail}"
        if failure.kind == "transport":
            return f"connection to {self.url} failed after {n}: {failure.detail}"
        if not failure.retryable:
            return failure.detail
        if failure.status == 429:
            return f"{self.url} kept rate-limiting (HTTP 429) after {n}: {failure.detail}"
        if failure.status == 408:
            return f"{self.url} answered HTTP 408 (request timeout) after {n}: {failure.detail}"
        return f"{self.url}: server error HTTP {failure.status} after {n}: {failure.detail}"

    def short_body(self, content: bytes) -> str:
        """Return the gist of an error body: its error message if JSON, else the text, cut."""
        text = content.decode("utf-8", "replace")
        try:
            data = json.loads(text)
            error = data.get("error", data) if isinstance(data, dict) else data
            message = error.get("message", error) if isinstance(error, dict) else error
            text = message if isinstance(message, str) else json.dumps(message)
        except (ValueError, RecursionError):  # not JSON, or nested past Python's stack
            pass
        text = self._masked(" ".join(text.split()) or "(empty body)")
        return text if len(text) <= SHORT_BODY_CHARS else text[: SHORT_BODY_CHARS - 1] + "…"

    def bad_host(self, exc: Exception) -> ConfigError:
        """Return the error for a base URL whose host no resolver takes (an empty label…)."""
        why = printable(" ".join(str(exc).split()))[:SHORT_BODY_CHARS] or type(exc).__name__
        return ConfigError(
            f"base URL {self.url}: its host is not a usable name ({why}); set TINY_BASE_URL",
            field="base_url",
        )

    def _masked(self, text: str) -> str:
        """`text` with the API key, or one the environment holds beside it, redacted: some
        servers echo the key they rejected."""
        return scrubber(self._api_key).for_caller().text(text)

    def _location(self, headers: httpx.Headers) -> str:
        """Where a redirect points, as shown: no credentials, escaped, cut."""
        where = headers.get("location", "")
        try:
            shown = redact_url(where) if where else "no Location"
        except ValueError:  # not a URL (e.g. "http://[x"): nothing to follow anyway
            shown = "an unparseable Location"
        return self._masked(printable(shown))[:SHORT_BODY_CHARS]

    def malformed(self, what: str) -> ProviderError:
        """Return the error for a response that is not a usable chat completion."""
        return ProviderError(f"malformed response from {self.url}: {what}", url=self.url)

    def undecodable(self, response: httpx.Response, exc: httpx.DecodingError) -> ProviderError:
        """Return the error for a body its own Content-Encoding cannot decode (no retry: the
        server answered, and would answer the same again)."""
        encoding = printable(response.headers.get("content-encoding", ""))[:SHORT_BODY_CHARS]
        why = " ".join(str(exc).split())[:SHORT_BODY_CHARS] or type(exc).__name__
        return ProviderError(
            f"malformed response from {self.url} (HTTP {response.status_code}): its body "
            f"cannot be decoded as its Content-Encoding {encoding!r} says ({why})",
            status=None if response.status_code == 200 else response.status_code,
            url=self.url,
        )


def _unreached(exc: httpx.TransportError) -> _Failure:
    """The failure of a connection that carried no request: TLS refused (not retried: the
    certificate or the scheme fails the same again), else the server not reached."""
    detail = tls_failure(exc)
    if detail is None:
        return _Failure("connect", str(exc), retryable=True)
    return _Failure("tls", detail, retryable=False)


def tls_failure(exc: BaseException) -> str | None:
    """Say why TLS failed behind an httpx error, and how to fix it; None if TLS is not why."""
    error = _ssl_error(exc)
    if error is None:
        return None
    if isinstance(error, ssl.SSLCertVerificationError):
        why = printable(str(error.verify_message or "certificate verify failed"))
        return (
            f"certificate verify failed ({why}); if the server's certificate comes from your "
            "own CA, set SSL_CERT_FILE to that CA's PEM file"
        )
    return (
        f"the TLS handshake failed ({printable(str(error.reason or error))}); if the server "
        "speaks plain HTTP, use http:// in TINY_BASE_URL; a private CA goes in SSL_CERT_FILE"
    )


def _ssl_error(exc: BaseException) -> ssl.SSLError | None:
    """The ssl error behind an httpx error, if any: httpx chains httpcore's, which chains it."""
    cause: BaseException | None = exc
    for _ in range(8):  # a short chain; never loop on a cycle
        if isinstance(cause, ssl.SSLError):
            return cause
        cause = None if cause is None else cause.__cause__ or cause.__context__
    return None


def _parse(content: bytes, server: _Server) -> Completion:
    """Turn a 200 response body into a Completion, or say what is missing; a malformed one
    carries the tokens its `usage` reported, if readable."""
    try:
        data = json.loads(content)
    except ValueError:
        raise server.malformed(f"not JSON: {server.short_body(content)}") from None
    except RecursionError:
        raise server.malformed("JSON nested too deeply") from None
    if not isinstance(data, dict):
        raise server.malformed("the body is not a JSON object")
    data = unsurrogated(data)  # a model may write "\\ud800": its text goes into the next request
    try:
        return _completion(data, content, server)
    except ProviderError as exc:  # unusable, yet the server says what it spent: a run counts it
        try:
            tokens = _usage(data.get("usage"), server)
        except ProviderError:
            tokens = (0, 0)
        raise ProviderError(str(exc), status=exc.status, url=exc.url, tokens=tokens) from None


def _completion(data: dict[str, Any], content: bytes, server: _Server) -> Completion:
    """Turn a 200 response's JSON object into a Completion, or say what is missing."""
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        if "error" in data:
            raise ProviderError(
                f"{server.url} answered with an error: {server.short_body(content)}",
                url=server.url,
            )
        raise server.malformed("no 'choices'")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise server.malformed("no 'choices[0].message'")
    tokens_in, tokens_out = _usage(data.get("usage"), server)
    return Completion(
        content=_content(message.get("content"), server),
        tool_calls=tuple(_tool_calls(message.get("tool_calls"), server)),
        tokens_in=tokens_in,
        tokens_out=tokens_out,
        finish_reason=choice.get("finish_reason"),
        raw=data,
    )


def _usage(usage: object, server: _Server) -> tuple[int, int]:
    """Return (prompt, completion) tokens; a server that reports none counts as 0."""
    if usage is None:
        return 0, 0
    if not isinstance(usage, dict):
        raise server.malformed("'usage' is not an object")
    counts = []
    for key in ("prompt_tokens", "completion_tokens"):
        value = usage.get(key) or 0
        if not _token_count(value):
            raise server.malformed(f"'usage.{key}' is {value!r:.40}, not a token count")
        counts.append(value)
    return counts[0], counts[1]


def _content(content: object, server: _Server) -> str | None:
    """Return the message text; some servers send a list of text parts instead of a string."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [p.get("text", "") for p in content if isinstance(p, dict)]
        return "".join(p for p in parts if isinstance(p, str))
    raise server.malformed(f"'choices[0].message.content' is a {type(content).__name__}")


def _tool_calls(calls: object, server: _Server) -> list[ToolCall]:
    """Return the tool calls with arguments as JSON text, whatever form the server used."""
    if not calls:
        return []
    if not isinstance(calls, list):
        raise server.malformed("'choices[0].message.tool_calls' is not a list")
    result: list[ToolCall] = []
    for i, call in enumerate(calls):
        where = f"'choices[0].message.tool_calls[{i}]"
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not isinstance(function.get("name"), str):
            raise server.malformed(f"no {where}.function.name'")
        arguments = function.get("arguments")
        if arguments is None:
            arguments = "{}"
        elif not isinstance(arguments, str):  # some servers send the object itself
            arguments = json.dumps(arguments, ensure_ascii=False)
        call_id = _call_id(call.get("id"), i, {c.id for c in result})
        result.append(ToolCall(call_id, function["name"], arguments))
    return result


def _call_id(given: object, i: int, taken: set[str]) -> str:
    """The id of the `i`th call: the server's, else `call_{i}`; each answer echoes its call's
    id, so none may be shared (some servers omit ids, LM Studio sends \"\")."""
    if isinstance(given, str) and given.strip() and given not in taken:
        return given
    call_id = f"call_{i}"
    while call_id in taken:  # the server named another call so
        call_id += "_"
    return call_id


def _retry_after(headers: httpx.Headers) -> float | None:
    """Return the server's Retry-After in seconds (a number or an HTTP date), if usable."""
    # OpenAI's finer-grained variant first, in milliseconds; then seconds
    for name, per_second in (("retry-after-ms", 1000), ("retry-after", 1)):
        try:
            return max(0.0, float(headers[name]) / per_second)
        except (KeyError, ValueError):
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:  # an HTTP date
        when = parsedate_to_datetime(value)
        # measure against the server's own Date header when there is one: immune to clock skew
        now = parsedate_to_datetime(headers["date"]).timestamp() if "date" in headers else None
    except (TypeError, ValueError, IndexError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))
