"""The live view: what it draws from events, pausing for a prompt, and when it never appears.

The pty tests run the real `tiny` in a pseudo-terminal against the scripted server and read
everything the terminal was sent.
"""

from __future__ import annotations

import io
import json
import os
import pty
import re
import select
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from tiny_cli.cli import live
from tiny_cli.cli import run as cli
from tiny_cli.cli.common import wants_live
from tiny_cli.cli.live import LiveView, pause_current
from tiny_cli.digest import Cost, Digest
from tiny_cli.events import (
    BudgetHit,
    Finished,
    GhostCall,
    ModelReplied,
    ModeSwitched,
    RunStarted,
    ToolCalled,
    ToolFinished,
    TurnStarted,
)
from tiny_cli.secrets import scrubber
from tiny_cli.testing import reply, tool_call

from .conftest import HANDBOOK, REPO, SEED_CARDS

TASK = "how did the onboarding process work again"
ANSWER = {"status": "ok", "summary": "Day one: laptop and accounts.", "source": "onboarding.md"}
ANSI = re.compile(r"\x1b(\[[0-9;?]*[ -/]*[@-~]|\][^\x07]*\x07|[()][0-9A-Za-z]|[=>78])")
PROMPT_PAUSE = 0.5  # seconds the test waits at a prompt before it answers
PTY_SECONDS = 15.0  # the whole run takes ~2 s; this only bounds a hang
SCREEN_LINES = 40  # the pty's size, as the view and the test's terminal model see it


# --- drawing from events --------------------------------------------------------------------


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _started(card: str = "docs-finder", goal: str = TASK) -> RunStarted:
    system = {"role": "system", "content": "s"}
    return RunStarted(card, "m", "native", goal, 4, 45.0, 400, (system,))


def _screen(view: LiveView) -> str:
    """The view's current picture as plain text, 120 columns wide."""
    console = Console(file=io.StringIO(), width=120, color_system=None)
    console.print(view._render())
    return console.file.getvalue()  # type: ignore[attr-defined]


def _view(clock: Callable[[], float] = Clock()) -> LiveView:
    return LiveView(Console(file=io.StringIO(), width=120), clock=clock)


def test_view_shows_turns_calls_ghosts_and_budget() -> None:
    clock = Clock()
    view = _view(clock)
    see = view.observer("invoke")
    see(_started())
    see(TurnStarted(1, 45.0, 0, False))
    assert "waiting for the model" in _screen(view)
    see(ModelReplied(1, 512, 24, 0.75, None, 1))
    see(ToolCalled("c1", "web_search", '{"q": "x"}'))
    see(GhostCall("web_search", 1))
    see(ToolFinished("c1", "web_search", "ghost", 0.0, "error: no such tool web_search"))
    clock.now += 10.0
    see(TurnStarted(2, 35.0, 1, False))
    see(ModelReplied(2, 600, 20, 0.5, None, 1))
    see(ToolCalled("c2", "docs_search", json.dumps({"query": "onboarding " * 20})))
    see(ToolFinished("c2", "docs_search", "ok", 0.02, "x" * 1234))
    clock.now += 5.0
    screen = _screen(view)
    assert "docs-finder · m · native" in screen and TASK in screen
    assert "turn 1" in screen and "512 tokens in · 24 out" in screen and "0.75" in screen
    assert "web_search" in screen and "(no such tool)" in screen and "ghost" in screen
    assert '{"query": "onboarding onboarding' in screen and "…" in screen  # shortened
    assert "1,234 chars" in screen and " ok " in screen
    assert "tool calls 2/4" in screen and "30 s of 45 s left" in screen
    assert "ghost calls 1" in screen and "tokens 1112 in / 44 out" in screen


def test_the_view_shows_no_known_secret_a_model_copied_into_a_call() -> None:
    """A page held the key, the model put it in a call: the Digest hid it, the view showed it."""
    key = "KEY-s3cr3tVALUE99"
    scrub = scrubber(key).for_caller().text
    view = LiveView(Console(file=io.StringIO(), width=120), scrub=scrub)
    see = view.observer("invoke")
    see(_started(goal=f"onboarding, my key is {key}"))
    see(TurnStarted(1, 45.0, 0, False))
    see(ToolCalled("c1", "docs_search", json.dumps({"query": f"onboarding {key}"})))
    see(ToolFinished("c1", "docs_search", "ok", 0.02, f"found {key}"))
    see(ToolCalled("c2", f"{key}_x", "{}"))
    see(GhostCall(f"{key}_x", 1))
    see(ToolFinished("c2", f"{key}_x", "ghost", 0.0, f"error: no such tool {key}_x"))
    screen = _screen(view)
    assert key not in screen and "s3cr3t" not in screen
    assert '{"query": "onboarding [redacted]"}' in screen and "[redacted]_x" in screen


