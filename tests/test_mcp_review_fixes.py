"""`tiny cards import --from` after a review: secrets after camelCase flags and in `PASS`
entries lifted, paths kept, empty placeholders accepted, tools whose schema no call could pass
left out, two servers of one mcp.yaml name both told, JSONC read as JSON, a renamed or edited
card kept in its file, a cards folder that is a file refused in one line, true `set` lines and
true ages of the MCP tool lists routes read.

The servers are real processes: tests/mcp_servers/raw.py, a raw JSON-RPC server over stdio,
serving the tools of a JSON file. Every file is a real one under tmp_path.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.mcp_servers.raw import entry
from tiny_cli.errors import ConfigError
from tiny_cli.routing.tooltexts import gathered, save_mcp_tools
from tiny_cli.settings import load_settings
from tiny_cli.tools.mcp_hosts import read_host_config

READ_ONLY = {"readOnlyHint": True}
GET_TIME = {
    "name": "get_time",
    "description": "Get the time now.",
    "inputSchema": {"type": "object", "properties": {}},
    "annotations": READ_ONLY,
}
LIST_FILES = {**GET_TIME, "name": "list_files", "description": "List the files of a folder."}
# `required` inside a property: a JSON Schema's `required` is a list, so no call could pass
BROKEN = {
    "name": "weather",
    "description": "Weather for a city.",
    "inputSchema": {
        "type": "object",
        "properties": {"city": {"type": "string", "required": True}},
    },
    "annotations": READ_ONLY,
}

pytestmark = pytest.mark.usefixtures("stop_mcp_servers")  # none outlives its test

Server = Callable[..., dict[str, Any]]


@pytest.fixture
def server(tmp_path: Path) -> Server:
    """A maker of host entries that start the raw server with `tools`, then `args`."""
    numbers = itertools.count()

    def make(tools: list[dict[str, Any]], *args: str, **spec: Any) -> dict[str, Any]:
        listed = tmp_path / f"tools{next(numbers)}.json"
        listed.write_text(json.dumps(tools), encoding="utf-8")
        return entry("--tools", str(listed), *args, **spec)

    return make


def host(where: Path, servers: dict[str, Any], key: str = "mcpServers") -> Path:
    """Write a host's config of `servers` (Claude's key, or VS Code's `servers`)."""
    where.write_text(json.dumps({key: servers}), encoding="utf-8")
    return where


def run_import(tiny: Callable[..., Any], cards: Path, *flags: str) -> Any:
    return tiny("cards", "import", *flags, env={"TINY_CARDS": str(cards)})


def import_json(tiny: Callable[..., Any], cards: Path, *flags: str) -> tuple[int, dict[str, Any]]:
    result = run_import(tiny, cards, "--json", *flags)
    return result.exit_code, json.loads(result.stdout)


# --- 1: a secret after a flag named like one, camelCase too -------------------------------


def test_a_secret_after_a_camel_case_flag_is_lifted(
    tmp_path: Path, tiny: Callable[..., Any], server: Server
) -> None:
    args = ("--accessToken", "Summer2024!", "--apiToken=Winter2024!", "--pat", "Autumn2024!")
    config = host(tmp_path / "h.json", {"flags": server([GET_TIME], *args)})
    code, report = import_json(tiny, tmp_path / "cards", "--from", str(config))
    assert code == 0, report
    written = (tmp_path / "cards" / "mcp.yaml").read_text(encoding="utf-8")
    assert not {"Summer2024!", "Winter2024!", "Autumn2024!"} & set(written.split())
    assert "--apiToken=${FLAGS_APITOKEN}" in written
    assert [s["variable"] for s in report["set"]] == [
        "FLAGS_ACCESSTOKEN",
        "FLAGS_APITOKEN",
        "FLAGS_PAT",
    ]


def test_an_env_entry_named_pass_is_a_secret_but_path_is_not(tmp_path: Path) -> None:
    env = {"MYSQL_PASS": "Summer2024!", "DATA_PATH": "data/x", "BYPASS_CACHE": "yes",
           "MAX_TOKENS": "4096"}  # fmt: skip
    flags = ["--max-tokens", "4096", "--maxTokens=512", "--author", "Jane Doe", "--hotkey", "F5"]
    spec = {"command": "x", "env": env, "args": flags}
    read = read_host_config(host(tmp_path / "h.json", {"db": spec}))
    assert read.servers["db"]["env"] == {
        "MYSQL_PASS": "${DB_MYSQL_PASS}",
        "DATA_PATH": "data/x",
        "BYPASS_CACHE": "yes",
        "MAX_TOKENS": "4096",  # a count of tokens is no token
    }
    assert read.servers["db"]["args"] == flags  # whole words of a flag name a secret


# --- 2: an empty placeholder holds no secret ----------------------------------------------


