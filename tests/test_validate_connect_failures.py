"""`tiny validate --connect` says a server's failure once a card, and says which step failed.

The servers are real processes (tests/mcp_servers/raw.py, raw JSON-RPC over stdio).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.mcp_servers.raw import entry

from .test_mcp_secret_fixes import cards_folder

pytestmark = pytest.mark.usefixtures("stop_mcp_servers")  # none outlives its test


def test_a_server_that_does_not_start_is_one_problem_a_card_not_one_a_tool(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    tools = ["srv.a", "srv.b", "srv.c"]
    servers = {"srv": {"command": "/nonexistent/server-bin"}}
    cards = cards_folder(tmp_path / "cards", servers, one=tools, two=tools)
    result = tiny("validate", "--connect", env={"TINY_CARDS": str(cards)})

    said = [line for line in result.stdout.splitlines() if "did not start" in line]
    assert result.exit_code == 1
    assert [line.split(":")[0] for line in said] == [
        str(cards / "one.yaml"),
        str(cards / "two.yaml"),
    ], result.stdout
    assert all("tools[0]: MCP server 'srv' did not start: FileNotFoundError" in s for s in said)


def test_a_tool_list_the_sdk_refuses_is_said_as_such_by_its_first_fault(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    listing = tmp_path / "tools.json"  # a tool with no inputSchema: the SDK refuses the list
    listing.write_text(json.dumps([{"name": "get", "description": "Gets."}]), encoding="utf-8")
    servers = {"box": entry("--name", "box", "--tools", str(listing))}
    cards = cards_folder(tmp_path / "cards", servers, boxed=["box.get"])
    result = tiny("validate", "--connect", "--wide", env={"TINY_CARDS": str(cards)})

    (line,) = [line for line in result.stdout.splitlines() if "MCP server 'box'" in line]
    assert result.exit_code == 1
    said = "MCP server 'box' failed to list its tools: the MCP SDK refused its answer: "
    assert line.endswith(said + "tools.0.inputSchema: Field required"), line
    # where and what, not pydantic's dump of the server's answer and its help URL
    assert "input_value" not in line and "https://" not in line, line


def test_an_import_of_a_server_whose_list_the_sdk_refuses_names_the_first_fault(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    tools = [{"name": "good", "inputSchema": {"type": "object"}}, {"name": "bad"}]
    listing = tmp_path / "tools.json"
    listing.write_text(json.dumps(tools), encoding="utf-8")
    host = tmp_path / ".mcp.json"
    host.write_text(
        json.dumps({"mcpServers": {"s": entry("--name", "s", "--tools", str(listing))}})
    )
    cards = tmp_path / "cards"
    cards.mkdir()
    result = tiny("cards", "import", "--from", str(host), "--json", env={"TINY_CARDS": str(cards)})

    assert result.exit_code == 1
    (server,) = json.loads(result.stdout)["servers"]
    assert server["why"] == (
        "MCP server 's' failed to list its tools: the MCP SDK refused its answer: "
        "tools.1.inputSchema: Field required"
    )