@pytest.mark.slow  # seconds on 2 cores: in `make test-slow`
def test_the_live_view_a_command_draws_is_scrubbed(scripted_server, home) -> None:
    key = "KEY-s3cr3tVALUE99"
    scripted_server.add(
        tool_call("docs_search", {"query": f"onboarding {key}"}, delay=0.5),
        reply(json.dumps(ANSWER), delay=0.5),
    )
    env = {**_pty_env(scripted_server.url, home), "TINY_API_KEY": key}
    code, sent = _run_in_pty(["invoke", "docs-finder", TASK, "--tool-mode", "native"], env)
    assert code == 0, _plain(sent)
    assert "docs_search" in _plain(sent) and "s3cr3t" not in sent


def test_view_shows_bad_arguments_mode_switch_budget_and_status() -> None:
    view = _view()
    see = view.observer("invoke")
    see(_started())
    see(ToolCalled("c1", "docs_search", "{broken", recovered=True))
    see(ToolFinished("c1", "docs_search", "bad_arguments", 0.0, "error: not JSON"))
    see(ModeSwitched("json", "the model wrote tool calls as text"))
    see(ToolCalled("c2", "docs_search", "{}"))
    see(BudgetHit("max_tool_calls"))
    see(ToolFinished("c2", "docs_search", None, 0.0, "not run"))
    see(Finished(Digest("docs-finder", "partial", "cut short", cost=Cost())))
    screen = _screen(view)
    assert "(from text)" in screen and "bad_arguments" in screen
    assert "→ json: the model wrote tool calls as text" in screen
    assert "max_tool_calls reached" in screen and "not run (budget)" in screen
    assert "tool calls 1/4" in screen and "partial" in screen and "left" not in screen


def test_view_escapes_what_the_model_sent() -> None:
    view = _view()
    see = view.observer("invoke")
    see(_started(goal="find [red]x[/red]\x1b[2J"))
    see(ToolCalled("c1", "[bold]evil\x1b]0;pwned\x07", '{"q": "[link=x]y[/link]\\u001b"}'))
    see(ToolFinished("c1", "[bold]evil\x1b]0;pwned\x07", "ghost", 0.0, "no"))
    screen = _screen(view)
    assert "\x1b" not in screen and "\x07" not in screen
    assert "[bold]evil\\u001b]0;pwned\\u0007" in screen  # shown as it is, not interpreted
    assert "find [red]x[/red]\\u001b[2J" in screen


def test_each_run_gets_its_own_panel_labelled() -> None:
    view = _view()
    first = view.observer("onboarding/tiny/0")
    first(_started())
    first(ToolCalled("c1", "docs_search", '{"query": "first"}'))
    second = view.observer("vacation/tiny/0")
    second(_started(goal="where is the vacation request process documented"))
    screen = _screen(view)
    assert "vacation/tiny/0 · docs-finder" in screen and "vacation request" in screen
    assert "first" not in screen and "onboarding/tiny/0" not in screen


def test_abstain_without_a_run_still_shows_the_outcome() -> None:
    view = _view()
    see = view.observer("delegate")
    assert "starting" in _screen(view)
    see(Finished(Digest(None, "abstain", "No card fits.", cost=Cost())))
    assert "tiny" in _screen(view) and "abstain" in _screen(view)


# --- pausing for a prompt -------------------------------------------------------------------


def _terminal_view() -> LiveView:
    return LiveView(Console(file=io.StringIO(), width=120, force_terminal=True))


def test_pause_current_stops_the_view_and_starts_it_again() -> None:
    with pause_current():
        pass  # no view: nothing to pause
    with _terminal_view() as view:
        assert view._live.is_started
        with pause_current():
            assert not view._live.is_started
        assert view._live.is_started
    assert not view._live.is_started
    assert live._current is None


def test_stderr_output_goes_through_the_view_while_it_is_on() -> None:
    with _terminal_view() as view:
        assert live.console(stderr=True) is view.console  # rich stacks a progress bar in it
        assert live.console() is not view.console
    assert live.console(stderr=True) is not view.console


def test_ask_prompts_with_the_view_paused(monkeypatch) -> None:
    seen: list[bool] = []

    class Answer(io.StringIO):  # not a file descriptor: the prompt reads it by lines
        def readline(self, size: int | None = -1) -> str:
            seen.append(view._live.is_started)
            return "y\n"

    monkeypatch.setattr(sys, "stdin", Answer())
    card = type("C", (), {"id": "crm-writer"})()
    with _terminal_view() as view:
        assert cli._ask(card, "crm_add_company", {"name": "X"}) is True
        assert view._live.is_started
    assert seen == [False]


# --- never without a terminal ---------------------------------------------------------------


class _Stream(io.StringIO):
    """A stderr that says whether it is a terminal."""

    def __init__(self, terminal: bool) -> None:
        super().__init__()
        self.terminal = terminal

    def isatty(self) -> bool:
        return self.terminal


