"""`tiny validate` as a reviewer found it: a named file checked against its folder's ids, each
folder's own learned.jsonl, plain words for a bad name, keys as written, and a function's
arguments always an object."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import Result

from .conftest import SEED_CARDS

Tiny = Callable[..., Result]
HASHING = {"TINY_EMBEDDER": "hashing"}
BASE = "id: one\nsummary: Reads one web page the user links to.\nreturns_required: []\n"


def _validate(tiny: Tiny, *args: str, **env: str) -> tuple[int, dict[str, Any]]:
    result = tiny("validate", *args, "--json", env={**HASHING, **env})
    assert "Traceback" not in result.output
    return result.exit_code, json.loads(result.stdout)


def _lines(found: dict[str, Any], kind: str = "problems") -> list[str]:
    """Each problem as `file:line: field: message`, the file's name only."""
    return [
        f"{Path(p['file']).name}:{p['line']}: {p['field']}: {p['message']}" for p in found[kind]
    ]


def _card(tmp_path: Path, text: str, name: str = "card.yaml") -> Path:
    folder = tmp_path / "cards"
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(text, "utf-8")
    return path


# --- 1. a named file is part of its folder ------------------------------------------------


def test_a_named_file_whose_id_a_folder_card_uses_fails(tiny: Tiny, tmp_path: Path) -> None:
    folder = tmp_path / "pc" / "cards"
    folder.mkdir(parents=True)
    seed = (SEED_CARDS / "docs-finder.yaml").read_text("utf-8")
    (folder / "docs-finder.yaml").write_text(seed, "utf-8")
    (folder / "new-card.yaml").write_text(seed.replace("Finds", "Looks up"), "utf-8")
    code, found = _validate(tiny, str(folder / "new-card.yaml"))
    assert code == 1
    [line] = _lines(found)
    assert line.startswith("new-card.yaml:1: id: duplicate id 'docs-finder'")
    assert f"{folder / 'docs-finder.yaml'}:1" in line  # both places, the other's line too
    assert tiny("route", "--cards", str(folder), "x", env=HASHING).exit_code == 2  # as route


def test_a_named_file_with_its_own_id_passes(tiny: Tiny, tmp_path: Path) -> None:
    folder = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    code, found = _validate(tiny, str(folder / "web-reader.yaml"), str(folder / "crm-writer.yaml"))
    assert (code, found["problems"]) == (0, [])


def test_two_folders_checked_at_once_may_hold_the_same_card(tiny: Tiny, tmp_path: Path) -> None:
    """Each folder is a set of cards of its own, as a route reads one: no duplicate across them."""
    one, two = (Path(shutil.copytree(SEED_CARDS, tmp_path / name)) for name in ("one", "two"))
    (one / "docs-finder.yaml").unlink()  # each folder still routes, with two and three cards
    code, found = _validate(tiny, str(one), str(two))
    assert (code, found["problems"]) == (0, [])
    twice = (two / "crm-writer.yaml").read_text("utf-8")  # within one folder, still refused
    (two / "crm-again.yaml").write_text(twice, "utf-8")
    code, found = _validate(tiny, str(one), str(two))
    [problem] = found["problems"]
    assert code == 1 and Path(problem["file"]).parent == two
    assert problem["message"].startswith("duplicate id 'crm-writer'")


# --- 2. each folder its own learned.jsonl -------------------------------------------------


def test_a_folder_named_is_checked_with_its_own_learned_file(tiny: Tiny, tmp_path: Path) -> None:
    folder = Path(shutil.copytree(SEED_CARDS, tmp_path / "lj"))
    (folder / "learned.jsonl").write_text('{"task": 5, "card": "docs-finder"}\n', "utf-8")
    code, found = _validate(tiny, str(folder))
    assert code == 1
    assert [p["file"] for p in found["problems"]] == [str(folder / "learned.jsonl")]


def test_the_set_folders_learned_file_is_not_another_folders(tiny: Tiny, tmp_path: Path) -> None:
    home = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    (home / "learned.jsonl").write_text("not json\n", "utf-8")
    other = shutil.copytree(SEED_CARDS, tmp_path / "other")
    code, found = _validate(tiny, str(other), TINY_CARDS=str(home))
    assert (code, found["problems"]) == (0, [])
    assert all("learned.jsonl" not in p["file"] for p in found["warnings"])


