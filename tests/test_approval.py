"""Approval bound to the call: each write call is approved with its arguments, or it never runs.

Library tests pass a scripted `approve`; CLI tests run the real `tiny` against the scripted
server and check the real SQLite CRM under TINY_HOME and what went over the wire.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tiny_cli.agent.loop import approve_writes, invoke
from tiny_cli.cards.card import Card
from tiny_cli.cli.common import Terminal
from tiny_cli.delegation import run_card
from tiny_cli.digest import make_brief
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.runs.log import RunLog
from tiny_cli.settings import load_settings
from tiny_cli.testing import reply, tool_call, tool_calls
from tiny_cli.workspace import open_workspace

from .conftest import SEED_CARDS

MUSTERMANN = {"name": "Mustermann GmbH", "city": "Berlin"}
OTHER = {"name": "Other AG", "city": "Köln"}
CLAIM_OK = json.dumps(
    {"status": "ok", "summary": "Added it.", "company_id": 1, "name": "Mustermann GmbH"}
)
TASK = "add Mustermann GmbH in Berlin as a new customer"


def _rows(home: Path) -> list[tuple[str, str]]:
    path = home / "crm.sqlite3"
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return db.execute("select name, city from companies order by company_id").fetchall()


def _tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


class ScriptedApprover:
    """Approve the first `yes` write calls, decline the rest; remember every question."""

    def __init__(self, yes: int) -> None:
        self.yes = yes
        self.asked: list[tuple[str, str, dict[str, Any]]] = []

    def __call__(self, card: Card, tool: str, arguments: dict[str, Any]) -> bool:
        self.asked.append((card.id, tool, arguments))
        arguments["name"] = "tampered"  # a copy: what runs is what the model asked for
        return len(self.asked) <= self.yes


@pytest.fixture
def workspace(home: Path):
    return open_workspace(
        load_settings(env={"TINY_HOME": str(home), "TINY_CARDS": str(SEED_CARDS)})
    )


@pytest.fixture
def run(tiny, scripted_server, request: pytest.FixtureRequest):
    """Run `tiny ARGS`; a test that asks for `terminal` runs it as if stdin were a terminal."""
    at_terminal = Terminal(True) if "terminal" in request.fixturenames else None

    def go(*args: str, input: str | None = None):
        env = {"TINY_BASE_URL": scripted_server.url}
        result = tiny(*args, input=input, env=env, obj=at_terminal)
        assert "Traceback" not in result.output
        return result

    return go


@pytest.fixture
def terminal() -> Terminal:
    """The CLI is told stdin is a terminal (its invoker's Terminal); answers come from input."""
    return Terminal(True)


# --- library: the approve parameter --------------------------------------------------------


def _invoke_crm(workspace, server, card: Card | None = None, **options: Any):
    """Run the CRM task in-process through the library against the scripted server."""
    return invoke(
        card or workspace.card("crm-writer"),
        make_brief(TASK),
        registry=workspace.registry,
        provider=OpenAIProvider(server.url),
        model="m",
        **options,
    )


def test_approving_one_write_does_not_approve_another(workspace, scripted_server, home) -> None:
    scripted_server.add(
        tool_call("crm_add_company", MUSTERMANN),
        tool_call("crm_add_company", OTHER),
        reply(CLAIM_OK),
    )
    approver = ScriptedApprover(yes=1)
    digest = run_card(
        workspace,
        "crm-writer",
        make_brief(TASK),
        provider=OpenAIProvider(scripted_server.url),
        approve=approver,
    )
    scripted_server.assert_done()
    assert approver.asked == [
        ("crm-writer", "crm_add_company", {**MUSTERMANN, "name": "tampered"}),
        ("crm-writer", "crm_add_company", {**OTHER, "name": "tampered"}),
    ]
    assert _rows(home) == [("Mustermann GmbH", "Berlin")]  # the declined one was never written
    _, second, third = scripted_server.requests
    assert '"Mustermann GmbH"' in _tool_results(second)[0]  # the approved call ran
    declined = _tool_results(third)[-1]
    assert declined.startswith("declined: the user did not approve this call of crm_add_company")
    assert "nothing was written" in declined
    assert digest.status == "partial" and digest.reason == "write_declined"  # not the model's ok
    doc = digest.to_json()
    assert doc["approved_writes"] == [
        {"tool": "crm_add_company", "arguments": MUSTERMANN, "outcome": "ok"}
    ]
    assert doc["declined_writes"] == [
        {"tool": "crm_add_company", "arguments": OTHER, "outcome": "declined"}
    ]


def test_library_default_declines_every_write(workspace, scripted_server, home) -> None:
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(CLAIM_OK))
    digest = _invoke_crm(workspace, scripted_server)
    assert _rows(home) == []
    assert digest.status == "needs_confirmation" and digest.reason == "write_declined"
    assert digest.to_json()["approved_writes"] == []


