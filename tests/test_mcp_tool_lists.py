"""MCP tool lists after a review: every server listed is kept as listed now, each server gets
its own time to start, routes say the ages of the servers their cards name only, a tool with
no description keeps none, and a literal secret in a server's args is never shown.

The servers are real processes (tests/mcp_servers/raw.py, raw JSON-RPC over stdio); the model
is tiny_cli.testing's scripted server; every file is a real one under tmp_path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.mcp_servers.raw import entry
from tiny_cli.mcp_import import connect_problems
from tiny_cli.routing.tooltexts import gathered, save_mcp_tools
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, reply
from tiny_cli.tools.mcp_client import stop_servers
from tiny_cli.validation import validate
from tiny_cli.workspace import mcp_settings

READ_ONLY = {"readOnlyHint": True}
RECIPE = {
    "name": "find_recipe",
    "description": "Find a recipe for a dish.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": READ_ONLY,
}
OK = json.dumps({"status": "ok", "summary": "Done.", "answer": "42"})
API_KEY = "sk-live-abcdef1234567890XYZ"
TOKEN = "ghp_abcdefghijklmnopqrstuvwxyz0123456789"
PASSWORD = "Summer2024!"  # no key's shape: a secret by the flag before it alone
PIECE = 6  # a run of this many characters of a secret is a leak

pytestmark = pytest.mark.usefixtures("stop_mcp_servers")  # none outlives its test


def raw(listed: Path, *args: str) -> dict[str, Any]:
    """An mcp.yaml entry starting the raw server with the tools of `listed`."""
    return entry("--tools", str(listed), *args)


def tools_file(path: Path, *tools: dict[str, Any]) -> Path:
    path.write_text(json.dumps(list(tools)), encoding="utf-8")
    return path


def cards_folder(where: Path, servers: dict[str, Any], **cards: list[str]) -> Path:
    """Write mcp.yaml and one read-only card per keyword (id -> its tools) into `where`."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "mcp.yaml").write_text(yaml.safe_dump({"servers": servers}), encoding="utf-8")
    for card_id, tools in cards.items():
        card = {"id": card_id, "summary": f"The {card_id} test card.", "tools": tools}
        text = yaml.safe_dump({**card, "side_effects": "none", "returns_required": ["answer"]})
        (where / f"{card_id}.yaml").write_text(text, encoding="utf-8")
    return where


def kept(home: Path) -> dict[str, Any]:
    return json.loads((home / "cache" / "mcp-tools.json").read_text(encoding="utf-8"))


# --- 1. a server listed without the tools a card names is kept as listed now -----------------


WRITER = {k: v for k, v in RECIPE.items() if k != "annotations"}  # no hints: a writer


@pytest.mark.parametrize(
    "now",
    [
        {**RECIPE, "name": "other_tool", "description": "Forecast the weather."},
        {**WRITER, "description": "Forecast the weather."},
    ],
    ids=["renamed", "became-a-writer"],
)
def test_sync_keeps_a_listed_server_as_it_lists_now_when_a_card_names_what_it_lacks(
    tmp_path: Path, tiny: Callable[..., Any], home: Path, now: dict[str, Any]
) -> None:
    listed = tools_file(tmp_path / "tools.json", RECIPE)
    cards = cards_folder(tmp_path / "cards", {"food": raw(listed)}, cook=["food.find_recipe"])
    env = {"TINY_CARDS": str(cards)}
    assert tiny("cards", "sync", env=env).exit_code == 0
    assert kept(home)["tools"] == {"food.find_recipe": "Find a recipe for a dish."}
    before = kept(home)["servers"]["food"]

    tools_file(listed, now)
    stop_servers()  # a new `tiny` starts the server anew: it lists its tools when it starts
    synced = tiny("cards", "sync", "--json", env=env)

    assert synced.exit_code == 1 and json.loads(synced.stdout)["problems"], synced.stdout
    found = kept(home)
    listed_now = {f"food.{now['name']}": "Forecast the weather."}
    assert found["tools"] == listed_now  # every tool, as the server lists them now
    assert found["servers"]["food"] > before  # listed now, not kept from the first sync
    shown = tiny("cards", "show", "cook", "--cards", str(cards), "--json", env=env).stdout
    assert "Find a recipe" not in shown, shown


# --- 2. a server that hangs leaves the next one its own time ---------------------------------


