"""The scripted OpenAI-compatible server: what it sends, what it records, how loudly it fails."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tiny_cli.testing import (
    ScriptedServer,
    Turn,
    http_error,
    raw_response,
    reply,
    respond,
    tool_call,
    tool_calls,
)

pytest_plugins = ["pytester"]


# one client for the module: a fresh httpx client per request costs more than the request
HTTP = httpx.Client(timeout=10)


def chat(server: ScriptedServer, text: str = "hi", model: str = "m1") -> httpx.Response:
    """POST one chat request to the server the way any OpenAI client would."""
    body = {"model": model, "messages": [{"role": "user", "content": text}]}
    return HTTP.post(f"{server.url}/chat/completions", json=body)


# --- what it sends ----------------------------------------------------------------------


def test_reply_is_a_proper_chat_completion(scripted_server: ScriptedServer) -> None:
    scripted_server.add(reply("hello there", tokens_in=40, tokens_out=7))
    response = chat(scripted_server, model="qwen2.5:7b")
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/json"
    body = response.json()
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    assert isinstance(body["created"], int)
    assert body["model"] == "qwen2.5:7b"  # echoed
    (choice,) = body["choices"]
    assert choice["message"] == {"role": "assistant", "content": "hello there"}
    assert choice["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 40, "completion_tokens": 7, "total_tokens": 47}


def test_tool_calls_get_ids_and_json_text_arguments(scripted_server: ScriptedServer) -> None:
    scripted_server.add(
        tool_call("http_get", {"url": "https://a.test"}),
        tool_call("http_get", '{"url": broken', call_id="mine"),
        tool_calls(("f", {"x": 1}), ("g", {}), content="two at once"),
    )
    first, second, third = (chat(scripted_server).json()["choices"][0] for _ in range(3))
    assert first["finish_reason"] == "tool_calls"
    assert first["message"]["content"] is None
    (call,) = first["message"]["tool_calls"]
    assert call["type"] == "function" and call["id"]
    assert call["function"] == {"name": "http_get", "arguments": '{"url": "https://a.test"}'}
    assert second["message"]["tool_calls"][0]["id"] == "mine"
    assert second["message"]["tool_calls"][0]["function"]["arguments"] == '{"url": broken'
    assert third["message"]["content"] == "two at once"
    names = [c["function"]["name"] for c in third["message"]["tool_calls"]]
    ids = [call["id"], *(c["id"] for c in third["message"]["tool_calls"])]
    assert names == ["f", "g"]
    assert len(set(ids)) == 3  # ids are unique across the run


def test_http_error_and_raw_response(scripted_server: ScriptedServer) -> None:
    scripted_server.add(
        http_error(429, headers={"Retry-After": "3"}),
        http_error(502, "bad gateway"),
        raw_response({"choices": []}, status=200),
    )
    limited, gateway, raw = (chat(scripted_server) for _ in range(3))
    assert limited.status_code == 429 and limited.headers["retry-after"] == "3"
    assert limited.json()["error"]["message"] == "scripted HTTP 429"
    assert (gateway.status_code, gateway.text) == (502, "bad gateway")
    assert gateway.headers["content-type"] == "text/plain"
    assert raw.json() == {"choices": []}


def test_respond_computes_the_turn_from_the_request(scripted_server: ScriptedServer) -> None:
    def echo(request: dict) -> Turn:
        return reply(f"you said {request['messages'][-1]['content']}", tokens_in=len(request))

    scripted_server.add(respond(echo))
    body = chat(scripted_server, "ping").json()
    assert body["choices"][0]["message"]["content"] == "you said ping"
    assert body["usage"]["prompt_tokens"] == 2


def test_models_are_listed(scripted_server: ScriptedServer) -> None:
    response = HTTP.get(f"{scripted_server.url}/models")
    assert response.json()["object"] == "list"
    assert response.json()["data"][0]["id"]


# --- what it records, and how loudly it fails -----------------------------------------------


def test_requests_and_headers_are_recorded_in_order(scripted_server: ScriptedServer) -> None:
    scripted_server.add(reply("a"), reply("b"))
    HTTP.post(
        f"{scripted_server.url}/chat/completions",
        json={"model": "m", "messages": [], "max_tokens": 9},
        headers={"Authorization": "Bearer k"},
    )
    chat(scripted_server, "second")
    assert scripted_server.requests[0] == {"model": "m", "messages": [], "max_tokens": 9}
    assert scripted_server.requests[1]["messages"][0]["content"] == "second"
    assert scripted_server.headers[0]["authorization"] == "Bearer k"
    scripted_server.assert_done()


def test_an_unscripted_request_gets_500_and_is_recorded() -> None:
    with ScriptedServer([reply("only one")]) as server:
        chat(server, "first")
        response = chat(server, "second request text")
    assert response.status_code == 500
    assert "no turn left" in response.json()["error"]["message"]
    (error,) = server.errors
    assert "request #2" in error and "second request text" in error and "'m1'" in error
    with pytest.raises(AssertionError, match="no turn left"):
        server.assert_done()


def test_unplayed_turns_fail_assert_done() -> None:
    with ScriptedServer([reply("a"), reply("b")]) as server:
        chat(server)
        with pytest.raises(
            AssertionError, match="1 turn\\(s\\) of the default script never played"
        ):
            server.assert_done()
        chat(server)
        server.assert_done()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [("POST", "/v1/completions", 404), ("GET", "/v1/chat/completions", 404), ("POST", None, 400)],
)
def test_wrong_paths_and_bodies_are_loud(method: str, path: str | None, status: int) -> None:
    with ScriptedServer([reply("unused")]) as server:
        url = server.url.removesuffix("/v1") + (path or "/v1/chat/completions")
        response = HTTP.request(method, url, content=b"{not json" if path is None else b"{}")
    assert response.status_code == status
    assert len(server.errors) == 1
    assert server.errors[0] in response.json()["error"]["message"]


def test_url_before_start_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="not started"):
        _ = ScriptedServer().url


# --- routing concurrent runs -------------------------------------------------------------


def test_on_routes_concurrent_requests_to_their_own_scripts() -> None:
    delay = 1.5  # six answers one after another take 9 s; side by side about 1.5 s
    server = ScriptedServer([reply("default")])
    for name in ("alpha", "beta"):
        turns = [reply(f"{name} {i}", delay=delay) for i in range(3)]
        server.on(lambda r, name=name: name in r["messages"][0]["content"], *turns)
    texts = ["alpha", "beta"] * 3
    with server, ThreadPoolExecutor(len(texts)) as pool:
        start = time.monotonic()
        answers = list(pool.map(lambda t: _content(chat(server, t)), texts))
        elapsed = time.monotonic() - start
    assert sorted(a for a in answers if a.startswith("alpha")) == ["alpha 0", "alpha 1", "alpha 2"]
    assert sorted(a for a in answers if a.startswith("beta")) == ["beta 0", "beta 1", "beta 2"]
    assert elapsed < len(texts) * delay / 2  # served side by side, not one after another
    with pytest.raises(AssertionError, match="default script never played"):
        server.assert_done()  # the default script was not touched


def test_a_used_up_rule_does_not_fall_through_to_the_default() -> None:
    server = ScriptedServer([reply("default")])
    server.on(lambda r: True, reply("ruled"))
    with server:
        assert _content(chat(server)) == "ruled"
        assert chat(server).status_code == 500
    assert "rule #0 matched but its turns are used up" in server.errors[0]


def test_a_matcher_that_raises_is_reported() -> None:
    server = ScriptedServer()
    server.on(lambda r: r["missing"], reply("never"))
    with server:
        assert chat(server).status_code == 500
    assert "rule #0 raised KeyError" in server.errors[0]


# --- shutting down, the fixture, and importing without pytest -----------------------------


def test_stop_is_prompt_while_a_handler_sleeps() -> None:
    server = ScriptedServer([reply("never sent", delay=30)]).start()
    outcome: list[object] = []
    client = threading.Thread(target=lambda: outcome.append(_try(lambda: chat(server))))
    client.start()
    while not server.requests:
        time.sleep(0.01)
    start = time.monotonic()
    server.stop()
    client.join(timeout=5)
    assert time.monotonic() - start < 2  # nowhere near the 30 s delay
    assert not client.is_alive()
    assert isinstance(outcome[0], httpx.TransportError)  # the client saw a hang-up


def test_the_fixture_fails_a_test_on_an_unscripted_request(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(
        """
        import httpx
        from tiny_cli.testing import reply

        pytest_plugins = ["tiny_cli.testing"]

        def post(server):
            return httpx.post(server.url + "/chat/completions", json={"messages": []})

        def test_unscripted(scripted_server):
            post(scripted_server)

        def test_unplayed_turns_are_left_to_assert_done(scripted_server):
            scripted_server.add(reply("a"), reply("b"))
            post(scripted_server)
        """
    )
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, errors=1)
    result.stdout.fnmatch_lines(["*scripted server got requests it had no turn for*"])


def test_importable_without_pytest() -> None:
    code = (
        "import sys; sys.modules['pytest'] = None\n"  # makes `import pytest` fail
        "import tiny_cli.testing as t\n"
        "assert not hasattr(t, 'scripted_server')\n"
        "with t.ScriptedServer([t.reply('x')]) as s: print(s.url)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("http://127.0.0.1:")


def _content(response: httpx.Response) -> str:
    return json.loads(response.content)["choices"][0]["message"]["content"]


def _try(fn: object) -> object:
    try:
        return fn()  # type: ignore[operator]
    except Exception as exc:
        return exc


def test_the_module_docstring_example_passes_as_a_users_test(pytester: pytest.Pytester) -> None:
    import tiny_cli.testing as testing

    doc = (testing.__doc__ or "").split("::\n\n", 1)[1].split("\n\nTurns:")[0]
    code = "\n".join(line[4:] for line in doc.splitlines())
    shutil.copytree(Path(__file__).resolve().parent.parent / "cards", pytester.path / "cards")
    pytester.makeconftest('pytest_plugins = ["tiny_cli.testing"]')
    pytester.makepyfile(test_my_card=code)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
