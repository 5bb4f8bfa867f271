"""The library as a caller uses it: an MCP run leaves the application's own `client` logger
alone; a run's, a workspace's and the settings' arguments of the wrong kind are refused up
front, by name; `@tool(name="name")` names the tool, and `@tool("name")` is refused with that hint.

Each test goes through `tiny_cli` as a library caller would, with the scripted model server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx
import pytest
import yaml

import tiny_cli as T
from tiny_cli import ConfigError, ScriptedServer, ToolError

ROOT = Path(__file__).resolve().parent.parent
RAW = ROOT / "tests" / "mcp_servers" / "raw.py"
TASK = "How does onboarding work here?"
ANSWER = json.dumps({"status": "ok", "summary": "Two weeks.", "source": "onboarding.md"})

pytestmark = pytest.mark.usefixtures("stop_mcp_servers")  # none outlives its test


def _refused(call: Any) -> ConfigError:
    """Run `call`, which must raise ConfigError, and return it."""
    with pytest.raises(ConfigError) as caught:
        call()
    return caught.value


@pytest.fixture
def workspace(tmp_path: Path, scripted_server: ScriptedServer) -> T.Workspace:
    """This repository's cards, a scratch home, the scripted model as the endpoint."""
    settings = T.load_settings(env={"TINY_HOME": str(tmp_path / "home")}, cwd=tmp_path)
    flagged = settings.with_flags(cards_dir=ROOT / "cards", base_url=scripted_server.url)
    return T.open_workspace(flagged)


@pytest.fixture
def provider(scripted_server: ScriptedServer) -> Any:
    with T.OpenAIProvider(scripted_server.url, retries=0) as provider:
        yield provider


# --- 1. an MCP run and the application's `client` logger -----------------------------------

# the raw server, after one notification the SDK cannot validate: its client session logs
# that to the logger named "client"
NOTE = json.dumps({"jsonrpc": "2.0", "method": "notifications/message", "params": {}})
SERVER = (
    f"import runpy; print({NOTE!r}, flush=True); runpy.run_path({str(RAW)!r}, run_name='__main__')"
)
APP = """
import io, json, logging, sys
import tiny_cli as T
root, own = io.StringIO(), io.StringIO()
logging.basicConfig(stream=root, format="%(name)s: %(message)s")
logging.getLogger("client").addHandler(logging.StreamHandler(own))  # the app's own logger
settings = T.load_settings()
with T.OpenAIProvider(settings.base_url) as provider:
    ws = T.open_workspace(settings)
    digest = T.run_card(ws, "hello", T.make_brief("say hello"), provider=provider)
logging.getLogger("client").warning("payment gateway unreachable, order 42")
print(json.dumps([digest.status, own.getvalue(), root.getvalue()]))
"""


