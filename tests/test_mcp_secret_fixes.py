"""MCP secrets that leaked in part, URL credentials, a missing knowledge folder, a key twice.

The servers are real processes (tests/mcp_servers/raw.py, raw JSON-RPC over stdio); the model
is tiny_cli.testing's scripted server; every file is a real one under tmp_path.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.mcp_servers.raw import DSN, entry
from tiny_cli.errors import ConfigError
from tiny_cli.testing import ScriptedServer, reply, tool_call
from tiny_cli.tools.mcp_client import STDERR_CHARS, STDERR_TAIL_BYTES
from tiny_cli.tools.mcp_config import load_mcp_config
from tiny_cli.tools.mcp_hosts import read_host_config

SERVERS = Path(__file__).resolve().parent / "mcp_servers"

TOKEN = "MCPSECRET77abcdefXYZ"
QUOTED = 'tkQ"x\\SECRET9988776655'  # a secret JSON text must escape
PASSWORD = "pa55word/Q+"  # a secret that would split a URL where it stands
PIECE = 6  # a run of this many characters of a secret is a leak
OK = json.dumps({"status": "ok", "summary": "Done.", "answer": "42"})


pytestmark = pytest.mark.usefixtures("stop_mcp_servers")  # none outlives its test


def raw(*args: str) -> dict[str, Any]:
    """An mcp.yaml entry that starts the raw server with `args`, its $MY_API_KEY $MCP_TOK."""
    return entry(*args, env={"MY_API_KEY": "${MCP_TOK}"})


def cards_folder(where: Path, servers: dict[str, Any], **cards: list[str]) -> Path:
    """Write mcp.yaml and one card per keyword (id -> its tools) into `where`."""
    where.mkdir(parents=True, exist_ok=True)
    (where / "mcp.yaml").write_text(yaml.safe_dump({"servers": servers}), encoding="utf-8")
    for card_id, tools in cards.items():
        card = {"id": card_id, "summary": f"The {card_id} test card.", "tools": tools}
        text = yaml.safe_dump({**card, "returns_required": ["answer"]})
        (where / f"{card_id}.yaml").write_text(text, encoding="utf-8")
    return where


def pieces(secret: str) -> set[str]:
    """Every run of PIECE characters of `secret`, as written and as JSON text holds it."""
    forms = (secret, json.dumps(secret)[1:-1])
    return {form[i : i + PIECE] for form in forms for i in range(len(form) - PIECE + 1)}


def leaked(secret: str, text: str) -> list[str]:
    """The pieces of `secret` that `text` holds."""
    return sorted(piece for piece in pieces(secret) if piece in text)


def files_text(folder: Path) -> str:
    """Everything the files under `folder` hold, as text."""
    found = (p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())
    return "\n".join(data.decode("latin-1") for data in found)


# --- 1. a secret cut before it is redacted ------------------------------------------------------


@pytest.mark.parametrize(
    "leak",
    [  # the secret starts PIECE chars before the cut of the line quoted, or of the tail kept
        ("--leak-line", str(STDERR_CHARS - len(" token=") - PIECE)),
        ("--leak-tail", str(STDERR_TAIL_BYTES)),
    ],
    ids=["long", "tail"],
)
def test_a_secret_where_the_stderr_line_or_tail_is_cut_is_never_shown_in_part(
    tmp_path: Path, tiny: Callable[..., Any], leak: tuple[str, str]
) -> None:
    cards = cards_folder(tmp_path / "cards", {"box": raw(*leak)}, boxed=["box.get"])
    result = tiny("validate", "--connect", env={"TINY_CARDS": str(cards), "MCP_TOK": TOKEN})

    shown = result.stdout + result.stderr
    assert "MCP server 'box' did not start: " in shown, shown
    assert leaked(TOKEN, shown) == [], shown


def test_a_failure_quoting_a_secret_past_the_cut_is_redacted_before_it(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    # no such program: the failure names the path, the secret PIECE + 2 chars before the cut
    head = "[Errno 2] No such file or directory: '/nonexistent/"
    path = "/nonexistent/" + "x" * (STDERR_CHARS - len(head) - len("/") - PIECE - 2)
    server = {"command": f"{path}/${{MCP_TOK}}"}
    cards = cards_folder(tmp_path / "cards", {"box": server}, boxed=["box.get"])
    result = tiny("validate", "--connect", env={"TINY_CARDS": str(cards), "MCP_TOK": TOKEN})

    shown = result.stdout + result.stderr
    assert "MCP server 'box' did not start: FileNotFoundError: " in shown, shown
    assert leaked(TOKEN, shown) == [], shown


# --- 2. a secret inside a JSON result -----------------------------------------------------------


def test_a_secret_with_a_quote_and_a_backslash_in_a_json_result_is_redacted(
    tmp_path: Path, tiny: Callable[..., Any], scripted_server: ScriptedServer, home: Path
) -> None:
    server = raw("--tool", "get", "--leak-json")
    cards = cards_folder(tmp_path / "cards", {"box": server}, boxed=["box.get"])
    scripted_server.add(tool_call("box__get", {}), reply(OK))
    env = {"TINY_CARDS": str(cards), "TINY_BASE_URL": scripted_server.url, "MCP_TOK": QUOTED}
    result = tiny("invoke", "boxed", "get the token", "--json", env=env)

    told = [m["content"] for m in scripted_server.requests[-1]["messages"] if m["role"] == "tool"]
    assert json.loads(result.stdout)["status"] == "ok", result.stdout
    assert told == [json.dumps({"token": "[redacted]"})]
    assert leaked(QUOTED, result.stdout + result.stderr + files_text(home)) == []


# --- 3. URL credentials in args and env --------------------------------------------------------


def test_import_lifts_a_url_password_from_args_and_env(tmp_path: Path) -> None:
    dsn = "postgresql://admin:pa55%2Fword@localhost:5432/db"
    host = tmp_path / ".mcp.json"
    spec = {"command": "pg-mcp", "args": ["--dsn", dsn], "env": {"DATABASE_URL": dsn}}
    host.write_text(json.dumps({"mcpServers": {"pg": spec}}), encoding="utf-8")
    found = read_host_config(host)

    assert found.servers["pg"]["args"] == [
        "--dsn",
        "postgresql://admin:${PG_PASSWORD}@localhost:5432/db",
    ]
    assert found.servers["pg"]["env"] == {
        "DATABASE_URL": "postgresql://admin:${PG_DATABASE_URL_PASSWORD}@localhost:5432/db"
    }
    assert [(x.where, x.variable) for x in found.lifted] == [
        ("args[1]", "PG_PASSWORD"),
        ("env.DATABASE_URL", "PG_DATABASE_URL_PASSWORD"),
    ]
    assert set(found.values.values()) == {"pa55/word"}  # the password itself, decoded


def test_import_keeps_a_query_parameter_whose_name_only_contains_a_secret_word(
    tmp_path: Path,
) -> None:
    feed = "https://news.example.com/rss?keywords=ai&author=x&sort=new&api_key=k3y4ever"
    host = tmp_path / ".mcp.json"
    spec = {"command": "news-mcp", "args": ["--feed", feed], "env": {"FEED_URL": feed}}
    host.write_text(json.dumps({"mcpServers": {"news": spec}}), encoding="utf-8")
    found = read_host_config(host)
    kept = "https://news.example.com/rss?keywords=ai&author=x&sort=new&api_key=${NEWS_API_KEY"
    assert found.servers["news"]["args"][1].startswith(kept)
    assert found.servers["news"]["env"]["FEED_URL"].startswith(kept)
    assert set(found.values.values()) == {"k3y4ever"}  # only the credential is lifted


def test_import_starts_the_server_with_the_url_it_read_and_writes_no_password(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    host = tmp_path / "host" / ".mcp.json"
    host.parent.mkdir()
    # DSN's password is pa55%2Fword: the server starts only if given the URL as written here
    spec = entry("--tool", "get", "--dsn", DSN)
    host.write_text(json.dumps({"mcpServers": {"pg": spec}}), encoding="utf-8")
    cards = tmp_path / "project" / "cards"
    result = tiny("cards", "import", "--from", str(host), env={"TINY_CARDS": str(cards)})

    assert result.exit_code == 0, result.stdout + result.stderr
    assert "set PG_PASSWORD" in result.stdout
    assert (cards / "pg.yaml").is_file()  # it started and listed its tool
    assert "pa55" not in files_text(tmp_path / "project")


@pytest.mark.parametrize(
    ("setting", "where"),
    [
        ({"args": ["--dsn", "postgresql://admin:hunter2@db/app"]}, "args[1]"),
        ({"env": {"DATABASE_URL": "postgresql://admin:hunter2@db/app"}}, "env.DATABASE_URL"),
        ({"args": ["--db=postgresql://admin:hunter2${X}@db/app"]}, "args[0]"),
    ],
)
def test_mcp_yaml_refuses_a_literal_url_password_in_args_and_env(
    tmp_path: Path, setting: dict[str, Any], where: str
) -> None:
    path = tmp_path / "mcp.yaml"
    path.write_text(yaml.safe_dump({"servers": {"pg": {"command": "pg", **setting}}}))
    with pytest.raises(ConfigError) as caught:
        load_mcp_config(path)

    message = str(caught.value)
    assert message.startswith(f"{path}: servers.pg.{where}: a password in a URL must be ")
    assert "\n" not in message and "hunter2" not in message


# --- 4. a variable in a URL's userinfo ----------------------------------------------------------


def test_a_password_substituted_into_a_url_is_percent_encoded_and_never_shown(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    server = {"url": "http://u:${MCP_PW}@127.0.0.1:9/mcp"}
    cards = cards_folder(tmp_path / "cards", {"web": server}, webbed=["web.get"])
    config = load_mcp_config(cards / "mcp.yaml")
    assert config is not None
    resolved, secrets = config.servers["web"].resolved({"MCP_PW": PASSWORD})
    result = tiny("validate", "--connect", env={"TINY_CARDS": str(cards), "MCP_PW": PASSWORD})

    assert resolved.url == "http://u:pa55word%2FQ%2B@127.0.0.1:9/mcp"
    assert secrets == {PASSWORD, "pa55word%2FQ%2B"}  # redacted wherever the URL is quoted
    shown = result.stdout + result.stderr
    assert "MCP server 'web' did not start: " in shown and "InvalidURL" not in shown, shown
    assert "pa55" not in shown


# --- 5. a knowledge folder that is not there ---------------------------------------------------


@pytest.mark.parametrize("docs", ["missing", "a-file.md"])
def test_a_knowledge_folder_that_is_not_there_stops_the_run_with_one_line(
    tmp_path: Path, tiny: Callable[..., Any], scripted_server: ScriptedServer, docs: str
) -> None:
    (tmp_path / "a-file.md").write_text("# Not a folder\n", encoding="utf-8")
    folder = tmp_path / docs
    scripted_server.add(tool_call("docs_search", {"query": "onboarding"}), reply(OK))
    env = {"TINY_DOCS": str(folder), "TINY_BASE_URL": scripted_server.url}
    result = tiny("invoke", "docs-finder", "how does onboarding work", env=env)
    runs = json.loads(tiny("runs", "--json").stdout)

    assert result.exit_code == 2, result.stdout + result.stderr
    assert result.stderr.startswith(f"tiny: error: knowledge folder {folder} ")
    assert "TINY_DOCS" in result.stderr and result.stderr.count("\n") == 1
    assert [(r["status"], r["reason"]) for r in runs] == [("failed", result.stderr[13:-1])]


# --- 6. a key written twice in mcp.yaml ---------------------------------------------------------


def test_a_key_written_twice_in_mcp_yaml_is_refused_at_its_line(
    tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    cards = tmp_path / "cards"
    cards.mkdir()
    text = "servers:\n  box:\n    command: first\n    command: second\n"
    (cards / "mcp.yaml").write_text(text, encoding="utf-8")
    result = tiny("validate", env={"TINY_CARDS": str(cards)})

    assert result.exit_code == 1  # a problem validate reports, as a card's
    assert (
        f"{cards / 'mcp.yaml'}:4: yaml: invalid YAML: key 'command' appears twice; "
        "YAML would keep only the last one"
    ) in result.stdout


def test_a_host_config_read_for_import_keeps_its_own_rules_for_a_key_twice(
    tmp_path: Path,
) -> None:
    host = tmp_path / ".mcp.json"  # another program's file: read as that program reads it
    host.write_text('{"mcpServers": {"a": {"command": "one"}, "a": {"command": "two"}}}')
    assert read_host_config(host).servers == {"a": {"command": "two"}}


# --- a server's short secret: the import scrubs what the MCP client scrubs ------------------------


@pytest.mark.slow
def test_cards_import_scrubs_a_server_secret_as_short_as_the_mcp_client_does(
    tmp_path: Path, tiny: Callable[..., Any], home: Path
) -> None:
    from tiny_cli.secrets import MIN_SERVER_SECRET_CHARS

    pin = "Qz7k9"  # five characters: scrubbed by the client, so by the import too
    assert len(pin) >= MIN_SERVER_SECRET_CHARS
    tools = tmp_path / "tools.json"
    described = f"Look up a record; the service is reached with key {pin}."
    tools.write_text(json.dumps([{"name": "lookup", "description": described, "kind": "read"}]))
    cards = tmp_path / "cards"
    cards.mkdir()
    server = {"command": sys.executable, "args": [str(SERVERS / "catalogue.py")],
              "env": {"CATALOGUE_FILE": str(tools), "OFFICE_PIN": "${OFFICE_PIN}"}}  # fmt: skip
    (cards / "mcp.yaml").write_text(yaml.safe_dump({"servers": {"office": server}}), "utf-8")
    env = {"TINY_CARDS": str(cards), "OFFICE_PIN": pin}
    result = tiny("cards", "import", "--json", env=env)
    assert result.exit_code == 0, result.stdout
    assert (cards / "office.yaml").is_file() and pin not in result.stdout
    for folder in (cards, home):
        for path in folder.rglob("*"):
            if path.is_file():
                assert pin.encode() not in path.read_bytes(), path
    for args in (("cards", "sync"), ("validate", "--connect")):
        # both start the server again and keep its tools for routing: the cache held the pin
        (home / "cache" / "mcp-tools.json").unlink(missing_ok=True)
        result = tiny(*args, env=env)
        assert result.exit_code == 0, result.output
        explained = tiny("route", "--explain", "look up a record", env=env).stdout
        assert "look up a record" in explained.lower() and pin not in explained
        for path in home.rglob("*"):
            if path.is_file():
                assert pin.encode() not in path.read_bytes(), (args, path)
