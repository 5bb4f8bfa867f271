"""The provider: wire format and failure handling (MockTransport), and the same over loopback."""

from __future__ import annotations

import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tiny_cli.agent.reply import response_format
from tiny_cli.errors import ConfigError, ProviderError, ProviderTimeout
from tiny_cli.provider.client import (
    DEFAULT_MAX_RETRY_AFTER,
    ChatRequest,
    Completion,
    OpenAIProvider,
    ToolCall,
)
from tiny_cli.testing import ScriptedServer, hang_up, http_error, raw_response, reply, tool_call

KEY = "sk-test-SECRET-7f3a9c"
BASE = "http://model.test/v1"
MESSAGES = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
TOOLS = [{"type": "function", "function": {"name": "http_get", "parameters": {"type": "object"}}}]


class FakeTime:
    """A clock that only moves when someone sleeps; records every sleep."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def completion(content: str | None = "hello", **extra: object) -> dict:
    """Return a minimal valid chat.completion body."""
    message = {"role": "assistant", "content": content, **extra}
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15},
    }


Answer = httpx.Response | Exception


def mocked(
    answers: list[Answer], api_key: str | None = KEY, base_url: str = BASE, **kwargs: object
) -> tuple[OpenAIProvider, list[httpx.Request], FakeTime]:
    """Return a provider whose transport plays `answers` in order, the requests it saw, its time."""
    seen: list[httpx.Request] = []
    fake = FakeTime()

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        answer = answers[len(seen) - 1]
        if isinstance(answer, Exception):
            raise answer
        return answer

    provider = OpenAIProvider(
        base_url,
        api_key,
        transport=httpx.MockTransport(handler),
        sleep=fake.sleep,
        clock=fake.clock,
        **kwargs,  # type: ignore[arg-type]
    )
    return provider, seen, fake


def ask(
    provider: OpenAIProvider, tools: list[dict] | None = None, timeout: float | None = None
) -> Completion:
    request = ChatRequest("m1", MESSAGES, TOOLS if tools is None else tools, 64)
    return provider.complete(request, timeout=timeout)


def ok(body: dict | None = None) -> httpx.Response:
    return httpx.Response(200, json=completion() if body is None else body)


# --- wire format ------------------------------------------------------------------------


def test_request_carries_bearer_key_model_messages_max_tokens_and_tools() -> None:
    provider, seen, _ = mocked([ok()])
    ask(provider)
    (request,) = seen
    assert request.method == "POST"
    assert str(request.url) == f"{BASE}/chat/completions"
    assert request.headers["authorization"] == f"Bearer {KEY}"
    assert request.headers["content-type"] == "application/json"
    body = json.loads(request.content)
    assert body == {"model": "m1", "messages": MESSAGES, "max_tokens": 64, "tools": TOOLS}


def test_empty_tools_are_omitted_and_no_key_sends_no_authorization() -> None:
    provider, seen, _ = mocked([ok()], api_key=None, base_url=BASE + "/")
    ask(provider, tools=[])
    assert "authorization" not in seen[0].headers
    assert str(seen[0].url) == f"{BASE}/chat/completions"  # trailing slash folded
    assert set(json.loads(seen[0].content)) == {"model", "messages", "max_tokens"}


def test_completion_holds_content_tool_calls_usage_and_raw() -> None:
    calls = [
        {"id": "a", "type": "function", "function": {"name": "f", "arguments": '{"x": 1'}},
        {"id": "b", "type": "function", "function": {"name": "g", "arguments": {"y": "ü"}}},
        {"type": "function", "function": {"name": "h"}},
    ]
    body = completion(None, tool_calls=calls)
    provider, _, _ = mocked([ok(body)])
    result = ask(provider)
    assert result.content is None
    assert result.tool_calls == (
        ToolCall("a", "f", '{"x": 1'),  # broken JSON is passed on verbatim: the runner judges it
        ToolCall("b", "g", '{"y": "ü"}'),  # an object is normalised to JSON text
        ToolCall("call_2", "h", "{}"),  # no id, no arguments: still answerable
    )
    assert (result.tokens_in, result.tokens_out, result.finish_reason) == (12, 3, "stop")
    assert result.raw == body


def test_missing_usage_counts_zero_tokens() -> None:
    body = completion("hi")
    del body["usage"]
    provider, _, _ = mocked([ok(body)])
    result = ask(provider)
    assert (result.content, result.tokens_in, result.tokens_out) == ("hi", 0, 0)


def test_content_as_text_parts_is_joined() -> None:
    parts = [{"type": "text", "text": "one "}, {"type": "text", "text": "two"}]
    provider, _, _ = mocked([ok(completion(parts))])  # type: ignore[arg-type]
    assert ask(provider).content == "one two"


@pytest.mark.parametrize(
    ("response", "expected"),
    [
        (httpx.Response(200, text="<html>gateway</html>"), "not JSON: <html>gateway</html>"),
        (httpx.Response(200, json=[1, 2]), "not a JSON object"),
        (httpx.Response(200, json={"id": "x"}), "no 'choices'"),
        (httpx.Response(200, json={"choices": []}), "no 'choices'"),
        (httpx.Response(200, json={"choices": [{"index": 0}]}), "no 'choices[0].message'"),
        (httpx.Response(200, json={**completion(), "usage": "lots"}), "'usage' is not an object"),
        (
            httpx.Response(200, json={**completion(), "usage": {"prompt_tokens": "ten"}}),
            "'usage.prompt_tokens' is 'ten'",
        ),
        (
            httpx.Response(200, json={**completion(), "usage": {"completion_tokens": 2**64}}),
            "'usage.completion_tokens' is 1844674407370955",  # cut: a count, not a page of digits
        ),
        (
            httpx.Response(200, json=completion(tool_calls=[{"function": {"arguments": "{}"}}])),
            "tool_calls[0].function.name",
        ),
        (httpx.Response(200, json={"error": {"message": "model is loading"}}), "model is loading"),
    ],
)
def test_malformed_responses_name_what_is_missing(response: httpx.Response, expected: str) -> None:
    provider, seen, _ = mocked([response])
    with pytest.raises(ProviderError) as info:
        ask(provider)
    assert expected in str(info.value)
    assert BASE in str(info.value)
    assert len(seen) == 1  # a malformed answer is not retried


# --- retries ----------------------------------------------------------------------------


def test_429_with_retry_after_seconds_then_success() -> None:
    provider, seen, fake = mocked([httpx.Response(429, headers={"Retry-After": "2"}), ok()])
    assert ask(provider).content == "hello"
    assert len(seen) == 2
    assert fake.sleeps == [2.0]


def test_retry_after_http_date_is_measured_against_the_servers_date() -> None:
    headers = {
        "Retry-After": "Wed, 21 Oct 2015 07:28:03 GMT",
        "Date": "Wed, 21 Oct 2015 07:28:00 GMT",
    }
    provider, _, fake = mocked([httpx.Response(503, headers=headers), ok()])
    ask(provider)
    assert fake.sleeps == [3.0]


def test_retry_after_is_capped() -> None:
    provider, _, fake = mocked([httpx.Response(429, headers={"Retry-After": "3600"}), ok()])
    ask(provider)
    assert fake.sleeps == [DEFAULT_MAX_RETRY_AFTER]


def test_persistent_5xx_fails_after_all_tries_with_exponential_backoff() -> None:
    error = httpx.Response(503, json={"error": {"message": "overloaded, try later"}})
    provider, seen, fake = mocked([error] * 4, retries=3, backoff=0.5)
    with pytest.raises(ProviderError) as info:
        ask(provider)
    assert len(seen) == 4
    assert fake.sleeps == [0.5, 1.0, 2.0]
    assert "server error HTTP 503 after 4 tries: overloaded, try later" in str(info.value)
    assert not isinstance(info.value, ProviderTimeout)


def test_backoff_doubles_up_to_its_cap() -> None:
    provider, _, fake = mocked([httpx.Response(500)] * 7, retries=6, backoff=1.0)
    with pytest.raises(ProviderError):
        ask(provider)
    assert fake.sleeps == [1.0, 2.0, 4.0, 8.0, 8.0, 8.0]


@pytest.mark.parametrize(
    ("status", "body", "api_key", "expected"),
    [
        (401, "", KEY, f"{BASE} rejected the API key (HTTP 401); check the key where"),
        (403, "", KEY, f"{BASE} rejected the API key (HTTP 403); check the key where"),
        (401, "", None, f"{BASE} requires an API key (HTTP 401); set TINY_API_KEY or"),
        (404, '{"error": "model \'m1\' not found"}', KEY, "model 'm1' exists there"),
        (400, '{"error": {"message": "context too long"}}', KEY, "(HTTP 400): context too long"),
    ],
)
def test_client_errors_fail_at_once_with_a_reason(
    status: int, body: str, api_key: str | None, expected: str
) -> None:
    provider, seen, fake = mocked([httpx.Response(status, text=body)], api_key=api_key)
    with pytest.raises(ProviderError) as info:
        ask(provider)
    assert expected in str(info.value)
    assert (len(seen), fake.sleeps) == (1, [])


def test_404_names_the_url_and_the_model() -> None:
    provider, _, _ = mocked([httpx.Response(404, text="404 page not found")])
    with pytest.raises(ProviderError) as info:
        ask(provider)
    message = str(info.value)
    assert f"{BASE}/chat/completions answered HTTP 404" in message
    assert "TINY_BASE_URL" in message and "'m1'" in message


def test_connection_errors_are_retried_then_say_cannot_reach() -> None:
    refused = httpx.ConnectError("[Errno 111] Connection refused")
    provider, seen, fake = mocked([refused] * 4, retries=3)
    with pytest.raises(ProviderError) as info:
        ask(provider)
    assert str(info.value) == f"cannot reach {BASE} — is the server running? set TINY_BASE_URL"
    assert len(seen) == 4 and len(fake.sleeps) == 3


def test_a_dropped_connection_is_retried() -> None:
    dropped = httpx.RemoteProtocolError("Server disconnected without sending a response.")
    provider, seen, _ = mocked([dropped, ok()])
    assert ask(provider).content == "hello"
    assert len(seen) == 2


def test_per_request_timeouts_are_retried_then_reported() -> None:
    provider, seen, _ = mocked([httpx.ReadTimeout("read timed out")] * 2, retries=1, timeout=5.0)
    with pytest.raises(ProviderError) as info:
        ask(provider)
    assert "gave no answer after 2 tries: no answer within 5s" in str(info.value)
    assert not isinstance(info.value, ProviderTimeout)  # the caller's budget was not involved
    assert len(seen) == 2


# --- the caller's time budget ---------------------------------------------------------------


def test_every_httpx_timeout_is_bounded_by_the_remaining_budget() -> None:
    provider, seen, _ = mocked([ok(), ok()], timeout=60.0)
    ask(provider, timeout=2.5)
    ask(provider)
    assert seen[0].extensions["timeout"] == dict.fromkeys(("connect", "read", "write", "pool"), 2.5)
    assert seen[1].extensions["timeout"]["read"] == 60.0


def test_a_retry_that_would_pass_the_deadline_is_not_attempted() -> None:
    provider, seen, fake = mocked([httpx.Response(429, headers={"Retry-After": "5"}), ok()])
    with pytest.raises(ProviderTimeout) as info:
        ask(provider, timeout=3.0)
    assert (len(seen), fake.sleeps) == (1, [])
    assert "time budget" in str(info.value) and "HTTP 429" in str(info.value)
    assert isinstance(info.value, ProviderError)  # callers that catch ProviderError see it too


def test_a_timeout_at_the_budget_is_a_provider_timeout_without_retry() -> None:
    provider, seen, _ = mocked([httpx.ReadTimeout("read timed out"), ok()], timeout=60.0)
    with pytest.raises(ProviderTimeout):
        ask(provider, timeout=1.0)
    assert len(seen) == 1


def test_a_server_trickling_its_answer_is_abandoned_at_the_deadline() -> None:
    fake = FakeTime()

    def trickle() -> Iterator[bytes]:
        for _ in range(10):
            fake.now += 1.0  # each chunk arrives within the read timeout, but time goes by
            yield b" "

    provider = OpenAIProvider(
        BASE,
        transport=httpx.MockTransport(lambda request: httpx.Response(200, content=trickle())),
        clock=fake.clock,
        sleep=fake.sleep,
    )
    with pytest.raises(ProviderTimeout, match="still sending"):
        ask(provider, timeout=2.5)
    assert fake.now - 1000.0 == 3.0  # gave up at the first chunk past the deadline


def test_no_budget_left_sends_nothing() -> None:
    provider, seen, _ = mocked([ok()])
    with pytest.raises(ProviderTimeout):
        ask(provider, timeout=0.0)
    assert seen == []


# --- secrets and configuration ----------------------------------------------------------


def test_the_key_never_appears_in_errors_or_repr() -> None:
    echo = {"error": {"message": f"Incorrect API key provided: {KEY}"}}
    answers: list[Answer] = [
        httpx.Response(401, json=echo),
        httpx.Response(400, json=echo),
        httpx.Response(500, json=echo),
        httpx.Response(200, text=f"oops {KEY}"),
    ]
    for answer in answers:
        provider, _, _ = mocked([answer] * 4)
        with pytest.raises(ProviderError) as info:
            ask(provider)
        assert KEY not in str(info.value)
        assert KEY not in repr(provider) and "api_key=set" in repr(provider)


def test_credentials_in_the_base_url_are_refused_and_not_shown() -> None:
    with pytest.raises(ConfigError, match="credentials in the URL") as info:
        OpenAIProvider("http://u:pw@h.test/v1", KEY)
    assert "pw" not in str(info.value)


@pytest.mark.parametrize(
    ("base_url", "kwargs"),
    [("localhost:11434/v1", {}), (BASE, {"retries": -1}), (BASE, {"timeout": 0.0})],
)
def test_impossible_configuration_is_a_config_error(base_url: str, kwargs: dict) -> None:
    with pytest.raises(ConfigError):
        OpenAIProvider(base_url, **kwargs)


# --- the same over real HTTP on 127.0.0.1 -------------------------------------------------


def real(
    server: ScriptedServer, api_key: str | None = KEY, **kwargs: object
) -> tuple[OpenAIProvider, FakeTime]:
    """Return a provider on the scripted server that records (not sleeps) its backoff."""
    fake = FakeTime()
    provider = OpenAIProvider(server.url, api_key, sleep=fake.sleep, **kwargs)  # type: ignore[arg-type]
    return provider, fake


def test_loopback_round_trip_with_tool_call(scripted_server: ScriptedServer) -> None:
    scripted_server.add(tool_call("http_get", {"url": "https://example.org"}, tokens_in=321))
    with real(scripted_server)[0] as provider:
        result = ask(provider)
    assert result.tool_calls[0].name == "http_get"
    assert json.loads(result.tool_calls[0].arguments) == {"url": "https://example.org"}
    assert (result.tokens_in, result.tokens_out, result.finish_reason) == (321, 5, "tool_calls")
    assert scripted_server.requests == [
        {"model": "m1", "messages": MESSAGES, "max_tokens": 64, "tools": TOOLS}
    ]
    assert scripted_server.headers[0]["authorization"] == f"Bearer {KEY}"


def test_a_chat_requests_body_is_what_went_over_the_wire_in_tinys_order(
    scripted_server: ScriptedServer,
) -> None:
    scripted_server.add(reply("ok"))
    constraint = response_format(TOOLS, None)  # json mode's: `tool` before `arguments`
    request = ChatRequest("m1", MESSAGES, TOOLS, 64, constraint, tool_choice="required")
    with real(scripted_server)[0] as provider:
        provider.complete(request)
    (sent,) = scripted_server.requests
    assert sent == request.body()
    order = ["model", "messages", "max_tokens", "tools", "tool_choice", "response_format"]
    assert list(sent) == list(request.body()) == order  # tiny's order, not sorted
    schema = sent["response_format"]["json_schema"]["schema"]
    assert list(schema["properties"]) == ["tool", "arguments"]  # decoded in this order


def test_a_tool_choice_goes_over_the_wire_only_with_tools() -> None:
    bare = ChatRequest("m1", MESSAGES, [], 64, tool_choice="required")
    assert bare.body() == {"model": "m1", "messages": MESSAGES, "max_tokens": 64}
    assert bare.parts()["tool_choice"] == "required"  # still part of what the request is


def test_loopback_429_then_success(scripted_server: ScriptedServer) -> None:
    scripted_server.add(http_error(429, headers={"Retry-After": "1"}), reply("after the wait"))
    provider, fake = real(scripted_server)
    assert ask(provider).content == "after the wait"
    assert len(scripted_server.requests) == 2
    assert fake.sleeps == [1.0]
    scripted_server.assert_done()


def test_loopback_persistent_500(scripted_server: ScriptedServer) -> None:
    scripted_server.add(*[http_error(500, "boom: worker crashed")] * 3)
    provider, fake = real(scripted_server, retries=2)
    with pytest.raises(ProviderError) as info:
        ask(provider)
    assert "server error HTTP 500 after 3 tries: boom: worker crashed" in str(info.value)
    assert len(scripted_server.requests) == 3 and len(fake.sleeps) == 2


def test_loopback_hang_up_is_retried(scripted_server: ScriptedServer) -> None:
    scripted_server.add(hang_up(), reply("second time lucky"))
    provider, _ = real(scripted_server)
    assert ask(provider).content == "second time lucky"
    assert len(scripted_server.requests) == 2


def test_loopback_rejected_key_is_not_echoed(scripted_server: ScriptedServer) -> None:
    body = json.dumps({"error": {"message": f"Incorrect API key provided: {KEY}"}})
    scripted_server.add(http_error(401, body))
    provider, _ = real(scripted_server)
    with pytest.raises(ProviderError) as info:
        ask(provider)
    assert str(info.value) == (
        f"{scripted_server.url} rejected the API key (HTTP 401); check the key where it was "
        "given (TINY_API_KEY, OPENAI_API_KEY or api_key)"
    )


def test_loopback_malformed_completion(scripted_server: ScriptedServer) -> None:
    scripted_server.add(raw_response({"id": "x", "object": "chat.completion"}))
    provider, _ = real(scripted_server)
    with pytest.raises(ProviderError, match="no 'choices'"):
        ask(provider)


def test_nothing_listening_says_cannot_reach() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    fake = FakeTime()
    provider = OpenAIProvider(url, KEY, retries=2, sleep=fake.sleep)
    with pytest.raises(ProviderError) as info:
        ask(provider)
    assert str(info.value) == f"cannot reach {url} — is the server running? set TINY_BASE_URL"
    assert len(fake.sleeps) == 2


def test_a_slow_server_is_abandoned_at_the_budget(scripted_server: ScriptedServer) -> None:
    delay, budget = 60.0, 0.5  # the answer comes far past the budget, even on a loaded machine
    scripted_server.add(reply("too late", delay=delay))
    provider = OpenAIProvider(scripted_server.url, KEY)
    start = time.monotonic()
    with pytest.raises(ProviderTimeout):
        ask(provider, timeout=budget)
    elapsed = time.monotonic() - start
    assert budget * 0.8 <= elapsed < delay / 6  # gave up at the budget, not at the answer
    assert len(scripted_server.requests) == 1  # and did not retry past it


def free_port() -> int:
    """Return a loopback port nobody listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class HeaderDrip:
    """A loopback server that sends its response headers one byte every `pause` seconds."""

    def __init__(self, pause: float = 0.2, limit_seconds: float = 15.0) -> None:
        self.pause, self.limit = pause, limit_seconds
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(self.limit)
        try:
            conn, _ = self.sock.accept()
        except OSError:
            return
        with conn:
            conn.recv(65536)
            headers = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n" + b"X-Pad: " * 500
            started = time.monotonic()
            for byte in headers:  # bounded: stops with the test or after `limit` seconds
                if self.stop.wait(self.pause) or time.monotonic() - started > self.limit:
                    return
                try:
                    conn.sendall(bytes([byte]))
                except OSError:
                    return

    def close(self) -> None:
        self.stop.set()
        self.sock.close()
        self.thread.join(5)


