"""`tiny validate FILE` judged as the cards folder would judge it: a card file in a subfolder
of the cards folder is never read, and a named file's id clashes with any sibling's, broken
or not."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from typer.testing import Result

from .conftest import REPO, SEED_CARDS

Tiny = Callable[..., Result]
SEED = (SEED_CARDS / "docs-finder.yaml").read_text("utf-8")
BROKEN = SEED.replace("\ntools:", "\ntool:")  # an unknown key: the card is refused
UNREAD = "in a subfolder of the cards folder"


def _validate(tiny: Tiny, cards: Path, *args: Path) -> tuple[int, list[dict[str, Any]]]:
    env = {"TINY_EMBEDDER": "hashing", "TINY_CARDS": str(cards)}
    result = tiny("validate", *map(str, args), "--json", env=env)
    assert "Traceback" not in result.output
    return result.exit_code, json.loads(result.stdout)["problems"]


def _folder(tmp_path: Path, **cards: str) -> Path:
    """A cards folder holding `name.yaml` files (a `sub__x` name: `sub/x.yaml`)."""
    folder = tmp_path / "cards"
    for name, text in cards.items():
        path = folder / f"{name.replace('__', '/')}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, "utf-8")
    return folder


# --- a card file in a subfolder of the cards folder ------------------------------------------


def test_a_card_named_in_a_subfolder_of_the_cards_folder_is_not_read(tiny, tmp_path) -> None:
    cards = _folder(tmp_path, a=SEED, sub__x=SEED.replace("docs-finder", "other"))
    code, problems = _validate(tiny, cards, cards / "sub" / "x.yaml")
    [problem] = problems
    assert code == 1 and problem["file"] == str(cards / "sub" / "x.yaml")
    assert problem["field"] == "file" and problem["message"].startswith(UNREAD)


def test_a_subfolder_card_named_beside_a_good_one_is_the_one_problem(tiny, tmp_path) -> None:
    cards = _folder(tmp_path, a=SEED, sub__deeper__x=SEED.replace("docs-finder", "other"))
    code, problems = _validate(tiny, cards, cards / "a.yaml", cards / "sub" / "deeper" / "x.yaml")
    assert code == 1 and [Path(p["file"]).name for p in problems] == ["x.yaml"]
    assert problems[0]["message"].startswith(UNREAD)


def test_a_subfolder_named_as_a_cards_folder_of_its_own_reads_its_card(tiny, tmp_path) -> None:
    cards = _folder(tmp_path, a=SEED, sub__x=SEED.replace("docs-finder", "other"))
    x = cards / "sub" / "x.yaml"
    assert _validate(tiny, cards, cards / "sub", x) == (0, [])
    assert _validate(tiny, cards / "sub", x) == (0, [])  # the cards folder it is set to


def test_a_readme_named_in_a_subfolder_is_still_no_card(tiny, tmp_path) -> None:
    cards = _folder(tmp_path, a=SEED)
    (cards / "sub").mkdir()
    (cards / "sub" / "README.md").write_text("# Old cards\n", "utf-8")
    code, problems = _validate(tiny, cards, cards / "sub" / "README.md", cards / "a.yaml")
    assert (code, problems) == (0, [])


def test_the_hook_passes_subfolder_cards_to_tiny_validate() -> None:
    """The pre-commit hook hands a subfolder's card files on, so validate can refuse them."""
    hooks = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text("utf-8"))
    hook = next(h for h in hooks if h["id"] == "tiny-validate")
    files, exclude = re.compile(hook["files"]), re.compile(hook["exclude"])
    for name in ("cards/a.yaml", "cards/sub/x.yml", "agents/cards/sub/x.md"):
        assert files.search(name) and not exclude.search(name)
    assert exclude.search("cards/sub/README.md") and exclude.search("cards/mcp.yaml")


# --- a named file's id against every sibling card file ---------------------------------------


def test_a_named_card_clashes_with_a_broken_sibling(tiny, tmp_path) -> None:
    cards = _folder(tmp_path, a=SEED, b=BROKEN)
    code, problems = _validate(tiny, cards, cards / "a.yaml")
    [problem] = problems
    assert code == 1 and problem["file"] == str(cards / "a.yaml") and problem["line"] == 1
    assert problem["message"] == f"duplicate id 'docs-finder' (already used in {cards}/b.yaml:1)"


def test_a_broken_named_card_clashes_with_a_sibling(tiny, tmp_path) -> None:
    cards = _folder(tmp_path, a=SEED, b=BROKEN, c=BROKEN)
    code, problems = _validate(tiny, cards, cards / "b.yaml")
    assert code == 1
    assert [(p["field"], p["message"][:26]) for p in problems] == [
        ("tool", "unknown key (did you mean "),
        ("id", "duplicate id 'docs-finder'"),
    ]
    assert problems[1]["message"].endswith(f"(already used in {cards}/a.yaml:1)")  # the first


def test_a_named_card_clashes_as_the_folder_check_does(tiny, tmp_path) -> None:
    cards = _folder(tmp_path, a=BROKEN, b=BROKEN)
    _, whole = _validate(tiny, cards, cards)
    _, named = _validate(tiny, cards, cards / "b.yaml")
    of_b = [p for p in whole if p["file"] == str(cards / "b.yaml")]
    assert len(of_b) == 2 and named == of_b  # b's lines alike: its key, and a's id


def test_a_named_card_with_its_own_id_passes_beside_a_broken_sibling(tiny, tmp_path) -> None:
    cards = _folder(tmp_path, a=SEED.replace("docs-finder", "finder"), b=BROKEN)
    assert _validate(tiny, cards, cards / "a.yaml") == (0, [])
