"""Markdown cards (frontmatter + instructions) and Claude Code subagent files run as cards."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tiny_cli.cards.index import CACHE_DIR, CLAUDE_TOOLS, RACY_NS, _seal, list_cards
from tiny_cli.cards.load import check_cards, load_cards
from tiny_cli.testing import reply, tool_call

from .conftest import REPO

DOCS = REPO / "docs" / "cards.md"
TOOLS = {"docs_search": False, "http_get": False, "html_to_text": False,
         "crm_find_company": False, "crm_add_company": True}  # fmt: skip
OK = '{"status": "ok", "summary": "Taxis are refunded.", "source": "expenses-and-travel.md"}'


def _docs_example(name: str) -> tuple[str, str]:
    """Return the file name and text of the docs' example file `name` (what users copy)."""
    text = DOCS.read_text("utf-8")
    found = re.search(rf"`([\w./-]*{re.escape(name)})`:\n\n```markdown\n(.*?)```", text, re.S)
    assert found, f"docs/cards.md has no example {name}"
    return found.group(1), found.group(2)


def _write(folder: Path, name: str, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(text, "utf-8")
    return path


def _body(text: str) -> str:
    return text.split("\n---\n", 1)[1].strip()


@pytest.fixture
def expense(tmp_path: Path) -> Path:
    """The docs' Markdown card, in a cards folder of its own."""
    name, text = _docs_example("expense-explainer.md")
    return _write(tmp_path / "cards", Path(name).name, text)


@pytest.fixture
def subagent(tmp_path: Path) -> Path:
    """The docs' Claude Code subagent file, in a .claude/agents folder as Claude Code keeps it."""
    name, text = _docs_example("handbook-expert.md")
    assert name == ".claude/agents/handbook-expert.md"
    return _write(tmp_path / ".claude" / "agents", Path(name).name, text)


def _problems(path: Path, tools: dict[str, bool] | None = None) -> list[str]:
    cards, problems = check_cards([path], tools or TOOLS)
    assert not cards
    return [str(p) for p in problems]


def test_a_markdown_card_loads_its_fields_and_its_body_as_instructions(expense: Path) -> None:
    [card] = load_cards([expense.parent], TOOLS)
    assert card.id == "expense-explainer"
    assert card.tools == ("docs_search",)
    assert card.returns_required == ("source",)
    assert card.first == "tool"
    assert card.examples == ("can I expense a taxi to the airport",)
    assert card.instructions == _body(expense.read_text("utf-8"))
    assert card.instructions.startswith("Search the handbook for the rule")
    assert card.instructions.endswith("never average them.")


def test_the_instructions_go_over_the_wire_in_the_system_prompt(
    tiny, scripted_server, expense: Path
) -> None:
    scripted_server.add(tool_call("docs_search", {"query": "travel expenses"}), reply(OK))
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(expense.parent)}
    result = tiny("invoke", "expense-explainer", "can I expense a taxi", "--json", env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "ok"
    system = scripted_server.requests[0]["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith("You are expense-explainer, a tiny agent with one job:")
    assert f"\n\nInstructions:\n{_body(expense.read_text('utf-8'))}\n" in system["content"]
    scripted_server.assert_done()


def test_a_yaml_card_may_set_instructions_as_a_key(tmp_path: Path) -> None:
    text = (
        "id: yaml-instructed\nsummary: Answers questions about the handbook.\n"
        "tools: [docs_search]\nreturns_required: []\ninstructions: |\n  Always cite.\n"
    )
    [card] = load_cards([_write(tmp_path, "card.yaml", text)], TOOLS)
    assert card.instructions == "Always cite."


def test_the_docs_subagent_runs_as_a_card(tiny, scripted_server, subagent: Path) -> None:
    [card] = load_cards([subagent.parent], TOOLS)
    assert card.id == "handbook-expert"
    assert card.summary.startswith("Answers questions about the company handbook")
    assert card.tools == ("docs_search", "http_get", "html_to_text")  # Read+Grep+Glob, WebFetch
    assert card.returns_required == ()
    assert card.side_effects == "none"
    assert card.model is None  # `model: haiku` names no tiny model: ignored
    scripted_server.add(reply('{"status": "ok", "summary": "30 days a year (urlaub.md)."}'))
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(subagent.parent)}
    result = tiny("invoke", "handbook-expert", "how much vacation do I get", "--json", env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "ok"
    request = scripted_server.requests[0]
    assert request["model"] != "haiku"
    assert [t["function"]["name"] for t in request["tools"]] == list(card.tools)
    assert "never guess a policy." in request["messages"][0]["content"]
    assert card.instructions in request["messages"][0]["content"]


def test_tiny_validate_and_route_take_markdown_cards(tiny, expense: Path, subagent: Path) -> None:
    folder = expense.parent
    (folder / subagent.name).write_text(subagent.read_text("utf-8"), "utf-8")
    checked = tiny("validate", str(folder), "--json", env={"TINY_EMBEDDER": "hashing"})
    assert checked.exit_code == 0, checked.output
    env = {"TINY_CARDS": str(folder), "TINY_EMBEDDER": "hashing", "TINY_THRESHOLD": "-100"}
    routed = tiny("route", "expense rules for travel costs and receipts", "--json", env=env)
    assert routed.exit_code == 0, routed.output
    assert "expense-explainer" in routed.stdout


def test_an_unmapped_claude_tool_is_one_line_naming_file_line_tool_and_table(
    tiny, tmp_path: Path
) -> None:
    text = "---\nname: reviewer\ndescription: Reviews code for bugs.\ntools: Read, Bash\n---\nx\n"
    path = _write(tmp_path, "reviewer.md", text)
    result = tiny("validate", str(path))
    assert result.exit_code == 1
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith(str(path))]
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith(f"{path}:4: tools: Claude Code tool 'Bash' has no tiny equivalent")
    assert all(name in lines[0] for name in CLAUDE_TOOLS)
    [shown] = [ln for ln in DOCS.read_text("utf-8").splitlines() if "tool 'Bash' has no" in ln]
    assert shown.split(":4: ", 1)[1] == lines[0].split(":4: ", 1)[1]  # as docs/cards.md says


def test_a_listed_unmapped_tool_points_at_its_own_line(tmp_path: Path) -> None:
    text = (
        "---\nname: writer\ndescription: Writes release notes.\n"
        "tools:\n  - WebFetch\n  - Write\n  - WebSearch\n---\n"
    )
    problems = _problems(_write(tmp_path, "writer.md", text))
    where = [p.split(": Claude")[0] for p in problems]
    assert where == [f"{tmp_path}/writer.md:6: tools[1]", f"{tmp_path}/writer.md:7: tools[2]"]
    assert "'Write'" in problems[0]
    assert "'WebSearch'" in problems[1]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("# Notes\n\nno frontmatter here\n", "1: frontmatter: a Markdown card starts with"),
        ("---\nid: open\nsummary: never closed at all\n", "1: frontmatter: the frontmatter opened"),
        ("", "1: frontmatter: a Markdown card starts with"),
    ],
    ids=["no-frontmatter", "unterminated", "empty-file"],
)
def test_missing_or_unterminated_frontmatter_is_one_line(
    tiny, tmp_path: Path, text: str, expected: str
) -> None:
    path = _write(tmp_path, "broken.md", text)
    result = tiny("validate", str(path))
    assert result.exit_code == 1
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith(str(path))]
    assert len(lines) == 1, result.stdout
    assert lines[0].startswith(f"{path}:{expected}"), lines[0]
    assert "Traceback" not in result.output


