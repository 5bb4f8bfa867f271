"""`tiny serve` after the second review: a port restarted at once, a failed approved write, no
stdout, a whole number written as a float, and what a host's failed answer prints on stderr."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.types import ErrorData

from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.secrets import Scrubber
from tiny_cli.serve import Served, build_server
from tiny_cli.settings import load_settings
from tiny_cli.testing import reply, tool_call
from tiny_cli.workspace import open_workspace

from .conftest import HANDBOOK, SEED_CARDS
from .test_serve import (
    CLAIM_OK,
    CRM_TASK,
    DOCS_TASK,
    MUSTERMANN,
    _call,
    _crm_rows,
    _digest,
    _free_port,
    _text,
    _wait_for,
    _with_client,
)

KEY = "tk-" + "7" * 30


def _served(home, url: str, **rule: Any) -> Any:
    """An in-process server on the seed cards, its replies and stderr scrubbed of KEY."""
    where = {"TINY_HOME": str(home), "TINY_CARDS": str(SEED_CARDS), "TINY_DOCS": str(HANDBOOK)}
    settings = load_settings(env=where)
    scrub = Scrubber([KEY]).for_caller()
    return build_server(
        Served(open_workspace(settings), OpenAIProvider(url), caller_scrub=scrub, **rule)
    )


# --- 1. --http restarts on the port it just left ---------------------------------------------


@pytest.mark.slow  # two servers started on 2 cores: in `make test-slow`
def test_http_restarts_at_once_on_the_port_a_host_was_connected_to(cli_env) -> None:
    env, port = {**os.environ, **cli_env, "TINY_NO_LOG": "1"}, _free_port()
    command = [sys.executable, "-m", "tiny_cli", "serve", "--http", str(port)]
    first = subprocess.Popen(command, env=env, stderr=subprocess.PIPE)
    _wait_for(port, first)

    async def stop_while_connected(client: Client) -> None:
        await client.list_tools()
        first.terminate()  # the server closes the connection: its side waits (TIME_WAIT)
        first.communicate(timeout=30)

    with contextlib.suppress(Exception):  # the host may see its server go
        anyio.run(_with_client, Client(f"http://127.0.0.1:{port}/mcp"), stop_while_connected)
    second = subprocess.Popen(command, env=env, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(port, second)
    finally:
        second.terminate()
        err = second.communicate(timeout=30)[1]
    assert "cannot listen" not in err and second.returncode == 130, err


# --- 2. an approved write that failed says so -------------------------------------------------


def test_an_approved_write_that_failed_shows_its_outcome(home, scripted_server) -> None:
    scripted_server.add(
        tool_call("crm_add_company", MUSTERMANN),
        tool_call("crm_add_company", MUSTERMANN),  # the same company again: the CRM refuses it
        reply(json.dumps(CLAIM_OK)),
    )
    server = _served(home, scripted_server.url, allow_writes=True)
    result = anyio.run(_with_client, Client(server), _call("delegate", task=CRM_TASK))
    outcomes = [w["outcome"] for w in _digest(result)["approved_writes"]]
    assert outcomes == ["ok", "tool_error"]
    written = [line for line in _text(result).splitlines() if line.startswith("approved write")]
    assert written[0].endswith('"city": "Berlin"}')  # ok: as the CLI prints it, no outcome
    assert written[1].endswith('"city": "Berlin"} (tool_error)')
    assert _crm_rows(home) == [("Mustermann GmbH", "Berlin")]


# --- 3. --http needs no stdout ----------------------------------------------------------------

SERVE_HTTP = """
import sys
from tiny_cli.serve import serve
from tiny_cli.settings import load_settings
serve(load_settings(env={"TINY_HOME": sys.argv[1], "TINY_CARDS": sys.argv[2]}),
      http_port=int(sys.argv[3]))
"""


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="closes an fd before exec (POSIX)")
def test_serve_over_http_without_stdout_listens(home) -> None:
    port = _free_port()  # pythonw, a daemon: Python's sys.stdout is None
    command = [sys.executable, "-c", SERVE_HTTP, str(home), str(SEED_CARDS), str(port)]
    process = subprocess.Popen(
        command, stderr=subprocess.PIPE, text=True, preexec_fn=lambda: os.close(1)
    )
    try:
        _wait_for(port, process)
    finally:
        process.send_signal(signal.SIGINT)
        err = process.communicate(timeout=30)[1]
    assert "ValueError" not in err and "isatty" not in err, err
    assert f"tiny serve: MCP at http://127.0.0.1:{port}/mcp" in err


# --- 4. a whole number written as a float -----------------------------------------------------


def test_a_whole_number_written_as_a_float_is_that_integer(home, scripted_server) -> None:
    answer = {"status": "ok", "summary": "Day one: laptop.", "source": "onboarding.md"}
    scripted_server.add(
        tool_call("docs_search", {"query": "onboarding"}), reply(json.dumps(answer))
    )
    server = _served(home, scripted_server.url)
    # JSON Schema reads 1e20 as an integer, as tiny's check does; pydantic could not read it
    call = _call("invoke", card="docs-finder", task=DOCS_TASK, max_output_tokens=1e20)
    result = anyio.run(_with_client, Client(server), call)
    assert _digest(result)["status"] == "ok", _text(result)


def test_route_reads_top_written_as_a_float_as_the_integer(home, scripted_server) -> None:
    server = _served(home, scripted_server.url)
    result = anyio.run(_with_client, Client(server), _call("route", task="onboard", top=1e20))
    cards = list(SEED_CARDS.glob("*.yaml"))
    assert len(_digest(result)["candidates"]) == len(cards)  # every one: 1e20 is that many
    fraction = anyio.run(_with_client, Client(server), _call("route", task="onboard", top=2.5))
    assert _text(fraction) == "tiny: error: top: must be an integer, got a number"


# --- 5. a host that could not be asked --------------------------------------------------------


def test_a_hosts_failed_answer_reaches_stderr_scrubbed_and_escaped(
    home, scripted_server, capsys
) -> None:
    scripted_server.add(
        tool_call("crm_add_company", MUSTERMANN),
        reply(json.dumps({"status": "partial", "summary": "Not approved: nothing written."})),
    )

    async def failing_host(context: Any, params: Any) -> ErrorData:
        return ErrorData(code=-1, message=f"\x1b[2J\x1b[31mHOST SAYS\x07 {KEY}\nforged line")

    server = _served(home, scripted_server.url)
    # asked mid-call (before 2026-07-28; from then on the host retries with its answer)
    client = Client(server, elicitation_callback=failing_host, mode="legacy")
    anyio.run(_with_client, client, _call("invoke", card="crm-writer", task=CRM_TASK))
    said = [line for line in capsys.readouterr().err.splitlines() if "write declined" in line]
    assert len(said) == 1, said  # one line: the host's newline escaped
    assert KEY not in said[0] and "[redacted]" in said[0]
    assert "\x1b" not in said[0] and "\x07" not in said[0] and "\\u001b[2J" in said[0]
    assert _crm_rows(home) == []