@pytest.mark.slow
def test_a_hanging_server_does_not_use_up_the_time_of_the_other_servers_a_card_names(
    tmp_path: Path, home: Path
) -> None:
    listed = tools_file(tmp_path / "tools.json", {**RECIPE, "name": "ping"})
    servers = {"hang": raw(listed, "--hang"), "good": raw(listed)}
    cards = cards_folder(
        tmp_path / "cards", servers, ha=["hang.ping", "good.ping"], hb=["good.ping"]
    )
    settings = load_settings({"TINY_CARDS": str(cards), "TINY_HOME": str(home)})
    mcp = mcp_settings(settings)
    assert mcp is not None

    cards_checked = validate(settings, []).cards
    problems = connect_problems(cards_checked, mcp, seconds=5.0, cache_dir=settings.cache_dir)

    assert [(Path(p.file).name, p.field) for p in problems] == [("ha.yaml", "tools[0]")], problems
    assert "MCP server 'hang' did not answer within 5.0s (starting)" in problems[0].message
    assert kept(home)["tools"] == {"good.ping": "Find a recipe for a dish."}
    assert list(kept(home)["servers"]) == ["good"]


# --- 3. a route says the ages of the servers its cards name only -----------------------------


def test_the_ages_a_route_reads_are_of_the_servers_the_cards_name_only(
    tmp_path: Path, home: Path, tiny: Callable[..., Any]
) -> None:
    listed = tools_file(tmp_path / "tools.json", RECIPE)
    cards = cards_folder(tmp_path / "cards", {"food": raw(listed)}, cook=["food.find_recipe"])
    plain = cards_folder(tmp_path / "plain", {"food": raw(listed)}, count=[])
    day = 86400.0
    cache = home / "cache"
    save_mcp_tools(cache, {"odd.thing": "Another project's tool."}, now=1000.0)
    save_mcp_tools(cache, {"food.find_recipe": "Find a recipe."}, now=1000.0 + 3 * day)

    def source(folder: Path) -> str:
        settings = load_settings({"TINY_CARDS": str(folder), "TINY_HOME": str(home)})
        chosen = validate(settings, []).cards
        return gathered(settings, now=1000.0 + 3 * day + 5, cards=chosen).source

    assert source(cards) == (
        "MCP tool list cached 5 s ago (validate --connect, cards import or sync)"
    )
    assert source(plain) == ""  # no card names an MCP tool: nothing to say of any list
    said = tiny("route", "--explain", "find a recipe", "--cards", str(cards)).stdout
    assert "MCP tool list cached" in said and "odd" not in said, said  # as route builds it


# --- 4. a tool with no description keeps none -------------------------------------------------


def test_a_tool_without_a_description_is_kept_and_sent_without_one(
    tmp_path: Path,
    tiny: Callable[..., Any],
    home: Path,
    scripted_server: ScriptedServer,
) -> None:
    bare = {"name": "nodesc", "inputSchema": {"type": "object"}, "annotations": READ_ONLY}
    listed = tools_file(tmp_path / "tools.json", RECIPE, bare)
    cards = cards_folder(tmp_path / "cards", {"wx": raw(listed)}, weather=["wx.nodesc"])
    env = {"TINY_CARDS": str(cards), "TINY_BASE_URL": scripted_server.url}

    assert tiny("validate", "--connect", env=env).exit_code == 0
    assert kept(home)["tools"]["wx.nodesc"] == ""
    shown = tiny("cards", "show", "weather", "--cards", str(cards), env=env).stdout
    assert "MCP tool" not in shown.replace("MCP server", ""), shown
    scripted_server.add(reply(OK))
    result = tiny("invoke", "weather", "anything", "--json", env=env)
    assert json.loads(result.stdout)["status"] == "ok", result.stdout
    sent = [t["function"] for t in scripted_server.requests[0]["tools"]]
    assert {"name": "wx__nodesc", "description": ""}.items() <= sent[0].items()


# --- 5. a literal secret in a server's args is never shown -----------------------------------


def pieces(secret: str) -> set[str]:
    return {secret[i : i + PIECE] for i in range(len(secret) - PIECE + 1)}


def test_a_literal_secret_in_a_servers_args_is_not_echoed_when_it_fails(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    listed = tools_file(tmp_path / "tools.json", RECIPE)
    args = (
        "--refuse",
        "--api-key",
        API_KEY,
        f"--token={TOKEN}",
        "--password",
        PASSWORD,
        "--port",
        "8080",
    )
    cards = cards_folder(tmp_path / "cards", {"ca": raw(listed, *args)}, c=["ca.find_recipe"])
    result = tiny("validate", "--connect", env={"TINY_CARDS": str(cards)})

    shown = result.stdout + result.stderr
    assert result.exit_code == 1
    assert "MCP server 'ca' did not start: fatal: bad args --api-key [redacted]" in shown, shown
    assert "--port 8080" in shown  # no secret: shown as the server wrote it
    for secret in (API_KEY, TOKEN, PASSWORD):
        assert not [p for p in pieces(secret) if p in shown], (secret, shown)
