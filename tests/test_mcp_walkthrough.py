"""docs/mcp.md "Put your MCP servers behind tiny", run as a user runs it.

A project folder with a host's `.mcp.json` (the PyPI `mcp-server-time` and the 40-tool
tests/mcp_servers/catalogue.py, with a literal key) goes through every step as a separate
`tiny` process in that folder: `tiny cards import --from .mcp.json`, `tiny validate`,
`tiny route`, then `tiny serve`, started as the host's config for tiny says, answering a
`delegate` from the official MCP SDK client. The model is the scripted server; the assertions
are on what came back over MCP, what went to the model, and what the MCP server answered.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters

from tiny_cli.testing import ScriptedServer, reply, tool_call

SERVERS = Path(__file__).resolve().parent / "mcp_servers"
KEY = "ok-live-Walkthr0ughKey0123456789abcdef"
TASK = "weather forecast for Berlin tomorrow"
ANSWER = {"status": "ok", "summary": "Sunny in Berlin tomorrow."}
CALL_SECONDS = 90


def host_config(folder: Path) -> Path:
    """The host's .mcp.json: two servers, one with a key written into it, and tiny itself."""
    servers = {
        "time": {"command": sys.executable, "args": ["-m", "mcp_server_time"]},
        "office": {
            "command": sys.executable,
            "args": [str(SERVERS / "catalogue.py")],
            "env": {"OFFICE_API_KEY": KEY},
        },
        "tiny": {"command": "tiny", "args": ["serve"]},  # registered before: never imported
    }
    path = folder / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def tiny(folder: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tiny_cli", *args],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=CALL_SECONDS,
    )


async def delegate(params: StdioServerParameters) -> Any:
    with anyio.fail_after(CALL_SECONDS):
        async with Client(params) as client:
            return await client.call_tool("delegate", {"task": TASK})


@pytest.mark.slow  # four tiny processes and two MCP servers: CI runs it with -m slow
def test_from_a_host_config_to_a_delegate_through_tiny_serve(
    tmp_path: Path, scripted_server: ScriptedServer
) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    host_config(folder)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("TINY_", "OPENAI_"))}
    env = {**base, "TINY_HOME": str(tmp_path / "home"), "TINY_BASE_URL": scripted_server.url}

    imported = tiny(folder, env, "cards", "import", "--from", ".mcp.json")
    assert imported.returncode == 0, imported.stdout + imported.stderr
    assert "set OFFICE_API_KEY" in imported.stdout and KEY not in imported.stdout
    assert "tiny itself" in imported.stdout  # tiny's own entry is not a server of tools
    assert (folder / "cards" / "office-weather.yaml").is_file()  # ./cards: never tiny's seed
    again = tiny(
        folder, {**env, "OFFICE_API_KEY": KEY}, "cards", "import", "--from", ".mcp.json", "--check"
    )
    assert again.returncode == 0, again.stdout  # up to date; tiny's own entry is no reason not
    checked = tiny(folder, env, "validate")
    assert checked.returncode == 0, checked.stdout
    routed = tiny(folder, env, "route", TASK)
    assert "route → office-weather" in routed.stdout

    scripted_server.add(
        tool_call("office__weather_forecast", {"query": "Berlin"}), reply(json.dumps(ANSWER))
    )
    served = {**env, "OFFICE_API_KEY": KEY}  # the variable the import said to set
    tiny_serve = StdioServerParameters(
        command=sys.executable, args=["-m", "tiny_cli", "serve"], env=served, cwd=str(folder)
    )
    result = anyio.run(delegate, tiny_serve)

    assert not result.is_error, result.content
    digest = result.structured_content
    assert digest["agent_id"] == "office-weather" and digest["status"] == "ok"
    assert digest["cost"]["tool_calls"] == 1 and digest["cost"]["ghost_calls"] == 0
    first, second = scripted_server.requests
    offered = sorted(t["function"]["name"] for t in first["tools"])
    assert offered == [
        "office__current_weather",
        "office__weather_alerts",
        "office__weather_forecast",
    ]
    assert second["messages"][-1]["role"] == "tool"
    assert second["messages"][-1]["content"] == "weather_forecast: Berlin"  # the server ran it
    for path in [*folder.rglob("*"), *(tmp_path / "home").rglob("*")]:
        if path.is_file() and path.name != ".mcp.json":  # the host's own file holds it
            assert KEY.encode() not in path.read_bytes(), path
