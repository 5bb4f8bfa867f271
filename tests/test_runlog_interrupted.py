"""The run log keeps what an interrupted run did: its messages, its tool calls and its cost.

A real `tiny invoke` process against the scripted model server, Ctrl-C'd while it waits for
the model after an approved write; then `tiny runs` reads what the log kept. A run an error
ended (a logged replay that misses an exchange) keeps its calls the same way.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tiny_cli.testing import ScriptedServer, reply, tool_call

from .test_runlog_replay_miss import MISS, replay_misses

ACME = {"name": "Acme GmbH", "city": "Berlin"}
TASK = "add Acme GmbH in Berlin"
WAIT_SECONDS = 60  # for tiny to reach the model call after the write, on a busy machine


def _invoke(cli_env: dict[str, str], server: ScriptedServer) -> subprocess.Popen[bytes]:
    """Start `tiny invoke crm-writer` as a user would; SIGINT acts even if the suite runs in
    the background (where the shell hands children SIGINT ignored)."""
    env = {**os.environ, **cli_env, "TINY_BASE_URL": server.url}
    return subprocess.Popen(
        [sys.executable, "-m", "tiny_cli", "invoke", "crm-writer", TASK, "--yes", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def interrupt_at_request(child: subprocess.Popen[bytes], server: ScriptedServer, n: int) -> str:
    """Ctrl-C `child` once the model server got its `n`th request; return its stderr."""
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while len(server.requests) < n and time.monotonic() < deadline:
            assert child.poll() is None, child.communicate()[1]
            time.sleep(0.05)
        assert len(server.requests) == n, f"tiny sent {len(server.requests)} request(s)"
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=WAIT_SECONDS)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130, err
    return err.decode("utf-8", "replace")


def wall_span(run: dict[str, Any]) -> float:
    """Seconds from a run's start to its end, as its row says."""
    ended, started = (datetime.fromisoformat(run[k]) for k in ("ended_at", "started_at"))
    return (ended - started).total_seconds()


def _companies(home: Path) -> list[tuple[str, str]]:
    with sqlite3.connect(home / "crm.sqlite3") as db:
        return db.execute("select name, city from companies").fetchall()


# the write as the model asks for it, and the roles of what it was sent next, per tool mode
JSON_WRITE = json.dumps({"tool": "crm_add_company", "arguments": ACME})
WRITES = {
    "native": (tool_call("crm_add_company", ACME, tokens_in=120, tokens_out=15), "tool"),
    "json": (reply(JSON_WRITE, tokens_in=120, tokens_out=15), "user"),
}


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
@pytest.mark.parametrize("mode", list(WRITES))
def test_a_run_interrupted_after_a_write_keeps_its_transcript_calls_and_cost(
    cli_env: dict[str, str],
    scripted_server: ScriptedServer,
    tiny: Callable[..., Any],
    home: Path,
    mode: str,
) -> None:
    write, answered_as = WRITES[mode]
    scripted_server.add(
        write,
        reply('{"status": "ok"}', delay=WAIT_SECONDS),  # never answered: Ctrl-C comes first
    )
    env = {**cli_env, "TINY_TOOL_MODE": mode}
    err = interrupt_at_request(_invoke(env, scripted_server), scripted_server, 2)
    assert "tiny: interrupted" in err
    assert _companies(home) == [("Acme GmbH", "Berlin")]  # the write ran

    shown = tiny("runs", "show", "1", "--json")
    assert shown.exit_code == 0, shown.output
    run = json.loads(shown.stdout)
    assert run["status"] == "interrupted"
    assert (run["tokens_in"], run["tokens_out"], run["tool_calls"]) == (120, 15, 1)
    assert run["wall_seconds"] == pytest.approx(wall_span(run), abs=0.002)  # up to the Ctrl-C
    [call] = run["calls"]
    assert (call["name"], json.loads(call["arguments"]), call["outcome"]) == (
        "crm_add_company",
        ACME,
        "ok",
    )
    # what the model was sent last: its context, its call and the write's result
    assert run["transcript"] == scripted_server.requests[1]["messages"]
    assert [m["role"] for m in run["transcript"]] == ["system", "user", "assistant", answered_as]

    readable = tiny("runs", "show", "1")
    assert "120 tokens in, 15 out, 1 tool call(s)" in readable.stdout, readable.stdout
    found = tiny("runs", "search", "website", "--json")  # in the write's result alone
    assert [r["id"] for r in json.loads(found.stdout)] == [1], found.output
    stats = json.loads(tiny("runs", "stats", "--json").stdout)
    assert stats["total"]["ghost_rate"] == 0.0  # of one call: a rate, not "no calls"


def test_a_run_an_error_ended_keeps_its_calls_too(tiny: Callable[..., Any], tmp_path: Path):
    replay_misses(tiny, tmp_path)  # a replay logged with --log misses the answer's exchange
    replayed = json.loads(tiny("runs", "--json").stdout)[0]
    run = json.loads(tiny("runs", "show", str(replayed["id"]), "--json").stdout)
    assert run["status"] == "failed" and MISS in run["reason"]
    assert [(c["name"], c["outcome"]) for c in run["calls"]] == [("docs_search", "ok")]
    assert run["tool_calls"] == 1 and run["tokens_in"] > 0
    assert run["wall_seconds"] == pytest.approx(wall_span(run), abs=0.002)
    assert [m["role"] for m in run["transcript"]] == ["system", "user", "assistant", "tool"]