def test_an_empty_token_placeholder_is_carried_and_the_import_goes_on(
    tmp_path: Path, tiny: Callable[..., Any], server: Server
) -> None:
    servers = {
        "gh": server([GET_TIME], env={"GITHUB_PERSONAL_ACCESS_TOKEN": ""}),
        "files": server([LIST_FILES]),
    }
    code, report = import_json(
        tiny, tmp_path / "cards", "--from", str(host(tmp_path / "h.json", servers))
    )
    assert code == 0, report
    assert [s["status"] for s in report["servers"]] == ["ok", "ok"]
    assert report["set"] == []  # nothing was lifted: there is nothing to set
    assert tiny("validate", env={"TINY_CARDS": str(tmp_path / "cards")}).exit_code == 0


# --- 3: a tool whose inputSchema is no JSON Schema ----------------------------------------


def test_a_tool_whose_schema_no_call_could_pass_is_left_out_and_said(
    tmp_path: Path, tiny: Callable[..., Any], server: Server
) -> None:
    config = host(tmp_path / "h.json", {"w": server([GET_TIME, BROKEN])})
    cards = tmp_path / "cards"
    code, report = import_json(tiny, cards, "--from", str(config))
    assert code == 0, report
    (only,) = report["servers"]
    assert only["tools"] == 1
    assert (
        "tool weather: its inputSchema cannot be applied: True is not of type 'array'"
        in only["why"]
    )
    assert only["why"].endswith("left out")
    assert [c["tools"] for c in report["cards"]] == [["w.get_time"]]
    assert tiny("validate", "--connect", env={"TINY_CARDS": str(cards)}).exit_code == 0


# --- 4: two servers of one mcp.yaml name ---------------------------------------------------


@pytest.mark.parametrize(
    ("first", "second", "name"),
    [
        ("my.server", "my server", "my-server"),
        ("a" * 40, "a" * 32 + "b" * 8, "a" * 32),  # cut to 32 characters
        ("日本", "中文", "server"),  # no ASCII letter left
    ],
)
def test_a_server_whose_mcp_yaml_name_is_taken_is_listed_with_why(
    tmp_path: Path, first: str, second: str, name: str
) -> None:
    servers = {first: {"command": "one"}, second: {"command": "two"}}
    read = read_host_config(host(tmp_path / "h.json", servers))
    assert read.servers == {name: {"command": "one"}}
    ((skipped, why),) = read.skipped
    assert skipped == second
    assert f"{name}, is taken by {first}" in why


# --- 5 and 11: a generated card renamed or edited is the same card ------------------------


def test_a_generated_card_renamed_yml_is_refreshed_where_it_is(
    tmp_path: Path, tiny: Callable[..., Any], server: Server
) -> None:
    cards = tmp_path / "cards"
    config = host(tmp_path / "h.json", {"clock": server([GET_TIME])})
    assert run_import(tiny, cards, "--from", str(config)).exit_code == 0
    (cards / "clock.yaml").rename(cards / "clock.yml")
    code, report = import_json(tiny, cards)
    assert code == 0, report
    assert [(c["action"], Path(c["file"]).name) for c in report["cards"]] == [
        ("unchanged", "clock.yml")
    ]
    assert sorted(p.name for p in cards.iterdir() if not p.name.startswith(".")) == [
        "clock.yml",
        "mcp.yaml",
    ]
    assert tiny("validate", env={"TINY_CARDS": str(cards)}).exit_code == 0


def test_an_edit_to_a_generated_cards_first_line_is_kept(
    tmp_path: Path, tiny: Callable[..., Any], server: Server
) -> None:
    cards = tmp_path / "cards"
    config = host(tmp_path / "h.json", {"clock": server([GET_TIME])})
    assert run_import(tiny, cards, "--from", str(config)).exit_code == 0
    card = cards / "clock.yaml"
    lines = card.read_text(encoding="utf-8").split("\n", 1)
    card.write_text("# Our team's clock: ask Ann before changing it.\n" + lines[1], "utf-8")
    code, report = import_json(tiny, cards)
    assert code == 0, report
    assert [c["action"] for c in report["cards"]] == ["kept"]
    assert card.read_text(encoding="utf-8").startswith("# Our team's clock")


# --- 6: a cards folder that cannot be one -------------------------------------------------


def test_a_cards_folder_that_is_a_file_is_one_line(
    tmp_path: Path, tiny: Callable[..., Any], server: Server
) -> None:
    config = host(tmp_path / "h.json", {"clock": server([GET_TIME])})
    afile = tmp_path / "clock.yaml"
    afile.write_text("id: clock\n", encoding="utf-8")
    for cards, said in (
        (afile, "the cards folder is a file, not a folder"),
        (afile / "sub", "cannot make the cards folder"),
    ):
        result = run_import(tiny, cards, "--from", str(config))
        assert result.exit_code == 2
        assert f"{cards}: {said}" in result.output and "Traceback" not in result.output


# --- 7: `set` only for what was written ---------------------------------------------------