def test_runner_refuses_a_write_tool_on_a_card_that_does_not_write(
    workspace, scripted_server, home
) -> None:
    card = Card("sneaky", "Reads the CRM.", ("crm_add_company",), ("name",))
    assert not card.writes  # built by hand: the card loader would refuse it
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(CLAIM_OK))
    approver = ScriptedApprover(yes=99)
    digest = _invoke_crm(workspace, scripted_server, card, approve=approver)
    assert approver.asked == [] and _rows(home) == []
    assert "this agent may not write" in _tool_results(scripted_server.requests[1])[0]
    assert digest.status == "needs_confirmation"
    assert digest.to_json()["declined_writes"][0]["outcome"] == "not_allowed"


def test_waiting_for_approval_does_not_spend_the_wall_budget(
    workspace, scripted_server, home
) -> None:
    now = [0.0]

    def slow_human(card: Card, tool: str, arguments: dict[str, Any]) -> bool:
        now[0] += 1000.0  # far beyond crm-writer's 45 s
        return True

    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(CLAIM_OK))
    digest = _invoke_crm(workspace, scripted_server, approve=slow_human, clock=lambda: now[0])
    assert digest.status == "ok" and _rows(home) == [("Mustermann GmbH", "Berlin")]
    assert digest.cost.wall_seconds < 45


def test_bench_style_approve_writes_lists_every_write(workspace, scripted_server, home) -> None:
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(CLAIM_OK))
    digest = _invoke_crm(workspace, scripted_server, approve=approve_writes)
    assert digest.status == "ok"
    assert [c.name for c in digest.approved_writes()] == ["crm_add_company"]


# --- the command line ----------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("command", [("invoke", "crm-writer", TASK), ("delegate", TASK)])
@pytest.mark.parametrize("json_flag", [(), ("--json",)])
def test_no_terminal_no_yes_writes_nothing(run, scripted_server, home, command, json_flag) -> None:
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(CLAIM_OK))
    result = run(*command, *json_flag)
    assert result.exit_code == 7
    assert _rows(home) == []
    assert scripted_server.requests == []  # nobody could approve: stopped before the model
    if json_flag:
        digest = json.loads(result.stdout)
        assert digest["status"] == "needs_confirmation"
        assert digest["reason"] == "write_not_confirmed"
        assert "--yes" in digest["notes_for_caller"][0]
    else:
        assert "needs_confirmation" in result.stdout
    with RunLog.open(home) as log:  # invoke logged an empty task: `runs search` missed it
        [logged] = log.runs()
        assert (logged.status, logged.goal) == ("needs_confirmation", TASK)


def test_json_at_a_terminal_does_not_prompt(run, scripted_server, home, terminal) -> None:
    result = run("invoke", "crm-writer", TASK, "--json", input="y\n")
    assert result.exit_code == 7 and _rows(home) == [] and scripted_server.requests == []
    assert "Allow this write?" not in result.stderr


def test_invoke_yes_writes_and_lists_the_approved_write(run, scripted_server, home) -> None:
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(CLAIM_OK))
    result = run("invoke", "crm-writer", TASK, "--yes", "--json")
    digest = json.loads(result.stdout)
    assert result.exit_code == 0 and digest["status"] == "ok"
    assert _rows(home) == [("Mustermann GmbH", "Berlin")]
    assert digest["approved_writes"] == [
        {"tool": "crm_add_company", "arguments": MUSTERMANN, "outcome": "ok"}
    ]
    assert digest["declined_writes"] == []
    assert '"company_id": 1' in _tool_results(scripted_server.requests[1])[0]


def test_human_digest_shows_each_approved_write(run, scripted_server, home) -> None:
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(CLAIM_OK))
    result = run("invoke", "crm-writer", TASK, "-y")
    assert result.exit_code == 0
    assert 'approved write: crm_add_company {"name": "Mustermann GmbH", "city": "Berlin"}' in (
        result.stdout
    )