def test_dripping_headers_cannot_hold_a_request_past_its_deadline() -> None:
    # every byte arrives well within httpx's per-read timeout; only a deadline stops this
    drip = HeaderDrip(pause=0.2)
    try:
        provider = OpenAIProvider(drip.url, KEY, retries=0)
        start = time.monotonic()
        with pytest.raises(ProviderTimeout, match="still answering when the time budget ran out"):
            ask(provider, timeout=1.0)
        assert time.monotonic() - start < 3.0  # the server would go on for 15 s
    finally:
        drip.close()


def test_a_deeply_nested_body_is_malformed_not_a_crash() -> None:
    body = b'{"choices": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    provider = OpenAIProvider(
        "http://127.0.0.1:9/v1",
        KEY,
        transport=httpx.MockTransport(lambda request: httpx.Response(200, content=body)),
    )
    with pytest.raises(ProviderError, match="JSON nested too deeply"):
        ask(provider)


def test_an_unparseable_base_url_is_a_config_error_that_hides_the_url() -> None:
    with pytest.raises(ConfigError) as info:
        OpenAIProvider("http://user:sk-secret@[::1", KEY)
    assert str(info.value) == "base URL is not a usable URL (Invalid IPv6 URL); set TINY_BASE_URL"


# --- what the client costs to make: no CA bundle for http://, no httpx CLI -------------------


