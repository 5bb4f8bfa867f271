"""Review fixes: init beside [tool.tiny], show's json-mode prompt, --eval's per-card rates and
MCP tool names, a BOM on stdin, cards that cannot work, a broken mcp.yaml, an empty folder,
a taught out-of-scope example against --threshold, a damaged saved router state, a bench
task's length with {site} expanded, and MCP servers never listed."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from tests.conftest import REPO, SEED_CARDS, one_error_line
from tiny_cli.routing.lexical import WORDS_FILE
from tiny_cli.routing.state import STATE_DIR, TEXTS_FILE
from tiny_cli.testing import ScriptedServer, reply
from tiny_cli.text import MAX_GOAL_CHARS

Tiny = Callable[..., Result]
NO_PROJECT = {"TINY_PROJECT": "none", "TINY_EMBEDDER": "hashing"}
MCP_CARDS = REPO / "examples" / "mcp" / "cards"


def _lines(path: Path, *items: dict) -> Path:
    path.write_text("".join(json.dumps(item) + "\n" for item in items), encoding="utf-8")
    return path


# --- 1: tiny init beside a pyproject.toml that has [tool.tiny] --------------------------------


def test_init_stops_at_a_pyproject_tool_tiny_table(tiny: Tiny, tmp_path: Path) -> None:
    folder = tmp_path / "project"
    folder.mkdir()
    pyproject = folder / "pyproject.toml"
    pyproject.write_text('[tool.tiny]\ncards = "mycards"\nthreshold = 3.0\n', encoding="utf-8")
    line = one_error_line(tiny("init", str(folder), env=NO_PROJECT))
    assert str(pyproject) in line and "[tool.tiny]" in line
    assert sorted(p.name for p in folder.iterdir()) == ["pyproject.toml"]  # nothing written


def test_init_beside_a_pyproject_without_tool_tiny_writes(tiny: Tiny, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n', encoding="utf-8")
    assert tiny("init", str(tmp_path), env=NO_PROJECT).exit_code == 0
    assert (tmp_path / "tiny.toml").is_file()


# --- 2: cards show's system prompt in json tool mode ------------------------------------------


def test_show_gives_the_json_mode_prompt_the_model_gets(
    tiny: Tiny, scripted_server: ScriptedServer
) -> None:
    call = {"tool": "docs_search", "arguments": {"query": "onboarding"}}
    answer = {"status": "ok", "summary": "Two weeks.", "source": "onboarding.md"}
    scripted_server.add(reply(json.dumps(call)), reply(json.dumps(answer)))
    env = {**NO_PROJECT, "TINY_TOOL_MODE": "json", "TINY_BASE_URL": scripted_server.url}
    task = "how did the onboarding process work again"
    assert tiny("invoke", "docs-finder", task, "--json", env=env).exit_code == 0
    sent = scripted_server.requests[0]["messages"][0]["content"]
    shown = json.loads(tiny("cards", "show", "docs-finder", "--json", env=env).stdout)
    assert shown["system_prompt"] == sent
    assert '{"tool": "<name>"' in sent and "- docs_search(" in sent


def test_show_lists_an_unstarted_mcp_tool_in_json_mode(tiny: Tiny) -> None:
    env = {**NO_PROJECT, "TINY_CARDS": str(MCP_CARDS), "TINY_TOOL_MODE": "json"}
    shown = json.loads(tiny("cards", "show", "clock", "--json", env=env).stdout)
    assert "- time__get_current_time(" in shown["system_prompt"]
    assert "from MCP server 'time'" in shown["system_prompt"]


# --- 4 and 5: --eval's per-card rates, and a tool named as the card writes it -----------------


def test_eval_per_card_rate_with_nothing_to_measure_is_null(tiny: Tiny, tmp_path: Path) -> None:
    tasks = _lines(
        tmp_path / "t.jsonl", {"task": "what is our expense policy", "expected": "docs-finder"}
    )
    args = ("route", "--eval", str(tasks), "--threshold", "100")  # every task abstains
    rows = {
        r["agent_id"]: r
        for r in json.loads(tiny(*args, "--json", env=NO_PROJECT).stdout)["per_card"]
    }
    assert rows["docs-finder"]["recall"] == 0.0 and rows["docs-finder"]["precision"] is None
    assert rows["web-reader"]["recall"] is None and rows["web-reader"]["precision"] is None
    table = tiny(*args, env=NO_PROJECT).stdout
    row = next(line for line in table.splitlines() if "docs-finder" in line)  # the per card one
    assert "0.000" in row and "—" in row  # recall measured, precision not


def test_eval_expected_tool_as_the_card_writes_it(tiny: Tiny, tmp_path: Path) -> None:
    cards = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    for name in ("clock.yaml", "mcp.yaml"):
        shutil.copy(MCP_CARDS / name, cards / name)
    task = "what time is it in Tokyo"
    tasks = _lines(
        tmp_path / "t.jsonl",
        {"task": task, "expected": "docs-finder", "expected_tool": "time.get_current_time"},
        {"task": task, "expected": "docs-finder", "expected_tool": "time__get_current_time"},
    )
    env = {**NO_PROJECT, "TINY_CARDS": str(cards)}
    report = json.loads(tiny("route", "--eval", str(tasks), "--json", env=env).stdout)
    assert report["several_right"] == 2  # clock is right for both, by either name


# --- 7: a BOM at the start of stdin -----------------------------------------------------------


def test_route_stdin_drops_a_leading_bom(tiny: Tiny) -> None:
    task = "how did the onboarding process work again"
    done = tiny("route", "-", "--json", input=f"\ufeff{task}\r\n", env=NO_PROJECT)
    assert done.exit_code == 0
    assert json.loads(done.stdout.splitlines()[0])["task"] == task


# --- 8: cards that pass the schema but cannot work --------------------------------------------

CARD = "id: {id}\nsummary: A card made for this test, nothing more.\n"


def test_validate_refuses_cards_that_cannot_work(tiny: Tiny, tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(
        CARD.format(id="blank-model") + 'tools: []\nreturns_required: [x]\nmodel: "   "\n'
    )
    (tmp_path / "b.yaml").write_text(
        CARD.format(id="no-tool") + "tools: []\nreturns_required: [x]\nfirst: tool\n"
    )
    (tmp_path / "c.yaml").write_text(
        CARD.format(id="no-value") + "tools: []\nreturns:\n  d: {enum: []}\n"
    )
    done = tiny("validate", str(tmp_path), "--json", env=NO_PROJECT)
    assert done.exit_code == 1
    found = {(Path(p["file"]).name, p["field"]) for p in json.loads(done.stdout)["problems"]}
    assert found == {("a.yaml", "model"), ("b.yaml", "first"), ("c.yaml", "returns.d.enum")}


# --- 6: a broken mcp.yaml is a problem of that file, in every format --------------------------


def test_validate_reports_a_broken_mcp_yaml_in_each_format(tiny: Tiny, tmp_path: Path) -> None:
    shutil.copy(MCP_CARDS / "clock.yaml", tmp_path / "clock.yaml")
    mcp = tmp_path / "mcp.yaml"
    mcp.write_text("servers:\n  time: {command: uvx, args: [x]\n", encoding="utf-8")
    text = tiny("validate", str(tmp_path), env=NO_PROJECT)
    assert text.exit_code == 1 and f"{mcp}:2: yaml: invalid YAML" in text.stdout
    assert "there is no mcp.yaml" not in text.stdout  # there is one: it is broken
    done = tiny("validate", str(tmp_path), "--json", env=NO_PROJECT)
    assert done.exit_code == 1
    (problem,) = json.loads(done.stdout)["problems"]
    assert (problem["file"], problem["line"], problem["field"]) == (str(mcp), 2, "yaml")
    github = tiny("validate", str(tmp_path), "--format", "github", env=NO_PROJECT)
    assert github.exit_code == 1 and f"::error file={mcp},line=2," in github.stdout


def test_every_command_names_the_line_a_broken_mcp_yaml_opened_its_brace(
    tiny: Tiny, tmp_path: Path
) -> None:
    shutil.copy(MCP_CARDS / "clock.yaml", tmp_path / "clock.yaml")
    mcp = tmp_path / "mcp.yaml"
    mcp.write_text("servers:\n  time: {command: uvx, args: [x]\n", encoding="utf-8")
    done = tiny("cards", "list", "--cards", str(tmp_path), env=NO_PROJECT)
    assert done.exit_code == 2
    assert f"{mcp}:2: invalid YAML: " in done.stderr and "opened on this line" in done.stderr


# --- 9: a folder with no card -----------------------------------------------------------------


def test_validate_refuses_a_folder_with_no_card(tiny: Tiny, tmp_path: Path) -> None:
    done = tiny("validate", str(tmp_path), "--json", env=NO_PROJECT)
    assert done.exit_code == 1
    (problem,) = json.loads(done.stdout)["problems"]
    assert problem["file"] == str(tmp_path) and "no card" in problem["message"]


# --- 3: a taught out-of-scope example against --threshold, and what --explain says ------------

FOODS = ("ham sandwich", "pizza", "salad", "soup", "pancakes", "omelette", "burger", "pasta")
MORE = ("curry", "tacos", "sushi", "cake", "cookies", "smoothie", "lasagna", "risotto", "stew")
LAST = ("waffles", "noodles", "bread", "chili", "pie")
NEAR = "make me a sandwich with cheese"


def _taught(tiny: Tiny, tmp_path: Path, foods: tuple[str, ...]) -> dict[str, str]:
    """Seed cards with `make me a FOOD` taught out of scope; the env that routes on them."""
    cards = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    taught = [{"task": f"make me a {food}", "card": None} for food in foods]
    env = {**NO_PROJECT, "TINY_CARDS": str(cards)}
    assert tiny("learn", str(_lines(tmp_path / "c.jsonl", *taught)), env=env).exit_code == 0
    return env


def test_an_out_of_scope_example_nearer_than_every_card_is_named_under_a_given_threshold(
    tiny: Tiny, tmp_path: Path
) -> None:
    # it counts in full under any threshold (a taught "not this" holds for its neighbours);
    # --explain says so, where it gave a score below every candidate's without a word
    env = _taught(tiny, tmp_path, FOODS[:1])
    args = ("route", NEAR, "--threshold", "-5", "--top", "1", "--explain", "--json")
    explained = json.loads(tiny(*args, env=env).stdout)
    assert explained["decision"] == "abstain"
    assert explained["score"] < explained["candidates"][0]["score"]
    assert "counted in full" in explained["score_source"]
    assert "'make me a ham sandwich'" in explained["score_source"]
    plain = json.loads(tiny("route", "how did the onboarding process work again", "--explain",
                            "--json", env=env).stdout)  # fmt: skip
    assert plain["score_source"] == ""  # the best z alone: nothing to explain


@pytest.mark.slow
def test_explain_names_the_out_of_scope_example_that_moved_the_score(
    tiny: Tiny, tmp_path: Path
) -> None:
    env = _taught(tiny, tmp_path, FOODS + MORE + LAST)  # enough to derive a threshold
    explained = json.loads(tiny("route", NEAR, "--explain", "--json", env=env).stdout)
    assert explained["threshold_source"].startswith("derived")
    assert explained["score"] != explained["candidates"][0]["score"]  # the margin moved it
    assert "out-of-scope examples" in explained["score_source"]
    assert "'make me a ham sandwich'" in explained["score_source"]
    text = " ".join(tiny("route", NEAR, "--explain", env=env).stdout.split())  # unwrapped
    assert f"score {explained['score']:.3f}: " in text and "ham sandwich" in text


def test_init_beside_a_pyproject_tiny_cannot_read_writes(tiny: Tiny, tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[project]\nversion = \n", encoding="utf-8")
    result = tiny("init", str(tmp_path), env=NO_PROJECT)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "tiny.toml").is_file()


# --- routing review: a damaged saved router state is rebuilt ---------------------------------

SANDWICH = "make me a sandwich"


def _state(tiny: Tiny, home: Path) -> Path:
    """Route once so the seed cards' router state is saved; its folder."""
    assert tiny("route", SANDWICH, env=NO_PROJECT).exit_code == 0
    (folder,) = (home / "cache" / STATE_DIR).iterdir()
    return folder


