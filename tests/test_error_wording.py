"""Small truths: what a rejected key, an untrusted certificate and an unreadable MCP line say."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiny_cli.errors import ProviderError
from tiny_cli.provider.client import ChatRequest, OpenAIProvider
from tiny_cli.testing import ScriptedServer, http_error

from .conftest import one_error_line
from .test_provider_review_fixes import self_signed  # noqa: F401 - a fixture, used by name

KEY = "sk-small-fixes-0123456789"
ASK = ChatRequest("m1", [{"role": "user", "content": "hi"}], [], 64)


# --- a rejected key: the message names no source the key did not come from --------------------


def test_a_key_a_library_caller_passed_is_not_said_to_be_tiny_api_key() -> None:
    with ScriptedServer([http_error(401, '{"error": "bad key"}')]) as server:
        provider = OpenAIProvider(server.url, api_key=KEY, retries=0)
        with pytest.raises(ProviderError) as info:
            provider.complete(ASK)
    message = str(info.value)
    assert message.startswith(f"{server.url} rejected the API key (HTTP 401); check the key")
    assert "set TINY_API_KEY" not in message and "api_key" in message and KEY not in message


# --- the embeddings client says a certificate failed, as the chat client does ----------------


def test_an_untrusted_certificate_of_the_embeddings_server_is_said_as_one(
    tiny,
    self_signed,  # noqa: F811 - the fixture imported above
) -> None:
    url, cert = self_signed
    env = {"TINY_EMBEDDER": "openai:e", "TINY_BASE_URL": url}
    line = one_error_line(tiny("route", "how does onboarding work", env=env))
    assert f"TLS with {url}/embeddings failed: certificate verify failed (self" in line, line
    assert "set SSL_CERT_FILE" in line and "is the server running" not in line
    trusted = tiny("route", "how does onboarding work", env={**env, "SSL_CERT_FILE": str(cert)})
    assert "malformed embeddings response" in one_error_line(trusted)  # past TLS: advice holds


# --- tiny serve answers a line the SDK cannot read, and serves on ------------------------------


def _serve(env: dict[str, str], data: bytes) -> list[dict]:
    """Write `data` after initialize to `tiny serve`'s stdin, close it; every line it answers."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "raw", "version": "0"}}  # fmt: skip
    start = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    done = subprocess.run(
        [sys.executable, "-m", "tiny_cli", "serve"],
        input="".join(json.dumps(line) + "\n" for line in start).encode() + data,
        env=env, capture_output=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


@pytest.mark.slow
def test_serve_answers_a_lone_surrogate_with_a_parse_error_and_serves_on(
    cli_env: dict[str, str], home: Path
) -> None:
    env = {**os.environ, **cli_env}
    surrogate = b'{"jsonrpc": "2.0", "id": 2, "method": "ping", "params": {"x": "\\ud800"}}\n'
    raw = b'{"jsonrpc": "2.0", "id": 3, "method": "ping", "params": {"x": "\xed\xa0\x80"}}\n'
    garbage = b"not json\n"
    after = b'{"jsonrpc": "2.0", "id": 4, "method": "ping"}\n'
    answers = _serve(env, surrogate + raw + garbage + after)
    by_id = {a["id"]: a for a in answers}
    assert sorted(by_id, key=str) == [1, 2, 3, 4, None] and len(answers) == 5, answers
    assert by_id[2]["error"]["code"] == -32700  # JSON-RPC's parse error, to the id it read
    assert "lone surrogate" in by_id[2]["error"]["message"]
    assert by_id[3]["result"] == {}  # raw bytes that are no UTF-8: read as U+FFFD
    assert by_id[None]["error"]["code"] == -32700  # no id to read
    assert by_id[4]["result"] == {}  # and the next line is served
