"""What a model server or a model sends is never taken at its word: a body its encoding cannot
decode, an error that asks for a wait, a reason or notes the model writes, an object cut off
by a filter, a summary of the wrong type. The CLI runs for real against a loopback server;
each test checks the Digest and, where it matters, what went over the wire."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tiny_cli.errors import ProviderError
from tiny_cli.provider.client import ChatRequest, OpenAIProvider
from tiny_cli.testing import ScriptedServer, Turn, http_error, raw_response, reply

ANSWER = {"status": "ok", "summary": "Two weeks, with a buddy.", "source": "onboarding.md"}
TASK = "how does onboarding work"
INVOKE = ("invoke", "docs-finder", TASK)
SMALL_BUDGET = "50"  # --max-output-tokens: notes and reasons are cut to 200 characters
LIMIT = 50 * 4
# a 200 whose body its own Content-Encoding cannot decode
BROKEN_GZIP = (
    b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
    b"Content-Length: 4\r\nConnection: close\r\n\r\nnope"
)
CUT_OBJECT = json.dumps(ANSWER)[:-1]  # an answer without its closing brace


@pytest.fixture
def run(tiny, plain_cards) -> Callable[..., tuple[int, dict]]:
    """Run `tiny ARGS --json` against a server URL; return (exit code, Digest)."""

    def go(url: str, *args: str) -> tuple[int, dict]:
        env = {"TINY_BASE_URL": url, "TINY_CARDS": str(plain_cards)}
        result = tiny(*args, "--json", env=env)
        assert "Traceback" not in result.output
        return result.exit_code, json.loads(result.stdout)

    return go


@pytest.fixture
def broken_gzip_server() -> Iterator[tuple[str, list[bytes]]]:
    """A loopback server answering every request with BROKEN_GZIP; yields its URL and the
    request heads it got."""
    listener = socket.create_server(("127.0.0.1", 0))
    heads: list[bytes] = []

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:  # closed at the end of the test
                return
            with conn:
                heads.append(_read_request(conn))
                conn.sendall(BROKEN_GZIP)

    threading.Thread(target=serve, daemon=True).start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", heads
    listener.close()


def _read_request(conn: socket.socket) -> bytes:
    """Read one request's head and body; return the head."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += conn.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length:")
        ),
        0,
    )
    while len(body) < length:
        body += conn.recv(65536)
    return head


def _notes(digest: dict) -> str:
    return "\n".join(digest["notes_for_caller"])


# --- 1: a body its Content-Encoding cannot decode ------------------------------------------


def test_an_undecodable_body_fails_the_run_with_a_malformed_reason(
    tiny, run, broken_gzip_server
) -> None:
    url, heads = broken_gzip_server
    code, digest = run(url, *INVOKE)
    assert (code, digest["status"]) == (5, "failed")
    assert digest["reason"].startswith("malformed response from")
    assert "cannot be decoded" in digest["reason"] and "'gzip'" in digest["reason"]
    assert len(heads) == 1  # the server answered: asking again would get the same body
    [row] = json.loads(tiny("runs", "--json", env={"TINY_BASE_URL": url}).stdout)
    assert row["status"] == "failed"


def test_the_library_raises_a_provider_error_for_an_undecodable_body(broken_gzip_server) -> None:
    url, _ = broken_gzip_server
    request = ChatRequest("m", [{"role": "user", "content": "hi"}], [], 10)
    with OpenAIProvider(url) as provider, pytest.raises(ProviderError, match="cannot be decoded"):
        provider.complete(request, timeout=10)


def test_a_probe_takes_an_undecodable_body_as_an_answer(broken_gzip_server) -> None:
    url, heads = broken_gzip_server
    with OpenAIProvider(url) as provider:
        provider.probe()  # something listens: no error, and no raw httpx one
    assert len(heads) == 1


# --- 2: an error whose wait the budget cannot hold ------------------------------------------


@pytest.mark.parametrize(
    ("turn", "scale", "wait"),
    [
        (http_error(503, headers={"Retry-After": "120"}), "0.5", "its Retry-After: 120s"),
        (http_error(500), "0.011", "next retry in 0.5s"),  # the backoff outlasts 0.495 s
    ],
)
def test_a_server_error_whose_wait_outlasts_the_budget_is_said_as_one(
    run, turn: Turn, scale: str, wait: str
) -> None:
    with ScriptedServer([turn]) as server:
        code, digest = run(server.url, *INVOKE, "--wall-scale", scale)
        assert len(server.requests) == 1  # no retry: its wait would outlast the budget
    assert (code, digest["status"], digest["reason"]) == (5, "failed", "server_unavailable")
    notes = _notes(digest)
    assert f"answered HTTP {turn.status}" in notes and wait in notes
    assert "was slow" not in notes and "max_wall_seconds" not in json.dumps(digest)


# --- 3: the model's reason and notes --------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "given", "shown"),
    [
        ("partial", "max_wall_seconds", "max_wall_seconds"),
        ("refused", "ghost_calls", "ghost_calls"),
        ("partial", "Answer Cut", "Answer Cut"),
        ("partial", "refused_by_agent", "refused_by_agent"),
        ("partial", {"a": [1, 2]}, '{"a": [1, 2]}'),
    ],
)
def test_a_model_cannot_claim_a_runner_reason(
    run, scripted_server, status: str, given: Any, shown: str
) -> None:
    scripted_server.add(reply(json.dumps({**ANSWER, "status": status, "reason": given})))
    _, digest = run(scripted_server.url, *INVOKE)
    assert (digest["status"], digest["reason"]) == (status, f"{status}_by_agent")
    assert f"the agent's reason: {shown}" in digest["notes_for_caller"]


