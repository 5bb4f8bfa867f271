"""`tiny cards import` and `tiny cards sync` against real stdio MCP servers.

The servers are started for real: tests/mcp_servers/catalogue.py (40 office tools, some with
write annotations, its tool set read from a file the test rewrites), the project's toolbox,
and the third-party `mcp-server-time`. Routing uses the real embedder.
"""

from __future__ import annotations

import importlib.util
import json
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tiny_cli.cards.grouping import CARD_TOOLS, plan_cards
from tiny_cli.tools.mcp_client import stop_servers
from tiny_cli.tools.mcp_config import load_mcp_config
from tiny_cli.tools.mcp_hosts import merge_mcp_yaml, read_host_config
from tiny_cli.tools.mcp_listing import ListedTool, list_servers

SERVERS = Path(__file__).resolve().parent / "mcp_servers"
_spec = importlib.util.spec_from_file_location("catalogue", SERVERS / "catalogue.py")
catalogue = importlib.util.module_from_spec(_spec)  # type: ignore[arg-type]
_spec.loader.exec_module(catalogue)  # type: ignore[union-attr]

TIME_SERVER = {"command": sys.executable, "args": ["-m", "mcp_server_time"]}
BOX = {"command": sys.executable, "args": [str(SERVERS / "toolbox.py")]}
TOKEN = "ghp_5ecretT0kenThatMustNeverBeWritten42"
KINDS = {f"office.{name}": kind != "read" for name, _, kind in catalogue.TOOLS}
KINDS |= {"time.get_current_time": False, "time.convert_time": False, "box.note": True}
KINDS |= {f"box.{name}": False for name in ("add", "pid", "authorized", "leak", "explode", "wait")}
ROUTES = {  # a typical task of the office server -> the card it belongs to
    "weather forecast for Berlin tomorrow": "office-weather",
    "convert 250 euros to japanese yen": "office-currency",
    "send an email to anna about the offsite": "office-message-write",
    "translate this paragraph into German": "office-text",
    "delete the old budget file from the drive": "office-file-write",
    "what is on my calendar next week": "office-events",
    "what time is it in Tokyo": "time",
}


pytestmark = pytest.mark.usefixtures("stop_mcp_servers")  # none outlives its test


def office(tools_file: Path) -> dict[str, Any]:
    """The catalogue server serving the tools `tools_file` lists."""
    args = [str(SERVERS / "catalogue.py")]
    return {"command": sys.executable, "args": args, "env": {"CATALOGUE_FILE": str(tools_file)}}


def write_tools(path: Path, tools: list[tuple[str, str, str]]) -> Path:
    specs = [{"name": n, "description": d, "kind": k} for n, d, k in tools]
    path.write_text(json.dumps(specs), encoding="utf-8")
    return path


def project(tmp_path: Path, servers: dict[str, Any]) -> Path:
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "mcp.yaml").write_text(yaml.safe_dump({"servers": servers}), encoding="utf-8")
    return cards


def cards_in(folder: Path) -> dict[str, dict[str, Any]]:
    files = [p for p in sorted(folder.glob("*.yaml")) if p.name != "mcp.yaml"]
    return {p.stem: yaml.safe_load(p.read_text(encoding="utf-8")) for p in files}


