"""`tiny serve` driven by the official MCP SDK's own client, against the scripted model server.

Every test starts the real `tiny serve` in a subprocess (stdio, or streamable HTTP on a free
loopback port), talks to it only through `mcp.Client`, and checks what the host gets, what
went over the wire to the model server, and what was written (CRM rows, the run log).
"""

from __future__ import annotations

import json
import os
import queue
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.types import CallToolResult, ElicitResult

from tiny_cli.events import Finished
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.runs.log import DB_NAME
from tiny_cli.serve import Served, build_server
from tiny_cli.serve.stdio import _Relay
from tiny_cli.settings import load_settings
from tiny_cli.testing import reply, tool_call
from tiny_cli.workspace import open_workspace

from .conftest import SEED_CARDS

DOCS_TASK = "how did the onboarding process work again"
DOCS_ANSWER = {"status": "ok", "summary": "Day one: laptop.", "source": "onboarding.md"}
OWNED = {**DOCS_ANSWER, "owner": "the hiring manager"}  # as the handbook says
CRM_TASK = "please add mustermann gmbh as a new customer"
MUSTERMANN = {"name": "Mustermann GmbH", "city": "Berlin"}
CLAIM_OK = {"status": "ok", "summary": "Added it.", "company_id": 1, "name": "Mustermann GmbH"}
CALL_SECONDS = 60  # a generous cap: a hung server fails the test instead of the suite

Session = Callable[[Client], Awaitable[Any]]


@pytest.fixture
def env(cli_env: dict[str, str], scripted_server) -> dict[str, str]:
    """Return the environment of `tiny serve`: the CLI's, pointed at the scripted server."""
    return {**os.environ, **cli_env, "TINY_BASE_URL": scripted_server.url, "TINY_NO_LOG": ""}


@pytest.fixture
def stdio(env: dict[str, str]) -> Callable[..., Any]:
    """Run `session(client)` against `tiny serve ARGS` over stdio; return what it returns."""

    def run(session: Session, *args: str, **client: Any) -> Any:
        command = StdioServerParameters(
            command=sys.executable, args=["-m", "tiny_cli", "serve", *args], env=env
        )
        return anyio.run(_with_client, Client(command, **client), session)

    return run


async def _with_client(client: Client, session: Session) -> Any:
    with anyio.fail_after(CALL_SECONDS):
        async with client:
            return await session(client)


def _call(name: str, **arguments: Any) -> Session:
    async def session(client: Client) -> CallToolResult:
        return await client.call_tool(name, arguments)

    return session