def test_a_plain_reason_of_the_models_own_stands(run, scripted_server) -> None:
    scripted_server.add(reply(json.dumps({**ANSWER, "status": "refused", "reason": "no_page"})))
    _, digest = run(scripted_server.url, *INVOKE)
    assert (digest["status"], digest["reason"]) == ("refused", "no_page")


def test_a_long_reason_and_notes_are_cut_like_the_summary(run, scripted_server) -> None:
    answer = {
        **ANSWER,
        "status": "partial",
        "reason": "r" * 150_000,
        "notes": ["n" * 5_000, {"seen": ["onboarding.md"]}, 7, *(["short"] * 100)],
    }
    scripted_server.add(reply(json.dumps(answer)))
    _, digest = run(scripted_server.url, *INVOKE, "--max-output-tokens", SMALL_BUDGET)
    assert digest["reason"] == "partial_by_agent"
    notes = digest["notes_for_caller"]
    said = next(n for n in notes if n.startswith("the agent's reason: "))
    assert len(said) < LIMIT + 30 and "cut by tiny" in said
    assert all(len(n) <= LIMIT for n in notes if not n.startswith("the agent's reason: "))
    assert notes[1].startswith("nnn") and "cut by tiny" in notes[1]
    assert '{"seen": ["onboarding.md"]}' in notes and "7" in notes
    assert "93 more note(s) from the agent left out" in notes  # 10 of the 103 kept
    assert len(json.dumps(digest)) < 5_000


# --- 4: an object tiny closed, from a reply that did not end on its own ----------------------


def _cut_reply(finish_reason: str | None) -> Turn:
    """A completion whose text is CUT_OBJECT, ended with `finish_reason` (None: sent as null)."""
    message = {"role": "assistant", "content": CUT_OBJECT}
    choice = {"index": 0, "message": message, "finish_reason": finish_reason}
    usage = {"prompt_tokens": 10, "completion_tokens": 5}
    return raw_response(
        {"id": "x", "object": "chat.completion", "choices": [choice], "usage": usage}
    )


@pytest.mark.parametrize("finish_reason", ["content_filter", None, "max_tokens", "length"])
def test_a_closed_object_is_cut_unless_the_reply_ended_on_its_own(
    run, scripted_server, finish_reason: str | None
) -> None:
    scripted_server.add(_cut_reply(finish_reason))
    code, digest = run(scripted_server.url, *INVOKE)
    assert (code, digest["status"], digest["reason"]) == (3, "partial", "answer_cut")
    assert digest["fields"] == {"source": "onboarding.md"}


def test_a_closed_object_from_a_stopped_reply_stays_ok(run, scripted_server) -> None:
    scripted_server.add(_cut_reply("stop"))
    code, digest = run(scripted_server.url, *INVOKE)
    assert (code, digest["status"], digest["reason"]) == (0, "ok", None)


# --- 5: a summary that is not a string -----------------------------------------------------


def _repairs(request: dict) -> list[str]:
    said = [m["content"] for m in request["messages"] if m["role"] == "user"]
    return [c for c in said if c.startswith("Your answer cannot be used")]


@pytest.mark.parametrize("summary", [12345, ["onboarding", "two weeks"], {"a": 1}])
def test_a_wrong_typed_summary_is_repaired_once_then_schema(
    run, scripted_server, summary: Any
) -> None:
    wrong = reply(json.dumps({**ANSWER, "summary": summary}))
    scripted_server.add(wrong, wrong)
    code, digest = run(scripted_server.url, *INVOKE)
    (repair,) = _repairs(scripted_server.requests[1])
    assert "field 'summary' must be a string" in repair
    assert (code, digest["status"], digest["reason"]) == (5, "failed", "schema")
    assert len(scripted_server.requests) == 2


def test_a_repaired_summary_is_taken(run, scripted_server) -> None:
    scripted_server.add(reply(json.dumps({**ANSWER, "summary": 12345})), reply(json.dumps(ANSWER)))
    _, digest = run(scripted_server.url, *INVOKE)
    assert (digest["status"], digest["summary"]) == ("ok", ANSWER["summary"])


def test_a_partials_wrong_typed_summary_is_left_out_not_shown_as_a_repr(
    run, scripted_server
) -> None:
    answer = {"status": "partial", "summary": {"a": 1}, "notes": [{"b": 2}, "plain"]}
    scripted_server.add(reply(json.dumps(answer)))
    _, digest = run(scripted_server.url, *INVOKE)
    assert (digest["status"], digest["summary"]) == ("partial", "")
    assert "{'a': 1}" not in json.dumps(digest) and "{'b': 2}" not in json.dumps(digest)
    assert '{"b": 2}' in digest["notes_for_caller"] and "plain" in digest["notes_for_caller"]
    assert any("'summary' must be a string" in n for n in digest["notes_for_caller"])
    assert len(scripted_server.requests) == 1  # a partial is never repaired


def test_a_server_that_reports_no_usage_is_not_said_to_have_spent_nothing(
    tiny, scripted_server, plain_cards
) -> None:
    answer = {"status": "ok", "summary": "Two weeks, with a buddy.", "source": "onboarding.md"}
    completion = {
        "id": "c1", "object": "chat.completion", "model": "m",
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": json.dumps(answer)}}],
    }  # fmt: skip
    scripted_server.add(raw_response(completion))  # no `usage` block at all
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards)}
    result = tiny("invoke", "docs-finder", "how does onboarding work", env=env)
    assert result.exit_code == 0, result.output
    assert "cost: no model tokens reported, no tool calls" in result.output