def test_delegate_yes_lists_every_write_the_model_made(run, scripted_server, home) -> None:
    others = [{"name": n, "city": "Hamburg"} for n in ("Alpha AG", "Beta AG", "Gamma AG")]
    scripted_server.add(
        tool_calls(*[("crm_add_company", a) for a in others]),
        reply(CLAIM_OK),
    )
    result = run("delegate", "please add mustermann gmbh as a new customer", "--yes", "--json")
    digest = json.loads(result.stdout)
    assert [w["arguments"] for w in digest["approved_writes"]] == others  # nothing hidden
    assert [name for name, _ in _rows(home)] == ["Alpha AG", "Beta AG", "Gamma AG"]


def test_terminal_prompt_approves_each_call_on_its_own(
    run, scripted_server, home, terminal
) -> None:
    scripted_server.add(
        tool_call("crm_add_company", MUSTERMANN),
        tool_call("crm_add_company", OTHER),
        reply(CLAIM_OK),
    )
    result = run("invoke", "crm-writer", TASK, input="y\nn\n")
    scripted_server.assert_done()
    assert result.exit_code == 3  # partial: one of the two writes did not happen
    assert _rows(home) == [("Mustermann GmbH", "Berlin")]
    lines = result.stderr.replace("[y/N]:", "[y/N]:\n").splitlines()  # input is not echoed
    prompts = [ln.strip() for ln in lines if "wants to write" in ln]
    assert prompts == [
        'crm-writer wants to write: crm_add_company {"name": "Mustermann GmbH", "city": "Berlin"}',
        'crm-writer wants to write: crm_add_company {"name": "Other AG", "city": "Köln"}',
    ]
    assert result.stderr.count("Allow this write? [y/N]") == 2
    assert _tool_results(scripted_server.requests[2])[-1].startswith("declined:")
    assert 'declined write: crm_add_company {"name": "Other AG", "city": "Köln"}' in result.stdout
    assert "write_declined" in result.stdout


def test_declining_every_write_at_the_terminal_is_not_ok(
    run, scripted_server, home, terminal
) -> None:
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(CLAIM_OK))
    result = run("delegate", TASK, input="\n")  # Enter: the default is no
    assert result.exit_code == 7 and _rows(home) == []
    assert "needs_confirmation" in result.stdout and "write_declined" in result.stdout
    assert "declined:" in _tool_results(scripted_server.requests[1])[0]


def test_prompt_shows_arguments_escaped(run, scripted_server, home, terminal) -> None:
    tricky = {"name": "[bold red]Evil[/] \x1b[2J Corp\u202e", "city": "Berlin"}
    scripted_server.add(tool_call("crm_add_company", tricky), reply(CLAIM_OK))
    result = run("invoke", "crm-writer", TASK, input="n\n")
    assert _rows(home) == []
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr
    assert "[bold red]Evil[/]" in result.stderr  # markup shown literally, not applied
    assert "\\u001b[2J" in result.stderr and "\\u202e" in result.stderr


# --- the prompt on a real terminal: Ctrl-C and the end of input -----------------------------

PROMPT = b"Allow this write? [y/N]: "
TERMINAL_SECONDS = 30  # a generous cap: a process stuck at the prompt fails the test


def _read_until(fd: int, wanted: bytes | None, seconds: float) -> bytes:
    """Read a pseudo-terminal until `wanted` shows (None: until the other side closes)."""
    seen, deadline = b"", time.monotonic() + seconds
    while (wanted is None or wanted not in seen) and time.monotonic() < deadline:
        if select.select([fd], [], [], 0.05)[0]:
            try:
                chunk = os.read(fd, 65536)
            except OSError:  # EIO: every process holding the terminal has ended
                break
            if not chunk:
                break
            seen += chunk
    return seen


