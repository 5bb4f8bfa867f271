"""What tiny prints on a terminal, and where it has none: closed streams, the live view after a
re-route, a returned value whole in the Digest, and `tiny runs`' goals."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from tiny_cli import build_router, delegate, make_brief, open_workspace
from tiny_cli.cli.live import LiveView
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.settings import load_settings
from tiny_cli.testing import reply, tool_call

from .conftest import HANDBOOK, SEED_CARDS

TASK = "how did the onboarding process work again"
WIDE_HINT = "--wide prints the table whole"
SEARCH = tool_call("docs_search", {"query": "onboarding"})


# --- a closed stdout or stderr ---------------------------------------------------------------


def _closed(fd: int, args: list[str], home: Path, url: str = "http://127.0.0.1:9/v1") -> Any:
    """Run `tiny ARGS` as a shell's `>&-` (fd 1) or `2>&-` (fd 2) does: started without it."""
    env = {**os.environ, "TINY_HOME": str(home), "TINY_BASE_URL": url, "TINY_NO_LOG": "1",
           "TINY_EMBEDDER": "hashing", "TINY_CARDS": str(SEED_CARDS),
           "TINY_DOCS": str(HANDBOOK)}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "tiny_cli", *args], env=env, capture_output=True, text=True,
        preexec_fn=lambda: os.close(fd), timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.skipif(sys.platform == "win32", reason="closes an fd before exec (POSIX)")
@pytest.mark.parametrize(
    "args",
    [["runs", "--json"], ["route", "onboarding", "--json"], ["invoke", "docs-finder", TASK]],
)
def test_a_closed_stdout_is_one_line_and_exit_2(tmp_path: Path, args: list[str]) -> None:
    result = _closed(1, args, tmp_path / "home")
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("tiny: error: stdout is closed")
    assert len(result.stderr.splitlines()) == 1


@pytest.mark.slow
@pytest.mark.skipif(sys.platform == "win32", reason="closes an fd before exec (POSIX)")
def test_a_closed_stderr_still_runs_and_prints_the_digest(tmp_path: Path, scripted_server) -> None:
    answer = {"status": "ok", "summary": "Day one: laptop.", "source": "onboarding.md"}
    scripted_server.add(SEARCH, reply(json.dumps(answer)))
    args = ["invoke", "docs-finder", TASK, "--tool-mode", "native"]
    result = _closed(2, args, tmp_path / "home", scripted_server.url)
    assert result.returncode == 0, result.stdout
    assert "docs-finder · ok" in result.stdout and "Day one: laptop." in result.stdout
    routed = _closed(2, ["route", "onboarding"], tmp_path / "home")  # its progress bar's stream
    assert routed.returncode == 0 and "route → docs-finder" in routed.stdout


# --- the live view after a re-route ----------------------------------------------------------


def test_the_live_view_counts_the_whole_task_after_a_re_route(tmp_path, scripted_server) -> None:
    scripted_server.add(
        tool_call("nosuch", {"q": "x"}),
        reply('{"status":"refused","summary":"not mine"}'),
        tool_call("nosuch2", {"q": "x"}),
        reply('{"status":"refused","summary":"nope"}'),
    )
    env = {"TINY_HOME": str(tmp_path), "TINY_CARDS": str(SEED_CARDS), "TINY_DOCS": str(HANDBOOK),
           "TINY_EMBEDDER": "hashing", "TINY_THRESHOLD": "-50"}  # fmt: skip
    ws = open_workspace(load_settings(env=env))
    screen = io.StringIO()
    with LiveView(Console(file=screen, width=120, force_terminal=True, color_system=None)) as view:
        digest = delegate(
            ws,
            build_router(ws.settings, ws.cards.values()),
            make_brief(TASK),
            provider=OpenAIProvider(scripted_server.url),
            observer=view.observer("delegate"),
        )
    assert len(digest.attempts) == 1 and digest.cost.ghost_calls == 2  # two cards, one task
    first_limit = ws.card(digest.attempts[0].agent_id).budget.max_tool_calls
    # the last frame, drawn as the view stops: the whole task's counts, as the Digest's
    last = screen.getvalue().rsplit("tool calls ", 1)[1]
    assert last.startswith(f"{digest.cost.tool_calls}/{first_limit} ")
    assert f"ghost calls {digest.cost.ghost_calls} " in last
    assert f"tokens {digest.cost.tokens_in} in / {digest.cost.tokens_out} out" in last


# --- a returned value in the Digest ----------------------------------------------------------


def test_a_long_returned_value_is_folded_whole_in_the_digest(tiny, scripted_server) -> None:
    url = "https://example.com/" + "a" * 154  # 174 characters
    answer = {"status": "ok", "summary": "Found it.", "source": url}
    scripted_server.add(SEARCH, reply(json.dumps(answer)))
    env = {"TINY_BASE_URL": scripted_server.url, "COLUMNS": "80", "TINY_NO_LOG": "1"}
    result = tiny("invoke", "docs-finder", TASK, "--tool-mode", "native", env=env)
    table = result.stdout[result.stdout.index("fields") :].split("cost")[0]
    cells = [line.split("│")[2].strip() for line in table.splitlines() if line.count("│") >= 3]
    assert url in "".join(cells) and "…" not in table
    assert max(map(len, result.stdout.splitlines())) <= 80


# --- `tiny runs`: the goal -------------------------------------------------------------------


def _logged(tiny, scripted_server, goal: str) -> dict[str, str]:
    """Log one run of docs-finder on `goal`; return the env to list it with."""
    answer = {"status": "ok", "summary": "Day one.", "source": "onboarding.md"}
    scripted_server.add(SEARCH, reply(json.dumps(answer)))
    env = {"TINY_BASE_URL": scripted_server.url}
    assert tiny("invoke", "docs-finder", goal, "--tool-mode", "native", env=env).exit_code == 0
    return env


def test_runs_wide_prints_the_goal_whole(tiny, scripted_server) -> None:
    goal = "how did the onboarding process work again " + "and what came after it " * 5
    env = {**_logged(tiny, scripted_server, goal.strip()), "COLUMNS": "80"}
    result = tiny("runs", "--wide", env=env)
    assert goal.strip() in result.stdout and "…" not in result.stdout
    assert WIDE_HINT not in result.stdout


@pytest.mark.parametrize(
    ("goal", "columns"),
    [
        ("how did the onboarding process work again " * 3, "80"),  # over 60 characters
        ("onboarding process steps for the new team lead and the rest", "80"),  # past 3 lines
    ],
)
def test_runs_says_wide_when_the_goal_is_cut(tiny, scripted_server, goal, columns) -> None:
    env = {**_logged(tiny, scripted_server, goal.strip()), "COLUMNS": columns}
    result = tiny("runs", env=env)
    assert "…" in result.stdout and WIDE_HINT in result.stdout, result.stdout
    assert max(map(len, result.stdout.splitlines())) <= int(columns)
