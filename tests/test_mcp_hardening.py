"""MCP servers that collide, leak, flood or babble: each has a defined, bounded outcome.

The servers are real processes: tests/mcp_servers/raw.py, a raw JSON-RPC server over stdio
(no SDK, so it starts fast and can misbehave in ways the SDK's own servers cannot); the model
is tiny_cli.testing's scripted server.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import string
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import mcp_types
import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.mcp_servers.raw import entry
from tiny_cli.agent.calls import _arguments  # the tool-argument validator the run loop uses
from tiny_cli.agent.loop import tools_section
from tiny_cli.agent.reply import response_format
from tiny_cli.errors import ConfigError, ToolServerError
from tiny_cli.testing import ScriptedServer, reply, tool_call
from tiny_cli.tools.mcp_client import SDK_WARNINGS, _tool
from tiny_cli.tools.mcp_config import McpServer, load_mcp_config
from tiny_cli.tools.registry import Registry, Tool

OK = json.dumps({"status": "ok", "summary": "Done.", "answer": "42"})

pytestmark = pytest.mark.usefixtures("stop_mcp_servers")  # none outlives its test


def raw(name: str, tool: str, *args: str) -> dict[str, Any]:
    """An mcp.yaml entry starting the raw server `name`, serving `tool`, with `args`."""
    return entry("--name", name, "--tool", tool, *args)


def cards_folder(where: Path, servers: dict[str, Any], **cards: list[str] | dict[str, Any]) -> Path:
    """Write mcp.yaml and one card per keyword (id -> its tools, or its fields) into `where`."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "mcp.yaml").write_text(yaml.safe_dump({"servers": servers}), encoding="utf-8")
    for card_id, fields in cards.items():
        extra = {"tools": fields} if isinstance(fields, list) else fields
        card = {"id": card_id, "summary": f"The {card_id} test card.", "returns_required": []}
        text = yaml.safe_dump({**card, "returns_required": ["answer"], **extra})
        (where / f"{card_id}.yaml").write_text(text, encoding="utf-8")
    return where


def workspace(cards: Path, home: Path) -> Any:
    from tiny_cli.settings import load_settings
    from tiny_cli.workspace import open_workspace

    return open_workspace(load_settings({"TINY_CARDS": str(cards), "TINY_HOME": str(home)}))


def tool_results(server: ScriptedServer) -> list[str]:
    """What the model was told each tool call returned, in order."""
    return [m["content"] for r in server.requests for m in r["messages"] if m["role"] == "tool"]