def _at_the_prompt(
    cli_env: dict[str, str],
    url: str,
    then: Callable[[subprocess.Popen, int], None],
    when: bytes = PROMPT,
) -> tuple[int | None, str]:
    """Run `tiny invoke crm-writer` on a pseudo-terminal; once it shows `when`, do `then`."""
    import pty  # POSIX only

    master, slave = pty.openpty()
    env = {**os.environ, **cli_env, "TINY_BASE_URL": url}
    command = [sys.executable, "-m", "tiny_cli", "invoke", "crm-writer", TASK]
    process = subprocess.Popen(command, stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    try:
        seen = _read_until(master, when, TERMINAL_SECONDS)
        assert when in seen, seen.decode("utf-8", "replace")
        then(process, master)  # the instant it is there
        code = process.wait(timeout=TERMINAL_SECONDS)
        seen += _read_until(master, None, 2)
    except subprocess.TimeoutExpired:
        code = None  # still waiting at the prompt: the signal was lost
    finally:
        process.kill()
        process.wait()
        os.close(master)
    return code, seen.decode("utf-8", "replace")


def _ctrl_c(process: subprocess.Popen, master: int) -> None:
    process.send_signal(signal.SIGINT)


def _interrupted_at_the_prompt(cli_env, scripted_server, home, trials: int) -> None:
    for trial in range(trials):
        scripted_server.add(tool_call("crm_add_company", MUSTERMANN))
        when = PROMPT if trial % 2 == 0 else b" wants to write: "  # or while it is drawn
        code, output = _at_the_prompt(cli_env, scripted_server.url, _ctrl_c, when)
        assert code == 130, f"trial {trial}: exit {code}\n{output}"
        assert "tiny: interrupted" in output and "Aborted" not in output, output
        assert "Traceback" not in output, output
    assert _rows(home) == []
    scripted_server.assert_done()  # no model call after the Ctrl-C


pty_only = pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")


@pty_only
def test_ctrl_c_at_the_write_prompt_exits_130(cli_env, scripted_server, home) -> None:
    _interrupted_at_the_prompt(cli_env, scripted_server, home, trials=1)


@pty_only
@pytest.mark.slow
def test_ctrl_c_the_instant_the_prompt_shows_is_never_lost(cli_env, scripted_server, home):
    # a SIGINT landing between the prompt and the blocking read used to wait for a line;
    # one landing while the question is drawn must end the command the same way
    _interrupted_at_the_prompt(cli_env, scripted_server, home, trials=10)


@pty_only
def test_the_end_of_input_at_the_write_prompt_is_no(cli_env, scripted_server, home) -> None:
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(CLAIM_OK))
    code, output = _at_the_prompt(cli_env, scripted_server.url, lambda _, m: os.write(m, b"\x04"))
    assert code == 7, output  # needs_confirmation: the write was declined, not the run aborted
    assert "write_declined" in output and "Aborted" not in output and "Traceback" not in output
    assert _rows(home) == []
    assert _tool_results(scripted_server.requests[1])[0].startswith("declined:")
    scripted_server.assert_done()


@pytest.mark.parametrize(
    ("claimed", "status", "reason", "code"),
    [("ok", "failed", "unverified_write", 5), ("partial", "partial", "partial_by_agent", 3)],
)
@pytest.mark.slow
def test_a_write_claimed_without_any_tool_call_is_not_ok(
    run, scripted_server, home, claimed: str, status: str, reason: str, code: int
) -> None:
    # what a 1.5B model really answered: success, an invented id, and not a single call
    invented = {"status": claimed, "summary": "Company added successfully", "company_id": 12345,
                "name": "Mustermann GmbH"}  # fmt: skip
    scripted_server.add(reply(json.dumps(invented)))
    result = run("delegate", TASK, "--yes", "--json", "--tool-mode", "native")  # no insisting
    digest = json.loads(result.stdout)
    assert result.exit_code == code, result.output
    assert (digest["status"], digest["reason"]) == (status, reason)
    assert any("nothing was written" in note for note in digest["notes_for_caller"])
    assert digest["cost"]["tool_calls"] == 0 and _rows(home) == []
    if status == "failed":  # the invented claim is not printed as done
        assert digest["fields"] == {} and "added" not in result.stdout.lower()
    else:
        assert digest["field_sources"]["company_id"] == "model"  # no tool ever saw 12345
    scripted_server.assert_done()


def test_an_ok_after_only_a_lookup_is_an_unverified_write(run, scripted_server, home) -> None:
    # a tool ran (the lookup), but the write the answer claims never did
    found = tool_call("crm_find_company", {"name": "Mustermann GmbH"})
    scripted_server.add(found, reply(CLAIM_OK))
    result = run("invoke", "crm-writer", TASK, "--yes", "--json")
    digest = json.loads(result.stdout)
    assert (digest["status"], digest["reason"]) == ("failed", "unverified_write")
    assert "added" not in result.stdout.lower() and digest["fields"] == {}
    assert digest["cost"]["tool_calls"] == 1 and _rows(home) == []
    system = scripted_server.requests[0]["messages"][0]["content"]
    assert 'Say "ok" only after a write tool succeeded' in system
    scripted_server.assert_done()