def test_frontmatter_problems_carry_the_line_of_the_file(tmp_path: Path) -> None:
    text = (
        "---\nid: budgeted\nsummary: Answers questions about the handbook.\n"
        "tools: [docs_search]\nreturns_required: []\nbudget:\n  max_tool_calls: 0\n---\nbody\n"
    )
    assert _problems(_write(tmp_path, "b.md", text)) == [
        f"{tmp_path}/b.md:7: budget.max_tool_calls: 0 is impossible: must be >= 1"
    ]


def test_subagent_problems_use_the_subagents_own_names(tmp_path: Path) -> None:
    text = "---\nname: Code Reviewer\ndescription: short\ntools: []\n---\n"
    problems = _problems(_write(tmp_path, "x.md", text))
    assert problems[0].startswith(f"{tmp_path}/x.md:2: name: 'Code Reviewer' is not a slug")
    assert problems[1].startswith(f"{tmp_path}/x.md:3: description: 'short' is too short")
    assert len(problems) == 2


def test_a_subagents_unknown_key_lists_the_keys_a_subagent_may_write(tmp_path: Path) -> None:
    text = "---\nname: helper\ndescription: Helps with long things.\ntools: Read\nfoo: 1\n---\n"
    [problem] = _problems(_write(tmp_path, "helper.md", text))
    assert problem.startswith(f"{tmp_path}/helper.md:5: foo: unknown key; allowed: name, ")
    allowed = problem.split("allowed: ", 1)[1].split(", ")
    assert "description" in allowed and "examples" in allowed
    assert not {"id", "summary", "instructions"} & set(allowed)  # the file would stop being one


