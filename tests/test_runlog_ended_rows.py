"""The run log, second round: what a run Ctrl-C cuts keeps when no `Aborted` tells it (a bench
run on its worker thread) and across a re-route's cards; empty `--since` / `--older-than`
values; a number past a double's range, edited in by hand, read back as valid JSON.

The Ctrl-C cases run a real `tiny` process against the scripted model server (as
tests/test_runlog_interrupted.py does) and read the row back with `tiny runs show N --json`.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tiny_cli.runs import DB_NAME
from tiny_cli.testing import ScriptedServer, reply, tool_call

from .test_reroute import REFUSAL, TASK, reroute_cards
from .test_runlog_interrupted import WAIT_SECONDS, interrupt_at_request, wall_span

OK = '{"status": "ok", "summary": "Two weeks, with a buddy.", "source": "onboarding.md"}'
SEARCH = {"query": "onboarding"}


def _tiny(env: dict[str, str], *args: str) -> subprocess.Popen[bytes]:
    """Start `tiny ARGS` as a user would; SIGINT acts even if the suite runs in the background."""
    return subprocess.Popen(
        [sys.executable, "-m", "tiny_cli", *args],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _shown(tiny: Callable[..., Any], run_id: int = 1) -> dict[str, Any]:
    shown = tiny("runs", "show", str(run_id), "--json")
    assert shown.exit_code == 0, shown.output
    return json.loads(shown.stdout)


@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_a_bench_run_cut_by_ctrl_c_keeps_its_calls_and_cost(
    cli_env: dict[str, str],
    scripted_server: ScriptedServer,
    tiny: Callable[..., Any],
    tmp_path: Path,
) -> None:
    tasks = tmp_path / "tasks.yaml"
    task = {"id": "slow", "task": "how does onboarding work", "expected_agent": "docs-finder"}
    tasks.write_text(yaml.safe_dump([task]), encoding="utf-8")
    scripted_server.add(
        tool_call("docs_search", SEARCH, tokens_in=77, tokens_out=7),
        reply(OK, delay=WAIT_SECONDS),  # never answered: Ctrl-C comes first
    )
    env = {**cli_env, "TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
    args = ("bench", "--tasks", str(tasks), "--arm", "all-tools", "--concurrency", "1")
    interrupt_at_request(_tiny(env, *args), scripted_server, 2)

    run = _shown(tiny)
    assert (run["command"], run["status"]) == ("bench", "interrupted")
    assert (run["tokens_in"], run["tokens_out"], run["tool_calls"]) == (77, 7, 1)
    assert [(c["name"], c["outcome"]) for c in run["calls"]] == [("docs_search", "ok")]
    assert run["wall_seconds"] == pytest.approx(wall_span(run), abs=0.002)
    # no Aborted came from the worker thread: the card's first messages, as the docs say
    assert run["transcript"] == scripted_server.requests[0]["messages"]
    assert "77 tokens in, 7 out, 1 tool call(s)" in tiny("runs", "show", "1").stdout
    found = json.loads(tiny("runs", "search", "onboarding", "--json").stdout)
    assert [r["id"] for r in found] == [1]
    stats = json.loads(tiny("runs", "stats", "--json").stdout)
    assert stats["total"]["ghost_rate"] == 0.0  # of the one call


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="sends SIGINT")
def test_a_re_routed_delegate_cut_by_ctrl_c_counts_both_cards(
    cli_env: dict[str, str],
    scripted_server: ScriptedServer,
    tiny: Callable[..., Any],
    tmp_path: Path,
) -> None:
    cards = reroute_cards(tmp_path / "cards", "policy-docs", "policy-web")
    scripted_server.add(
        tool_call("docs_search", {"query": "travel"}, tokens_in=40, tokens_out=4),
        reply(json.dumps(REFUSAL), tokens_in=10, tokens_out=150),  # policy-docs refuses
        reply(OK, delay=WAIT_SECONDS),  # policy-web never answers: Ctrl-C comes first
    )
    env = {
        **cli_env,
        "TINY_BASE_URL": scripted_server.url,
        "TINY_CARDS": str(cards),
        "TINY_EMBEDDER": "hashing",
    }
    interrupt_at_request(_tiny(env, "delegate", TASK, "--json"), scripted_server, 3)
    assert "You are policy-web" in scripted_server.requests[2]["messages"][0]["content"]

    run = _shown(tiny, 1)
    assert (run["card"], run["status"]) == ("policy-web", "interrupted")  # where it ended
    assert (run["tokens_in"], run["tokens_out"]) == (50, 154)  # both cards' replies
    assert run["tool_calls"] == len(run["calls"]) == 1
    assert run["calls"][0]["name"] == "docs_search"
    assert run["wall_seconds"] == pytest.approx(wall_span(run), abs=0.002)  # from the first card
    assert run["transcript"] == scripted_server.requests[2]["messages"]  # as last sent
    [group] = json.loads(tiny("runs", "stats", "--json").stdout)["by_card"]
    assert group["name"] == "policy-web"


@pytest.mark.parametrize(
    "args",
    [
        ("runs", "delete", "--older-than", "", "--yes"),
        ("runs", "--since", ""),
        ("runs", "stats", "--since", ""),
        ("runs", "export", "--since", ""),
    ],
)
def test_an_empty_age_is_refused_like_a_blank_one(tiny: Callable[..., Any], args) -> None:
    flag = args[-2] if args[-1] == "" else args[-3]
    result = tiny(*args)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    [line] = result.stderr.splitlines()
    assert line.startswith(f"tiny: error: {flag} '': use an ISO date or time"), line


def _strict(text: str) -> Any:
    """Parse JSON as a strict reader would: NaN and Infinity are no JSON."""

    def refuse(constant: str) -> None:
        raise AssertionError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def test_a_number_past_a_doubles_range_edited_in_reads_as_none(
    tiny: Callable[..., Any], scripted_server: ScriptedServer, home: Path
) -> None:
    scripted_server.add(tool_call("docs_search", SEARCH), reply(OK))
    ran = tiny("invoke", "docs-finder", "how does onboarding work", "--json",
               env={"TINY_BASE_URL": scripted_server.url})  # fmt: skip
    assert ran.exit_code == 0, ran.output
    with sqlite3.connect(home / DB_NAME) as db:  # edited by hand
        db.execute(
            "UPDATE runs SET wall_seconds = 9e999, "
            "digest = json_set(digest, '$.cost.wall_seconds', json('1e999'))"
        )
        assert db.execute("SELECT wall_seconds FROM runs").fetchone() == (float("inf"),)
    [listed] = _strict(tiny("runs", "--json").stdout)
    assert listed["wall_seconds"] is None
    shown = _strict(tiny("runs", "show", "1", "--json").stdout)
    assert shown["wall_seconds"] is None and shown["digest"]["cost"]["wall_seconds"] is None
    [exported] = [_strict(line) for line in tiny("runs", "export").stdout.splitlines()]
    assert exported["wall_seconds"] is None
    total = _strict(tiny("runs", "stats", "--json").stdout)["total"]
    assert total["wall_p50"] is None and total["wall_p95"] is None
    assert "— s" in tiny("runs", "show", "1").stdout  # the readable view shows no number
