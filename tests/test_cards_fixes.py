"""Cards as a reviewer found them: each fault one clear line, each card where it belongs.

`tiny cards show` with an MCP server not started, ids `tiny cards import` may not take,
budgets written as floats, the line of a tool `--connect` finds wrong, oversized files, a
summary of spaces, a fault said once, a file named twice or an mcp.yaml named, a hand-edited
card index, and one server name in two projects. Servers are the real stdio test servers.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import Result

from tiny_cli.cards.index import CACHE_DIR
from tiny_cli.routing.tooltexts import save_mcp_tools
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, reply

from .conftest import REPO

SERVERS = Path(__file__).resolve().parent / "mcp_servers"
BOX = {"command": sys.executable, "args": [str(SERVERS / "toolbox.py")]}
TIME_SERVER = {"command": sys.executable, "args": ["-m", "mcp_server_time"]}
BOUND = "file: more than 262144 bytes (the bound for a card)"
Tiny = Callable[..., Result]


pytestmark = pytest.mark.usefixtures("stop_mcp_servers")  # none outlives its test


def _folder(root: Path, servers: dict[str, Any] | None = None, **cards: str) -> Path:
    """A cards folder with an mcp.yaml of `servers` and card files named by keyword."""
    root.mkdir(parents=True)
    if servers is not None:
        (root / "mcp.yaml").write_text(yaml.safe_dump({"servers": servers}), "utf-8")
    for name, text in cards.items():
        (root / name.replace("__", ".")).write_text(text, "utf-8")
    return root


def _problems(tiny: Tiny, *args: str) -> list[dict[str, Any]]:
    result = tiny("validate", *args, "--json", env={"TINY_EMBEDDER": "hashing"})
    assert "Traceback" not in result.output
    return list(json.loads(result.stdout)["problems"])


def _cache(home: Path) -> Path:
    return load_settings(env={"TINY_HOME": str(home)}).cache_dir


# --- 1. an MCP tool whose server is not started -------------------------------------------


def test_cards_show_names_the_server_of_a_tool_not_started(
    tiny: Tiny, tmp_path: Path, home: Path
) -> None:
    cards = Path(shutil.copytree(REPO / "examples" / "mcp" / "cards", tmp_path / "cards"))
    save_mcp_tools(_cache(home), {"time.get_current_time": "Get the current time in a zone."})
    shown = tiny("cards", "show", "clock", "--cards", str(cards), "--json")
    assert shown.exit_code == 0, shown.output
    now, convert = json.loads(shown.stdout)["tool_schemas"]
    assert (now["name"], now["server"]) == ("time__get_current_time", "time")
    assert now["description"] == "Get the current time in a zone."  # from the kept list
    assert convert["mcp_tool"] == "time.convert_time" and "description" not in convert
    assert "when it starts" in convert["schema"]
    text = tiny("cards", "show", "clock", "--cards", str(cards))
    assert text.exit_code == 0 and "from MCP server 'time' when it starts" in text.stdout


# --- 2. import takes no id another card has -----------------------------------------------


@pytest.mark.slow
def test_import_gives_its_cards_ids_no_yaml_or_markdown_card_has(
    tiny: Tiny, tmp_path: Path
) -> None:
    mine = "---\nid: box\nsummary: My own box card that adds numbers.\ntools: [box.add]\n"
    mine += "returns_required: []\n---\nAdd them.\n"
    other = "id: box-write\nsummary: Notes things down for me.\ntools: [box.note]\n"
    other += "returns_required: []\nside_effects: write\n"
    cards = _folder(tmp_path / "cards", {"box": BOX}, mine__md=mine, other__yaml=other)
    result = tiny("cards", "import", "--json", env={"TINY_CARDS": str(cards)})
    assert result.exit_code == 0, result.stdout
    made = {c["card_id"] for c in json.loads(result.stdout)["cards"] if c["action"] == "added"}
    assert made == {"box-2", "box-write-2"}
    assert _problems(tiny, str(cards)) == []  # no duplicate id


# --- 3. float budgets -----------------------------------------------------------------------

FLOATS = """id: fl
summary: Reads one web page the user links to and answers.
tools: [http_get]
returns_required: [url]
budget:
  max_tool_calls: 3.0
  max_output_tokens: 300.0
