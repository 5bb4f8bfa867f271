"""`tiny learn --generate`: a model writes each card's examples before anyone teaches (issue 33).

A scripted model server on loopback answers; the cards, learned.jsonl and the hashing
embedder are real. The tests read what went over the wire and what the file holds.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import Result

from tiny_cli.cards.card import Card
from tiny_cli.example_writer import TOKENS_PER_EXAMPLE, TOKENS_SLACK, generate
from tiny_cli.routing.embed import HashingEmbedder
from tiny_cli.routing.examples_file import (
    LEARNED_FILENAME,
    DerivedThreshold,
    Learned,
    check_learned,
    load_learned,
    with_learned,
)
from tiny_cli.routing.factory import FOLDS, _fold, _fold_router, build_router, derive_threshold
from tiny_cli.routing.router import Router, card_texts
from tiny_cli.routing.state import state_key
from tiny_cli.routing.tooltexts import ToolTexts
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, reply
from tiny_cli.workspace import open_workspace

from .conftest import SEED_CARDS

TOOL_OF = {"crm-writer": "crm_add_company", "docs-finder": "docs_search", "web-reader": "http_get"}
TAUGHT = "who is on call for the payroll system this week"
ANSWERS = {
    "crm-writer": [
        "Add Globex Ltd from Hamburg as a customer",
        "add globex  ltd from hamburg as a CUSTOMER",
    ],
    "docs-finder": ["Where does the handbook explain parental leave?", TAUGHT.upper()],
    "web-reader": ["Summarise the article at https://example.net/story for me"],
}  # fmt: skip


@pytest.fixture
def cards(tmp_path: Path) -> Path:
    """The seed cards copied, with one taught example: learned.jsonl is written beside them."""
    folder = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    head = {"kind": "tiny learned routing examples", "version": 1}
    rows = [head, {"task": TAUGHT, "card": "docs-finder"}]
    (folder / LEARNED_FILENAME).write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return folder


@pytest.fixture
def go(tiny: Callable[..., Result], cards: Path, scripted_server: ScriptedServer):
    """Run `tiny learn ARGS` on the copied cards against the scripted server."""

    def run(*args: str) -> Result:
        env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing",
               "TINY_BASE_URL": scripted_server.url, "TINY_MODEL": "tiny-test-model"}  # fmt: skip
        result = tiny("learn", *args, env=env)
        assert "Traceback" not in result.output
        return result

    return run


def _script(server: ScriptedServer, answers: dict[str, list[str]]) -> None:
    """Answer each card's request (told apart by its tool's name) with its scripted turns."""
    for card, texts in answers.items():
        server.on(lambda body, tool=TOOL_OF[card]: tool in user_text(body), *map(reply, texts))


def load_cards(folder: Path) -> list[Card]:
    """The cards in `folder` as tiny loads them."""
    return list(open_workspace(load_settings(env={"TINY_CARDS": str(folder)})).cards.values())


def user_text(body: dict) -> str:
    return str(body["messages"][-1]["content"])


def _lines(cards: Path) -> list[dict]:
    text = (cards / LEARNED_FILENAME).read_text("utf-8")
    return [json.loads(line) for line in text.splitlines()[1:]]


def _generated(cards: Path) -> dict[str, list[str]]:
    return {k: sorted(v) for k, v in load_learned(cards).generated.items()}


def test_generate_asks_once_per_card_and_writes_marked_lines(go, cards, scripted_server) -> None:
    _script(scripted_server, {c: [json.dumps(a)] for c, a in ANSWERS.items()})
    result = go("--generate", "--per-card", "4", "--json")
    assert result.exit_code == 0, result.output
    summaries = {c.id: " ".join(c.summary.split()) for c in load_cards(cards)}
    assert len(scripted_server.requests) == 3  # one request per card
    for body in scripted_server.requests:
        card = next(c for c, tool in TOOL_OF.items() if tool in user_text(body))
        assert summaries[card] in user_text(body)
        assert body["max_tokens"] == 4 * TOKENS_PER_EXAMPLE + TOKENS_SLACK
        assert body["model"] == "tiny-test-model"
        assert body["response_format"]["json_schema"]["schema"]["type"] == "array"
        assert body["temperature"] == 0  # greedy by default: asked again, the same file
    assert "docs_search" in user_text(
        scripted_server.requests[0]
    ) or "crm_add_company" in user_text(scripted_server.requests[0])
    rows = _lines(cards)
    taught = [r for r in rows if "source" not in r]
    assert taught == [{"task": TAUGHT, "card": "docs-finder"}]  # the taught line stays, once
    made = [r for r in rows if r.get("source") == "generated"]
    assert all(len(r["key"]) == 16 for r in made)
    # the CRM answer's two lines are one request normalised; the docs answer's copy of the
    # taught example is dropped: what a user taught wins
    assert _generated(cards) == {
        "crm-writer": ["Add Globex Ltd from Hamburg as a customer"],
        "docs-finder": ["Where does the handbook explain parental leave?"],
        "web-reader": ["Summarise the article at https://example.net/story for me"],
    }
    data = json.loads(result.stdout)
    assert (data["card_requests"], data["tokens_in"] > 0, data["tokens_out"] > 0) == (
        3,
        True,
        True,
    )
    assert {c["card"]: c["duplicates"] for c in data["cards"]} == {
        "crm-writer": 1, "docs-finder": 1, "web-reader": 0,
    }  # fmt: skip


def test_a_second_run_resumes_and_regenerate_asks_again(go, cards, scripted_server) -> None:
    _script(scripted_server, {c: [json.dumps(a)] * 2 for c, a in ANSWERS.items()})
    assert go("--generate").exit_code == 0
    first = (cards / LEARNED_FILENAME).read_text("utf-8")
    again = go("--generate")
    assert again.exit_code == 0, again.output
    assert len(scripted_server.requests) == 3  # nothing on the wire for cards already done
    assert "3 card(s) already done" in again.stdout
    assert "cost: 0 card request(s)" in again.stdout
    assert (cards / LEARNED_FILENAME).read_text("utf-8") == first
    assert go("--generate", "--regenerate", "--card", "web-reader").exit_code == 0
    assert len(scripted_server.requests) == 4
    assert "http_get" in user_text(scripted_server.requests[-1])


def test_a_garbage_answer_is_asked_again_once_then_reported(go, cards, scripted_server) -> None:
    _script(
        scripted_server,
        {
            "crm-writer": ["Sure! Here are some requests: add a company"] * 2,
            "docs-finder": [json.dumps(ANSWERS["docs-finder"])],
            "web-reader": ["not json", json.dumps(ANSWERS["web-reader"])],
        },
    )
    result = go("--generate")
    assert result.exit_code == 1, result.output
    assert len(scripted_server.requests) == 5  # 2 + 1 + 2: one retry each, no more
    assert "failed crm-writer: the answer was not a JSON list of strings" in result.stdout
    assert "crm-writer: failed" in result.stderr  # the progress line, per card
    assert sorted(_generated(cards)) == ["docs-finder", "web-reader"]
    cost = "cost: 5 card request(s) (the provider's retries not counted) to tiny-test-model"
    assert f"{cost} at temperature 0," in result.stdout


def test_a_list_cut_off_at_max_tokens_keeps_its_whole_requests(go, cards, scripted_server) -> None:
    # what the 1.5B model wrote greedily for a BFCL card: it repeated itself into max_tokens
    cut = '[\n  "Who scored most for Arsenal in 2022?",\n  "Top scorer of the 2022-2023-2024-20'
    _script(scripted_server, {"crm-writer": [cut]})
    result = go("--generate", "--card", "crm-writer")
    assert result.exit_code == 0, result.output
    assert len(scripted_server.requests) == 1  # not asked again: greedy would write it again
    assert _generated(cards) == {"crm-writer": ["Who scored most for Arsenal in 2022?"]}


def test_temperature_goes_over_the_wire_and_a_new_one_generates_again(
    go, cards, scripted_server
) -> None:
    _script(scripted_server, {c: [json.dumps(a)] * 2 for c, a in ANSWERS.items()})
    assert go("--generate").exit_code == 0
    again = go("--generate", "--temperature", "0.7", "--card", "web-reader", "--json")
    assert again.exit_code == 0, again.output
    # what the examples were written at is part of what they were written from: not "done"
    assert len(scripted_server.requests) == 4
    assert scripted_server.requests[-1]["temperature"] == 0.7
    assert json.loads(again.stdout)["temperature"] == 0.7
    bad = go("--generate", "--temperature", "3")
    assert bad.exit_code != 0
    assert "--temperature 3.0: must be a number from 0 (greedy) to 2" in bad.output
    assert len(scripted_server.requests) == 4


def test_what_validate_would_flag_is_not_written(go, cards, scripted_server) -> None:
    copies = ["How did the onboarding process work AGAIN", ANSWERS["crm-writer"][0].lower()]
    answers = {**ANSWERS, "web-reader": [*ANSWERS["web-reader"], *copies]}
    _script(scripted_server, {c: [json.dumps(a)] for c, a in answers.items()})
    result = go("--generate", "--json")
    assert result.exit_code == 0, result.output
    # a docs-finder example of its own, and the CRM card's generated one: both taken, not
    # written (left to the overlap check, they would go only where it tells them apart)
    done = {c["card"]: c for c in json.loads(result.stdout)["cards"]}
    assert (done["web-reader"]["written"], done["web-reader"]["duplicates"]) == (1, 2)
    assert _generated(cards)["web-reader"] == ANSWERS["web-reader"]
    assert check_learned(cards, load_cards(cards)) == []


def test_prune_removes_only_generated_examples(go, cards, scripted_server) -> None:
    _script(scripted_server, {c: [json.dumps(a)] for c, a in ANSWERS.items()})
    assert go("--generate").exit_code == 0
    one = go("--prune-generated", "--card", "crm-writer")
    assert one.exit_code == 0, one.output
    assert "pruned 1 generated example(s)" in one.stdout
    assert sorted(_generated(cards)) == ["docs-finder", "web-reader"]
    assert go("--prune-generated").exit_code == 0
    assert _lines(cards) == [{"task": TAUGHT, "card": "docs-finder"}]


@pytest.mark.slow
def test_learn_counts_the_generated_examples_the_file_holds(go, cards, scripted_server) -> None:
    """It said "0 example(s) for cards" of a file holding generated ones only."""
    _script(scripted_server, {c: [json.dumps(a)] for c, a in ANSWERS.items()})
    assert go("--generate").exit_code == 0
    made = sum(map(len, _generated(cards).values()))
    assert made > 0
    said = f"the file holds 1 taught example(s) for cards, {made} generated, 0 out of scope"
    assert said in go().stdout
    assert json.loads(go("--json").stdout)["generated"] == made


@pytest.mark.slow
def test_an_example_closer_to_another_card_is_dropped(go, cards, scripted_server) -> None:
    crm = next(c for c in load_cards(cards) if c.id == "crm-writer")
    stray = f"{crm.examples[0]} today"  # a CRM request, written for the docs card
    answers = {**ANSWERS, "docs-finder": ["Where does the handbook explain parental leave?", stray]}
    _script(scripted_server, {c: [json.dumps(a)] for c, a in answers.items()})
    result = go("--generate", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["overlapping"] >= 1
    assert stray not in _generated(cards)["docs-finder"]
    by_card = {c["card"]: c for c in data["cards"]}  # each card says what the check took back
    assert sum(c["dropped"] for c in by_card.values()) == data["overlapping"]
    stayed = len(_generated(cards)["docs-finder"])
    assert by_card["docs-finder"]["written"] - by_card["docs-finder"]["dropped"] == stayed


def test_teaching_a_generated_example_makes_it_taught(go, tiny, cards, scripted_server) -> None:
    _script(scripted_server, {c: [json.dumps(a)] for c, a in ANSWERS.items()})
    assert go("--generate").exit_code == 0
    text = ANSWERS["web-reader"][0]
    (cards.parent / "teach.jsonl").write_text(json.dumps({"task": text, "card": "web-reader"}))
    assert go(str(cards.parent / "teach.jsonl")).exit_code == 0
    learned = load_learned(cards)
    assert learned.examples["web-reader"] == (text,)
    assert "web-reader" not in learned.generated


def test_the_router_reads_generated_examples_apart_from_taught_ones() -> None:
    cards = load_cards(SEED_CARDS)
    learned = Learned(
        Path("learned.jsonl"),
        {"docs-finder": (TAUGHT,)},
        generated={"docs-finder": ("parental leave rules", TAUGHT)},
        generation={"docs-finder": "k"},
    )
    docs = next(c for c in with_learned(cards, learned) if c.id == "docs-finder")
    assert docs.examples[-1] == TAUGHT and "parental leave rules" not in docs.examples
    assert docs.generated == ("parental leave rules",)  # taught wins a text both hold
    assert ("generated", "parental leave rules") in card_texts(docs)


# four requests a model wrote for docs-finder, one of them off its topic
MADE = (
    "where is the travel expense policy",
    "find the onboarding checklist in the handbook",
    "what does the handbook say about remote work",
    "book me a table for two at an italian restaurant tonight",
)


def _docs_score(learned: Learned, task: str) -> tuple[float, str]:
    router = Router(with_learned(load_cards(SEED_CARDS), learned), HashingEmbedder(), None)
    reason = next(r for r in router.explain(task, 3).reasons if r.agent_id == "docs-finder")
    return reason.score, reason.source


def test_one_off_topic_generated_example_counts_for_less_than_a_taught_one() -> None:
    off = MADE[-1]
    taught, _ = _docs_score(Learned(Path("l.jsonl"), {"docs-finder": MADE}), off)
    made, _ = _docs_score(Learned(Path("l.jsonl"), generated={"docs-finder": MADE}), off)
    # taught, the off-topic request is its own nearest example (the kNN view); generated, it
    # is one of four whose cosines are averaged
    assert made < taught - 1.0


def test_explain_names_the_generated_example_nearest_the_task() -> None:
    # a card of its summary alone, and three requests written for it
    cards = [replace(c, examples=()) for c in load_cards(SEED_CARDS)]
    learned = Learned(Path("l.jsonl"), generated={"docs-finder": MADE[:3]})
    router = Router(with_learned(cards, learned), HashingEmbedder(), None)
    reason = router.explain(MADE[1], 3).reasons[0]
    assert (reason.agent_id, reason.source, reason.text) == (
        "docs-finder",
        "generated examples",
        MADE[1],
    )


@pytest.mark.slow
def test_the_threshold_is_derived_from_generated_examples_too(tmp_path: Path) -> None:
    cards = load_cards(SEED_CARDS)
    out = tuple(f"unrelated request number {n} about the weather on mars" for n in range(20))
    made = {"web-reader": ("summarise https://example.net/a", "what does example.org/b say")}
    learned = Learned(tmp_path / LEARNED_FILENAME, {"docs-finder": (TAUGHT,)}, out)
    with_made = replace(learned, generated=made, generation={"web-reader": "k"})
    derived = derive_threshold(cards, with_made, HashingEmbedder(), tmp_path / "cache")
    assert derived is not None
    assert derived.examples == 3  # the taught one and the two generated
    assert derived.sha == with_made.sha() != learned.sha()  # the file as written, lines and all


def test_a_threshold_derived_before_generated_examples_were_one_group_says_so() -> None:
    made = {"web-reader": ("summarise https://example.net/a",)}
    learned = Learned(Path("l.jsonl"), {"docs-finder": (TAUGHT,)}, generated=made)
    derived = DerivedThreshold(1.2, 0.8, 2, 20, 5, 0.9, 0.8, 0.8, "hashing", "")

    def why(sha: str) -> str | None:
        return replace(learned, threshold=replace(derived, sha=sha)).why_stale("hashing", "", "", 0)

    assert why(learned.sha()) is None
    # the same lines hashed as an older tiny hashed them: the rule changed, not the examples
    assert why(learned.sha(rule="")) == (
        "the way tiny reads generated examples changed since `tiny learn` derived it"
    )
    assert why("0" * 64) == "the examples changed since `tiny learn` derived it"
    # with no generated example the two hashes are one: fresh, never "the way tiny reads"
    plain = replace(learned, generated={})
    fresh = replace(plain, threshold=replace(derived, sha=plain.sha()))
    assert fresh.why_stale("hashing", "", "", 0) is None


def test_each_fold_holds_its_generated_examples_out_as_the_router_holds_them() -> None:
    cards = load_cards(SEED_CARDS)
    learned = Learned(Path("l.jsonl"), generated={"docs-finder": MADE})
    for fold in range(FOLDS):
        router = _fold_router(cards, learned, HashingEmbedder(), None, fold, None)
        docs = next(c for c in router.cards if c.id == "docs-finder")
        assert docs.generated == tuple(t for t in MADE if _fold(t) != fold)
        assert not set(MADE) & set(docs.examples)


def test_the_router_state_is_keyed_by_the_generated_examples() -> None:
    cards = load_cards(SEED_CARDS)

    def key(made: tuple[str, ...]) -> str:
        learned = Learned(Path("l.jsonl"), generated={"docs-finder": made})
        return state_key(with_learned(cards, learned), (), "hashing", ())

    assert key(MADE) != key(MADE[:3]) != key(())
    assert key(()) == state_key(cards, (), "hashing", ())  # none: the cards' own key


def test_a_folder_with_only_generated_examples_says_why_the_default_applies(
    tmp_path: Path,
) -> None:
    learned = Learned(tmp_path / LEARNED_FILENAME, generated={"docs-finder": MADE})
    settings = load_settings(env={"TINY_HOME": str(tmp_path)})
    router = build_router(
        settings, load_cards(SEED_CARDS), learned=learned, embedder=HashingEmbedder(),
        keep_state=False, tool_texts=ToolTexts(),
    )  # fmt: skip
    assert router.threshold_source == (
        f"default 1.5: {LEARNED_FILENAME} has 0 out-of-scope examples, and deriving one needs 20"
    )


@pytest.mark.slow
def test_a_run_stopped_before_the_overlap_check_is_finished_when_resumed(
    go, tiny, cli_env, cards, scripted_server, tmp_path
) -> None:
    out = [{"task": f"unrelated request number {n} about the weather on mars", "card": None}
           for n in range(20)]  # fmt: skip
    (tmp_path / "out.jsonl").write_text("".join(json.dumps(r) + "\n" for r in out), "utf-8")
    assert go(str(tmp_path / "out.jsonl")).exit_code == 0  # a derived threshold
    twin = Path(shutil.copytree(cards, tmp_path / "twin"))
    crm = next(c for c in load_cards(cards) if c.id == "crm-writer")
    stray = f"{crm.examples[0]} today"  # a CRM request, written for the docs card
    answers = {**ANSWERS, "docs-finder": ["Where does the handbook explain parental leave?", stray]}
    _script(scripted_server, {c: [json.dumps(a)] * 2 for c, a in answers.items()})
    env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing",
           "TINY_BASE_URL": scripted_server.url, "TINY_MODEL": "tiny-test-model"}  # fmt: skip
    # Ctrl-C as the last card's line is shown, its examples written and nothing checked yet
    # (in-process: the CLI would end the test's process, as it ends tiny's)
    with pytest.raises(KeyboardInterrupt):
        generate(load_settings(env={**cli_env, **env}), progress=_ctrl_c_at_the_last_card)
    resumed = go("--generate", "--json")
    assert resumed.exit_code == 0, resumed.output
    data = json.loads(resumed.stdout)
    assert (data["card_requests"], data["overlapping"] >= 1) == (0, True)
    assert data["report"]["threshold"] is not None
    twin_env = {**env, "TINY_CARDS": str(twin)}
    assert tiny("learn", "--generate", env=twin_env).exit_code == 0  # the same, uninterrupted
    learned = (cards / LEARNED_FILENAME).read_text("utf-8")
    assert learned == (twin / LEARNED_FILENAME).read_text("utf-8")
    assert stray not in learned
    again = go("--generate", "--json")  # done now: nothing left to finish
    assert json.loads(again.stdout)["status"] == "unchanged"


def _ctrl_c_at_the_last_card(line: str) -> None:
    done, total = line[1:].split("]")[0].split("/")  # "[3/3] crm-writer: …"
    if done == total:
        raise KeyboardInterrupt
