"""Checked cards remembered: unchanged files are taken from the cache, changed ones re-checked."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from tiny_cli.cards.index import CACHE_DIR, RACY_NS, CardIndex, _seal, _stamp
from tiny_cli.cards.load import check_cards, load_cards
from tiny_cli.errors import CardError

from .conftest import SEED_CARDS

TOOLS = {"docs_search": False, "http_get": False, "html_to_text": False,
         "crm_find_company": False, "crm_add_company": True}  # fmt: skip


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    shutil.copytree(SEED_CARDS, tmp_path / "cards")
    return tmp_path / "cards"


def _entries(cache: Path) -> dict:
    [file] = (cache / CACHE_DIR).iterdir()
    return json.loads(file.read_text("utf-8"))["files"]


def _later() -> int:
    """A clock as if the index were written well after the files changed: none is racy."""
    return time.time_ns() + 5 * RACY_NS


def test_a_second_load_takes_unchanged_cards_from_the_cache(folder: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    first = load_cards([folder], TOOLS, None, cache, clock=_later)
    assert sorted(Path(p).name for p in _entries(cache)) == sorted(
        p.name for p in folder.glob("*.yaml")
    )
    assert load_cards([folder], TOOLS, None, cache, clock=_later) == first
    # proof that the second load reads the cache, not the file: an entry changed and sealed
    # again, as only the index writes one, is what it gives (a file's edit that keeps its size
    # and mtime is seen: tests/test_portability_fixes.py)
    [file] = (cache / CACHE_DIR).iterdir()
    data = json.loads(file.read_text("utf-8"))
    entry = data["files"][str(folder / "docs-finder.yaml")]
    entry[2]["summary"] = "Taken from the cache, not from the file."
    entry[4] = _seal(entry[2], entry[3])
    file.write_text(json.dumps(data), "utf-8")
    second = {c.id: c for c in load_cards([folder], TOOLS, None, cache)}
    assert second["docs-finder"].summary == "Taken from the cache, not from the file."


def test_an_edited_card_is_checked_again(folder: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    load_cards([folder], TOOLS, None, cache)
    target = folder / "docs-finder.yaml"
    target.write_text(target.read_text("utf-8") + "unknown_key: 1\n", "utf-8")
    with pytest.raises(CardError, match="unknown_key"):
        load_cards([folder], TOOLS, None, cache)
    assert str(target) not in _entries(cache)  # a card with problems is never cached
    with pytest.raises(CardError, match="unknown_key"):  # and its problem is told every time
        load_cards([folder], TOOLS, None, cache)


def test_other_tools_are_another_cache(folder: Path, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    load_cards([folder], TOOLS, None, cache)
    fewer = {k: v for k, v in TOOLS.items() if k != "docs_search"}
    _, problems = check_cards([folder], fewer, None, cache)
    assert any("docs_search" in p.message for p in problems)  # checked, not taken from cache


@pytest.mark.parametrize(("written_after", "taken"), [(RACY_NS // 2, False), (2 * RACY_NS, True)])
def test_a_file_changed_just_before_the_index_was_written_is_checked_again(
    folder: Path, tmp_path: Path, written_after: int, taken: bool
) -> None:
    # on FAT (2 s mtimes) or HFS+ (1 s) an edit right after a check may leave the whole stamp
    # as it was: an entry written that close to its file's change is not trusted ("racy")
    card = folder / "docs-finder.yaml"
    stamp = _stamp(os.stat(card))
    changed = max(os.stat(card).st_mtime_ns, os.stat(card).st_ctime_ns)
    cache = tmp_path / "cache"
    index = CardIndex.open(cache, [folder], "salt", clock=lambda: changed + written_after)
    index.put(card, stamp, {"id": "docs-finder"}, 1)
    index.save([card])
    again = CardIndex.open(cache, [folder], "salt", clock=lambda: changed + 10 * RACY_NS)
    assert (again.get(card, stamp) is not None) is taken
    # a racy entry is forgotten, not kept for its recheck to replace: a card that now fails
    # the check is never put, and an index written later (another card put) would give it back
    other = folder / "web-reader.yaml"
    again.put(other, _stamp(os.stat(other)), {"id": "web-reader"}, 1)
    again.save([card, other])
    later = CardIndex.open(cache, [folder], "salt")
    assert (later.get(card, stamp) is not None) is taken