def test_the_live_view_is_only_for_a_terminal_and_a_person() -> None:
    assert wants_live(False, False, stderr=_Stream(True))
    assert not wants_live(False, False, stderr=_Stream(False))  # a pipe, a file, CI's log
    assert not wants_live(True, False, stderr=_Stream(True))  # --quiet
    assert not wants_live(False, True, stderr=_Stream(True))  # --json


def test_no_live_view_when_stderr_is_not_a_terminal(tiny, scripted_server) -> None:
    scripted_server.add(
        tool_call("web_search", {"q": "x"}),
        tool_call("docs_search", {"query": "onboarding"}),
        reply(json.dumps(ANSWER)),
    )
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_NO_LOG": "1"}
    result = tiny("invoke", "docs-finder", TASK, "--tool-mode", "native", env=env)
    assert result.exit_code == 0, result.output
    assert "docs-finder · ok" in result.stdout
    assert "ghost" not in result.stderr and "tool calls" not in result.stderr


# --- a real pseudo-terminal -----------------------------------------------------------------


def _pty_env(url: str, home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINY_", "OPENAI_"))}
    return {
        **env,
        "TINY_BASE_URL": url,
        "TINY_HOME": str(home),
        "TINY_CARDS": str(SEED_CARDS),
        "TINY_DOCS": str(HANDBOOK),
        "TINY_NO_LOG": "1",  # this test is about the screen, not the run log
        "TERM": "xterm-256color",
        "COLUMNS": "120",
        "LINES": str(SCREEN_LINES),
    }


def _run_in_pty(args: list[str], env: dict[str, str], answer: bytes = b"") -> tuple[int, str]:
    """Run `python -m tiny_cli ARGS` with stdin, stdout and stderr on a pty; return all it sent.

    `answer` is typed (after a pause) at the first [y/N] prompt."""
    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tiny_cli", *args],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            cwd=REPO,
            start_new_session=True,  # the pty becomes its controlling terminal
        )
    finally:
        os.close(slave)  # only the child holds it now: EIO on the master once it exits
    try:
        sent = _read_all(master, answer)
        return proc.wait(timeout=PTY_SECONDS), sent.decode("utf-8", "replace")
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _read_all(master: int, answer: bytes) -> bytes:
    """Read the master side until the child closes the terminal; fail after PTY_SECONDS."""
    chunks: list[bytes] = []
    deadline = time.monotonic() + PTY_SECONDS
    asked = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 0.1)
        if not ready:
            continue
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every slave fd is closed, the child is gone
            return b"".join(chunks)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        if answer and not asked and b"[y/N]" in b"".join(chunks):
            time.sleep(PROMPT_PAUSE)  # a live view still running would redraw meanwhile
            os.write(master, answer)
            asked = True
    raise AssertionError(f"tiny still running after {PTY_SECONDS} s: {b''.join(chunks)[-2000:]!r}")


def _plain(text: str) -> str:
    """The text without terminal escapes and carriage returns."""
    return ANSI.sub("", text).replace("\r", "")


TERMINAL_TOKEN = re.compile(r"\x1b\[([0-9;?]*)([@-~])|\x1b\][^\x07]*\x07|\x1b.|\r|\n|[^\x1b\r\n]+")


def _final_screen(sent: str, height: int = SCREEN_LINES) -> list[str]:
    """Replay what a terminal got (text, CR, LF, cursor up, erase line): the lines it keeps.

    The cursor cannot go up into the scrollback: only the last `height` lines are reachable."""
    lines, row, col = [""], 0, 0
    for token in TERMINAL_TOKEN.finditer(sent):
        text, code = token.group(0), token.group(2)
        if text == "\n":
            row, col = row + 1, 0
            lines += [""] * (row + 1 - len(lines))
        elif text == "\r":
            col = 0
        elif code == "A":
            row = max(0, len(lines) - height, row - int(token.group(1) or 1))
        elif code == "K":
            lines[row] = ""  # rich erases whole lines (ESC[2K)
        elif not text.startswith("\x1b"):
            line = lines[row].ljust(col)
            lines[row], col = line[:col] + text + line[col + len(text) :], col + len(text)
    return [line.rstrip() for line in lines]


def _script(server) -> None:
    """A ghost call, a real call and an answer, each slow enough for a frame to be drawn."""
    server.add(
        tool_call("web_search", {"q": "x"}, delay=0.5),
        tool_call("docs_search", {"query": "onboarding"}, delay=0.5),
        reply(json.dumps(ANSWER), delay=0.5),
    )