@pytest.mark.slow
def test_an_mcp_run_leaves_the_apps_client_logger_and_still_shows_the_sdks_warning(
    tmp_path: Path, scripted_server: ScriptedServer, cli_env: dict[str, str]
) -> None:
    cards = tmp_path / "cards"
    cards.mkdir()
    server = {"command": sys.executable, "args": ["-c", SERVER, "--tool", "hello"]}
    (cards / "mcp.yaml").write_text(yaml.safe_dump({"servers": {"raw": server}}))
    card = {"id": "hello", "summary": "Says hello.", "tools": ["raw.hello"], "returns_required": []}
    (cards / "hello.yaml").write_text(yaml.safe_dump(card))
    scripted_server.add(T.tool_call("raw__hello", {}), T.reply('{"status": "ok", "summary": "hi"}'))
    env = {**os.environ, **cli_env, "TINY_CARDS": str(cards), "TINY_BASE_URL": scripted_server.url}
    done = subprocess.run(
        [sys.executable, "-c", APP],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stderr[-2000:]
    status, own, root = json.loads(done.stdout)
    assert status == "ok"
    # the app's record reaches its own handler and the root's, and nothing of the SDK's does
    assert own == "payment gateway unreachable, order 42\n"
    assert root == "client: payment gateway unreachable, order 42\n"
    # the SDK's own record is a TinyWarning (Python shows it: no CLI here); the app's is not there
    first = done.stderr.splitlines()[0]
    assert first.endswith(
        "TinyWarning: MCP SDK: Failed to validate notification: notifications/message "
        "(ValidationError)"
    )
    assert "payment gateway" not in done.stderr


# --- 2. a run's arguments of the wrong kind -------------------------------------------------

WRONG = [
    ("clock", 3),
    ("observer", 3),
    ("artifacts", 3),
    ("routing", 3),
    ("cap", 3),
    ("routing", {"decision": "route"}),
]


@pytest.mark.parametrize(("name", "value"), WRONG)
def test_run_card_refuses_an_argument_of_the_wrong_kind_before_the_model(
    workspace, provider, scripted_server, name, value
) -> None:
    brief = T.make_brief(TASK)
    error = _refused(
        lambda: T.run_card(workspace, "docs-finder", brief, provider=provider, **{name: value})
    )
    assert error.field == name and str(error).startswith(f"{name}: must be ")
    assert scripted_server.requests == []  # before any work


@pytest.mark.parametrize(("name", "value"), [("clock", 3), ("observer", 3), ("artifacts", 3)])
def test_delegate_refuses_an_argument_of_the_wrong_kind_before_routing(
    workspace, provider, scripted_server, name, value
) -> None:
    def never(task: str) -> Any:
        raise AssertionError("the task must not be routed")

    router = SimpleNamespace(route=never)
    brief = T.make_brief(TASK)
    error = _refused(
        lambda: T.delegate(workspace, router, brief, provider=provider, **{name: value})
    )
    assert error.field == name and str(error).startswith(f"{name}: must be ")
    assert scripted_server.requests == []


@pytest.mark.parametrize(
    ("name", "value"),
    [("model", 3), ("model", ""), ("model", "  "), ("model", None), *WRONG],
)
def test_invoke_refuses_an_argument_of_the_wrong_kind_before_the_model(
    workspace, provider, scripted_server, name, value
) -> None:
    arguments = {"registry": workspace.registry, "provider": provider, "model": "m", name: value}
    card, brief = workspace.cards["docs-finder"], T.make_brief(TASK)
    error = _refused(lambda: T.invoke(card, brief, **arguments))
    assert error.field == name and str(error).startswith(f"{name}: must be ")
    assert scripted_server.requests == []


def test_the_arguments_of_the_right_kind_still_run(workspace, provider, scripted_server) -> None:
    scripted_server.add(T.tool_call("docs_search", {"query": "onboarding"}), T.reply(ANSWER))
    events: list[Any] = []
    cap = replace(workspace.cards["docs-finder"].budget, max_tool_calls=2)  # a Budget, lowered
    digest = T.run_card(
        workspace, "docs-finder", T.make_brief(TASK), provider=provider,
        observer=events.append, cap=cap, routing=None, artifacts=None,
    )  # fmt: skip
    assert digest.status == "ok" and type(events[-1]).__name__ == "Finished"
    assert len(scripted_server.requests) == 2


def test_open_workspace_refuses_a_transport_that_is_none(tmp_path: Path) -> None:
    settings = T.load_settings(env={"TINY_HOME": str(tmp_path)}).with_flags(
        cards_dir=ROOT / "cards"
    )
    error = _refused(lambda: T.open_workspace(settings, transport=3))
    assert error.field == "transport" and str(error).startswith("transport: must be ")
    mock = httpx.MockTransport(lambda request: httpx.Response(200, text="hello"))
    assert "docs-finder" in T.open_workspace(settings, transport=mock).cards


# --- 3. load_settings and @tool ---------------------------------------------------------------


def test_load_settings_takes_a_str_folder_and_reads_its_project_file(tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text('model = "from-the-project"\n')
    settings = T.load_settings(env={"TINY_HOME": str(tmp_path)}, cwd=str(tmp_path))
    assert settings.model == "from-the-project" and settings.project_file == tmp_path / "tiny.toml"


@pytest.mark.parametrize(("arguments", "name"), [({"cwd": 3}, "cwd"), ({"env": 1}, "env")])
def test_load_settings_names_an_argument_of_the_wrong_kind(arguments, name) -> None:
    error = _refused(lambda: T.load_settings(**arguments))
    assert error.field == name and str(error).startswith(f"{name}: must be ")


def test_a_tools_name_given_by_keyword_is_its_name(workspace, provider, scripted_server) -> None:
    @T.tool(name="docs_search")
    def my_search(query: str) -> str:
        """Search my notes.

        Args:
            query: What to look for.
        """
        return "onboarding.md: two weeks, with a buddy"

    scripted_server.add(T.tool_call("docs_search", {"query": "x"}), T.reply(ANSWER))
    digest = T.invoke(
        workspace.cards["docs-finder"], T.make_brief(TASK),
        registry=T.Registry([my_search]), provider=provider, model="m",
    )  # fmt: skip
    assert my_search.name == "docs_search" and [c.name for c in digest.calls] == ["docs_search"]
    assert digest.status == "ok"


@pytest.mark.parametrize(
    ("make", "said"),
    [(lambda: T.tool(name=3), "@tool: name must be a str, got int"),
     (lambda: T.tool(3), '@tool: decorates a function, got int; name it as @tool(name="name")'),
     (lambda: T.tool("docs_search"),
      '@tool: decorates a function, got str; name it as @tool(name="name")')],
)  # fmt: skip
def test_a_tool_name_or_function_of_the_wrong_kind_is_one_tool_error(make, said) -> None:
    with pytest.raises(ToolError) as caught:
        make()
    assert str(caught.value).startswith(said)


# --- 4. with_flags(api_key=...) -------------------------------------------------------------


def test_a_flagged_api_key_that_cannot_be_sent_is_the_api_key_field(tmp_path: Path) -> None:
    settings = T.load_settings(env={"TINY_HOME": str(tmp_path)})
    error = _refused(lambda: settings.with_flags(api_key="sk-a\nb"))
    assert error.field == "api_key" and str(error).startswith("with_flags: api_key: ")
    assert "sk-a" not in str(error)
    assert _refused(lambda: settings.with_flags(api_key=3)).field == "api_key"


def test_a_registry_of_no_list_is_refused_naming_the_argument() -> None:
    error = _refused(lambda: T.Registry(3))
    assert (error.field, str(error)) == (
        "tools",
        "tools: must be a list of tools (made with @tool), got a number",
    )