def tiny_process(
    cards: Path, server: ScriptedServer, cli_env: dict[str, str], card: str
) -> subprocess.CompletedProcess[str]:
    """Run `tiny invoke CARD --json` as a user would: its own process, its real stderr."""
    env = {**os.environ, **cli_env, "TINY_CARDS": str(cards), "TINY_BASE_URL": server.url}
    command = [sys.executable, "-m", "tiny_cli", "invoke", card, "do the thing", "--json"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


# --- wire names: each card's own tools --------------------------------------------------------


# servers `a` (tool b__c) and `a__b` (tool c): a.b__c and a__b.c are both a__b__c
COLLIDE = {"a": raw("a", "b__c"), "a__b": raw("a__b", "c")}


def test_validate_refuses_two_mcp_tools_that_meet_on_one_wire_name(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = cards_folder(tmp_path / "cards", COLLIDE, xa=["a.b__c"], xb=["a__b.c"])
    checked = tiny("validate", env={"TINY_CARDS": str(cards)})
    invoked = tiny("invoke", "xa", "go", env={"TINY_CARDS": str(cards)})

    assert checked.exit_code == 1
    lines = [line for line in checked.stdout.splitlines() if "a__b__c" in line]
    assert len(lines) == 1, checked.stdout
    assert lines[0].startswith(f"{cards / 'xb.yaml'}:6: tools[0]: ")  # with its line
    assert all(name in lines[0] for name in ("'a.b__c'", "'a__b.c'", "card xa", "card xb"))
    assert invoked.exit_code != 0 and "'a__b__c'" in invoked.stderr  # no run picks one


def test_an_mcp_tool_may_not_reach_the_model_under_a_registered_tools_name(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    tools = tmp_path / "my_tools.py"
    tools.write_text(
        "from tiny_cli.tools import tool\n\n\n@tool\ndef a__b__c() -> str:\n"
        '    """Say hello."""\n    return "hello"\n',
        encoding="utf-8",
    )
    cards = cards_folder(tmp_path / "cards", COLLIDE, xa=["a.b__c"])
    checked = tiny("validate", env={"TINY_CARDS": str(cards), "TINY_TOOLS": str(tools)})

    assert checked.exit_code == 1
    assert "'a.b__c' of card xa and 'a__b__c' (a registered tool)" in checked.stdout


def test_a_wire_name_two_cards_share_runs_each_cards_own_tool(
    tmp_path: Path, scripted_server: ScriptedServer
) -> None:
    from tiny_cli.agent.loop import invoke as run
    from tiny_cli.digest import make_brief
    from tiny_cli.provider.client import OpenAIProvider

    # two folders, each valid alone, loaded in one process (a library, a bench): xb is last
    mine = workspace(cards_folder(tmp_path / "one", COLLIDE, xa=["a.b__c"]), tmp_path)
    theirs = workspace(cards_folder(tmp_path / "two", COLLIDE, xb=["a__b.c"]), tmp_path)
    scripted_server.add(*[tool_call("a__b__c", {}), reply(OK)] * 2)
    provider = OpenAIProvider(scripted_server.url, api_key=None)
    for ws, card in ((mine, "xa"), (theirs, "xb")):
        digest = run(
            ws.cards[card], make_brief("go"), registry=ws.registry, provider=provider, model="m"
        )
        assert digest.status == "ok"

    assert tool_results(scripted_server) == ["server a ran b__c", "server a__b ran c"]


# --- secrets in mcp.yaml, literal in part -----------------------------------------------------


@pytest.mark.parametrize(
    ("section", "key", "value"),
    [
        ("headers", "Authorization", "Bearer hunter2-literal${EMPTY}"),
        ("headers", "Authorization", "${EMPTY}hunter2"),
        ("headers", "Authorization", "Bearer ${T} hunter2"),
        ("headers", "Proxy-Authorization", "hunter2 ${T}"),
        ("headers", "X-Api-Key", "hunter2${T}"),
        ("headers", "X-Auth-Token", "Bearer\nhunter2${T}"),
        ("env", "DB_PASSWORD", "hunter2${T}"),
    ],
)
def test_a_secret_written_into_mcp_yaml_in_part_is_refused(
    tmp_path: Path, section: str, key: str, value: str
) -> None:
    path = tmp_path / "mcp.yaml"
    spec = {"url": "http://x/mcp"} if section == "headers" else {"command": "srv"}
    server = {**spec, section: {key: value}}
    path.write_text(yaml.safe_dump({"servers": {"gh": server}}), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_mcp_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: servers.gh.{section}.{key}: ") and "\n" not in message
    assert "hunter2" not in message and "literal" not in message


def test_a_password_in_the_url_literal_in_part_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    server = {"url": "https://user:hunter2${PW}@x/mcp"}
    path.write_text(yaml.safe_dump({"servers": {"gh": server}}), encoding="utf-8")
    with pytest.raises(ConfigError, match=rf"^{path}: servers\.gh\.url: ") as caught:
        load_mcp_config(path)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    "value", ["${T}", "Bearer ${T}", "Basic ${T}", "Token ${T}", "bearer ${T}"]
)
def test_a_secret_that_is_a_variable_after_a_scheme_at_most_is_accepted(
    tmp_path: Path, value: str
) -> None:
    path = tmp_path / "mcp.yaml"
    server = {"url": "https://user:${PW}@x/mcp", "headers": {"Authorization": value}}
    path.write_text(yaml.safe_dump({"servers": {"gh": server}}), encoding="utf-8")
    config = load_mcp_config(path)
    assert config is not None
    resolved, secrets = config.servers["gh"].resolved({"T": "abc123", "PW": "pw456"})
    assert resolved.headers["Authorization"] == value.replace("${T}", "abc123")
    assert secrets == {"abc123", "pw456"}


def test_validate_names_file_server_and_header_of_a_partly_literal_secret(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    server = {"url": "http://x/mcp", "headers": {"Authorization": "Bearer hunter2-literal${EMPTY}"}}
    cards = cards_folder(tmp_path / "cards", {"gh": server}, xa=["gh.search"])
    result = tiny("validate", env={"TINY_CARDS": str(cards)})

    assert result.exit_code == 1  # a problem validate reports, as a card's
    assert f"{cards / 'mcp.yaml'}: servers.gh.headers.Authorization: " in result.stdout
    assert "hunter2" not in result.stdout + result.stderr


# --- what a server writes: bounded ------------------------------------------------------------


def _largest_open_file() -> int:
    """The size of the largest regular file this process holds open (Linux's /proc)."""
    sizes = [0]
    for fd in Path("/proc/self/fd").iterdir():
        with contextlib.suppress(OSError):  # the listing's own fd is gone by now
            info = fd.stat()
            sizes += [info.st_size] if stat.S_ISREG(info.st_mode) else []
    return max(sizes)


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="reads /proc/self/fd")
def test_a_server_that_floods_stderr_and_dies_costs_only_its_last_lines(tmp_path: Path) -> None:
    loud = {"box": raw("box", "t", "--stderr-mb", "50")}
    ws = workspace(cards_folder(tmp_path / "cards", loud, loud=["box.t"]), tmp_path)
    with pytest.raises(ToolServerError) as caught:
        ws.registry.bind(ws.cards["loud"].tools, 60.0)

    assert str(caught.value) == "MCP server 'box' did not start: box: last words"
    assert caught.value.server == "box"  # which server, without reading the message
    # its stderr is read and dropped as it comes: no file holds the 50 MB
    assert _largest_open_file() < 2**20


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_a_server_that_babbles_on_stdout_gives_a_few_one_line_warnings(
    tmp_path: Path, scripted_server: ScriptedServer, cli_env: dict[str, str]
) -> None:
    noisy = {"n": raw("n", "t", "--noise", "200")}
    cards = cards_folder(tmp_path / "cards", noisy, noisy=["n.t"])
    scripted_server.add(tool_call("n__t", {}), reply(OK))
    done = tiny_process(cards, scripted_server, cli_env, "noisy")

    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads(done.stdout)["status"] == "ok"
    assert tool_results(scripted_server) == ["server n ran t"]  # the noise broke nothing
    assert "Traceback" not in done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == SDK_WARNINGS + 1, done.stderr[-2000:]
    assert all(line.startswith("tiny: warning: MCP SDK: ") for line in lines[:-1])
    assert "Failed to parse JSONRPC message from server" in lines[0]
    assert (
        lines[-1]
        == f"tiny: warning: {200 - SDK_WARNINGS} more warning(s) from the MCP SDK not shown"
    )


@pytest.mark.slow
def test_a_result_nested_100000_deep_gives_one_line_not_a_traceback(
    tmp_path: Path, scripted_server: ScriptedServer, cli_env: dict[str, str]
) -> None:
    deep = {"d": raw("d", "t", "--deep", "100000")}
    card = {"tools": ["d.t"], "budget": {"max_wall_seconds": 2}}
    cards = cards_folder(tmp_path / "cards", deep, deep=card)
    scripted_server.add(tool_call("d__t", {}))
    done = tiny_process(cards, scripted_server, cli_env, "deep")

    digest = json.loads(done.stdout)  # the document, whatever stderr says
    assert digest["status"] == "failed" and digest["reason"] == "max_wall_seconds"
    assert "Traceback" not in done.stderr and len(done.stderr) < 1000, done.stderr[-2000:]
    assert done.stderr.splitlines() == [
        "tiny: warning: MCP SDK: Failed to parse JSONRPC message from server (ValidationError)"
    ]


# --- published input schemas: any valid JSON Schema ------------------------------------------

QUICK = settings(
    max_examples=40,
    deadline=2000,  # ms per example
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=2) | st.dictionaries(st.text(max_size=4), inner, max_size=2)
    ),
    max_leaves=4,
)
keys = st.text(string.ascii_letters + "_-.", min_size=1, max_size=6)
types = st.sampled_from(["object", "array", "string", "number", "integer", "boolean", "null"])
keywords = {  # JSON Schema 2020-12 keywords whose values need no subschema
    "type": types | st.lists(types, min_size=1, max_size=3, unique=True),
    "description": st.text(max_size=12),
    "enum": st.lists(json_values, max_size=2),
    "const": json_values,
    "default": json_values,
    "minimum": st.integers() | st.floats(allow_nan=False, allow_infinity=False),
    "maxLength": st.integers(0, 50),
    "pattern": st.sampled_from(["^a", "[0-9]+$", ".*", "\\w"]),
    "format": st.sampled_from(["date", "email", "uri", "made-up"]),
    "required": st.lists(keys, max_size=2, unique=True),
}


def _with_subschemas(inner: st.SearchStrategy[Any]) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {},
        optional={
            **keywords,
            "properties": st.dictionaries(keys, inner, max_size=3),
            "items": inner,
            "additionalProperties": inner,
            "anyOf": st.lists(inner, min_size=1, max_size=2),
            "not": inner,
            "prefixItems": st.lists(inner, min_size=1, max_size=2),
            "$defs": st.dictionaries(keys, inner, max_size=1),
        },
    )