def _tls_context(provider: OpenAIProvider) -> ssl.SSLContext:
    """The SSL context httpx gave the client's connection pool (httpx/httpcore internals)."""
    return provider._client._transport._pool._ssl_context


@pytest.fixture
def ca_loads(monkeypatch: pytest.MonkeyPatch) -> list[tuple]:
    """Record every CA bundle an SSL context loads (certifi's, or SSL_CERT_FILE's)."""
    loads: list[tuple] = []
    original = ssl.SSLContext.load_verify_locations

    def spy(self: ssl.SSLContext, *args: object, **kwargs: object) -> None:
        loads.append((args, kwargs))
        original(self, *args, **kwargs)

    monkeypatch.setattr(ssl.SSLContext, "load_verify_locations", spy)
    return loads


def test_an_http_endpoint_loads_no_ca_bundle_and_could_not_skip_verification(ca_loads) -> None:
    with OpenAIProvider("http://127.0.0.1:9/v1", KEY) as provider:
        assert ca_loads == []
        context = _tls_context(provider)
    # never used for http://; were it used, it would demand a certificate and trust none
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] == 0


def test_an_https_endpoint_still_verifies_with_the_ca_bundle(ca_loads) -> None:
    with OpenAIProvider("https://api.example.invalid/v1", KEY) as provider:
        assert len(ca_loads) == 1
        context = _tls_context(provider)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert context.cert_store_stats()["x509_ca"] > 0
