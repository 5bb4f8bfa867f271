"""`tiny serve --http` after a review: Ctrl-C does not wait for a running call under the SDK's
default client, and what the SDK logs about a client's headers reaches stderr escaped."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys

import anyio
import pytest
from mcp import Client

from tiny_cli.testing import reply, tool_call

from .test_serve import DOCS_ANSWER, DOCS_TASK, _free_port, _wait_for

SLOW_ANSWER = 20.0  # the model's first answer: far longer than Ctrl-C may take to end serve
EXIT_WAIT = 10.0  # generous: Ctrl-C ends the process in about 2 s; the call would take 20+
MCP_HEADERS = (  # a request the SDK reads far enough to check its Host
    "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n"
    "Content-Length: 2\r\n"
)
EVIL_HOST = "ev\x1b]0;PWNED\x1b\\il\x1b[2J[bold red]EVIL[/]\x9b"


def _serve_http(cli_env: dict[str, str], model_url: str) -> tuple[subprocess.Popen, int]:
    """Start the real `tiny serve --http PORT` on the scripted model; wait until it listens."""
    env = {**os.environ, **cli_env, "TINY_BASE_URL": model_url, "TINY_NO_LOG": ""}
    port = _free_port()
    command = [sys.executable, "-m", "tiny_cli", "serve", "--http", str(port)]
    process = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    _wait_for(port, process)
    return process, port


@pytest.mark.slow  # a server started, a call begun, then stopped
def test_ctrl_c_under_the_default_client_ends_serve_and_the_run_is_interrupted(
    cli_env, scripted_server, tiny
) -> None:
    scripted_server.add(
        tool_call("docs_search", {"query": "onboarding"}, delay=SLOW_ANSWER),
        reply(json.dumps(DOCS_ANSWER)),
    )
    process, port = _serve_http(cli_env, scripted_server.url)

    ended_while_called: list[int | None] = []

    async def call(client: Client) -> None:
        with contextlib.suppress(Exception):  # the host sees its server go
            await client.call_tool("invoke", {"card": "docs-finder", "task": DOCS_TASK})

    async def host() -> None:
        # the SDK's default mode: it negotiates the newest protocol (2026-07-28)
        async with (
            Client(f"http://127.0.0.1:{port}/mcp") as client,
            anyio.create_task_group() as tg,
        ):
            tg.start_soon(call, client)  # held open: the host waits for its answer
            while not scripted_server.requests:  # the run is waiting on the model
                await anyio.sleep(0.05)
            process.send_signal(signal.SIGINT)
            with anyio.move_on_after(EXIT_WAIT):  # not until the call would have finished
                await anyio.to_thread.run_sync(process.wait, abandon_on_cancel=True)
            ended_while_called.append(process.poll())
            tg.cancel_scope.cancel()

    try:
        with contextlib.suppress(Exception):  # closing the session: its server is gone
            anyio.run(host)
    finally:
        process.kill()
        err = process.communicate()[1]
    assert ended_while_called == [130] and "tiny: interrupted" in err, err
    runs = json.loads(tiny("runs", "--json").stdout)
    assert [(r["label"], r["status"]) for r in runs] == [("invoke", "interrupted")]


@pytest.mark.slow  # a server started
def test_a_hostile_host_header_reaches_stderr_escaped_in_one_line(cli_env, scripted_server) -> None:
    process, port = _serve_http(cli_env, scripted_server.url)
    try:
        with socket.create_connection(("127.0.0.1", port)) as client:
            head = f"POST /mcp HTTP/1.1\r\nHost: {EVIL_HOST}\r\n{MCP_HEADERS}\r\n{{}}"
            client.sendall(head.encode("latin-1"))  # a byte each: ESC and C1 as they are
            assert client.recv(100).startswith(b"HTTP/1.1 421")  # refused: not loopback
    finally:
        process.send_signal(signal.SIGINT)
        err = process.communicate(timeout=30)[1]
    assert "\x1b" not in err and "\x9b" not in err, repr(err)
    warning = [line for line in err.splitlines() if "Invalid Host header" in line]
    assert warning == [
        "tiny serve: warning: Invalid Host header: "
        "ev\\u001b]0;PWNED\\u001b\\il\\u001b[2J[bold red]EVIL[/]\\u009b"
    ], err
