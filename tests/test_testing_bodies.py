"""The scripted server sends any body a test gives it, exactly, over real HTTP on loopback."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tiny_cli.testing import ScriptedServer, http_error, raw_response

# one client for the module: a fresh httpx client per request costs more than the request
HTTP = httpx.Client(timeout=10)
DEEP = "[" * 100_000 + "]" * 100_000  # valid JSON, nested far deeper than json.loads goes
QUICK = settings(
    max_examples=60,
    deadline=2000,  # ms per example: a request and its answer on loopback
    suppress_health_check=[HealthCheck.too_slow],
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def shared_server() -> Iterator[ScriptedServer]:
    """One server for every example of a property (a start and a stop cost more than a body)."""
    with ScriptedServer() as server:
        yield server


def _post(server: ScriptedServer) -> httpx.Response:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    return HTTP.post(f"{server.url}/chat/completions", json=body)


def test_a_body_nested_deeper_than_the_parser_goes_is_sent_exactly(scripted_server) -> None:
    scripted_server.add(raw_response(DEEP), raw_response("{" * 50_000, status=502))
    deep, broken = _post(scripted_server), _post(scripted_server)
    assert deep.status_code == 200 and deep.text == DEEP  # not a dropped connection
    assert deep.headers["content-type"] == "application/json"
    assert broken.status_code == 502 and broken.text == "{" * 50_000
    scripted_server.assert_done()


@QUICK
@given(
    st.one_of(
        st.text(max_size=300),
        json_values.map(json.dumps),
        st.integers(1, 5000).map(lambda n: "[" * n + "]" * n),
        st.integers(1, 5000).map(lambda n: '{"a":' * n + "1" + "}" * n),
    )
)
@example("")
def test_any_text_body_comes_back_exactly(shared_server: ScriptedServer, body: str) -> None:
    shared_server.add(raw_response(body, status=200))
    response = _post(shared_server)
    assert response.status_code == 200
    assert response.content == body.encode()
    shared_server.assert_done()


def test_a_content_type_of_the_turn_replaces_the_guess(scripted_server) -> None:
    scripted_server.add(
        raw_response('{"choices": []}', headers={"content-type": "text/event-stream"}),
        http_error(503, "down", headers={"Content-Type": "text/html", "Retry-After": "1"}),
    )
    stream, down = _post(scripted_server), _post(scripted_server)
    assert stream.headers.get_list("content-type") == ["text/event-stream"]  # one, not two
    assert stream.text == '{"choices": []}'
    assert down.headers.get_list("content-type") == ["text/html"] and down.text == "down"
    assert down.headers["retry-after"] == "1"


def test_a_body_that_cannot_be_sent_is_a_loud_500() -> None:
    nested: list = []
    for _ in range(100_000):  # deeper than json.dumps goes
        nested = [nested]
    with ScriptedServer([raw_response({"x": {1, 2}}), raw_response({"deep": nested})]) as server:
        unencodable, deep = _post(server), _post(server)
    assert unencodable.status_code == 500 and deep.status_code == 500  # answered, not dropped
    assert "its body cannot be sent: TypeError" in unencodable.json()["error"]["message"]
    assert "its body cannot be sent: RecursionError" in deep.json()["error"]["message"]
    assert len(server.errors) == 2  # and the scripted_server fixture would fail the test
