"""MCP servers after a review: Ctrl-C stops a server still starting, two imports never give two
secrets one variable, a kept tool list is its definition's, a route names the servers with no
list, VS Code's own variables are written out, sync needs mcp.yaml as validate does, a tool a
server lists twice is refused, sync keeps the server's whole list, and grouping stays as it was.

The servers are real processes: tests/mcp_servers/raw.py (raw JSON-RPC over stdio), or one
written here that hangs; every file is a real one under tmp_path.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.mcp_servers.raw import entry
from tiny_cli.cards.grouping import plan_cards
from tiny_cli.errors import ConfigError
from tiny_cli.tools.mcp_hosts import read_host_config
from tiny_cli.tools.mcp_listing import ListedTool

from .test_mcp_tools import _gone

READ_ONLY = {"readOnlyHint": True}
PING = {
    "name": "ping",
    "description": "Ping the service.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": READ_ONLY,
}
RECIPE = {**PING, "name": "find_recipe", "description": "Find a recipe for a dish."}
SLACK = 8.0  # seconds a stopped process may take to be gone on a slow, busy CI machine

pytestmark = pytest.mark.usefixtures("stop_mcp_servers")  # none outlives its test

Tiny = Callable[..., Any]


def raw(where: Path, *tools: dict[str, Any]) -> dict[str, Any]:
    """An mcp.yaml entry starting the raw server with `tools` (written to `where`)."""
    where.write_text(json.dumps(list(tools)), encoding="utf-8")
    return entry("--tools", str(where))


def cards_folder(where: Path, servers: dict[str, Any] | None, **cards: list[str]) -> Path:
    """mcp.yaml (unless `servers` is None) and one read-only card per keyword (id -> tools)."""
    where.mkdir(parents=True, exist_ok=True)
    if servers is not None:
        text = yaml.safe_dump({"servers": servers})
        (where / "mcp.yaml").write_text(text, encoding="utf-8")
    for card_id, tools in cards.items():
        card = {"id": card_id, "summary": f"The {card_id} test card.", "tools": tools,
                "side_effects": "none", "returns_required": []}  # fmt: skip
        (where / f"{card_id}.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    return where


def as_json(result: Any) -> dict[str, Any]:
    assert "Traceback" not in result.output, result.output
    return json.loads(result.stdout)


# --- 1. Ctrl-C stops a server that hangs while starting -----------------------------------


# answers the handshake, writes its pid once tools/list arrives, then never answers
HANGS_LISTING = """
import json, os, sys, time
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    if msg["method"] == "tools/list":
        with open(sys.argv[1] + ".part", "w") as f:
            f.write(str(os.getpid()))
        os.replace(sys.argv[1] + ".part", sys.argv[1])
        time.sleep(600)
    found = {}
    if msg["method"] == "initialize":
        found = {"protocolVersion": msg["params"]["protocolVersion"],
                 "capabilities": {"tools": {}}, "serverInfo": {"name": "hang", "version": "1"}}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": found}), flush=True)
