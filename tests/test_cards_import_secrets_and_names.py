"""`tiny cards import` and `tiny init` after a review: a key in a server's URL or in a
`NAME=value` argument lifted, a server name ending in a newline renamed or refused, a true
`--check` count, a host `type` that contradicts the keys refused, a starter card whose id is
taken refused, and a renamed server that lands on a name mcp.yaml holds reported.

The servers are real processes (tests/mcp_servers/raw.py, a raw JSON-RPC server over stdio);
every file is a real one under tmp_path.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.mcp_servers.raw import entry
from tiny_cli.tools.mcp_config import load_mcp_config
from tiny_cli.tools.mcp_hosts import literal_secrets, read_host_config

pytestmark = pytest.mark.usefixtures("stop_mcp_servers")  # none outlives its test

KEY = "sk-ak-9f8e7d6c5b4a39281726abcd"
URL = f"http://127.0.0.1:9/api/mcp/{KEY}/mcp"
NAME_RULE = "a server name is 1-32 letters, digits, '_' or '-'"


def host_file(folder: Path, servers: dict[str, Any]) -> Path:
    path = folder / ".mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}), encoding="utf-8")
    return path


def cards_folder(folder: Path, servers: dict[str, Any] | None = None) -> Path:
    cards = folder / "cards"
    cards.mkdir()
    if servers is not None:
        text = yaml.safe_dump({"servers": servers})
        (cards / "mcp.yaml").write_text(text, encoding="utf-8")
    return cards


def run_import(tiny: Callable[..., Any], cards: Path, *flags: str) -> Any:
    return tiny("cards", "import", *flags, env={"TINY_CARDS": str(cards)})


# --- 1. a key in a URL, or in a NAME=value argument ----------------------------------------


def test_a_key_in_a_servers_url_is_lifted_and_expanded_back_when_it_starts(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = cards_folder(tmp_path)
    host = host_file(tmp_path, {"zap": {"url": URL}})
    result = run_import(tiny, cards, "--json", "--from", str(host))

    written = (cards / "mcp.yaml").read_text(encoding="utf-8")
    assert KEY not in written and KEY not in result.stdout + result.stderr
    lifted = json.loads(result.stdout)["set"]
    assert [(x["server"], x["where"]) for x in lifted] == [("zap", "url")]
    config = load_mcp_config(cards / "mcp.yaml")
    assert config is not None
    server, secrets = config.servers["zap"].resolved({lifted[0]["variable"]: KEY})
    assert server.url == URL and secrets == {KEY}  # the URL as the host wrote it, redacted


def test_a_key_written_in_an_mcp_yaml_url_is_redacted_by_the_import_rule() -> None:
    assert KEY in literal_secrets("zap", {"url": URL})


@pytest.mark.parametrize(
    ("arg", "secret"),
    [("GITHUB_PERSONAL_ACCESS_TOKEN=abc123def", "abc123def"), ("CONFIG=ghp_abc123", "ghp_abc123")],
)
def test_a_docker_style_name_value_argument_holding_a_secret_is_lifted(
    tmp_path: Path, arg: str, secret: str
) -> None:
    spec = {"command": "docker", "args": ["run", "-e", arg, "img"]}
    found = read_host_config(host_file(tmp_path, {"gh": spec}))

    name = arg.split("=")[0]
    args = found.servers["gh"]["args"]
    assert args[2].startswith(f"{name}=${{") and secret not in json.dumps(args)
    assert list(found.values.values()) == [secret]


# --- 2. a server name ending in a newline -------------------------------------------------


def test_a_host_server_name_ending_in_a_newline_is_renamed_on_import(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = cards_folder(tmp_path)
    host = host_file(tmp_path, {"box\n": entry("--tool", "ping")})
    result = run_import(tiny, cards, "--from", str(host))

    assert result.exit_code == 0, result.stdout
    assert list(yaml.safe_load((cards / "mcp.yaml").read_text(encoding="utf-8"))["servers"]) == [
        "box"
    ]


def test_an_mcp_yaml_server_name_ending_in_a_newline_is_refused_in_one_line(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = cards_folder(tmp_path, {"box\n": {"command": "srv"}})
    result = tiny("validate", env={"TINY_CARDS": str(cards)})

    assert result.exit_code == 1  # a problem of the project, listed as validate lists them
    said = [line for line in result.stdout.splitlines() if "servers.box" in line]
    assert said == [f"{cards / 'mcp.yaml'}: servers.box\\u000a: {NAME_RULE}"], result.stdout


# --- 3. --check counts the servers it would add ---------------------------------------------


def test_check_says_a_new_server_is_behind_not_zero_cards(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = cards_folder(tmp_path)
    host = host_file(tmp_path, {"box": entry("--tool", "ping")})
    result = run_import(tiny, cards, "--check", "--from", str(host))

    assert result.exit_code == 1
    assert "0 card(s) would change" not in result.stdout
    assert "behind: 1 server(s) to add to mcp.yaml" in result.stdout, result.stdout


# --- 4. a host `type` that contradicts the keys -------------------------------------------


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ({"type": "http", "command": "srv"}, "mcpServers.box.type: http needs 'url'"),
        ({"type": "stdio", "url": "http://127.0.0.1:9/mcp"}, "mcpServers.box.type: stdio needs"),
    ],
)
def test_a_host_type_that_contradicts_the_keys_is_refused(
    tmp_path: Path, tiny: Callable[..., Any], spec: dict[str, str], said: str
) -> None:
    cards = cards_folder(tmp_path)
    result = run_import(tiny, cards, "--from", str(host_file(tmp_path, {"box": spec})))

    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and said in result.stderr, result.stderr
    assert not (cards / "mcp.yaml").exists()


# --- 5. tiny init and a card that already has the starter card's id -----------------------


def test_init_refuses_when_a_card_already_has_the_starter_cards_id(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    (tmp_path / "p").mkdir()
    cards = cards_folder(tmp_path / "p")
    (cards / "word-counter.yml").write_text("id: word-counter\nsummary: mine\n", encoding="utf-8")
    result = tiny("init", str(tmp_path / "p"))

    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "word-counter.yml" in result.stderr
    assert sorted(p.name for p in (tmp_path / "p").rglob("*")) == ["cards", "word-counter.yml"]


def test_init_writes_the_starter_card_beside_cards_of_other_ids(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = cards_folder(tmp_path)
    (cards / "word-counter.yml").write_text("id: mine\nsummary: mine\n", encoding="utf-8")

    assert tiny("init", str(tmp_path)).exit_code == 0
    assert (cards / "word-counter.yaml").is_file()


# --- 6. a renamed server that lands on a name mcp.yaml already holds ------------------------


def test_a_renamed_server_landing_on_an_mcp_yaml_name_is_reported_not_dropped(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = cards_folder(tmp_path, {"my-server": entry("--name", "mine", "--tool", "ping")})
    before = (cards / "mcp.yaml").read_text(encoding="utf-8")
    theirs = entry("--name", "theirs", "--tool", "pong")
    host = host_file(tmp_path, {"my.server": theirs, "my server": theirs})
    result = run_import(tiny, cards, "--json", "--from", str(host))

    servers = {s["server"]: s for s in json.loads(result.stdout)["servers"]}
    assert set(servers) == {"my.server", "my server"}, servers
    for server in servers.values():
        assert server["status"] == "skipped" and "is taken by" in server["why"]
    assert (cards / "mcp.yaml").read_text(encoding="utf-8") == before


def test_a_renamed_server_imported_again_is_carried_as_before(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = cards_folder(tmp_path)
    host = host_file(tmp_path, {"my.server": entry("--tool", "ping")})
    assert run_import(tiny, cards, "--from", str(host)).exit_code == 0
    again = run_import(tiny, cards, "--json", "--from", str(host))

    assert again.exit_code == 0
    assert [s["status"] for s in json.loads(again.stdout)["servers"]] == ["ok"]
