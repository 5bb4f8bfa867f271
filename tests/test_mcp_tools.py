"""Tools from MCP servers: real servers over stdio and streamable HTTP, the scripted model.

The third-party `mcp-server-time` (a dev dependency) and tests/mcp_servers/toolbox.py (built
with the SDK's MCPServer) are started for real; the model is tiny_cli.testing's scripted
server, so what goes over the wire can be compared with what the MCP server publishes.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import anyio
import pytest
import yaml

from tiny_cli.errors import ConfigError
from tiny_cli.testing import ScriptedServer, Turn, reply, respond, tool_call, tool_calls
from tiny_cli.tools.mcp_config import WIRE_NAME, load_mcp_config, wire_name

TOOLBOX = Path(__file__).resolve().parent / "mcp_servers" / "toolbox.py"
TIME_SERVER = {"command": sys.executable, "args": ["-m", "mcp_server_time"]}
BOX = {"command": sys.executable, "args": [str(TOOLBOX)]}
OK = json.dumps({"status": "ok", "summary": "Done.", "answer": "42"})
SECRET = "s3cr3t-token-for-tests"
SLACK = 8.0  # seconds a bounded run may take beyond its budget on a slow, busy CI machine


pytestmark = pytest.mark.usefixtures("stop_mcp_servers")  # none outlives its test


def folder(tmp_path: Path, servers: dict[str, Any], **cards: dict[str, Any]) -> Path:
    """Write mcp.yaml and one card file per keyword (id -> fields) into a cards folder."""
    cards_dir = tmp_path / "cards"
    cards_dir.mkdir(exist_ok=True)
    (cards_dir / "mcp.yaml").write_text(yaml.safe_dump({"servers": servers}), encoding="utf-8")
    for card_id, fields in cards.items():
        card = {"id": card_id, "summary": f"The {card_id} test card.", "returns_required": []}
        card = {**card, "returns_required": ["answer"], **fields}
        (cards_dir / f"{card_id}.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    return cards_dir


def invoke(
    tiny: Callable[..., Any],
    server: ScriptedServer,
    cards: Path,
    card: str,
    *flags: str,
    **env: str,
) -> tuple[dict[str, Any], float]:
    """Run `tiny invoke CARD` against the scripted model; return the Digest and the seconds."""
    started = time.monotonic()
    result = tiny(
        "invoke",
        card,
        "do the thing",
        "--json",
        *flags,
        env={"TINY_CARDS": str(cards), "TINY_BASE_URL": server.url, **env},
    )
    assert result.stdout, result.stderr
    return json.loads(result.stdout), time.monotonic() - started


def warm_up(tiny: Callable[..., Any], cards: Path) -> None:
    """Start the cards' servers in this process (`validate --connect`): the runs reuse them."""
    result = tiny("validate", "--connect", env={"TINY_CARDS": str(cards)})
    assert result.exit_code == 0, result.stdout


def published(target: Any) -> dict[str, Any]:
    """List a server's tools with the SDK's own client: name -> the tool as published."""
    from mcp import Client

    async def listing() -> dict[str, Any]:
        async with Client(target) as client:
            page = await client.list_tools()
            return {t.name: t.model_dump(by_alias=True, exclude_none=True) for t in page.tools}

    return anyio.run(listing)


def wire_entry(name: str, tool: dict[str, Any]) -> dict[str, Any]:
    """Return the OpenAI `tools` entry tiny must send for a published MCP tool."""
    parameters = tool["inputSchema"]
    return {
        "type": "function",
        "function": {"name": name, "description": tool["description"], "parameters": parameters},
    }


# --- over stdio: the real third-party time server ------------------------------------------