@pytest.mark.slow  # seconds each on 2 cores: in `make test-slow`
def test_live_view_in_a_real_terminal(scripted_server, home) -> None:
    _script(scripted_server)
    args = ["invoke", "docs-finder", TASK, "--tool-mode", "native"]
    code, sent = _run_in_pty(args, _pty_env(scripted_server.url, home))
    screen = _plain(sent)
    print(sent)  # shown when the test fails: what the terminal got
    assert code == 0, screen
    assert re.search(r"docs-finder · \S+ · native", screen), screen
    assert re.search(
        r'call\s+"web_search" \{"q": "x"\} \(no such tool\)\s+\S+ chars\s+ghost', screen
    )
    assert re.search(r'call\s+docs_search \{"query": "onboarding"\}\s+\S+ chars\s+ok', screen)
    assert "ghost calls 1" in screen and "tool calls 1/4" in screen
    assert re.search(r"turn 2\s+\d+ tokens in · \d+ out · 1 tool call", screen)
    digest = screen[screen.rindex("docs-finder · ok") :]  # the Digest, after the view
    assert "Day one: laptop and accounts." in digest and "onboarding.md" in digest
    assert "waiting for the model" not in digest  # the view is gone before the Digest
    kept = "\n".join(_final_screen(sent))
    assert kept.lstrip().startswith("╭─ docs-finder · ok") and "onboarding.md" in kept
    assert "tool calls 2/4" not in kept and "waiting" not in kept  # nothing of the view is left


@pytest.mark.slow  # seconds each on 2 cores: in `make test-slow`
def test_no_live_view_with_json_in_a_real_terminal(scripted_server, home) -> None:
    _script(scripted_server)
    args = ["invoke", "docs-finder", TASK, "--tool-mode", "native", "--json"]
    code, sent = _run_in_pty(args, _pty_env(scripted_server.url, home))
    assert code == 0, sent
    assert "\x1b" not in sent  # no cursor movement, no colour: nothing drew
    document = json.loads(sent.replace("\r", ""))
    assert document["status"] == "ok" and document["cost"]["ghost_calls"] == 1


@pytest.mark.slow  # seconds each on 2 cores: in `make test-slow`
def test_live_view_pauses_for_the_write_prompt(scripted_server, home) -> None:
    claim = {"status": "ok", "summary": "Added.", "company_id": 1, "name": "Mustermann GmbH"}
    scripted_server.add(
        tool_call("crm_add_company", {"name": "Mustermann GmbH", "city": "Berlin"}, delay=0.5),
        reply(json.dumps(claim), delay=0.5),
    )
    args = ["invoke", "crm-writer", "add Mustermann GmbH in Berlin", "--tool-mode", "native"]
    code, sent = _run_in_pty(args, _pty_env(scripted_server.url, home), answer=b"y\n")
    print(sent)  # shown when the test fails: what the terminal got
    assert code == 0, _plain(sent)
    before, prompt, after = sent.partition("Allow this write? [y/N]: ")
    assert prompt and "waiting for the model" in before  # the view ran before the prompt
    assert 'crm-writer wants to write: crm_add_company {"name": "Mustermann GmbH"' in _plain(before)
    answered, _, resumed = after.partition("y")
    assert answered == ""  # nothing drew over the prompt while it waited for the answer
    assert re.search(r"crm_add_company .*ok", _plain(resumed))  # the view came back
    assert "approved write: crm_add_company" in _plain(resumed)
    kept = _final_screen(sent)
    assert any(line.startswith("crm-writer wants to write: crm_add_company") for line in kept)
    assert "Allow this write? [y/N]: y" in kept  # the prompt and the answer stay readable
    assert not any("waiting for the model" in line for line in kept)


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_bench_shows_each_run_and_its_progress_in_one_display(
    scripted_server, home, tmp_path
) -> None:
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "- {id: onboarding, task: how did the onboarding process work again,"
        " expected_agent: docs-finder}\n"
        "- {id: vacation, task: where is the vacation request process documented,"
        " expected_agent: docs-finder}\n",
        encoding="utf-8",
    )
    for _ in range(2):
        _script(scripted_server)  # the ghost call and the real one, per run
    env = {**_pty_env(scripted_server.url, home), "TINY_EMBEDDER": "hashing"}
    args = ["bench", "--tasks", str(tasks), "--arm", "tiny", "--concurrency", "1"]
    code, sent = _run_in_pty(args, env)
    print(sent)  # shown when the test fails: what the terminal got
    screen = _plain(sent)
    assert code == 0, screen
    assert "onboarding/tiny/0 · docs-finder" in screen and "vacation/tiny/0 · docs-finder" in screen
    # one display: the progress bar is drawn right under the run's panel, in the same frame
    assert re.search(r"╯\r?\n(\x1b\[[0-9;]*m)*bench (\x1b\[[0-9;]*m)*━", sent)
    kept = "\n".join(_final_screen(sent))
    assert "tiny bench" in kept and "bench ━" not in kept and "/tiny/0" not in kept
