"""`tiny serve` over stdio, driven as a host drives it: raw lines on its stdin, stdin closed.

Each test starts the real `tiny serve` in a subprocess against the scripted model server and
checks every line it wrote on stdout (and, for stray prints, stderr).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiny_cli.testing import reply, tool_call

CALL_SECONDS = 60  # a generous cap: a hung server fails the test instead of the suite
HELLO = {"protocolVersion": "2025-06-18", "capabilities": {},
         "clientInfo": {"name": "raw", "version": "0"}}  # fmt: skip
START = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": HELLO},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
]
DOCS_TASK = "how did the onboarding process work again"
DOCS_ANSWER = {"status": "ok", "summary": "Day one: laptop.", "source": "onboarding.md"}
NOISY_TOOLS = '''
from tiny_cli.tools import tool

print("IMPORT NOISE")


@tool
def shout(text: str) -> str:
    """Say it loud."""
    print("TOOL NOISE")
    return text.upper()
'''
SHOUTER = """
id: shouter
summary: Shouts text back loudly in uppercase letters.
tools: [shout]
returns_required: [loud]
"""


@pytest.fixture
def env(cli_env: dict[str, str], scripted_server) -> dict[str, str]:
    """`tiny serve`'s environment, stdout block-buffered as a host starts it (no
    PYTHONUNBUFFERED), the model the scripted server."""
    environ = {**os.environ, **cli_env, "TINY_BASE_URL": scripted_server.url}
    return {**environ, "TINY_NO_LOG": "", "PYTHONUNBUFFERED": ""}


def _serve(env: dict[str, str], data: bytes, *args: str) -> tuple[list[bytes], str]:
    """Write `data` to `tiny serve ARGS`'s stdin and close it; its stdout lines, its stderr."""
    done = subprocess.run(
        [sys.executable, "-m", "tiny_cli", "serve", *args],
        input=data, env=env, capture_output=True, timeout=CALL_SECONDS,
    )  # fmt: skip
    stderr = done.stderr.decode(errors="replace")
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    return done.stdout.splitlines(), stderr


def _invoke(card: str, task: str) -> dict:
    arguments = {"card": card, "task": task}
    return {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "invoke", "arguments": arguments}}  # fmt: skip


def _lines(*messages: dict) -> bytes:
    return "".join(json.dumps(m) + "\n" for m in messages).encode()


@pytest.mark.slow
def test_a_last_request_without_a_newline_is_answered_when_stdin_closes(
    env, scripted_server, plain_cards: Path
) -> None:
    # the host's last line is a whole message even unended: it is served, not left to the drain
    scripted_server.add(reply(json.dumps(DOCS_ANSWER)))
    call = _invoke("docs-finder", DOCS_TASK)
    data = _lines(*START) + json.dumps(call).encode()  # no newline, then stdin closes
    out, _ = _serve(env, data, "--cards", str(plain_cards))
    answers = {a["id"]: a for a in map(json.loads, out)}
    assert sorted(answers) == [1, 2] and len(out) == 2, out
    assert "error" not in answers[2], answers[2]  # not "Connection closed"
    assert answers[2]["result"]["structuredContent"]["summary"] == DOCS_ANSWER["summary"]
    scripted_server.assert_done()


@pytest.mark.slow
def test_stdout_carries_only_the_protocol_from_the_tools_import_to_the_drain(
    env, scripted_server, tmp_path: Path
) -> None:
    # the module prints as it is imported, its tool once the host cancelled and went: while
    # the run ends in the drain. Neither may reach the host's stdout; stderr has both.
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "shouter.yaml").write_text(SHOUTER, encoding="utf-8")
    (tmp_path / "noisy.py").write_text(NOISY_TOOLS, encoding="utf-8")
    scripted_server.add(
        tool_call("shout", {"text": "hi"}, delay=2),
        reply(json.dumps({"status": "ok", "summary": "Shouted.", "loud": "HI"})),
    )
    call = _invoke("shouter", "shout hi")
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    args = ("--cards", str(tmp_path / "cards"), "--tools", str(tmp_path / "noisy.py"))
    out, stderr = _serve(env, _lines(*START, call, cancel), *args)
    assert [json.loads(line)["id"] for line in out] == [1], out  # the cancelled call: no answer
    assert "IMPORT NOISE" in stderr and "TOOL NOISE" in stderr  # the tool ran, in the drain
    scripted_server.assert_done()