def _digest(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def _text(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def _crm_rows(home: Path) -> list[tuple[str, str]]:
    path = home / "crm.sqlite3"
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return db.execute("select name, city from companies order by company_id").fetchall()


def _logged(home: Path) -> list[tuple[str, str, str | None, str]]:
    path = home / DB_NAME
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return db.execute("select command, label, card, status from runs order by id").fetchall()


# --- what a host sees -----------------------------------------------------------------------


@pytest.mark.slow
def test_lists_the_three_tools_with_their_input_schemas(stdio) -> None:
    async def session(client: Client) -> dict[str, Any]:
        return {t.name: t for t in (await client.list_tools()).tools}

    tools = stdio(session)
    assert sorted(tools) == ["delegate", "invoke", "route"]
    delegate = tools["delegate"].input_schema
    assert delegate["required"] == ["task"]
    assert set(delegate["properties"]) == {
        "task",
        "must_return",
        "inputs",
        "context_hint",
        "max_output_tokens",
    }
    assert "ctx" not in json.dumps(delegate)  # the SDK's context is no argument
    invoke = tools["invoke"].input_schema
    assert invoke["required"] == ["card", "task"]
    assert "crm-writer, docs-finder, web-reader" in invoke["properties"]["card"]["description"]
    assert tools["route"].input_schema["required"] == ["task"]
    assert tools["route"].annotations.read_only_hint is True
    assert tools["delegate"].annotations.read_only_hint is False


def test_serve_has_help_and_other_commands_never_load_the_sdk(tiny) -> None:
    result = tiny("serve", "--help")
    assert result.exit_code == 0 and "MCP hosts" in result.stdout
    assert "--allow-writes" in result.stdout and "--http" in result.stdout
    assert "serve" in tiny("--help").stdout
    probe = (
        "import sys; from typer.testing import CliRunner; from tiny_cli.cli import app; "
        "[CliRunner().invoke(app, a) for a in (['--help'], ['serve', '--help'])]; "
        "print(sorted(m for m in sys.modules if m == 'mcp' or m.startswith('mcp.')))"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert done.stdout.strip() == "[]", done.stderr  # cold start: mcp only when serving


@pytest.mark.slow
def test_resources_list_every_card_with_its_facts(stdio) -> None:
    async def session(client: Client) -> tuple[list[str], Any, Any]:
        listed = [str(r.uri) for r in (await client.list_resources()).resources]
        index = await client.read_resource("tiny://cards")
        one = await client.read_resource("tiny://cards/crm-writer")
        return listed, index.contents[0].text, one.contents[0].text

    listed, index, one = stdio(session)
    assert listed == [
        "tiny://cards",
        "tiny://cards/crm-writer",
        "tiny://cards/docs-finder",
        "tiny://cards/web-reader",
    ]
    assert [c["id"] for c in json.loads(index)] == ["crm-writer", "docs-finder", "web-reader"]
    card = json.loads(one)
    assert card["side_effects"] == "write"
    assert card["tools"] == ["crm_find_company", "crm_add_company"]
    assert card["budget"] == {"max_tool_calls": 4, "max_output_tokens": 300, "max_wall_seconds": 45}


def test_a_resource_names_mcp_tools_as_the_card_does(tmp_path, home) -> None:
    from tiny_cli.serve import card_facts

    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "mcp.yaml").write_text("servers: {time: {command: mcp-server-time}}\n", "utf-8")
    clock = "id: clock\nsummary: Tells the time.\ntools: [time.get_current_time, http_get]\n"
    clock += "returns_required: [time]\n"
    (cards / "clock.yaml").write_text(clock, "utf-8")
    ws = open_workspace(load_settings({"TINY_CARDS": str(cards), "TINY_HOME": str(home)}))
    assert card_facts(ws.cards["clock"])["tools"] == ["time.get_current_time", "http_get"]


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_route_returns_the_decision_and_candidates(stdio, scripted_server) -> None:
    result = stdio(_call("route", task=DOCS_TASK))
    decision = _digest(result)
    assert decision["decision"] == "route" and decision["agent_id"] == "docs-finder"
    assert [c["agent_id"] for c in decision["candidates"]][:1] == ["docs-finder"]
    assert len(decision["candidates"]) == 3
    assert _text(result).startswith("route → docs-finder")
    assert scripted_server.requests == []  # routing never calls the model


@pytest.mark.slow
def test_delegate_routes_runs_and_returns_the_digest(stdio, scripted_server, home) -> None:
    scripted_server.add(
        tool_call("docs_search", {"query": "onboarding"}, tokens_in=300, tokens_out=20),
        reply(json.dumps(OWNED), tokens_in=400, tokens_out=30),
    )
    result = stdio(_call("delegate", task=DOCS_TASK, must_return=["owner"]))
    digest = _digest(result)
    assert digest["agent_id"] == "docs-finder" and digest["routing"]["agent_id"] == "docs-finder"
    assert digest["status"] == "ok" and digest["fields"]["owner"] == OWNED["owner"]
    assert digest["fields"]["source"] == "onboarding.md"
    cost = digest["cost"]
    assert (cost["tokens_in"], cost["tokens_out"], cost["tool_calls"]) == (700, 50, 1)
    assert cost["ghost_calls"] == 0 and cost["caller_tokens"] > 0
    first = scripted_server.requests[0]
    assert [t["function"]["name"] for t in first["tools"]] == ["docs_search"]  # its allowlist
    assert [m["role"] for m in first["messages"]] == ["system", "user"]  # a fresh context
    assert "You are docs-finder" in first["messages"][0]["content"]
    assert DOCS_TASK in first["messages"][1]["content"]
    assert "owner" in first["messages"][0]["content"]  # must_return reached the contract
    assert first["max_tokens"] == 400
    assert "docs-finder · ok" in _text(result) and "cost: 700 tokens in" in _text(result)
    assert _logged(home) == [("serve", "delegate", "docs-finder", "ok")]
    scripted_server.assert_done()


@pytest.mark.slow
def test_a_served_abstain_is_logged_with_its_task(stdio, scripted_server, home) -> None:
    digest = _digest(stdio(_call("delegate", task="make me a sandwich")))
    assert digest["status"] == "abstain" and scripted_server.requests == []
    with sqlite3.connect(home / DB_NAME) as db:
        assert db.execute("select status, goal from runs").fetchall() == [
            ("abstain", "make me a sandwich")
        ]


@pytest.mark.slow
def test_invoke_runs_the_named_card_and_counts_ghost_calls(stdio, scripted_server) -> None:
    scripted_server.add(
        tool_call("http_get", {"url": "https://example.org"}),  # not docs-finder's tool
        tool_call("docs_search", {"query": "onboarding"}),
        reply(json.dumps(DOCS_ANSWER)),
    )
    digest = _digest(stdio(_call("invoke", card="docs-finder", task=DOCS_TASK)))
    assert digest["agent_id"] == "docs-finder" and digest["status"] == "ok"
    assert digest["cost"]["ghost_calls"] == 1 and digest["cost"]["ghost_names"] == ["http_get"]
    assert "routing" not in digest
    scripted_server.assert_done()


@pytest.mark.slow
def test_a_reply_never_holds_the_api_key(env, stdio, scripted_server) -> None:
    key = "tk-" + "7" * 30
    env["TINY_API_KEY"] = key
    echoed = {**DOCS_ANSWER, "summary": f"The key is {key}.", "source": key}
    scripted_server.add(
        tool_call(key, {"q": key}),  # a ghost call named as the key
        tool_call("docs_search", {"query": key}),
        reply(json.dumps(echoed)),
    )
    result = stdio(_call("invoke", card="docs-finder", task=DOCS_TASK))
    assert scripted_server.headers[0]["authorization"] == f"Bearer {key}"  # the key in play
    digest = _digest(result)
    assert digest["summary"] == "The key is [redacted]."
    assert digest["fields"]["source"] == "[redacted]"
    assert key not in _text(result) and key not in json.dumps(digest)
    assert digest["cost"]["ghost_names"] == ["[redacted]"]


@pytest.mark.slow
def test_a_routed_task_never_echoes_the_api_key(env, stdio, scripted_server) -> None:
    key = "tk-" + "7" * 30
    env["TINY_API_KEY"] = key
    result = stdio(_call("route", task=f"{DOCS_TASK} {key}"))
    decision = _digest(result)
    assert decision["task"] == f"{DOCS_TASK} [redacted]"
    assert key not in _text(result) and key not in json.dumps(decision)


@pytest.mark.slow
def test_bad_input_is_a_readable_tool_error(stdio, scripted_server) -> None:
    async def session(client: Client) -> list[CallToolResult]:
        unknown = await client.call_tool("invoke", {"card": "nope", "task": DOCS_TASK})
        empty = await client.call_tool("delegate", {"task": "   "})
        tiny_cap = await client.call_tool("delegate", {"task": "x y", "max_output_tokens": 15})
        return [unknown, empty, tiny_cap]

    unknown, empty, tiny_cap = stdio(session)
    assert tiny_cap.is_error and _text(tiny_cap) == (
        "tiny: error: max_output_tokens 15 is impossible: must be >= 16"
    )
    assert unknown.is_error and "no card 'nope'" in _text(unknown)
    assert "known: crm-writer, docs-finder, web-reader" in _text(unknown)
    assert empty.is_error and _text(empty).startswith("tiny: error: the task is empty")
    assert scripted_server.requests == []


@pytest.mark.slow
def test_arguments_are_held_to_the_published_schema_in_one_line(stdio, scripted_server) -> None:
    """The SDK answered a wrong type with pydantic's dump, values and all, and dropped an
    argument it did not know (`must_retrun`), so the run went on without the field."""
    calls = [
        ("invoke", {"card": "docs-finder", "task": 5}, "task: must be a string, got a number"),
        ("invoke", {"card": "docs-finder", "task": "x", "must_retrun": ["owner"]},
         "'must_retrun': no argument of invoke (card, task, must_return, inputs, context_hint, "
         "max_output_tokens)"),
        ("delegate", {"task": "x", "max_output_tokens": True},
         "max_output_tokens: must be an integer or null, got a boolean"),
        ("delegate", {"task": "x", "inputs": {"a": 1}}, "inputs.a: must be a string, got a number"),
        ("route", {"task": "x", "top": 0}, "top: must be at least 1"),
        ("invoke", {"card": "docs-finder"}, "task: missing"),
    ]  # fmt: skip

    async def session(client: Client) -> list[CallToolResult]:
        return [await client.call_tool(name, arguments) for name, arguments, _ in calls]

    for result, (_, _, said) in zip(stdio(session), calls, strict=True):
        assert result.is_error and _text(result) == f"tiny: error: {said}"
    assert scripted_server.requests == []


@pytest.mark.slow
def test_no_log_keeps_served_runs_out_of_the_run_log(stdio, scripted_server, home) -> None:
    digest = _digest(stdio(_call("delegate", task="make me a sandwich"), "--no-log"))
    assert digest["status"] == "abstain" and scripted_server.requests == []
    assert _logged(home) == []


def _lines(stream: Any) -> queue.Queue[str | None]:
    """Read a pipe's lines in a thread (a buffered readline would hide lines from select);
    None follows the last one."""
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_stdout_carries_nothing_but_the_protocol(env, scripted_server) -> None:
    # a host reads every stdout line as JSON-RPC: one stray print breaks the connection
    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "raw", "version": "0"}}  # fmt: skip
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "delegate", "arguments": {"task": "make me a sandwich"}}},
    ]  # fmt: skip
    command = [sys.executable, "-m", "tiny_cli", "serve"]
    process = subprocess.Popen(command, env=env, text=True, stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write("".join(json.dumps(line) + "\n" for line in lines))
    process.stdin.flush()
    out = _lines(process.stdout)
    answers = [json.loads(out.get(timeout=60) or "EOF") for _ in range(2)]  # JSON, or fails
    process.stdin.close()  # the host goes away: the server ends cleanly, saying nothing more
    assert process.wait(timeout=30) == 0
    assert out.get(timeout=30) is None  # the pipe ended with nothing more on it
    assert [a["id"] for a in answers] == [1, 2]
    assert answers[1]["result"]["structuredContent"]["status"] == "abstain"
    assert scripted_server.requests == []


def _host_that_hangs_up(
    env: dict[str, str],
    *calls: dict,
    args: tuple[str, ...] = (),
    capabilities: dict | None = None,
    then: tuple[dict, ...] = (),
) -> tuple[list[dict], int, str]:
    """Write initialize, `calls` and `then` to `tiny serve`'s stdin, close it at once, read
    every line."""
    hello = {"protocolVersion": "2025-06-18", "capabilities": capabilities or {},
             "clientInfo": {"name": "raw", "version": "0"}}  # fmt: skip
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        *({"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": call}
          for i, call in enumerate(calls, start=2)),
        *then,
    ]  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "tiny_cli", "serve", *args],
        input="".join(json.dumps(line) + "\n" for line in lines),
        env=env, capture_output=True, text=True, timeout=CALL_SECONDS,
    )  # fmt: skip
    return [json.loads(line) for line in done.stdout.splitlines()], done.returncode, done.stderr


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_a_host_that_closes_stdin_still_gets_every_answer(env, scripted_server, plain_cards):
    # the calls are still running when stdin ends: each is finished and answered, then the exit
    tasks = [f"how does onboarding work, question {n}" for n in range(3)]
    for task in tasks:
        answer = {**DOCS_ANSWER, "summary": task}
        scripted_server.on(
            lambda r, t=task: t in json.dumps(r), reply(json.dumps(answer), delay=0.5)
        )
    calls = [{"name": "invoke", "arguments": {"card": "docs-finder", "task": t}} for t in tasks]
    answers, code, stderr = _host_that_hangs_up(env, *calls, args=("--cards", str(plain_cards)))
    assert code == 0, stderr
    by_id = {a["id"]: a for a in answers}
    assert sorted(by_id) == [1, 2, 3, 4] and len(answers) == 4, answers  # each once
    for i, task in enumerate(tasks, start=2):
        assert "error" not in by_id[i], by_id[i]  # not "Connection closed"
        assert by_id[i]["result"]["structuredContent"]["summary"] == task
    scripted_server.assert_done()


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_a_call_the_host_cancelled_still_ends_and_is_logged(env, scripted_server, home):
    scripted_server.add(
        tool_call("docs_search", {"query": "onboarding"}, delay=2), reply(json.dumps(DOCS_ANSWER))
    )
    call = {"name": "invoke", "arguments": {"card": "docs-finder", "task": DOCS_TASK}}
    cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
    _answers, code, stderr = _host_that_hangs_up(env, call, then=(cancel,))
    assert code == 0 and "Traceback" not in stderr, stderr
    assert _logged(home) == [("serve", "invoke", "docs-finder", "ok")]  # ended after the cancel
    scripted_server.assert_done()


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_a_write_question_to_a_host_that_hung_up_is_declined(env, scripted_server, home):
    # the host could elicit, but it is gone: nobody can approve, so the write never runs
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(json.dumps(CLAIM_OK)))
    call = {"name": "invoke", "arguments": {"card": "crm-writer", "task": CRM_TASK}}
    started = time.monotonic()
    answers, code, stderr = _host_that_hangs_up(env, call, capabilities={"elicitation": {}})
    assert code == 0, stderr
    assert time.monotonic() - started < CALL_SECONDS / 2  # at once, not after the drain limit
    (result,) = [a for a in answers if a.get("id") == 2 and "method" not in a]
    digest = result["result"]["structuredContent"]
    assert (digest["status"], digest["reason"]) == ("needs_confirmation", "write_declined")
    assert _crm_rows(home) == []
    assert "write declined, the host could not be asked" in stderr
    scripted_server.assert_done()