@pytest.mark.slow
def test_time_server_tool_goes_on_the_wire_with_its_published_schema(
    tmp_path: Path, scripted_server: ScriptedServer, tiny: Callable[..., Any]
) -> None:
    from mcp.client.stdio import StdioServerParameters

    cards = folder(tmp_path, {"time": TIME_SERVER}, clock={"tools": ["time.get_current_time"]})
    scripted_server.add(
        tool_call("time__get_current_time", {"timezone": "Europe/Berlin"}),
        tool_call("time__convert_time", {"source_timezone": "UTC", "time": "10:00"}),
        reply(OK),
    )
    digest, _ = invoke(tiny, scripted_server, cards, "clock")

    params = StdioServerParameters(command=sys.executable, args=["-m", "mcp_server_time"])
    tools = published(params)
    first = scripted_server.requests[0]
    assert first["tools"] == [wire_entry("time__get_current_time", tools["get_current_time"])]
    assert "time__get_current_time" in first["messages"][0]["content"]  # the prompt's name
    result = [m for m in scripted_server.requests[1]["messages"] if m["role"] == "tool"]
    assert '"timezone": "Europe/Berlin"' in result[0]["content"]
    # convert_time exists on the server, but the card did not list it: a ghost call
    assert digest["cost"]["ghost_names"] == ["time__convert_time"]
    assert (
        "unknown tool 'time__convert_time'"
        in scripted_server.requests[2]["messages"][-1]["content"]
    )
    assert digest["status"] == "ok"
    assert digest["cost"]["tool_calls"] == 2


def test_a_server_starts_once_per_process_and_is_shared_by_runs_on_threads(
    tmp_path: Path, scripted_server: ScriptedServer
) -> None:
    from tiny_cli.agent.loop import invoke as run
    from tiny_cli.digest import make_brief
    from tiny_cli.provider.client import OpenAIProvider
    from tiny_cli.settings import load_settings
    from tiny_cli.workspace import open_workspace

    def turn(request: dict[str, Any]) -> Turn:  # each run: call box.pid, then answer
        called = any(m["role"] == "tool" for m in request["messages"])
        return reply(OK) if called else tool_call("box__pid", {})

    cards = folder(tmp_path, {"box": BOX}, boxed={"tools": ["box.pid"]})
    ws = open_workspace(load_settings({"TINY_CARDS": str(cards), "TINY_HOME": str(tmp_path)}))
    provider = OpenAIProvider(scripted_server.url, api_key=None)
    scripted_server.add(*[respond(turn)] * 8)

    def one(_: int) -> str:
        card, brief = ws.cards["boxed"], make_brief("pid")
        return run(card, brief, registry=ws.registry, provider=provider, model="m").status

    with ThreadPoolExecutor(4) as pool:  # as `tiny bench --concurrency 4` runs them
        assert list(pool.map(one, range(4))) == ["ok"] * 4
    requests = scripted_server.requests
    pids = {m["content"] for r in requests for m in r["messages"] if m["role"] == "tool"}
    assert len(pids) == 1  # every run's call reached the same server process