def test_no_set_line_for_a_server_mcp_yaml_already_declares(
    tmp_path: Path, tiny: Callable[..., Any], server: Server
) -> None:
    cards = tmp_path / "cards"
    cards.mkdir()
    own = server([GET_TIME], env={"API_KEY": "${MY_OWN_KEY}"})
    (cards / "mcp.yaml").write_text(yaml.safe_dump({"servers": {"clock": own}}), "utf-8")
    spec = server([GET_TIME], env={"API_KEY": "sk-live0123456789abcdef"})
    config = host(tmp_path / "h.json", {"clock": spec})
    result = tiny(
        "cards", "import", "--from", str(config), env={"TINY_CARDS": str(cards), "MY_OWN_KEY": "k"}
    )
    assert result.exit_code == 0, result.output
    assert "set " not in result.output and "CLOCK_API_KEY" not in result.output
    assert "${MY_OWN_KEY}" in (cards / "mcp.yaml").read_text(encoding="utf-8")


# --- 9: paths are no keys ------------------------------------------------------------------


def test_path_arguments_are_kept_as_written(tmp_path: Path) -> None:
    args = [
        "--db-path",
        "data/exports/2024-11-05/customers.sqlite3",
        "--log-file=logs/mcp-server-sqlite-2024.log",
        "mcp-server-sqlite-backup-2024-11-05-full.db",
    ]
    key = "Zk29aQ1x7RtY3mP8wL0vB6nC4jH2gF5d"  # a long random run: still a key
    spec = {"command": "uvx", "args": [*args, key]}
    read = read_host_config(host(tmp_path / "h.json", {"sqlite": spec}))
    assert read.servers["sqlite"]["args"] == [*args, "${SQLITE_ARG}"]
    assert read.values == {"SQLITE_ARG": key}


# --- 10: JSON as JSON, JSONC as VS Code writes it -----------------------------------------


def test_a_json_dump_with_an_emoji_is_read(tmp_path: Path) -> None:
    config = tmp_path / "h.json"
    config.write_text(json.dumps({"mcpServers": {"m": {"command": "x", "args": ["🎵"]}}}), "utf-8")
    assert "\\ud83c\\udfb5" in config.read_text(encoding="utf-8")
    assert read_host_config(config).servers["m"]["args"] == ["🎵"]


def test_vs_code_jsonc_with_comments_and_trailing_commas_is_read(tmp_path: Path) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        '{\n  /* VS Code MCP servers,\n     two lines */\n  "servers": {\n'
        '    "raw": {\n      "type": "stdio", // how it talks\n'
        '      "command": "python",\n      "args": ["a//b", "/* kept */", "x,]",],\n'
        "    },\n  },\n}\n",
        encoding="utf-8",
    )
    assert read_host_config(config).servers == {
        "raw": {"command": "python", "args": ["a//b", "/* kept */", "x,]"]}
    }


def test_json_that_is_not_names_its_line(tmp_path: Path) -> None:
    config = tmp_path / "h.json"
    config.write_text('{\n  "mcpServers": {\n    "a": {"command": "x"}\n    "b": {}\n}}\n', "utf-8")
    with pytest.raises(ConfigError, match=r"h\.json:4: not JSON: Expecting ',' delimiter"):
        read_host_config(config)


def test_half_a_character_in_a_host_config_is_one_error_naming_where(tmp_path: Path) -> None:
    config = tmp_path / "h.json"
    config.write_text('{"mcpServers": {"a": {"command": "x\\ud83d"}}}', "utf-8")
    with pytest.raises(ConfigError, match=r"h\.json: mcpServers: holds half of a UTF-16 pair"):
        read_host_config(config)


# --- 12: a server whose name starts with a digit -----------------------------------------


def test_an_input_of_a_server_named_with_a_digit_first_is_a_valid_variable(
    tmp_path: Path,
) -> None:
    spec = {"command": "op", "args": ["--vault", "${input:vault}"]}
    read = read_host_config(host(tmp_path / "h.json", {"1password": spec}, key="servers"))
    assert read.servers["1password"]["args"] == ["--vault", "${MCP_1PASSWORD_VAULT}"]


# --- 8: the age of each server's kept tool list ------------------------------------------


def test_route_explain_says_each_servers_tool_list_age(tmp_path: Path) -> None:
    settings = load_settings({"TINY_HOME": str(tmp_path / "home")}, cwd=tmp_path)
    day = 86400.0
    save_mcp_tools(settings.cache_dir, {"old.get": "Get it."}, now=1000.0)
    save_mcp_tools(settings.cache_dir, {"new.put": "Put it."}, now=1000.0 + 2 * day)
    source = gathered(settings, now=1000.0 + 2 * day + 120).source
    assert source.startswith("MCP tool list cached 2 min to 2 d ago (oldest: old) (validate")
    one = load_settings({"TINY_HOME": str(tmp_path / "home2")}, cwd=tmp_path)
    save_mcp_tools(one.cache_dir, {"new.put": "Put it."}, now=1000.0)
    assert gathered(one, now=1000.0 + 120).source.startswith("MCP tool list cached 2 min ago (v")