# --- writes ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_writer_needs_confirmation_without_allow_writes(stdio, scripted_server, home) -> None:
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(json.dumps(CLAIM_OK)))
    result = stdio(_call("delegate", task=CRM_TASK))  # this client cannot elicit
    digest = _digest(result)
    assert digest["agent_id"] == "crm-writer"
    assert (digest["status"], digest["reason"]) == ("needs_confirmation", "write_not_confirmed")
    assert "--allow-writes" in digest["notes_for_caller"][0]
    assert scripted_server.requests == []  # stopped before any model call
    assert _crm_rows(home) == []
    assert _logged(home) == [("serve", "delegate", "crm-writer", "needs_confirmation")]


@pytest.mark.slow
def test_allow_writes_lets_the_write_happen(stdio, scripted_server, home) -> None:
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(json.dumps(CLAIM_OK)))
    result = stdio(_call("delegate", task=CRM_TASK), "--allow-writes")
    digest = _digest(result)
    assert digest["status"] == "ok"
    assert digest["approved_writes"] == [
        {"tool": "crm_add_company", "arguments": MUSTERMANN, "outcome": "ok"}
    ]
    assert _crm_rows(home) == [("Mustermann GmbH", "Berlin")]
    assert 'approved write: crm_add_company {"name": "Mustermann GmbH"' in _text(result)
    scripted_server.assert_done()