# --- over streamable HTTP: a server the test starts on 127.0.0.1 ---------------------------


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def http_box() -> Iterator[str]:
    """Start toolbox.py over streamable HTTP; yield its URL."""
    port = _free_port()
    process = subprocess.Popen(
        [sys.executable, str(TOOLBOX), "http", str(port)],
        env={**os.environ, "TOOLBOX_TOKEN": SECRET},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_http_server_tool_goes_on_the_wire_with_its_published_schema(
    tmp_path: Path, scripted_server: ScriptedServer, tiny: Callable[..., Any], http_box: str
) -> None:
    server = {"url": http_box, "headers": {"Authorization": "Bearer ${TOOLBOX_TOKEN}"}}
    cards = folder(tmp_path, {"box": server}, adder={"tools": ["box.add", "box.authorized"]})
    scripted_server.add(
        tool_calls(
            ("box__add", {"a": 2, "b": 3}),
            ("box__note", {"text": "hi"}),
            ("box__authorized", {}),
        ),
        reply(OK),
    )
    digest, _ = invoke(tiny, scripted_server, cards, "adder", TOOLBOX_TOKEN=SECRET)

    tools = published(http_box)
    assert scripted_server.requests[0]["tools"] == [
        wire_entry("box__add", tools["add"]),
        wire_entry("box__authorized", tools["authorized"]),
    ]
    results = [m["content"] for m in scripted_server.requests[1]["messages"] if m["role"] == "tool"]
    assert results[0] == "5"
    assert results[2] == "true"  # the header went out with the token from the environment
    assert digest["cost"]["ghost_names"] == ["box__note"]  # the server has it; the card does not
    assert digest["status"] == "ok"


def test_arguments_are_checked_against_the_published_schema(
    tmp_path: Path, scripted_server: ScriptedServer, tiny: Callable[..., Any], http_box: str
) -> None:
    cards = folder(tmp_path, {"box": {"url": http_box}}, adder={"tools": ["box.add"]})
    scripted_server.add(tool_call("box__add", {"a": "two", "b": 3}), reply(OK))
    digest, _ = invoke(tiny, scripted_server, cards, "adder")

    answer = scripted_server.requests[1]["messages"][-1]["content"]
    assert answer.startswith("error: invalid arguments: a:")
    assert digest["cost"]["tool_calls"] == 1  # counted, as for a built-in tool


# --- servers that fail ---------------------------------------------------------------------


def test_a_server_that_crashes_at_start_fails_the_run_without_leaking_its_secret(
    tmp_path: Path, scripted_server: ScriptedServer, tiny: Callable[..., Any], home: Path
) -> None:
    crash = {**BOX, "args": [str(TOOLBOX), "crash"], "env": {"TOOLBOX_TOKEN": "${BOX_TOKEN}"}}
    cards = folder(tmp_path, {"box": crash}, adder={"tools": ["box.add"]})
    digest, seconds = invoke(tiny, scripted_server, cards, "adder", BOX_TOKEN=SECRET)

    assert digest["status"] == "failed"
    assert digest["reason"].startswith("MCP server 'box' did not start: boom: cannot log in")
    assert SECRET not in json.dumps(digest) and "[redacted]" in digest["reason"]
    assert scripted_server.requests == []  # no model call for a run that cannot have its tools
    assert seconds < 60 + SLACK
    for path in home.rglob("*"):
        if path.is_file():
            assert SECRET.encode() not in path.read_bytes(), path


def test_a_server_that_dies_mid_call_fails_the_run(
    tmp_path: Path, scripted_server: ScriptedServer, tiny: Callable[..., Any]
) -> None:
    cards = folder(
        tmp_path, {"box": BOX}, boom={"tools": ["box.explode"], "budget": {"max_wall_seconds": 5}}
    )
    scripted_server.add(tool_call("box__explode", {}))
    warm_up(tiny, cards)  # the budget is for the call: a busy machine may take 5 s to start it
    digest, seconds = invoke(tiny, scripted_server, cards, "boom")

    assert digest["status"] == "failed"
    assert digest["reason"].startswith("MCP server 'box' stopped during a call of explode")
    assert digest["cost"]["tool_calls"] == 1
    assert seconds < 5 + SLACK


@pytest.mark.slow
def test_a_server_that_never_answers_at_start_fails_within_the_wall_budget(
    tmp_path: Path, scripted_server: ScriptedServer, tiny: Callable[..., Any]
) -> None:
    silent = {**BOX, "args": [str(TOOLBOX), "silent"]}
    card = {"tools": ["box.add"], "budget": {"max_wall_seconds": 1.5}}
    cards = folder(tmp_path, {"box": silent}, adder=card)
    digest, seconds = invoke(tiny, scripted_server, cards, "adder")

    assert digest["status"] == "failed"
    assert re.fullmatch(
        r"MCP server 'box' did not answer within 1\.\ds \(starting\)", digest["reason"]
    )
    assert seconds < 1.5 + SLACK


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_a_tool_that_never_answers_ends_the_run_within_the_wall_budget(
    tmp_path: Path, scripted_server: ScriptedServer, tiny: Callable[..., Any]
) -> None:
    card = {"tools": ["box.wait"], "budget": {"max_wall_seconds": 4}}
    cards = folder(tmp_path, {"box": BOX}, waiter=card)
    scripted_server.add(tool_call("box__wait", {}))
    warm_up(tiny, cards)  # the budget is for the call: a busy machine may take 4 s to start it
    digest, seconds = invoke(tiny, scripted_server, cards, "waiter")

    assert digest["status"] == "failed"
    assert digest["reason"] == "max_wall_seconds"
    assert "box__wait did not answer before the time budget ran out" in digest["notes_for_caller"]
    assert any("in tools: a tool was slow" in note for note in digest["notes_for_caller"])
    assert seconds < 4 + SLACK


def test_an_error_result_reaches_the_model_and_the_log_without_the_secret(
    tmp_path: Path, scripted_server: ScriptedServer, tiny: Callable[..., Any], home: Path
) -> None:
    box = {**BOX, "env": {"TOOLBOX_TOKEN": "${BOX_TOKEN}"}}
    cards = folder(tmp_path, {"box": box}, leaky={"tools": ["box.leak"]})
    scripted_server.add(tool_call("box__leak", {}), reply(OK))
    digest, _ = invoke(tiny, scripted_server, cards, "leaky", BOX_TOKEN=SECRET)

    answer = scripted_server.requests[1]["messages"][-1]
    assert answer["role"] == "tool" and "cannot log in with token [redacted]" in answer["content"]
    assert SECRET not in json.dumps(scripted_server.requests) and SECRET not in json.dumps(digest)
    logged = [p for p in home.rglob("*") if p.is_file()]
    assert logged  # the run log is there, and holds no secret
    for path in logged:
        assert SECRET.encode() not in path.read_bytes(), path


# --- a real `tiny` process: its servers end with it ----------------------------------------


def _tiny_process(
    cards: Path, server: ScriptedServer, cli_env: dict[str, str]
) -> subprocess.Popen[bytes]:
    """Start `tiny invoke boxed` as a user would; SIGINT acts even if the suite runs in the
    background (where the shell hands children SIGINT ignored)."""
    env = {**os.environ, **cli_env, "TINY_CARDS": str(cards), "TINY_BASE_URL": server.url}
    return subprocess.Popen(
        [sys.executable, "-m", "tiny_cli", "invoke", "boxed", "what is your pid", "--json"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )


def _gone(pid: int, seconds: float) -> bool:
    """Wait until process `pid` is gone (a zombie nobody reaps counts as gone)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            return True
        if state == "Z":
            return True
        time.sleep(0.05)
    return False


def _server_pid(server: ScriptedServer) -> int:
    results = [m["content"] for r in server.requests for m in r["messages"] if m["role"] == "tool"]
    return int(results[0])


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_a_server_does_not_outlive_tiny(
    tmp_path: Path, scripted_server: ScriptedServer, cli_env: dict[str, str]
) -> None:
    cards = folder(tmp_path, {"box": BOX}, boxed={"tools": ["box.pid"]})
    scripted_server.add(tool_call("box__pid", {}), reply(OK))
    child = _tiny_process(cards, scripted_server, cli_env)
    out, err = child.communicate(timeout=60)

    assert child.returncode == 0, err
    assert json.loads(out)["status"] == "ok"
    assert _gone(_server_pid(scripted_server), SLACK)  # stopped at exit, not orphaned


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_ctrl_c_stops_the_servers_too(
    tmp_path: Path, scripted_server: ScriptedServer, cli_env: dict[str, str]
) -> None:
    # Ctrl-C ends tiny with os._exit, which skips atexit: a hung server must still be stopped
    card = {"tools": ["box.pid", "box.wait"], "budget": {"max_wall_seconds": 120}}
    cards = folder(tmp_path, {"box": BOX}, boxed=card)
    scripted_server.add(tool_call("box__pid", {}), tool_call("box__wait", {}))
    child = _tiny_process(cards, scripted_server, cli_env)
    try:
        deadline = time.monotonic() + 60
        while len(scripted_server.requests) < 2 and time.monotonic() < deadline:
            assert child.poll() is None, child.communicate()[1]
            time.sleep(0.05)
        assert len(scripted_server.requests) == 2, "tiny never called box.wait"
        time.sleep(0.5)  # the call of box.wait is under way
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 130 and b"tiny: interrupted" in err
    assert _gone(_server_pid(scripted_server), SLACK)


# --- writers ---------------------------------------------------------------------------------


def test_a_tool_not_marked_read_only_is_a_writer_put_to_approval(
    tmp_path: Path, scripted_server: ScriptedServer, tiny: Callable[..., Any]
) -> None:
    card = {"tools": ["box.note"], "side_effects": "write"}
    cards = folder(tmp_path, {"box": BOX}, noter=card)
    scripted_server.add(tool_call("box__note", {"text": "hello"}), reply(OK))
    digest, _ = invoke(tiny, scripted_server, cards, "noter", "--yes")

    assert digest["approved_writes"] == [
        {"tool": "box__note", "arguments": {"text": "hello"}, "outcome": "ok"}
    ]
    results = [m["content"] for m in scripted_server.requests[1]["messages"] if m["role"] == "tool"]
    assert results == ["stored: hello"]


def test_a_writer_tool_on_a_card_that_may_not_write_fails_the_run(
    tmp_path: Path, scripted_server: ScriptedServer, tiny: Callable[..., Any]
) -> None:
    cards = folder(tmp_path, {"box": BOX}, noter={"tools": ["box.note"]})
    digest, _ = invoke(tiny, scripted_server, cards, "noter")

    assert digest["status"] == "failed"
    assert "'box.note' writes" in digest["reason"] and "side_effects: write" in digest["reason"]
    assert scripted_server.requests == []


# --- validate, offline and --connect ---------------------------------------------------------


def test_validate_offline_names_the_card_and_tool_of_an_unknown_server(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = folder(tmp_path, {"time": TIME_SERVER}, clock={"tools": ["tme.get_current_time"]})
    result = tiny("validate", env={"TINY_CARDS": str(cards)})

    assert result.exit_code == 1
    assert f"{cards / 'clock.yaml'}:" in result.stdout
    assert "tools[0]: unknown MCP server 'tme' in 'tme.get_current_time' (did you mean" in (
        " ".join(result.stdout.split())
    )


@pytest.mark.slow
def test_validate_connect_starts_the_servers_and_checks_each_tool(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = folder(
        tmp_path,
        {"time": TIME_SERVER, "box": BOX},
        clock={"tools": ["time.get_current_time", "time.get_time"]},
        noter={"tools": ["box.note", "box.add"]},
    )
    offline = tiny("validate", env={"TINY_CARDS": str(cards)})
    online = tiny("validate", "--connect", env={"TINY_CARDS": str(cards)})

    assert offline.exit_code == 0  # both servers are declared: offline, that is all it can know
    assert online.exit_code == 1
    lines = [" ".join(line.split()) for line in online.stdout.split(str(cards))[1:]]
    assert any(
        "clock.yaml" in line and "tools[1]: MCP server 'time' has no tool 'get_time'" in line
        for line in lines
    )
    assert any(
        "noter.yaml" in line and "tools[0]: tool 'box.note' writes" in line for line in lines
    )
    assert "tools[1]" not in "".join(line for line in lines if "noter.yaml" in line)


@pytest.mark.slow
def test_validate_connect_waits_once_for_a_server_that_never_starts(tmp_path: Path) -> None:
    from tiny_cli.mcp_import import connect_problems
    from tiny_cli.settings import load_settings
    from tiny_cli.tools import mcp_client, mcp_tools
    from tiny_cli.validation import validate
    from tiny_cli.workspace import mcp_settings

    silent = {**BOX, "args": [str(TOOLBOX), "silent"]}
    cards = folder(tmp_path, {"box": silent}, a={"tools": ["box.add"]}, b={"tools": ["box.pid"]})
    settings = load_settings({"TINY_CARDS": str(cards), "TINY_HOME": str(tmp_path)})
    starts: list[str] = []

    def opener(server: Any, seconds: float, environ: Any) -> Any:
        starts.append(server.name)
        return mcp_client.open_session(server, seconds, environ)

    mcp = mcp_settings(settings)
    assert mcp is not None
    source = mcp_tools.McpTools(mcp, opener=opener)
    problems = connect_problems(validate(settings, []).cards, mcp, seconds=1.0, source=source)

    assert starts == ["box"]  # two cards name the server: it is waited for once
    assert sorted(p.file.rsplit("/", 1)[-1] for p in problems) == ["a.yaml", "b.yaml"]
    assert all("did not answer within 1.0s (starting)" in p.message for p in problems)


def test_a_missing_environment_variable_is_a_one_line_error(
    tmp_path: Path, scripted_server: ScriptedServer, tiny: Callable[..., Any]
) -> None:
    server = {**BOX, "env": {"BOX_TOKEN": "${TINY_TEST_UNSET_VAR}"}}
    cards = folder(tmp_path, {"box": server}, adder={"tools": ["box.add"]})
    result = tiny(
        "invoke", "adder", "x", env={"TINY_CARDS": str(cards), "TINY_BASE_URL": scripted_server.url}
    )

    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0
    assert "mcp.yaml: servers.box.env.BOX_TOKEN: environment variable" in result.stderr
    assert "TINY_TEST_UNSET_VAR is not set" in result.stderr


# --- mcp.yaml and wire names -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("server", "key"),
    [
        (
            {"url": "http://x/mcp", "headers": {"Authorization": "Bearer abc"}},
            "headers.Authorization",
        ),
        ({"url": "http://x/mcp", "headers": {"X-Api-Key": "abc"}}, "headers.X-Api-Key"),
        ({"command": "srv", "env": {"GITHUB_TOKEN": "ghp_abc"}}, "env.GITHUB_TOKEN"),
        ({"command": "srv", "env": {"DB_PASSWORD": "hunter2"}}, "env.DB_PASSWORD"),
        ({"url": "https://user:pw@x/mcp"}, "url"),
    ],
)
def test_a_secret_written_into_mcp_yaml_is_refused(
    tmp_path: Path, server: dict[str, Any], key: str
) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text(yaml.safe_dump({"servers": {"gh": server}}), encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_mcp_config(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: servers.gh.{key}: ") and "\n" not in message
    assert "abc" not in message and "hunter2" not in message and "pw@" not in message


def test_secrets_from_the_environment_are_accepted_and_expanded(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    server = {"url": "http://x/mcp", "headers": {"Authorization": "Bearer ${T}"}}
    path.write_text(yaml.safe_dump({"servers": {"gh": server}}), encoding="utf-8")
    config = load_mcp_config(path)
    assert config is not None
    resolved, secrets = config.servers["gh"].resolved({"T": "abc123"})
    assert resolved.headers == {"Authorization": "Bearer abc123"}
    assert secrets == {"abc123"}


@pytest.mark.parametrize(
    ("bad", "key"),
    [
        ({"servers": {"a": {"command": "x", "url": "http://y"}}}, "servers.a"),
        ({"servers": {"a": {"command": "x", "agrs": []}}}, "servers.a.agrs"),
        ({"servers": {"a.b": {"command": "x"}}}, "servers.a.b"),
        ({"servers": {"a": {"command": "x", "args": [1]}}}, "servers.a.args"),
        ({"mcpServers": {}}, ""),
    ],
)
def test_a_broken_mcp_yaml_is_one_error_naming_file_and_key(
    tmp_path: Path, bad: dict[str, Any], key: str
) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text(yaml.safe_dump(bad), encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^{path}: {key}"):
        load_mcp_config(path)


def test_wire_names_fit_the_function_name_rule_and_stay_apart() -> None:
    assert wire_name("time.get_current_time") == "time__get_current_time"
    assert wire_name("http_get") == "http_get"
    odd = [wire_name("gh.repos.list"), wire_name("gh.repos_list"), wire_name("gh." + "x" * 100)]
    assert all(re.match(WIRE_NAME, name) for name in odd)
    assert len(set(odd)) == 3


def test_mcp_yaml_is_not_read_as_a_card_and_the_sdk_is_not_imported_without_a_run(
    tmp_path: Path,
) -> None:
    cards = folder(tmp_path, {"time": TIME_SERVER}, clock={"tools": ["time.get_current_time"]})
    code = (
        "import sys; from tiny_cli.settings import load_settings; "
        "from tiny_cli.workspace import open_workspace; "
        f"ws = open_workspace(load_settings({{'TINY_CARDS': {str(cards)!r}}})); "
        "print(sorted(ws.cards), 'mcp' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['clock'] False"