def test_a_subagent_without_tools_must_list_them(tmp_path: Path) -> None:
    text = "---\nname: helper\ndescription: Helps with everything at all.\nmodel: opus\n---\n"
    [problem] = _problems(_write(tmp_path, "helper.md", text))
    assert problem.startswith(f"{tmp_path}/helper.md:2: tools: missing:")
    assert "list them" in problem
    assert "model" not in problem.split("tools:", 1)[1]  # model: opus is ignored, not a problem


def test_a_subagent_tool_that_writes_makes_a_writer(tmp_path: Path) -> None:
    text = "---\nname: crm\ndescription: Adds companies to the CRM.\ntools: crm_add_company\n---\n"
    [card] = load_cards([_write(tmp_path, "crm.md", text)], TOOLS)
    assert card.side_effects == "write"
    assert card.tools == ("crm_add_company",)


def test_claude_mcp_tool_names_become_qualified_names(tmp_path: Path) -> None:
    text = "---\nname: issues\ndescription: Files GitHub issues.\n"
    text += "tools: mcp__github__create_issue\n---\n"
    [problem] = _problems(_write(tmp_path, "issues.md", text))
    assert problem.startswith(f"{tmp_path}/issues.md:4: tools[0]: 'github.create_issue' is a tool")


def test_a_crlf_markdown_card_loads_with_its_lines(tmp_path: Path) -> None:
    text = (
        "---\r\nid: crlf\r\nsummary: Answers questions about the handbook.\r\n"
        "tools: [docs_search]\r\nreturns_required: []\r\n---\r\n\r\nLine one.\r\nLine two.\r\n"
    )
    [card] = load_cards([_write_bytes(tmp_path, "crlf.md", text)], TOOLS)
    assert card.instructions == "Line one.\nLine two."
    bad = text.replace("returns_required: []", "returns_required: [status]")
    [problem] = _problems(_write_bytes(tmp_path, "crlf.md", bad))
    assert problem.startswith(f"{tmp_path}/crlf.md:5: returns_required[0]:")