class Host:
    """An elicitation callback: answer each question with `action`; remember the questions."""

    def __init__(self, action: str, content: dict[str, Any] | None = None) -> None:
        self.action, self.content = action, content
        self.asked: list[str] = []

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(params.message)
        return ElicitResult(action=self.action, content=self.content)  # type: ignore[arg-type]


ASKED = 'crm-writer wants to write: crm_add_company {"name": "Mustermann GmbH", "city": "Berlin"}'


class GoneHost(Host):
    """A host that is asked, and leaves without answering."""

    async def __call__(self, context: Any, params: Any) -> ElicitResult:
        self.asked.append(params.message)
        await anyio.sleep(CALL_SECONDS)
        raise AssertionError("the test leaves before this")


@pytest.mark.slow  # a host that waits, then leaves: seconds each, in `make test-slow`
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_write_question_left_by_a_host_that_went_is_declined(
    stdio, scripted_server, home, mode
) -> None:
    scripted_server.add(
        tool_call("crm_add_company", MUSTERMANN),
        reply(json.dumps({"status": "partial", "summary": "Not approved: nothing written."})),
    )
    host = GoneHost("accept")

    async def leave(client: Client) -> None:
        with anyio.move_on_after(2):  # the question is out: the host goes away
            await client.call_tool("invoke", {"card": "crm-writer", "task": CRM_TASK})

    stdio(leave, elicitation_callback=host, mode=mode)
    assert host.asked == [ASKED]
    assert _crm_rows(home) == []
    assert _logged(home) == [("serve", "invoke", "crm-writer", "needs_confirmation")]
    assert len(scripted_server.requests) == 2  # the run went on after the decline


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "legacy"])  # 2026-07-28 parks the run; older asks
def test_an_eliciting_host_approves_each_write(stdio, scripted_server, home, mode) -> None:
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(json.dumps(CLAIM_OK)))
    host = Host("accept", {"allow": True})
    digest = _digest(stdio(_call("delegate", task=CRM_TASK), elicitation_callback=host, mode=mode))
    assert host.asked == [ASKED]  # the exact call, asked once
    assert digest["status"] == "ok" and len(digest["approved_writes"]) == 1
    assert _crm_rows(home) == [("Mustermann GmbH", "Berlin")]
    scripted_server.assert_done()


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_write_question_never_holds_the_api_key(env, stdio, scripted_server, home, mode) -> None:
    key = "tk-" + "8" * 30
    env["TINY_API_KEY"] = key
    copied = {"name": f"Mustermann GmbH {key}", "city": "Berlin"}  # a key a page held, copied
    scripted_server.add(
        tool_call("crm_add_company", copied),
        reply(json.dumps({"status": "partial", "summary": "Not approved."})),
    )
    host = Host("decline")
    stdio(_call("invoke", card="crm-writer", task=CRM_TASK), elicitation_callback=host, mode=mode)
    assert host.asked == [ASKED.replace("GmbH", "GmbH [redacted]")]
    assert _crm_rows(home) == []


