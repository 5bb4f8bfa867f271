"""What a tool does cannot break the loop: exits, odd results, long text, odd names and echoes.

Each test runs the real CLI against the scripted model server and checks what went over the
wire: the next request's messages are what the model was told.
"""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from tiny_cli import tool
from tiny_cli.bench.pages import PageServer
from tiny_cli.errors import ToolError
from tiny_cli.testing import ScriptedServer, reply, tool_call
from tiny_cli.tools.mcp_client import stop_servers

from .conftest import REPO

TOOLS = '''
import sys
from tiny_cli import tool


@tool
def quit0(text: str) -> str:
    """Call sys.exit(0)."""
    sys.exit(0)


@tool
def interrupt(text: str) -> str:
    """Raise KeyboardInterrupt from the tool's own code."""
    raise KeyboardInterrupt


@tool
def circular(text: str) -> dict:
    """Return a dict that holds itself."""
    d = {}
    d["self"] = d
    return d


@tool
def deep(text: str) -> list:
    """Return a list nested 100,000 deep."""
    x = []
    for _ in range(100_000):
        x = [x]
    return x


@tool
def surrogate(text: str) -> str:
    """Return text with a lone surrogate."""
    return "bad \\ud800 char"


@tool
def long_failure(text: str) -> str:
    """Fail with a very long message."""
    raise ValueError("x" * 20_000)


@tool
def echo(self: str) -> str:
    """Return the argument named self."""
    return f"echo: {self}"


@tool
def today() -> str:
    """Return today's date."""
    return "2026-01-02"
'''
NAMES = ["quit0", "interrupt", "circular", "deep", "surrogate", "long_failure", "echo", "today"]
OK = json.dumps({"status": "ok", "summary": "Done."})
CAP = 6000  # calls.DEFAULT_MAX_RESULT_CHARS
SCRIPT_CARD = {
    "id": "tooly",
    "summary": "Calls the test tools.",
    "examples": ["run the test tools"],
    "returns_required": [],
    "side_effects": "none",
    "budget": {"max_tool_calls": 6, "max_output_tokens": 300, "max_wall_seconds": 30},
}