def test_a_zero_filled_texts_file_is_rebuilt_not_reported(tiny: Tiny, home: Path) -> None:
    texts = _state(tiny, home) / TEXTS_FILE
    texts.write_bytes(bytes(texts.stat().st_size))  # a crash before the data reached the disk
    assert tiny("route", SANDWICH, "--explain", env=NO_PROJECT).exit_code == 0
    assert tiny("validate", env=NO_PROJECT).exit_code == 0
    assert json.loads(texts.read_text("utf-8"))["texts"]  # saved again, whole


def test_texts_that_are_not_json_are_removed_so_the_next_run_works(tiny: Tiny, home: Path) -> None:
    texts = _state(tiny, home) / TEXTS_FILE
    damaged = bytearray(texts.read_bytes())
    damaged[1] = 0  # same size, same first and last byte
    texts.write_bytes(bytes(damaged))
    line = one_error_line(tiny("route", SANDWICH, "--explain", env=NO_PROJECT))
    assert line == f"{texts}: the saved router state is damaged; removed, run again"
    assert tiny("route", SANDWICH, "--explain", env=NO_PROJECT).exit_code == 0


def test_a_state_of_the_wrong_size_is_replaced_by_the_rebuilt_one(tiny: Tiny, home: Path) -> None:
    texts = _state(tiny, home) / TEXTS_FILE
    texts.write_bytes(b"")
    assert tiny("route", SANDWICH, env=NO_PROJECT).exit_code == 0
    assert json.loads(texts.read_text("utf-8"))["texts"]  # not rebuilt on every run