@pytest.fixture
def library_server(home, scripted_server):
    """Build the server in-process from a Workspace and a provider, as a library user would."""
    settings = load_settings(env={"TINY_HOME": str(home), "TINY_CARDS": str(SEED_CARDS)})
    events: list[tuple[str, Any]] = []
    provider = OpenAIProvider(scripted_server.url)
    served = Served(
        open_workspace(settings),
        provider,
        observe=lambda label, **_: lambda event: events.append((label, event)),
    )
    yield build_server(served), events
    provider.close()


@pytest.mark.parametrize(
    ("action", "content"), [("decline", None), ("cancel", None), ("accept", {"allow": False})]
)
@pytest.mark.parametrize("mode", ["auto", "legacy"])
def test_a_declined_write_never_runs(
    library_server, scripted_server, home, action, content, mode
) -> None:
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(json.dumps(CLAIM_OK)))
    server, events = library_server
    host = Host(action, content)
    client = Client(server, elicitation_callback=host, mode=mode)
    result = anyio.run(_with_client, client, _call("invoke", card="crm-writer", task=CRM_TASK))
    digest = _digest(result)
    assert host.asked == [ASKED]
    assert (digest["status"], digest["reason"]) == ("needs_confirmation", "write_declined")
    assert digest["declined_writes"][0]["outcome"] == "declined"
    assert _crm_rows(home) == []
    tool_result = scripted_server.requests[1]["messages"][-1]
    assert tool_result["role"] == "tool" and tool_result["content"].startswith("declined:")
    finished = [e for label, e in events if isinstance(e, Finished)]
    assert {label for label, _ in events} == {"invoke"} and len(finished) == 1


