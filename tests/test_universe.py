"""Universes of the bench at scale: whole cards, about K tools, one per group of tasks, seeded."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tiny_cli.bench.universe import CATALOGUE, sample_tasks, universes

BFCL = Path(__file__).resolve().parent.parent / "examples" / "bfcl"


def _catalogue() -> dict[str, int]:
    cards = sorted((BFCL / "cards").glob("*.yaml"))
    return {d["id"]: len(d["tools"]) for d in (yaml.safe_load(p.read_text()) for p in cards)}


def _tasks() -> list[dict]:
    return [json.loads(line) for line in (BFCL / "tasks.jsonl").read_text().splitlines()]


def test_each_universe_holds_its_task_card_and_about_k_tools() -> None:
    tools_of = _catalogue()
    tasks = _tasks()
    picked = set(sample_tasks([t["id"] for t in tasks if t["expected_agent"]], 60, seed=1))
    cards = [t["expected_agent"] for t in tasks if t["id"] in picked] + [None] * 30
    for size in (10, 30, 100, 300):
        got = universes(cards, tools_of, size, seed=1)
        assert len(got) == len(cards)
        for card, universe in zip(cards, got, strict=True):
            assert card is None or card in universe.cards
            assert universe.tools == sum(tools_of[c] for c in universe.cards)
            assert universe.tools <= max(size, tools_of.get(card or "", 0))
            spare = [c for c in tools_of if c not in cards and c not in universe.cards]
            assert all(tools_of[c] > size - universe.tools for c in spare)  # filled up
        assert len({u.index for u in got}) <= len(cards)
    assert len({u.index for u in universes(cards, tools_of, 300, seed=1)}) == 1  # all share one


def test_the_same_seed_gives_the_same_universes_and_another_seed_others() -> None:
    tools_of = _catalogue()
    cards = [t["expected_agent"] for t in _tasks()[:20]]
    assert universes(cards, tools_of, 30, seed=7) == universes(cards, tools_of, 30, seed=7)
    assert universes(cards, tools_of, 30, seed=7) != universes(cards, tools_of, 30, seed=8)


def test_the_catalogue_size_is_every_card_and_cardless_tasks_take_universes_in_turn() -> None:
    tools_of = {"a": 2, "b": 3, "c": 4, "d": 2}
    whole = universes(["a", None], tools_of, CATALOGUE, seed=0)
    assert whole[0].cards == ("a", "b", "c", "d") and whole[0].label == "all"
    got = universes(["a", "c", None, None], tools_of, 5, seed=0)
    assert got[0] != got[1]  # a (2) and c (4) do not fit in 5 together
    assert [got[2], got[3]] == [got[0], got[1]]
    assert all(u.tools <= 5 for u in got)