"""


def test_integral_float_budgets_reach_prompt_and_wire_as_integers(
    tiny: Tiny, tmp_path: Path, scripted_server: ScriptedServer
) -> None:
    cards = _folder(tmp_path / "fl", fl__yaml=FLOATS)
    detail = json.loads(tiny("cards", "show", "fl", "--cards", str(cards), "--json").stdout)
    budget = detail["budget"]
    assert json.dumps([budget["max_tool_calls"], budget["max_output_tokens"]]) == "[3, 300]"
    assert "about 200 words" in detail["system_prompt"]
    scripted_server.add(reply('{"status": "ok", "summary": "done", "url": "http://x"}'))
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(cards)}
    result = tiny("invoke", "fl", "read http://x", "--json", env=env)
    assert result.exit_code == 0, result.output
    [request] = scripted_server.requests
    assert json.dumps(request["max_tokens"]) == "300"


def test_a_fractional_budget_count_is_one_line(tiny: Tiny, tmp_path: Path) -> None:
    cards = _folder(tmp_path / "fl", fl__yaml=FLOATS.replace("3.0", "3.5"))
    [problem] = _problems(tiny, str(cards))
    assert problem["field"] == "budget.max_tool_calls" and "integer" in problem["message"]


# --- 4. the line of a tool `--connect` finds wrong ------------------------------------------


@pytest.mark.slow
def test_connect_names_the_line_of_the_tool_not_of_a_comment(tiny: Tiny, tmp_path: Path) -> None:
    card = "# box.nothing was renamed; see box.nothing's notes\nid: a\n"
    card += "summary: Adds numbers and does nothing.\ntools:\n  - box.add\n  - box.nothing\n"
    card += "returns_required: []\n"
    md = "---\n# box.nothing: asked for by ops\nid: b\nsummary: Adds numbers and does nothing.\n"
    md += "tools: [box.nothing]\nreturns_required: []\n---\nUse box.nothing.\n"
    agent = "---\nname: c\ndescription: Adds numbers and does nothing at all.\n"
    agent += "# mcp__box__nothing is new\ntools: Read, mcp__box__nothing\n---\nBe brief.\n"
    cards = _folder(tmp_path / "cards", {"box": BOX}, a__yaml=card, b__md=md, c__md=agent)
    found = _problems(tiny, "--connect", str(cards))
    lines = {(Path(p["file"]).name, p["field"]): p["line"] for p in found}
    assert lines == {("a.yaml", "tools[1]"): 6, ("b.md", "tools[0]"): 5, ("c.md", "tools[1]"): 5}


# --- 5. an oversized card -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("ascii.yaml", "id: big\nsummary: " + "a" * 300_000 + "\n"),
        ("cut.yaml", "id: big\nsummary: " + "a" * (262144 - 17) + "é" * 10),  # é cut in two
        ("cut.md", "---\nid: big\n---\n" + "a" * (262144 - 16) + "é" * 10),
        ("just.yaml", "id: big\nsummary: " + "a" * (262145 - 17)),  # one byte past it
    ],
)
def test_an_oversized_card_is_one_line_naming_the_bound(
    tiny: Tiny, tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text, "utf-8")
    result = tiny("validate", str(path))
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == f"{path}: {BOUND}"


def test_a_card_at_the_bound_is_read(tiny: Tiny, tmp_path: Path) -> None:
    path = tmp_path / "edge.yaml"
    path.write_text("id: edge\nsummary: " + "a" * (262144 - 19) + "\n", "utf-8")
    assert path.stat().st_size == 262144
    found = {p["field"]: p["message"] for p in _problems(tiny, str(path))}
    assert "file" not in found and "too long" in found["summary"]  # read, then checked


# --- 6. a summary of spaces -----------------------------------------------------------------


def test_a_summary_of_spaces_is_one_problem_naming_summary(tiny: Tiny, tmp_path: Path) -> None:
    card = 'id: ws\nsummary: "            "\ntools: [http_get]\nreturns_required: [url]\n'
    cards = _folder(tmp_path / "ws", ws__yaml=card)
    [problem] = _problems(tiny, str(cards))
    assert (problem["line"], problem["field"]) == (2, "summary")
    assert "too short" in problem["message"]


# --- 7. one fault, one line -----------------------------------------------------------------

BASE = "id: one\nsummary: Reads one web page the user links to.\nreturns_required: []\n"


@pytest.mark.parametrize(
    ("extra", "field", "words"),
    [
        ("tools: [http_get html_to_text]\n", "tools[0]", "separates its names with commas"),
        (
            "tools: [f]\nfunctions:\n  - name: f\n",
            "functions[0]",
            "missing required field 'parameters'",
        ),
        (
            "tools: [f]\nfunctions:\n  - name: f\n    parameters: 5\n",
            "functions[0].parameters",
            "must be a mapping",
        ),
        (
            "tools: [http_get]\nbudget:\n  max_wall_seconds: .inf\n",
            "budget.max_wall_seconds",
            "impossible",
        ),
    ],
)
def test_a_single_fault_is_one_line_in_plain_words(
    tiny: Tiny, tmp_path: Path, extra: str, field: str, words: str
) -> None:
    cards = _folder(tmp_path / "one", one__yaml=BASE + extra)
    [problem] = _problems(tiny, str(cards))
    assert problem["field"] == field and words in problem["message"]
    assert "does not match" not in problem["message"]  # no raw pattern


# --- 8. a file named twice ------------------------------------------------------------------


def test_a_card_named_with_its_folder_is_read_once(tiny: Tiny, seed_copy: Path) -> None:
    env = {"TINY_EMBEDDER": "hashing"}
    alone = json.loads(tiny("validate", str(seed_copy), "--json", env=env).stdout)
    twice = tiny("validate", str(seed_copy), str(seed_copy / "web-reader.yaml"), "--json", env=env)
    assert twice.exit_code == 0, twice.stdout
    assert json.loads(twice.stdout)["cards"] == alone["cards"]


# --- 9. the docs say which mcp.yaml a named file is checked against -------------------------


def test_a_named_card_is_checked_against_its_own_folders_mcp_yaml_as_documented(
    tiny: Tiny, tmp_path: Path
) -> None:
    card = "id: c\nsummary: Tells the time in a city.\ntools: [time.get_current_time]\n"
    cards = _folder(tmp_path / "c2", {"time": TIME_SERVER}, c__yaml=card + "returns_required: []\n")
    configured = _folder(tmp_path / "configured", {})  # the cards folder tiny is set to
    env = {"TINY_CARDS": str(configured)}
    assert tiny("validate", str(cards / "c.yaml"), env=env).exit_code == 0
    docs = " ".join((REPO / "docs" / "cards.md").read_text("utf-8").split())
    assert "not of the folder the file is in" not in docs
    assert "the folder the named files are in" in docs


# --- 10. an mcp.yaml named as a file --------------------------------------------------------


def test_an_mcp_yaml_named_among_the_files_is_not_a_card(tiny: Tiny, tmp_path: Path) -> None:
    card = "id: c\nsummary: Tells the time in a city.\ntools: [time.get_current_time]\n"
    cards = _folder(tmp_path / "c2", {"time": TIME_SERVER}, c__yaml=card + "returns_required: []\n")
    result = tiny("validate", str(cards / "c.yaml"), str(cards / "mcp.yaml"), "--json")
    assert result.exit_code == 0, result.stdout
    assert [c["id"] for c in json.loads(result.stdout)["cards"]] == ["c"]


# --- 11. a hand-edited card index entry -----------------------------------------------------


@pytest.mark.parametrize("tools", [["no_such_tool"], ["bad name!"]])
def test_a_hand_edited_index_entry_is_checked_again(
    tiny: Tiny, seed_copy: Path, home: Path, tools: list[str]
) -> None:
    env = {"TINY_CARDS": str(seed_copy)}
    assert tiny("cards", "list", "--json", env=env).exit_code == 0  # the index is written
    [index] = (_cache(home) / CACHE_DIR).iterdir()
    data = json.loads(index.read_text("utf-8"))
    data["files"][str(seed_copy / "web-reader.yaml")][2]["tools"] = tools
    index.write_text(json.dumps(data), "utf-8")
    rows = json.loads(tiny("cards", "list", "--json", env=env).stdout)
    assert {r["id"]: r["tools"] for r in rows}["web-reader"] == ["http_get", "html_to_text"]


def test_an_index_entry_edited_into_another_valid_card_is_checked_again(
    tiny: Tiny, seed_copy: Path, home: Path
) -> None:
    env = {"TINY_CARDS": str(seed_copy)}
    assert tiny("cards", "list", "--json", env=env).exit_code == 0  # the index is written
    [index] = (_cache(home) / CACHE_DIR).iterdir()
    data = json.loads(index.read_text("utf-8"))
    data["files"][str(seed_copy / "web-reader.yaml")][2]["summary"] = "Summarises any page at all."
    index.write_text(json.dumps(data), "utf-8")
    rows = json.loads(tiny("cards", "list", "--json", env=env).stdout)
    assert "any page at all" not in {r["id"]: r["summary"] for r in rows}["web-reader"]


# --- 12. one server name in two projects ----------------------------------------------------


@pytest.mark.slow
def test_sync_counts_only_the_tools_this_projects_server_returned(
    tiny: Tiny, tmp_path: Path, home: Path
) -> None:
    adder = "id: adder\nsummary: Adds two numbers together.\ntools: [srv.add, srv.pid]\n"
    clock = "id: clock\nsummary: Tells the time in a city.\ntools: [srv.get_current_time]\n"
    first = _folder(tmp_path / "a", {"srv": BOX}, adder__yaml=adder + "returns_required: []\n")
    second = _folder(tmp_path / "b", {"srv": TIME_SERVER}, c__yaml=clock + "returns_required: []\n")
    counts = []
    for cards in (first, second):
        result = tiny("cards", "sync", "--json", env={"TINY_CARDS": str(cards)})
        assert result.exit_code == 0, result.stdout
        counts.append(json.loads(result.stdout)["servers"][0]["tools"])
    assert counts == [7, 2]  # every tool each project's own server lists
    shown = tiny("cards", "show", "adder", "--cards", str(first), "--json").stdout
    assert all("description" not in t for t in json.loads(shown)["tool_schemas"])  # B's list