@pytest.mark.slow
def test_the_question_shows_model_text_escaped(stdio, scripted_server, home) -> None:
    tricky = {"name": "Evil \x1b[2J Corp\u202e", "city": "Berlin"}
    scripted_server.add(tool_call("crm_add_company", tricky), reply(json.dumps(CLAIM_OK)))
    host = Host("decline")
    stdio(_call("invoke", card="crm-writer", task=CRM_TASK), elicitation_callback=host)
    assert "\x1b" not in host.asked[0] and "\u202e" not in host.asked[0]
    assert "\\u001b[2J" in host.asked[0] and "\\u202e" in host.asked[0]


# --- streamable HTTP ------------------------------------------------------------------------


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(port: int, process: subprocess.Popen, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert process.poll() is None, process.communicate()[1]
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise AssertionError(f"tiny serve --http {port} did not listen within {seconds}s")


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_streamable_http_serves_the_same_tools(env, scripted_server, home) -> None:
    scripted_server.add(
        tool_call("docs_search", {"query": "onboarding"}), reply(json.dumps(DOCS_ANSWER))
    )
    port = _free_port()
    command = [sys.executable, "-m", "tiny_cli", "serve", "--http", str(port)]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        _wait_for(port, process)

        async def session(client: Client) -> tuple[list[str], CallToolResult]:
            names = sorted(t.name for t in (await client.list_tools()).tools)
            return names, await client.call_tool("delegate", {"task": DOCS_TASK})

        names, result = anyio.run(_with_client, Client(f"http://127.0.0.1:{port}/mcp"), session)
    finally:
        process.terminate()
        out, err = process.communicate(timeout=30)
    assert process.returncode == 130, err  # SIGTERM stops it as Ctrl-C does: cleanly
    assert names == ["delegate", "invoke", "route"]
    digest = _digest(result)
    assert digest["agent_id"] == "docs-finder" and digest["status"] == "ok"
    assert _logged(home) == [("serve", "delegate", "docs-finder", "ok")]
    assert out == b""  # HTTP mode writes nothing to stdout either


@pytest.mark.slow
def test_http_refuses_a_port_in_use(env) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = [sys.executable, "-m", "tiny_cli", "serve", "--http", str(port)]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and done.stdout == ""
    assert f"tiny: error: --http {port}: cannot listen on 127.0.0.1:{port}" in done.stderr


def test_the_relay_and_the_runs_share_one_drain_after_the_host_goes() -> None:
    now = [100.0]
    to_sdk, sdk_side = os.pipe()
    host_out, marker = os.pipe()
    relay = _Relay(to_sdk, host_out, marker, drain_seconds=30.0, clock=lambda: now[0])
    assert relay.drain_left() == 30.0  # the host is still here: none of it spent
    host_in, host_end = os.pipe()
    os.close(host_end)  # the host hangs up at once, with nothing asked
    relay._pump_in(host_in)
    now[0] += 12.0
    assert relay.drain_left() == 18.0  # what is left for the runs still going
    now[0] += 40.0
    assert relay.drain_left() == 0.0
    for fd in (sdk_side, host_out, marker, host_in):
        os.close(fd)
