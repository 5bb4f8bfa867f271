"""Writing cards as a review of docs/cards.md found it: each fault found by `tiny validate`.

A writer card with no tool that writes, a file named that its folder would skip or refuse,
hidden files in a cards folder, a duplicate id beside another problem, a subagent's misspelt
`description`, its `name` in a duplicate-id problem and its `instructions:` key, the line of
a problem found across cards, a null value's wording, and blank examples. Real card files
under tmp_path, the CLI in-process, ScriptedServer as the model.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from tiny_cli.testing import ScriptedServer, reply, tool_call

Tiny = Callable[..., Result]
SUMMARY = "Reads one web page the user links to and answers questions about it."
NOTES_TOOL = '''from tiny_cli import tool


@tool{marked}
def save_note(text: str) -> str:
    """Save a note.

    Args:
        text: the note
    """
    with open({file!r}, "a", encoding="utf-8") as out:
        out.write(text + "\\n")
    return "saved"
'''
SERVER = {"command": "python", "args": ["-c", "pass"]}  # declared only: never started here


def _card(card_id: str, tools: str = "http_get", extra: str = "") -> str:
    return f"id: {card_id}\nsummary: {SUMMARY}\ntools: [{tools}]\nreturns_required: []\n{extra}"


def _folder(root: Path, **files: str) -> Path:
    """A folder of files named by keyword (`a__yaml`: a.yaml)."""
    root.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (root / name.replace("__", ".")).write_text(text, "utf-8")
    return root


def _validate(tiny: Tiny, *args: str) -> tuple[int, list[dict[str, Any]]]:
    """`tiny validate ARGS --json`: the exit code and the problems."""
    result = tiny("validate", *args, "--json", env={"TINY_EMBEDDER": "hashing"})
    assert "Traceback" not in result.output
    return result.exit_code, list(json.loads(result.stdout)["problems"])


def _said(problems: list[dict[str, Any]]) -> list[tuple[str, int | None, str]]:
    return [(Path(p["file"]).name, p["line"], p["field"]) for p in problems]


def _notes(tmp_path: Path, marked: str) -> tuple[Path, Path]:
    """A tools module whose save_note writes notes.txt (marked `marked`), and a writer card."""
    module = tmp_path / "notes_tools.py"
    module.write_text(NOTES_TOOL.format(marked=marked, file=str(tmp_path / "notes.txt")), "utf-8")
    card = _card("notes", "save_note", "side_effects: write\n")
    return module, _folder(tmp_path / "cards", notes__yaml=card)


# --- D1: side_effects: write with no tool that writes ---------------------------------------


@pytest.mark.parametrize("tools", ["save_note", "", "http_get"])  # none marked as writing
def test_a_writer_card_with_no_writing_tool_is_refused_pointing_to_writes_true(
    tiny: Tiny, tmp_path: Path, tools: str
) -> None:
    module, cards = _notes(tmp_path, "")
    (cards / "notes.yaml").write_text(_card("notes", tools, "side_effects: write\n"), "utf-8")
    code, problems = _validate(tiny, str(cards), "--tools", str(module))
    assert code == 1
    assert _said(problems) == [("notes.yaml", 5, "side_effects")]
    assert "@tool(writes=True)" in problems[0]["message"]


def test_a_writer_card_with_no_writing_tool_never_runs(tiny: Tiny, tmp_path: Path) -> None:
    module, cards = _notes(tmp_path, "")
    with ScriptedServer([tool_call("save_note", {"text": "milk"}), reply('{"status":"ok"}')]) as s:
        env = {"TINY_BASE_URL": s.url, "TINY_CARDS": str(cards), "TINY_TOOLS": str(module)}
        result = tiny("invoke", "notes", "note: milk", "--yes", "--json", env=env)
        assert s.requests == []  # refused when the cards load: no model call, nothing written
    assert result.exit_code == 2 and "@tool(writes=True)" in result.output
    assert not (tmp_path / "notes.txt").exists()


def test_a_writer_card_with_a_marked_tool_or_an_mcp_tool_passes(tiny: Tiny, tmp_path: Path) -> None:
    module, cards = _notes(tmp_path, "(writes=True)")
    assert _validate(tiny, str(cards), "--tools", str(module)) == (0, [])
    mcp = json.dumps({"servers": {"box": SERVER}})  # whether box.note writes, only box knows
    other = _folder(
        tmp_path / "mcp", mcp__yaml=mcp, box__yaml=_card("box", "box.note", "side_effects: write\n")
    )
    assert _validate(tiny, str(other)) == (0, [])


# --- D2, D3: files named, hidden files --------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "said"),
    [
        ("Crm.YAML", "rename it to end in .yaml"),
        ("crm.json", "not a card file"),
        ("crm.yaml.bak", "not a card file"),
        (".crm.yaml", "hidden file"),
    ],
)
def test_a_file_named_that_its_folder_skips_is_said_not_to_be_a_card(
    tiny: Tiny, tmp_path: Path, name: str, said: str
) -> None:
    cards = _folder(tmp_path / "cards", web__yaml=_card("web"))
    (cards / name).write_text(_card("crm"), "utf-8")
    code, problems = _validate(tiny, str(cards / name), str(cards / "web.yaml"))
    assert code == 1
    assert _said(problems) == [(name, None, "file")] and said in problems[0]["message"]


def test_a_file_named_that_its_folder_refuses_is_refused(tiny: Tiny, tmp_path: Path) -> None:
    cards = _folder(tmp_path / "cards", web__yaml=_card("web"))
    _folder(tmp_path / "elsewhere", o__yaml=_card("outside"))
    (cards / "outside.yaml").symlink_to(tmp_path / "elsewhere" / "o.yaml")
    (cards / "gone.yaml").symlink_to(tmp_path / "nothing.yaml")
    code, problems = _validate(tiny, str(cards / "outside.yaml"), str(cards / "gone.yaml"))
    assert code == 1
    assert _said(problems) == [("outside.yaml", None, "file"), ("gone.yaml", None, "file")]
    assert "to outside the cards folder" in problems[0]["message"]
    assert "leads nowhere" in problems[1]["message"]


def test_hidden_files_in_a_cards_folder_are_skipped(tiny: Tiny, tmp_path: Path) -> None:
    cards = _folder(tmp_path / "cards", web__yaml=_card("web"), __h__yaml=_card("hidden"))
    (cards / ".#web.yaml").symlink_to("user@host.4242:1700000000")  # Emacs's lock: dangling
    (cards / "._web.yaml").write_bytes(b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X")
    result = tiny("validate", str(cards), "--json", env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 0, result.output
    assert [c["id"] for c in json.loads(result.stdout)["cards"]] == ["web"]
    env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    assert tiny("cards", "list", "--json", env=env).exit_code == 0


# --- D4, D5, D6, D10: ids and subagents ----------------------------------------------------


def test_a_duplicate_id_is_told_beside_the_other_cards_problem(tiny: Tiny, tmp_path: Path) -> None:
    cards = _folder(tmp_path / "d", a__yaml=_card("same", "http_gett"), b__yaml=_card("same"))
    _, problems = _validate(tiny, str(cards))
    assert _said(problems) == [("a.yaml", 3, "tools[0]"), ("b.yaml", 1, "id")]
    assert "already used in" in problems[1]["message"] and "a.yaml:1" in problems[1]["message"]


def test_a_misspelt_subagent_description_is_named(tiny: Tiny, tmp_path: Path) -> None:
    text = f"---\nname: helper\ndesciption: {SUMMARY}\ntools: Read\n---\nbody\n"
    _, problems = _validate(tiny, str(_folder(tmp_path / "d", helper__md=text)))
    assert _said(problems) == [("helper.md", 3, "desciption")]
    assert "did you mean 'description'" in problems[0]["message"]


def test_a_subagents_duplicate_id_says_name(tiny: Tiny, tmp_path: Path) -> None:
    sub = f"---\nname: same\ndescription: {SUMMARY}\ntools: WebFetch\n---\nx\n"
    _, problems = _validate(tiny, str(_folder(tmp_path / "d", a__yaml=_card("same"), b__md=sub)))
    assert _said(problems) == [("b.md", 2, "name")]


def test_a_subagents_instructions_key_is_refused(tiny: Tiny, tmp_path: Path) -> None:
    text = f"---\nname: b\ndescription: {SUMMARY}\ntools: []\ninstructions: hi\n---\n"
    _, problems = _validate(tiny, str(_folder(tmp_path / "d", b__md=text)))
    assert _said(problems) == [("b.md", 5, "instructions")]
    assert "text after its frontmatter" in problems[0]["message"]


# --- D7, D8, D9: lines and words -----------------------------------------------------------


def test_problems_found_across_cards_have_their_line(tiny: Tiny, tmp_path: Path) -> None:
    fn = "functions:\n  - name: book\n    parameters: {type: object}\n"
    other = "functions:\n  - name: book\n    description: other\n    parameters: {type: object}\n"
    cards = _folder(
        tmp_path / "f", a__yaml=_card("a", "book", fn), b__yaml=_card("b", "book", other)
    )
    _, problems = _validate(tiny, str(cards))
    assert _said(problems) == [("b.yaml", 6, "functions[0]")]
    result = tiny("validate", str(cards), "--format", "github", env={"TINY_EMBEDDER": "hashing"})
    assert "line=6," in result.output


def test_an_mcp_name_clash_has_its_line(tiny: Tiny, tmp_path: Path) -> None:
    mcp = json.dumps({"servers": {"a": SERVER, "a__b": SERVER}})
    card = _card("c", "http_get, a.b__c, a__b.c")  # both `a__b__c` on the wire
    _, problems = _validate(tiny, str(_folder(tmp_path / "m", mcp__yaml=mcp, c__yaml=card)))
    assert _said(problems) == [("c.yaml", 3, "tools[2]")]


def test_a_null_value_is_said_once(tiny: Tiny, tmp_path: Path) -> None:
    text = f"id: n\nsummary: {SUMMARY}\ntools:\nreturns_required: []\n"
    _, problems = _validate(tiny, str(_folder(tmp_path / "n", n__yaml=text)))
    assert [p["message"] for p in problems] == ["must be a list, got nothing (null)"]


def test_blank_examples_and_refusals_are_refused(tiny: Tiny, tmp_path: Path) -> None:
    text = _card("b", "", 'examples: ["   ", "fine example"]\ndoes_not: ["  a  "]\n')
    _, problems = _validate(tiny, str(_folder(tmp_path / "b", b__yaml=text)))
    assert _said(problems) == [("b.yaml", 5, "examples[0]"), ("b.yaml", 6, "does_not[0]")]
    assert all("once its spaces are folded" in p["message"] for p in problems)