def test_a_skipped_overlap_check_names_the_folder_checked(tiny: Tiny, tmp_path: Path) -> None:
    other = shutil.copytree(SEED_CARDS, tmp_path / "other")
    code, found = _validate(tiny, str(other), TINY_EMBEDDER="st:nope")
    assert code == 0
    [warning] = found["warnings"]
    assert warning["file"] == str(other) and "overlap check skipped" in warning["message"]


# --- 3. a bad function name or a tool listed twice: one plain line --------------------------


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            'tools: [f]\nfunctions:\n  - name: "f g"\n    parameters: {type: object}\n',
            "card.yaml:6: functions[0].name: 'f g' is not a function name (letters, "
            "digits, '_' and '-', the first a letter or '_'; at most 64)",
        ),
        ("tools: [http_get, http_get]\n", "card.yaml:4: tools: lists 'http_get' twice; keep one"),
    ],
)
def test_a_bad_name_is_one_line_in_plain_words(
    tiny: Tiny, tmp_path: Path, extra: str, expected: str
) -> None:
    path = _card(tmp_path, BASE + extra)
    code, found = _validate(tiny, str(path))
    assert (code, _lines(found)) == (1, [expected])


# --- 4. a key that is no plain word: as written, on its line --------------------------------


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ("budget:\n  max_tool_calls: 3\n  yes: 1\n", "card.yaml:7: budget.yes: unknown key"),
        ("0x1F: x\n", "card.yaml:5: 0x1F: unknown key"),
        ("null: x\n", "card.yaml:5: null: unknown key"),
    ],
)
def test_an_unknown_key_is_named_as_written(
    tiny: Tiny, tmp_path: Path, extra: str, expected: str
) -> None:
    path = _card(tmp_path, BASE + "tools: [http_get]\n" + extra)
    code, found = _validate(tiny, str(path))
    assert code == 1
    [line] = _lines(found)
    assert line.startswith(expected)


# --- 5. what a name must be, said truly ---------------------------------------------------


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (
            f"tools: [{'a' * 70}]\n",
            "card.yaml:4: tools[0]: is too long for a tool name: 70 characters, at most 64",
        ),
        (
            "tools: [1abc]\n",
            "card.yaml:4: tools[0]: '1abc' is not a tool name (letters, digits, '_' and "
            "'-', the first a letter or '_', at most 64; or SERVER.TOOL for a tool of an MCP "
            "server)",
        ),
    ],
)
def test_a_tool_name_refused_says_the_rule_it_breaks(
    tiny: Tiny, tmp_path: Path, extra: str, expected: str
) -> None:
    path = _card(tmp_path, BASE + extra)
    code, found = _validate(tiny, str(path))
    assert (code, _lines(found)) == (1, [expected])


def test_an_id_refused_says_what_it_must_start_with(tiny: Tiny, tmp_path: Path) -> None:
    path = _card(tmp_path, BASE.replace("id: one", 'id: "-a"') + "tools: [http_get]\n")
    code, found = _validate(tiny, str(path))
    assert (code, _lines(found)) == (
        1,
        [
            "card.yaml:1: id: '-a' is not a slug (lowercase letters, digits, '-' and '_', "
            "the first a letter or digit; at most 63)"
        ],
    )


# --- 6. a function's arguments are an object ----------------------------------------------


@pytest.mark.parametrize(
    ("parameters", "expected"),
    [
        (
            "{type: array}",
            "card.yaml:7: functions[0].parameters.type: function 'f' takes a mapping of "
            "arguments: its parameters need type: object, not 'array'",
        ),
        (
            "{properties: {a: {type: string}}}",
            "card.yaml:7: functions[0].parameters: function 'f' takes a mapping of "
            "arguments: its parameters need type: object (they name no type)",
        ),
    ],
)
def test_parameters_that_are_no_object_are_refused(
    tiny: Tiny, tmp_path: Path, parameters: str, expected: str
) -> None:
    extra = f"tools: [f]\nfunctions:\n  - name: f\n    parameters: {parameters}\n"
    path = _card(tmp_path, BASE + extra)
    code, found = _validate(tiny, str(path))
    assert (code, _lines(found)) == (1, [expected])