def _write_bytes(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_bytes(
        text.encode("utf-8")
    )  # write_text would turn \r\n into \r\r\n nowhere, but be sure
    return path


def test_body_and_instructions_key_together_is_a_problem(tmp_path: Path) -> None:
    text = (
        "---\nid: twice\nsummary: Answers questions about the handbook.\ntools: []\n"
        "returns_required: []\ninstructions: one\n---\n\nand two\n"
    )
    [problem] = _problems(_write(tmp_path, "twice.md", text))
    assert problem.startswith(
        f"{tmp_path}/twice.md:9: instructions: given twice, as a key on line 6"
    )


def test_frontmatter_keeps_the_yaml_bounds(tmp_path: Path) -> None:
    bomb = "".join(
        f"{k}: &{k} [{', '.join([f'*{p}'] * 9)}]\n" for p, k in zip("abcd", "bcde", strict=True)
    )
    text = "---\na: &a [1, 1, 1, 1, 1, 1, 1, 1, 1]\n" + bomb + "---\nbody\n"
    [problem] = _problems(_write(tmp_path, "bomb.md", text))
    assert "expands to more than" in problem
    deep = "---\nid: deep\nsummary: " + "[" * 40 + "]" * 40 + "\n---\n"
    [problem] = _problems(_write(tmp_path, "deep.md", deep))
    assert problem.startswith(f"{tmp_path}/deep.md:3: yaml: invalid YAML: nested deeper than")
    huge = "---\nid: huge\n---\n" + "x" * 300_000
    [problem] = _problems(_write(tmp_path, "huge.md", huge))
    assert problem == f"{tmp_path}/huge.md: file: more than 262144 bytes (the bound for a card)"


def test_a_readme_in_a_cards_folder_is_not_a_card_but_other_notes_are(
    expense: Path, tmp_path: Path
) -> None:
    folder = expense.parent
    _write(folder, "README.md", "# What these cards are for\n")
    listing = list_cards([folder])
    assert listing.paths == [expense] and not listing.problems
    _write(folder, "notes.md", "todo: more cards\n")
    _, found = check_cards([folder], TOOLS)
    assert [str(p) for p in found] == [
        f"{folder}/notes.md:1: frontmatter: a Markdown card starts with a '---' line, then its "
        "YAML fields, then a '---' line; this file has no frontmatter"
    ]


@pytest.mark.parametrize("folder", ["cards", "examples/bfcl/cards", "benchmarks/data/hwu64/cards"])
def test_the_repositorys_cards_folders_still_validate(folder: str) -> None:
    cards, problems = check_cards([REPO / folder], TOOLS)
    assert cards and not problems, problems[:3]


def test_the_cache_hit_returns_identical_markdown_cards(
    expense: Path, subagent: Path, tmp_path: Path
) -> None:
    folder = expense.parent
    (folder / subagent.name).write_text(subagent.read_text("utf-8"), "utf-8")
    cache = tmp_path / "cache"

    # dated well after the files were written: none is "racily clean" (cards/index.py RACY_NS)
    def later() -> int:
        return time.time_ns() + 5 * RACY_NS

    first = load_cards([folder], TOOLS, None, cache, clock=later)
    [entries] = [json.loads(f.read_text("utf-8"))["files"] for f in (cache / CACHE_DIR).iterdir()]
    assert {e[2]["instructions"] for e in entries.values()} == {c.instructions for c in first}
    second = load_cards([folder], TOOLS, None, cache, clock=later)
    assert second == first
    assert [c.instructions for c in second] == [c.instructions for c in first]
    assert "exactly as the page" in second[0].instructions
    # taken from the cache, not read again: an entry changed and sealed again, as only the
    # index writes one, is what a load gives
    [index] = (cache / CACHE_DIR).iterdir()
    data = json.loads(index.read_text("utf-8"))
    entry = data["files"][str(expense)]
    entry[2]["instructions"] = entry[2]["instructions"].replace("exactly", "EXACTLY")
    entry[4] = _seal(entry[2], entry[3])
    index.write_text(json.dumps(data), "utf-8")
    again = load_cards([folder], TOOLS, None, cache, clock=later)
    assert "EXACTLY as the page" in again[0].instructions


def test_problems_name_files_relative_to_the_working_folder_as_the_docs_do(
    tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project file makes the cards folder absolute; a person reads `cards/x.md:4`."""
    _write(tmp_path, "tiny.toml", 'cards = "cards"\n')
    cards = tmp_path / "cards"
    fields = "summary: Reads a page.\ntools: [docs_serch]\nreturns_required: [a]\n"
    _write(cards, "x.md", f"---\nid: x\n{fields}---\nGo.\n")
    _write(cards, "y.yaml", f"id: y\n{fields}")
    monkeypatch.chdir(tmp_path)  # where the user works: the project file is found from here
    env = {"TINY_CARDS": "", "TINY_PROJECT": ""}
    checked = tiny("validate", env=env)
    assert checked.exit_code == 1
    assert checked.stdout.startswith("cards/x.md:4: tools[0]: unknown tool 'docs_serch'")
    assert "\ncards/y.yaml:3: tools[0]: unknown tool 'docs_serch'" in checked.stdout
    assert str(tmp_path) not in checked.stdout
    github = tiny("validate", "--format", "github", env=env)
    assert github.stdout.startswith("::error file=cards/x.md,line=4,title=tiny validate::")
    routed = tiny("route", "read a page", env=env)
    assert routed.exit_code == 2 and "cards/x.md:4: tools[0]" in routed.stderr
    assert str(tmp_path) not in routed.stderr