def run_import(tiny: Callable[..., Any], cards: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    result = tiny("cards", "import", "--json", *flags, env={"TINY_CARDS": str(cards)})
    return result.exit_code, json.loads(result.stdout)


@pytest.mark.slow  # seconds each on 2 cores: in `make test-slow`
def test_forty_tools_become_cards_that_validate_route_and_never_mix_writes(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    tools = write_tools(tmp_path / "tools.json", catalogue.TOOLS)
    missing = {"command": str(tmp_path / "no-such-server")}
    cards = project(
        tmp_path, {"office": office(tools), "time": TIME_SERVER, "box": BOX, "gone": missing}
    )
    code, report = run_import(tiny, cards)
    assert code == 1  # one server could not be read; the others were imported all the same
    servers = {s["server"]: s for s in report["servers"]}
    assert servers["gone"]["status"] == "unreachable" and "did not start" in servers["gone"]["why"]
    assert (servers["office"]["tools"], servers["office"]["writers"]) == (40, 15)
    made = cards_in(cards)
    assert {t for card in made.values() for t in card["tools"]} >= set(KINDS)
    for card_id, card in made.items():
        writes = {KINDS[t] for t in card["tools"] if t in KINDS}
        assert len(writes) == 1, f"{card_id} mixes read-only and writing tools"
        assert (card["side_effects"] == "write") == writes.pop(), card_id
        assert 1 <= len(card["tools"]) <= CARD_TOOLS and 10 <= len(card["summary"]) <= 600
    checked = tiny("validate", "--connect", env={"TINY_CARDS": str(cards)})
    assert checked.exit_code == 0, checked.stdout
    for task, card_id in ROUTES.items():
        routed = tiny("route", task, "--json", env={"TINY_CARDS": str(cards)})
        assert json.loads(routed.stdout)["agent_id"] == card_id, task


@pytest.mark.slow  # seconds each on 2 cores: in `make test-slow`
def test_reimport_follows_the_server_and_keeps_an_edited_card(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    tools = write_tools(tmp_path / "tools.json", catalogue.TOOLS)
    cards = project(tmp_path, {"office": office(tools)})
    assert run_import(tiny, cards)[0] == 0
    assert run_import(tiny, cards, "--check")[0] == 0  # just made: up to date
    weather = cards / "office-weather.yaml"
    weather.write_text(weather.read_text(encoding="utf-8") + "examples: [is it raining]\n")
    before = cards_in(cards)
    dropped = ("spell_check", "stock_quote", "weather_alerts")
    changed = [t for t in catalogue.TOOLS if t[0] not in dropped]
    changed += [("share_price", "The latest share price for a ticker symbol.", "read"),
                ("weather_radar", "Rain radar image of a region for the weather.", "read"),
                ("archive_mail", "Archive an email message out of the inbox.", "none")]  # fmt: skip
    write_tools(tools, changed)
    stop_servers()  # the server reads its tools when it starts; a new `tiny` starts it anew
    code, check = run_import(tiny, cards, "--check")
    assert code == 1 and check["status"] == "behind" and cards_in(cards) == before
    code, report = run_import(tiny, cards)
    assert code == 0
    actions = {c["card_id"]: (c["action"], c["note"]) for c in report["cards"]}
    assert actions["office-weather"] == (
        "kept",
        "edited, so kept; it lists office.weather_alerts, which the server no longer has",
    )
    assert cards_in(cards)["office-weather"] == before["office-weather"]  # not a byte changed
    allowed = {t for card in cards_in(cards).values() for t in card["tools"]}
    assert {"office.share_price", "office.weather_radar", "office.archive_mail"} <= allowed
    assert not {"office.spell_check", "office.stock_quote"} & allowed - set(
        before["office-weather"]["tools"]
    )
    assert actions["office-text"][0] == "updated"  # lost spell_check: untouched, so rewritten
    assert "office.weather_radar" not in cards_in(cards)["office-weather"]["tools"]
    code, check = run_import(tiny, cards, "--check")  # behind only for the card you edited
    assert code == 1 and check["status"] == "behind"
    assert [c["card_id"] for c in check["cards"] if c["action"] != "unchanged"] == [
        "office-weather"
    ]
    shown = tiny("cards", "import", env={"TINY_CARDS": str(cards)}).stdout
    assert "office-weather" in shown and "edited, so kept" in shown


@pytest.mark.slow
def test_a_host_config_with_a_literal_token_imports_with_a_variable(
    tmp_path: Path, tiny: Callable[..., Any], home: Path
) -> None:
    host = tmp_path / "host" / ".mcp.json"  # the host's file: outside the project
    host.parent.mkdir()
    box = {**BOX, "env": {"TOOLBOX_TOKEN": TOKEN}}
    bearer = {"url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": f"Bearer {TOKEN}"}}
    args = [str(SERVERS / "toolbox.py"), "--api-key", TOKEN]
    host.write_text(json.dumps({"mcpServers": {"box": box, "web": bearer,
                                               "argbox": {**BOX, "args": args}}}))  # fmt: skip
    cards = tmp_path / "project" / "cards"
    result = tiny("cards", "import", "--from", str(host), env={"TINY_CARDS": str(cards)})
    assert TOKEN not in result.stdout + result.stderr
    mcp = yaml.safe_load((cards / "mcp.yaml").read_text(encoding="utf-8"))["servers"]
    assert mcp["box"]["env"] == {"TOOLBOX_TOKEN": "${BOX_TOOLBOX_TOKEN}"}
    assert mcp["web"]["headers"] == {"Authorization": "Bearer ${WEB_AUTHORIZATION}"}
    assert mcp["argbox"]["args"][1:] == ["--api-key", "${ARGBOX_API_KEY}"]
    assert "set BOX_TOOLBOX_TOKEN" in result.stdout and "set WEB_AUTHORIZATION" in result.stdout
    assert (cards / "box.yaml").is_file()  # it started with the token, listed its tools
    for folder in (tmp_path / "project", home):
        for path in folder.rglob("*"):
            if path.is_file():
                assert TOKEN.encode() not in path.read_bytes(), path


def test_vs_code_servers_and_placeholders_carry_over(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text("// VS Code allows comment lines\n" + json.dumps({"inputs": [], "servers": {
        "gh": {"type": "http", "url": "https://api.example.com/mcp",
               "headers": {"Authorization": "Bearer ${input:gh_token}"}},
        "fs": {"type": "stdio", "command": "npx", "args": ["-y", "server-fs", "${env:HOME}/notes"]},
        "old": {"type": "sse", "url": "https://sse.example.com"},
        "my.server": {"command": "uvx", "args": ["thing", "--tokenizer", "cl100k"],
                      "env": {"LOG_LEVEL": "warn"}},
    }}))  # fmt: skip
    found = read_host_config(config)
    assert found.servers["gh"] == {
        "url": "https://api.example.com/mcp",
        "headers": {"Authorization": "Bearer ${GH_GH_TOKEN}"},
    }
    assert found.servers["fs"]["args"] == ["-y", "server-fs", "${HOME}/notes"]
    assert found.servers["my-server"] == {
        "command": "uvx",
        "args": ["thing", "--tokenizer", "cl100k"],  # not a secret: no word of it names one
        "env": {"LOG_LEVEL": "warn"},
    }
    assert found.skipped == (("old", "SSE transport: tiny speaks stdio and streamable HTTP"),)
    assert found.lifted == ()  # nothing literal: placeholders stay placeholders


def test_grouping_is_the_same_for_the_same_tools_in_any_order() -> None:
    tools = [ListedTool(n, d, k != "read", ("query",)) for n, d, k in catalogue.TOOLS]
    first = plan_cards("office", tools)
    shuffled = tools[:]
    random.Random(7).shuffle(shuffled)
    assert plan_cards("office", shuffled) == first
    assert all(len(p.tools) <= CARD_TOOLS for p in first)
    assert len({p.id for p in first}) == len(first)
    assert plan_cards("office", tools[:5])[0].id == "office"  # few tools: one card


def test_sync_refreshes_the_tool_lists_and_says_their_age(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = project(tmp_path, {"time": TIME_SERVER, "idle": BOX})
    clock = {"id": "clock", "summary": "Tells the time anywhere.", "returns_required": [],
             "tools": ["time.get_current_time"]}  # fmt: skip
    (cards / "clock.yaml").write_text(yaml.safe_dump(clock), encoding="utf-8")
    result = tiny("cards", "sync", "--json", env={"TINY_CARDS": str(cards)})
    assert result.exit_code == 0, result.stdout
    ages = {s["server"]: s for s in json.loads(result.stdout)["servers"]}
    assert ages["time"]["tools"] == 2 and 0 <= ages["time"]["age_seconds"] < 60  # all it lists
    assert ages["idle"] == {"server": "idle", "tools": 0, "age_seconds": None}  # no card names it
    shown = tiny("cards", "sync", env={"TINY_CARDS": str(cards)}).stdout
    assert "time" in shown and "s ago" in shown and "never" in shown


def test_what_a_server_says_reaches_the_terminal_escaped(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    says = "import sys; sys.stderr.write('\\x1b[2J[bold red]owned[/] \\u202e\\n'); sys.exit(1)"
    cards = project(tmp_path, {"loud": {"command": sys.executable, "args": ["-c", says]}})
    result = tiny("cards", "import", env={"TINY_CARDS": str(cards), "COLUMNS": "300"})
    assert result.exit_code == 1
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert "\\u001b[2J[bold red]owned[/]" in result.stdout and "\\u202e" in result.stdout


def test_a_url_key_and_a_key_shaped_argument_are_lifted_too(tmp_path: Path) -> None:
    config = tmp_path / "claude_desktop_config.json"
    config.write_text(json.dumps({"mcpServers": {
        "search": {"url": f"https://search.example.com/mcp?api_key={TOKEN}&region=eu"},
        "db": {"command": "db-mcp", "args": ["--dsn", "postgres://localhost/app", TOKEN]},
    }}))  # fmt: skip
    found = read_host_config(config)
    assert found.servers["search"]["url"] == (
        "https://search.example.com/mcp?api_key=${SEARCH_API_KEY}&region=eu"
    )
    assert found.servers["db"]["args"] == ["--dsn", "postgres://localhost/app", "${DB_ARG}"]
    assert [lifted.variable for lifted in found.lifted] == ["SEARCH_API_KEY", "DB_ARG"]
    assert set(found.values.values()) == {TOKEN}


def test_a_host_config_tiny_cannot_read_is_one_line(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = tmp_path / "cards"
    odd = tmp_path / "settings.json"
    odd.write_text(json.dumps({"editor.fontSize": 12}), encoding="utf-8")
    for source, said in (
        (tmp_path / "missing.json", "missing.json: cannot read"),
        (odd, "settings.json: no 'mcpServers' (Claude, Cursor) or 'servers' (VS Code)"),
    ):
        result = tiny("cards", "import", "--from", str(source), env={"TINY_CARDS": str(cards)})
        assert result.exit_code == 2 and said in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and not cards.exists()


def test_servers_carried_over_keep_mcp_yaml_and_its_comments(tmp_path: Path) -> None:
    shipped = Path(__file__).resolve().parent.parent / "examples" / "mcp" / "cards" / "mcp.yaml"
    mcp = tmp_path / "mcp.yaml"
    mcp.write_text(shipped.read_text(encoding="utf-8"), encoding="utf-8")
    time_changed = {"command": "python", "args": ["-m", "mcp_server_time"]}
    added = merge_mcp_yaml(mcp, {"time": time_changed, "box": BOX})
    assert added == ["box"]  # `time` is mcp.yaml's already: its settings stay
    text = mcp.read_text(encoding="utf-8")
    assert text.startswith(shipped.read_text(encoding="utf-8").rstrip("\n"))  # comments kept
    config = load_mcp_config(mcp)
    assert config is not None
    servers = config.servers
    assert servers["time"].command == "uvx" and servers["box"].args == tuple(BOX["args"])


def import_from(
    tiny: Callable[..., Any], tmp_path: Path, servers: Any, mcp_text: str
) -> tuple[Any, Path]:
    """`tiny cards import --from` a host config holding `servers`, into an mcp.yaml of
    `mcp_text`; the result and the mcp.yaml."""
    host = tmp_path / "h.json"
    host.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    mcp = tmp_path / "cards" / "mcp.yaml"
    mcp.parent.mkdir(exist_ok=True)
    mcp.write_text(mcp_text, encoding="utf-8")
    result = tiny("cards", "import", "--from", str(host), env={"TINY_CARDS": str(mcp.parent)})
    return result, mcp


@pytest.mark.parametrize(
    ("mcp_text", "said"),
    [
        ("servers I want: github and time\n", "must be a mapping with one key, 'servers'"),
        ("- github\n- time\n", "must be a mapping with one key, 'servers'"),
        ("servers: {}\nother: stuff\n", "must be a mapping with one key, 'servers'"),
        ("servers: {keep: {command: x}}  # mine\n", "cannot add a without rewriting the file"),
    ],
)
def test_an_mcp_yaml_import_cannot_add_to_losslessly_is_left_as_it_is(
    tmp_path: Path, tiny: Callable[..., Any], mcp_text: str, said: str
) -> None:
    result, mcp = import_from(tiny, tmp_path, {"a": {"command": "nonexistent-zz"}}, mcp_text)
    assert result.exit_code == 2 and f"{mcp}: {said}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert mcp.read_bytes() == mcp_text.encode()


def test_an_mcp_yaml_that_does_not_check_stops_the_import_before_it_writes(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    mcp_text = "servers:\n  keep: {command: x, agrs: [1]}\n"
    result, mcp = import_from(tiny, tmp_path, {"a": {"command": "nonexistent-zz"}}, mcp_text)
    assert result.exit_code == 2 and f"{mcp}: servers.keep.agrs: unknown key" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert mcp.read_bytes() == mcp_text.encode() and cards_in(mcp.parent) == {}


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("# servers I want: github, time\n", "# servers I want: github, time\nservers:\n  box:\n"),
        ("servers: {}  # none yet\n", "servers:  # none yet\n  box:\n"),
        ("# mine\nservers:\n    time:  # four\n        command: uvx\n",
         "# mine\nservers:\n    time:  # four\n        command: uvx\n    box:\n"),
    ],
)  # fmt: skip
def test_new_servers_go_after_what_mcp_yaml_holds(tmp_path: Path, before: str, after: str) -> None:
    mcp = tmp_path / "mcp.yaml"
    mcp.write_text(before, encoding="utf-8")
    assert merge_mcp_yaml(mcp, {"box": BOX}) == ["box"]
    assert mcp.read_text(encoding="utf-8").startswith(after)
    config = load_mcp_config(mcp)
    assert config is not None and config.servers["box"].args == tuple(BOX["args"])


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ({"command": "x", "args": "abc"}, "a.args: must be a list of strings, got a string"),
        ({"command": "x", "args": [1, None]}, "a.args[0]: must be a string, got a number"),
        ({"command": "x", "args": {"k": TOKEN}}, "a.args: must be a list of strings, got a map"),
        ({"command": "x", "env": {"X": 5}}, "a.env.X: must be a string, got a number"),
        ({"command": "x", "env": []}, "a.env: must be an object of strings, got a list"),
        ({"command": "x", "cwd": 5}, "a.cwd: must be a non-empty string, got a number"),
        ({"url": "http://127.0.0.1:9/mcp", "headers": 7}, "a.headers: must be an object of string"),
        ({"command": "x", "type": 5}, "a.type: must be stdio, http or sse, got a number"),
        ({"command": "x", "disabled": "yes"}, "a.disabled: must be true or false, got a string"),
        (5, "a: must be an object (command or url), got a number"),
        ({"command": "x", "url": TOKEN}, "a: needs either command (stdio) or url (HTTP)"),
    ],
)  # fmt: skip
def test_a_host_server_with_a_wrong_setting_is_one_line_and_nothing_is_written(
    tmp_path: Path, tiny: Callable[..., Any], spec: Any, said: str
) -> None:
    mcp_text = "servers:\n  keep: {command: x}\n"
    result, mcp = import_from(tiny, tmp_path, {"ok": {"command": "y"}, "a": spec}, mcp_text)
    assert result.exit_code == 2 and f"h.json: mcpServers.{said}" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and TOKEN not in result.stderr
    assert mcp.read_bytes() == mcp_text.encode() and cards_in(mcp.parent) == {}


def test_the_host_only_settings_are_ignored_as_documented(tmp_path: Path) -> None:
    config = tmp_path / "cline_mcp_settings.json"
    host_only = {"alwaysAllow": ["x"], "autoApprove": [], "timeout": 60, "dev": {"watch": "*"}}
    config.write_text(json.dumps({"mcpServers": {
        "on": {"command": "uvx", "args": ["thing"], **host_only},
        "off": {"command": "uvx", "disabled": True},
        "cline-sse": {"url": "https://sse.example.com", "transportType": "sse"},
    }}))  # fmt: skip
    found = read_host_config(config)
    assert found.servers == {"on": {"command": "uvx", "args": ["thing"]}}
    assert [name for name, _ in found.skipped] == ["off", "cline-sse"]


def test_a_host_server_with_a_setting_tiny_does_not_know_is_skipped_by_name(tmp_path) -> None:
    config = tmp_path / ".mcp.json"  # envFile: its variables would be missing at the start
    config.write_text(json.dumps({"mcpServers": {"a": {"command": "x", "envFile": ".env"}}}))
    found = read_host_config(config)
    assert found.servers == {}
    assert found.skipped == (("a", "a setting tiny does not carry over: envFile"),)


@pytest.mark.slow
def test_a_server_listed_again_in_one_process_is_asked_again_not_the_sdks_cache(
    tmp_path: Path,
) -> None:
    # the server lets clients keep its list an hour (ttlMs), and lists one tool more each time
    # it is asked: a second listing in the same process must be the server's answer now
    growing = Path(__file__).resolve().parent / "mcp_servers" / "growing.py"
    mcp = tmp_path / "mcp.yaml"
    server = {"command": sys.executable, "args": [str(growing)]}
    mcp.write_text(yaml.safe_dump({"servers": {"growing": server}}), encoding="utf-8")
    config = load_mcp_config(mcp)
    assert config is not None
    try:
        first, second = (list_servers([config.servers["growing"]])[0] for _ in range(2))
    finally:
        stop_servers()
    named = [t.name for t in first.tools]
    assert named and [t.name for t in second.tools] == [*named, f"listed_{len(named) + 1}"]