@pytest.fixture
def tools_env(tmp_path: Path) -> dict[str, str]:
    """A tools module and a card that lists its tools (with docs_search)."""
    module = tmp_path / "fix_tools.py"
    module.write_text(TOOLS, encoding="utf-8")
    cards = tmp_path / "cards"
    cards.mkdir()
    card = {**SCRIPT_CARD, "tools": [*NAMES, "docs_search"]}
    (cards / "tooly.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    return {"TINY_TOOLS": str(module), "TINY_CARDS": str(cards)}


def _invoke(
    tiny, server: ScriptedServer, env: dict[str, str], card: str = "tooly", task: str = "go"
):
    result = tiny("invoke", card, task, "--json", env={**env, "TINY_BASE_URL": server.url})
    assert "Traceback" not in result.output, result.output
    assert result.stdout, result.output
    return result, json.loads(result.stdout)


def _last(server: ScriptedServer, index: int = -1) -> dict[str, Any]:
    """The last message of request `index`: what the model was told last."""
    return server.requests[index]["messages"][-1]


# --- 1: sys.exit() and KeyboardInterrupt in a tool ------------------------------------------


def test_a_tool_that_calls_sys_exit_is_answered_as_an_error(
    tiny, scripted_server, tools_env
) -> None:
    scripted_server.add(tool_call("quit0", {"text": "x"}), reply(OK))
    result, digest = _invoke(tiny, scripted_server, tools_env)
    scripted_server.assert_done()
    assert _last(scripted_server)["content"] == "error: quit0 failed: SystemExit: 0"
    assert digest["status"] == "ok" and result.exit_code == 0


def test_a_tool_that_raises_keyboard_interrupt_is_answered_as_an_error(cli_env, tools_env) -> None:
    """Its own KeyboardInterrupt (no Ctrl-C of the user's) goes back to the model; tiny goes on.

    A process of its own: a KeyboardInterrupt that escaped in this one would stop pytest.
    """
    with ScriptedServer([tool_call("interrupt", {"text": "x"}), reply(OK)]) as server:
        env = {**os.environ, **cli_env, **tools_env, "TINY_BASE_URL": server.url}
        done = subprocess.run(
            [sys.executable, "-m", "tiny_cli", "invoke", "tooly", "go", "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        server.assert_done()
        assert server.requests[-1]["messages"][-1]["content"] == (
            "error: interrupt failed: KeyboardInterrupt"
        )
    assert json.loads(done.stdout)["cost"]["tool_calls"] == 1


# --- 2: async and generator functions are no tools ----------------------------------------


def test_an_async_or_generator_function_is_refused_as_a_tool() -> None:
    async def fetch(url: str) -> str:
        """Fetch a page."""
        return url

    def pages(url: str):
        """Yield pages."""
        yield url

    with pytest.raises(ToolError, match=r"^@tool .*fetch: an async function cannot be a tool"):
        tool(fetch)
    with pytest.raises(ToolError, match=r"pages: a generator function cannot be a tool"):
        tool(name="pages")(pages)


def test_a_tool_module_with_an_async_tool_fails_to_load(tiny, scripted_server, tmp_path) -> None:
    module = tmp_path / "async_tools.py"
    module.write_text(
        "from tiny_cli import tool\n\n\n@tool\nasync def today() -> str:\n"
        '    """Return the date."""\n    return "2026-01-02"\n',
        encoding="utf-8",
    )
    cards = tmp_path / "async-cards"
    cards.mkdir()
    (cards / "dated.yaml").write_text(
        yaml.safe_dump({**SCRIPT_CARD, "id": "dated", "tools": ["today"]})
    )
    env = {
        "TINY_TOOLS": str(module),
        "TINY_CARDS": str(cards),
        "TINY_BASE_URL": scripted_server.url,
    }
    result = tiny("invoke", "dated", "go", "--json", env=env)
    assert result.exit_code != 0 and not scripted_server.requests
    (line,) = result.stderr.strip().splitlines()
    assert "today: an async function cannot be a tool" in line


# --- 3: a result JSON cannot hold -----------------------------------------------------------


def test_a_result_that_cannot_be_json_is_answered_as_an_error(
    tiny, scripted_server, tools_env
) -> None:
    scripted_server.add(
        tool_call("circular", {"text": "x"}), tool_call("deep", {"text": "x"}), reply(OK)
    )
    _, digest = _invoke(tiny, scripted_server, tools_env)
    scripted_server.assert_done()
    assert _last(scripted_server, 1)["content"] == (
        "error: circular failed: its result cannot be written as JSON "
        "(ValueError: Circular reference detected)"
    )
    assert _last(scripted_server, 2)["content"].startswith(
        "error: deep failed: its result cannot be written as JSON (RecursionError"
    )
    assert digest["cost"]["tool_calls"] == 2 and digest["status"] == "ok"


# --- 4: lone surrogates ----------------------------------------------------------------------


def test_lone_surrogates_are_replaced_on_the_wire(tiny, scripted_server, tools_env) -> None:
    scripted_server.add(
        tool_call("surrogate", {"text": "x"}),
        reply("not json \ud800"),  # sent as the JSON escape "\ud800", as a model may write it
        reply(OK),
    )
    _, digest = _invoke(tiny, scripted_server, tools_env)
    scripted_server.assert_done()
    assert _last(scripted_server, 1)["content"] == "bad \ufffd char"
    said = [m["content"] for m in scripted_server.requests[2]["messages"][-2:]]
    assert said[0] == "not json \ufffd"  # the model's own text, then the repair
    assert digest["status"] == "ok"


def test_a_run_with_lone_surrogates_records_and_replays(tiny, tools_env, tmp_path) -> None:
    recording = tmp_path / "run.jsonl"
    turns = [tool_call("surrogate", {"text": "x"}), reply("not json \ud800"), reply(OK)]
    with ScriptedServer(turns) as server:
        env = {**tools_env, "TINY_BASE_URL": server.url}
        recorded = tiny("invoke", "tooly", "go", "--json", "--record", str(recording), env=env)
        assert recorded.exit_code == 0, recorded.output
    replayed = tiny("invoke", "tooly", "go", "--json", "--replay", str(recording), env=env)
    assert replayed.exit_code == 0, replayed.output
    first, again = json.loads(recorded.stdout), json.loads(replayed.stdout)
    assert again["status"] == first["status"] == "ok"
    assert again["notes_for_caller"] == first["notes_for_caller"]
    assert again["cost"]["tool_calls"] == first["cost"]["tool_calls"] == 1


# --- 5: arguments named like the call's own parameters -------------------------------------


def test_a_tool_parameter_named_self_is_passed(tiny, scripted_server, tools_env) -> None:
    scripted_server.add(tool_call("echo", {"self": "hi"}), reply(OK))
    _invoke(tiny, scripted_server, tools_env)
    scripted_server.assert_done()
    assert _last(scripted_server)["content"] == "echo: hi"


KIT = '''
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)
server = MCPServer("kit")


@server.tool(annotations=READ_ONLY)
def describe(tool: str) -> str:
    """Describe a tool by name."""
    return f"{tool} is a fine tool"


@server.tool(annotations=READ_ONLY)
def ping(server: str) -> str:
    """Ping a server by host name."""
    return f"pong from {server}"


@server.tool(annotations=READ_ONLY)
def fail_long() -> str:
    """Fail with a very long error."""
    raise ToolError("y" * 20_000)


server.run()
'''


@pytest.fixture
def kit_cards(tmp_path: Path):
    """A real MCP server over stdio whose tools take `tool` and `server`, and a card for it."""
    script = tmp_path / "kit.py"
    script.write_text(KIT, encoding="utf-8")
    cards = tmp_path / "kit-cards"
    cards.mkdir()
    servers = {"servers": {"kit": {"command": sys.executable, "args": [str(script)]}}}
    (cards / "mcp.yaml").write_text(yaml.safe_dump(servers), encoding="utf-8")
    card = {**SCRIPT_CARD, "id": "kit", "tools": ["kit.describe", "kit.ping", "kit.fail_long"]}
    (cards / "kit.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    yield {"TINY_CARDS": str(cards)}
    stop_servers()


@pytest.mark.slow
def test_mcp_arguments_named_tool_and_server_reach_the_server(
    tiny, scripted_server, kit_cards
) -> None:
    scripted_server.add(
        tool_call("kit__describe", {"tool": "foo"}),
        tool_call("kit__ping", {"server": "db1"}),
        tool_call("kit__fail_long", {}),
        reply(OK),
    )
    _, digest = _invoke(tiny, scripted_server, kit_cards, card="kit")
    scripted_server.assert_done()
    assert _last(scripted_server, 1)["content"] == "foo is a fine tool"
    assert _last(scripted_server, 2)["content"] == "pong from db1"
    # 7: an MCP tool's error text is capped like any result
    failed = _last(scripted_server, 3)["content"]
    assert failed.startswith("error: kit__fail_long failed: ") and "yyyyy" in failed
    assert len(failed) < CAP + 100 and failed.endswith("more characters not shown]")
    assert digest["cost"]["tool_calls"] == 3


# --- 6: a tool that only echoes the model's own text is no evidence ------------------------

PAGE = (
    "<html><head><title>Acme Pricing</title></head><body><p>Widgets cost 5 EUR.</p></body></html>"
)


def _web(tiny, server: ScriptedServer, task: str, *flags: str) -> dict[str, Any]:
    result = tiny("invoke", "web-reader", task, "--json", *flags, env={"TINY_BASE_URL": server.url})
    assert "Traceback" not in result.output, result.output
    server.assert_done()
    return json.loads(result.stdout)


def test_html_the_model_wrote_itself_is_no_evidence(tiny, scripted_server) -> None:
    url = "https://example.org/pricing"
    made_up = "<html><title>Acme Pricing</title><p>Widgets cost 5 EUR.</p></html>"
    answer = {"status": "ok", "summary": "Widgets cost 5 EUR.", "url": url, "title": "Acme Pricing"}
    scripted_server.add(tool_call("html_to_text", {"html": made_up}), reply(json.dumps(answer)))
    digest = _web(tiny, scripted_server, f"what does {url} say about prices")
    assert "Acme Pricing" in _last(scripted_server)["content"]  # the tool did run
    assert digest["field_sources"] == {"url": "task", "title": "args"}
    assert (digest["status"], digest["reason"]) == ("partial", "no_evidence")


def test_html_a_fetch_returned_passed_on_is_evidence(tiny, scripted_server, tmp_path) -> None:
    (tmp_path / "site").mkdir()
    (tmp_path / "site" / "pricing.html").write_text(PAGE)
    with PageServer(tmp_path / "site") as site:
        url = f"{site.url}/pricing.html"
        answer = {"status": "ok", "summary": "Widgets: 5 EUR.", "url": url, "title": "Acme Pricing"}
        scripted_server.add(
            tool_call("http_get", {"url": url}),
            tool_call("html_to_text", {"html": PAGE}),
            reply(json.dumps(answer)),
        )
        host = site.url.split("://", 1)[1]
        digest = _web(tiny, scripted_server, f"what does {url} say", "--allow-host", host)
    assert _last(scripted_server, 1)["content"] == PAGE
    assert digest["field_sources"] == {"url": "tool", "title": "tool"}
    assert (digest["status"], digest["reason"]) == ("ok", None)


# --- 7: error text is capped -------------------------------------------------------------------


def test_a_long_tool_error_is_capped(tiny, scripted_server, tools_env) -> None:
    scripted_server.add(tool_call("long_failure", {"text": "x"}), reply(OK))
    _invoke(tiny, scripted_server, tools_env)
    told = _last(scripted_server)["content"]
    assert told.startswith("error: long_failure failed: ValueError: xxx")
    assert len(told) < CAP + 100 and told.endswith("more characters not shown]")


class _Redirect(http.server.BaseHTTPRequestHandler):
    """Send every request on to the discard port of loopback, an address tiny refuses."""

    def do_GET(self) -> None:
        self.send_response(302)
        self.send_header("Location", "http://127.0.0.1:9/")
        self.end_headers()

    def log_message(self, *_: Any) -> None:
        pass


def test_a_refused_address_is_capped_for_the_model_and_the_note(tiny, scripted_server) -> None:
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Redirect) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        host = f"127.0.0.1:{server.server_address[1]}"
        url = f"http://{host}/" + "a" * 20_000  # named whole in the refusal of its redirect
        gave_up = json.dumps({"status": "partial", "summary": "The page could not be fetched."})
        scripted_server.add(tool_call("http_get", {"url": url}), reply(gave_up))
        digest = _web(tiny, scripted_server, f"read http://{host}/", "--allow-host", host)
        server.shutdown()
    told = _last(scripted_server)["content"]
    assert told.startswith("error: http_get failed: refused:") and len(told) < CAP + 100
    (note,) = [n for n in digest["notes_for_caller"] if n.startswith("http_get refused:")]
    assert len(note) < CAP + 100 and note.endswith("more characters not shown]")


# --- 8: a ghost call's name is cut where it is echoed ----------------------------------------


def test_a_huge_ghost_name_is_cut_wherever_it_is_echoed(tiny, scripted_server, tools_env) -> None:
    name, shown = "g" * 300_000, "g" * 64 + "…"
    scripted_server.add(tool_call(name, {}), reply(OK))
    result, digest = _invoke(tiny, scripted_server, tools_env)
    scripted_server.assert_done()
    asked, told = scripted_server.requests[1]["messages"][-2:]
    assert asked["tool_calls"][0]["function"]["name"] == shown
    assert told["content"].startswith(f"error: unknown tool '{shown}'. Your tools are: quit0,")
    assert digest["cost"]["ghost_names"] == [shown]
    assert any(
        f'ghost call(s) to tools this agent does not have: "{shown}"' in n
        for n in digest["notes_for_caller"]
    )
    assert len(result.stdout) < 10_000
    logged = tiny("runs", "show", "1", "--json", env=tools_env)  # the run log: cut too
    assert name not in logged.stdout and shown in logged.stdout


def test_a_huge_ghost_name_in_json_mode_is_cut(tiny, scripted_server, tools_env) -> None:
    name, shown = "g" * 300_000, "g" * 64 + "…"
    scripted_server.add(reply(json.dumps({"tool": name, "arguments": {}})), reply(OK))
    _, digest = _invoke(tiny, scripted_server, {**tools_env, "TINY_TOOL_MODE": "json"})
    scripted_server.assert_done()
    assert _last(scripted_server)["content"].startswith(f"Result of {shown}:\nerror: unknown tool")
    assert digest["cost"]["ghost_names"] == [shown]


# --- 9: json mode, a call with no "arguments" --------------------------------------------------


def test_json_mode_a_call_without_arguments_is_a_call(tiny, scripted_server, tools_env) -> None:
    scripted_server.add(reply('{"tool": "today"}'), reply('{"tool": "docs_search"}'), reply(OK))
    _, digest = _invoke(tiny, scripted_server, {**tools_env, "TINY_TOOL_MODE": "json"})
    scripted_server.assert_done()
    assert _last(scripted_server, 1)["content"].startswith("Result of today:\n2026-01-02\n")
    checked = _last(scripted_server, 2)["content"]  # checked against the schema like any call
    assert checked.startswith("Result of docs_search:\nerror:") and "query" in checked
    assert not any(
        "cannot be used" in str(m["content"]) for m in scripted_server.requests[2]["messages"]
    )
    assert digest["cost"]["tool_calls"] == 2
    assert digest["status"] == "ok"