"""


def _wait_for(path: Path, child: subprocess.Popen[bytes], seconds: float = 60.0) -> int:
    deadline = time.monotonic() + seconds
    while not path.is_file() and time.monotonic() < deadline:
        assert child.poll() is None, child.communicate()
        time.sleep(0.05)
    assert path.is_file(), "the server was never asked for its tools"
    return int(path.read_text())


@pytest.mark.slow  # a tiny process and a server: a few seconds on 2 cores
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
@pytest.mark.parametrize("command", ["import", "sync"])
def test_ctrl_c_stops_a_server_that_hangs_while_starting(
    tmp_path: Path, cli_env: dict[str, str], command: str
) -> None:
    script, pid_file = tmp_path / "hang.py", tmp_path / "hang.pid"
    script.write_text(HANGS_LISTING, encoding="utf-8")
    hang = {"command": sys.executable, "args": [str(script), str(pid_file)]}
    cards = cards_folder(tmp_path / "cards", {"hang": hang}, me=["hang.whoami"])
    child = subprocess.Popen(
        [sys.executable, "-m", "tiny_cli", "cards", command],
        env={**os.environ, **cli_env, "TINY_CARDS": str(cards)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    pid = None
    try:
        pid = _wait_for(pid_file, child)
        child.send_signal(signal.SIGINT)
        _, err = child.communicate(timeout=30)
        assert child.returncode == 130 and b"tiny: interrupted" in err, err
        assert _gone(pid, SLACK), "the server outlived tiny"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# --- 2. two imports never give two servers' secrets one variable --------------------------


def test_a_variable_mcp_yaml_uses_is_not_given_to_another_servers_secret(tmp_path: Path) -> None:
    mcp_file = tmp_path / "mcp.yaml"
    first = {"slack": {"command": "x", "env": {"BOT_TOKEN": "${SLACK_BOT_TOKEN}"}}}
    mcp_file.write_text(yaml.safe_dump({"servers": first}), encoding="utf-8")
    config = tmp_path / "b.json"
    second = {"slack-bot": {"command": "x", "env": {"TOKEN": "xoxb-two"}}}
    config.write_text(json.dumps({"mcpServers": second}), encoding="utf-8")

    read = read_host_config(config, mcp_file)

    assert read.servers["slack-bot"]["env"]["TOKEN"] == "${SLACK_BOT_TOKEN_2}"
    assert read.values == {"SLACK_BOT_TOKEN_2": "xoxb-two"}
    # the same server carried again keeps the variable mcp.yaml gives it
    same = {"slack": {"command": "x", "env": {"BOT_TOKEN": "xoxb-one"}}}
    config.write_text(json.dumps({"mcpServers": same}), encoding="utf-8")
    assert read_host_config(config, mcp_file).values == {"SLACK_BOT_TOKEN": "xoxb-one"}


# --- 3. a kept tool list is its server's definition's, not another project's --------------


def test_a_server_of_the_same_name_elsewhere_does_not_read_another_projects_list(
    tmp_path: Path, tiny: Tiny
) -> None:
    listing = tmp_path / "tools.json"
    time_a = raw(listing, {**PING, "name": "get_current_time", "description": "Tell the time."})
    project_a = cards_folder(tmp_path / "a", {"time": time_a})
    assert tiny("cards", "import", env={"TINY_CARDS": str(project_a)}).exit_code == 0
    never = {"command": str(tmp_path / "never-started")}
    project_b = cards_folder(tmp_path / "b", {"time": never}, clock=["time.get_current_time"])
    env = {"TINY_CARDS": str(project_b), "TINY_EMBEDDER": "hashing"}

    synced = as_json(tiny("cards", "sync", "--json", env=env))
    explained = as_json(tiny("route", "--explain", "--json", "what time is it", env=env))

    assert synced["servers"] == [{"server": "time", "tools": 0, "age_seconds": None}]
    # no list of this project's `time` was ever kept
    assert explained["tools_source"].startswith("MCP tool list never cached for time (")
    assert "Tell the time" not in json.dumps(explained)


# --- 4. a route names the servers its cards name that have no kept list -------------------


def test_route_explain_says_a_named_server_was_never_listed(tmp_path: Path, tiny: Tiny) -> None:
    servers = {"clock": raw(tmp_path / "tools.json", PING), "tracker": {"command": "/nowhere"}}
    cards = cards_folder(tmp_path / "cards", servers, clock=["clock.ping"], track=["tracker.ping"])
    env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    assert tiny("cards", "sync", env=env).exit_code == 1  # tracker does not start

    source = as_json(tiny("route", "--explain", "--json", "ping it", env=env))["tools_source"]

    assert source.startswith("MCP tool list cached "), source
    assert ", never for tracker (validate --connect" in source


# --- 5. VS Code's predefined variables ---------------------------------------------------


def test_vs_codes_workspace_folder_and_user_home_are_written_out(tmp_path: Path) -> None:
    config = tmp_path / "proj" / ".vscode" / "mcp.json"
    config.parent.mkdir(parents=True)
    args = ["${workspaceFolder}/server.js", "--name=${workspaceFolderBasename}"]
    spec = {"type": "stdio", "command": "node", "args": args, "env": {"DATA": "${userHome}/data"}}
    config.write_text(json.dumps({"servers": {"files": spec}}), encoding="utf-8")

    read = read_host_config(config)

    project = str((tmp_path / "proj").resolve())
    assert read.servers["files"]["args"] == [f"{project}/server.js", "--name=proj"]
    assert read.servers["files"]["env"] == {"DATA": f"{Path.home()}/data"}


def test_a_vs_code_variable_only_the_editor_knows_is_one_line(tmp_path: Path, tiny: Tiny) -> None:
    config = tmp_path / ".vscode" / "mcp.json"
    config.parent.mkdir()
    spec = {"type": "stdio", "command": "node", "args": ["lint.js", "${file}"]}
    config.write_text(json.dumps({"servers": {"lint": spec}}), encoding="utf-8")
    cards = tmp_path / "cards"

    result = tiny("cards", "import", "--from", str(config), env={"TINY_CARDS": str(cards)})

    assert result.exit_code == 2 and result.stdout == "", result.output
    assert result.stderr.strip() == (
        f"tiny: error: {config}: servers.lint.args[1]: ${{file}} is known only inside the editor: "
        "write its value instead"
    )
    assert not (cards / "mcp.yaml").exists()
    with pytest.raises(ConfigError, match=r"servers\.lint\.args\[1\]: \$\{file\}"):
        read_host_config(config)


# --- 6. sync with a card naming an MCP tool needs mcp.yaml --------------------------------


def test_sync_without_mcp_yaml_fails_as_validate_does(tmp_path: Path, tiny: Tiny) -> None:
    cards = cards_folder(tmp_path / "cards", None, clock=["time.get_current_time"])
    env = {"TINY_CARDS": str(cards)}

    synced = tiny("cards", "sync", env=env)

    assert synced.exit_code != 0, synced.output
    assert "but there is no mcp.yaml" in synced.stderr
    assert "but there is no mcp.yaml" in tiny("validate", env=env).output  # the same words


# --- 7. a tool a server lists twice is refused, and said --------------------------------


def test_a_tool_listed_twice_is_left_out_and_named(tmp_path: Path, tiny: Tiny) -> None:
    other_ping = {**PING, "description": "Delete every record."}
    servers = {"svc": raw(tmp_path / "tools.json", PING, other_ping, RECIPE)}
    cards = cards_folder(tmp_path / "cards", servers)

    report = as_json(tiny("cards", "import", "--json", env={"TINY_CARDS": str(cards)}))

    [row] = report["servers"]
    assert row["tools"] == 1 and "tool ping: the server lists it more than once" in row["why"]
    assert [c["tools"] for c in report["cards"]] == [["svc.find_recipe"]]
    cards_folder(cards, None, pinger=["svc.ping"])
    synced = as_json(tiny("cards", "sync", "--json", env={"TINY_CARDS": str(cards)}))
    assert synced["status"] == "problems"
    [problem] = synced["problems"]
    assert "tools[0]: tool 'svc.ping' cannot be offered: the server lists it more than" in problem


# --- 8. sync keeps and counts the server's whole list ------------------------------------


def test_sync_counts_and_keeps_every_tool_the_server_lists(
    tmp_path: Path, tiny: Tiny, home: Path
) -> None:
    servers = {"food": raw(tmp_path / "tools.json", PING, RECIPE)}
    cards = cards_folder(tmp_path / "cards", servers, cook=["food.find_recipe"])

    synced = as_json(tiny("cards", "sync", "--json", env={"TINY_CARDS": str(cards)}))

    assert synced["status"] == "ok" and synced["servers"][0]["tools"] == 2
    kept = json.loads((home / "cache" / "mcp-tools.json").read_text(encoding="utf-8"))
    assert kept["tools"] == {"food.find_recipe": "Find a recipe for a dish.",
                             "food.ping": "Ping the service."}  # fmt: skip


# --- 9. grouping gives the cards it always gave ------------------------------------------


THINGS = ("issue", "project", "invoice", "customer", "calendar", "mail", "wiki", "weather")
ACTS = ("get", "list", "find", "create", "update")
GROUPED = [  # as the grouping before the heap made them
    ("office-calendar", "find_calendar_12 get_calendar_20 list_calendar_36"),
    ("office-customer", "find_customer_27 find_project_17 get_customer_35 get_project_25 "
                        "list_customer_11 list_project_1"),
    ("office-invoice", "find_invoice_2 find_wiki_22 get_invoice_10 get_wiki_30 list_invoice_26 "
                       "list_wiki_6"),
    ("office-issue", "find_issue_32 get_issue_0 list_issue_16"),
    ("office-weather", "find_mail_37 find_weather_7 get_mail_5 get_weather_15 list_mail_21 "
                       "list_weather_31"),
    ("office-calendar-write", "create_calendar_28 update_calendar_4"),
    ("office-customer-write", "create_customer_3 create_project_33 update_customer_19 "
                              "update_project_9"),
    ("office-invoice-write", "create_invoice_18 create_wiki_38 update_invoice_34 update_wiki_14"),
    ("office-issue-write", "create_issue_8 update_issue_24"),
    ("office-weather-write", "create_mail_13 create_weather_23 update_mail_29 update_weather_39"),
]  # fmt: skip


def test_grouping_is_unchanged_on_a_fixed_input() -> None:
    tools = []
    for i in range(40):
        thing, other, act = THINGS[i % 8], THINGS[(i * 3) % 8], ACTS[i % 5]
        description = f"{act.title()} a {thing} of the {other} board."
        writes = act in ACTS[3:]
        tools.append(ListedTool(f"{act}_{thing}_{i}", description, writes, (thing, "limit")))
    kept = {"office-issue": ["get_issue_0", "list_issue_16", "find_issue_32", "gone"]}

    plans = plan_cards("office", tools, kept)

    assert [(p.id, " ".join(p.tools)) for p in plans] == GROUPED
    assert [p.writes for p in plans] == [False] * 5 + [True] * 5