schemas = st.recursive(
    st.booleans() | st.fixed_dictionaries({}, optional=keywords), _with_subschemas, max_leaves=6
)
input_schemas = _with_subschemas(schemas) | st.builds(  # most servers: an object's properties
    lambda properties, required: {"type": "object", "properties": properties, **required},
    st.dictionaries(keys, schemas, max_size=4),
    st.fixed_dictionaries({}, optional={"required": keywords["required"]}),
)
BOX = McpServer("box", Path("mcp.yaml"), command="srv")


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
@QUICK
@given(input_schemas, json_values)
@example({"type": "object", "properties": {"q": True}}, {"q": 1})
@example({"type": "object", "properties": {"q": False, "r": {"type": ["string", "null"]}}}, {})
@example({"properties": {"q": {"anyOf": [True, {"not": True}]}}}, None)
def test_any_valid_input_schema_makes_a_tool_its_prompt_and_its_checks(
    schema: dict[str, Any], arguments: Any
) -> None:
    jsonschema.Draft202012Validator.check_schema(schema)  # the strategy makes valid ones only
    published = mcp_types.Tool(
        name="search",
        input_schema=schema,
        description="Search.",
        annotations=mcp_types.ToolAnnotations(read_only_hint=True),
    )
    tool = _tool("box__search", "box.search", published, BOX)

    assert isinstance(tool, Tool) and not tool.writes
    entry = Registry([tool]).schemas(["box__search"])[0]
    assert entry["function"]["parameters"] == schema  # as published, unchanged
    assert "- box__search(" in tools_section([entry])  # json mode's prompt
    constraint = response_format([entry], None)["json_schema"]["schema"]  # json mode's schema
    jsonschema.Draft202012Validator.check_schema(constraint)
    parsed, problem = _arguments(json.dumps(arguments), tool.parameters)  # a call's check
    assert parsed == arguments if problem is None else parsed == {}
    assert problem is not None or isinstance(arguments, dict)