# --- routing review: --eval counts a bench task's length with {site} expanded -----------------


def test_eval_a_bench_task_too_long_once_site_is_expanded_is_its_lines_error(
    tiny: Tiny, tmp_path: Path
) -> None:
    start = "read {site}/a.html "
    long = start + "y" * (MAX_GOAL_CHARS - len(start))  # at the bound as written, past it routed
    tasks = _lines(
        tmp_path / "t.jsonl",
        {"task": "what does the Team plan cost per user?", "expected_agent": "web-reader"},
        {"task": long, "expected_agent": "web-reader"},
    )
    done = tiny("route", "--eval", str(tasks), "--json", env=NO_PROJECT)
    assert done.exit_code == 1
    report = json.loads(done.stdout)
    (error,) = report["errors"]
    assert report["n"] == 1 and error.startswith(f"{tasks}:2: task: the task is 8,010 characters")


# --- routing review: --explain names MCP servers never listed, when none is ---------------------


def test_explain_names_a_server_never_listed_when_no_server_has_a_list(tiny: Tiny) -> None:
    env = {**NO_PROJECT, "TINY_CARDS": str(MCP_CARDS)}
    explained = json.loads(tiny("route", "what time is it", "--explain", "--json", env=env).stdout)
    assert explained["tools_source"] == (
        "MCP tool list never cached for time (validate --connect, cards import or sync)"
    )


ONBOARDING = "how did the onboarding process work again"


def _not_json(words: bytes) -> bytes:
    return words[:1] + b"\0" + words[2:]  # same size, same first and last byte


def _a_number_for_a_word(words: bytes) -> bytes:
    first = words.index(b'"', words.index(b'"') + 1) + 1  # just past the first word
    return words[:2] + b"9" * (first - 2) + words[first:]  # same size, still JSON


@pytest.mark.parametrize("damage", [_not_json, _a_number_for_a_word])
def test_a_damaged_words_file_is_removed_so_the_next_explanation_works(
    tiny: Tiny, home: Path, damage: Callable[[bytes], bytes]
) -> None:
    """The words `--explain` reads are checked as the texts are: one line, then rebuilt."""
    assert tiny("route", ONBOARDING, env=NO_PROJECT).exit_code == 0
    (folder,) = (home / "cache" / STATE_DIR).iterdir()
    words = folder / WORDS_FILE
    words.write_bytes(damage(words.read_bytes()))
    line = one_error_line(tiny("route", ONBOARDING, "--explain", env=NO_PROJECT))
    assert line == f"{words}: the saved router state is damaged; removed, run again"
    assert tiny("route", ONBOARDING, "--explain", env=NO_PROJECT).exit_code == 0
