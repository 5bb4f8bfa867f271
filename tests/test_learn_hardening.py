"""`tiny learn` and `tiny validate` hardening: generation writes only what the file's readers
read and what passes validate's overlap check, validate reports every bad line, tiny never
writes a learned.jsonl it would refuse to read, a line taught twice is kept, an overlap
warning keeps its line when the line holds a secret, and the cost says when no tokens were
reported.

A scripted model server on loopback answers; the cards, learned.jsonl and the hashing
embedder are real.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from tiny_cli.routing.examples_file import (
    LEARNED_FILENAME,
    MAX_GENERATED_CHARS,
    MAX_LEARNED_BYTES,
    load_learned,
)
from tiny_cli.testing import ScriptedServer, reply

from .conftest import one_error_line
from .test_generate import TOOL_OF
from .test_learn_input import write_rows

HEADER = {"kind": "tiny learned routing examples", "version": 1}


@pytest.fixture
def cards(seed_copy: Path) -> Path:
    """The seed cards copied (conftest): learned.jsonl is written beside them."""
    return seed_copy


@pytest.fixture
def env(cards: Path, scripted_server: ScriptedServer) -> dict[str, str]:
    """The copied cards, the hashing embedder and the scripted server."""
    return {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing",
            "TINY_BASE_URL": scripted_server.url, "TINY_MODEL": "tiny-test-model"}  # fmt: skip


@pytest.fixture
def go(tiny: Callable[..., Result], env: dict[str, str]) -> Callable[..., Result]:
    """Run `tiny ARGS` with `env`, more variables as keywords; never a traceback."""

    def run(*args: str, **more: str) -> Result:
        result = tiny(*args, env={**env, **more})
        assert "Traceback" not in result.output
        return result

    return run


def _answer(server: ScriptedServer, answers: dict[str, list[str]], **usage: int) -> None:
    """Answer each card's request once with its list."""
    for card, texts in answers.items():
        turn = reply(json.dumps(texts), **usage)
        server.on(lambda body, tool=TOOL_OF[card]: tool in body["messages"][-1]["content"], turn)


# --- 1: a request with no letter or digit is never written ------------------------------


def test_a_generated_request_with_no_letter_or_digit_is_left_out(go, cards, scripted_server):
    said = ["Add Initech from Austin", "...", "\u2014", "!!! ???", "\u200b"]
    _answer(scripted_server, {"crm-writer": said})
    result = go("learn", "--generate", "--card", "crm-writer", "--per-card", "5")
    assert result.exit_code == 0, result.output
    assert load_learned(cards).generated == {"crm-writer": ("Add Initech from Austin",)}
    for command in (["route", "add a customer", "--json"], ["learn", "--prune-generated"]):
        checked = go(*command)
        assert checked.exit_code == 0, checked.output


# --- 2: what --generate keeps passes validate's overlap check ---------------------------

# found by search with the hashing embedder: dropping the first overlap moves crm-writer's
# group, and another of its examples then sits closer to web-reader
SHIFTING = {
    "crm-writer": ["read this article https://news.example/1 please",
                   "how do I request vacation please", "register Umbrella Corp as a new client",
                   "how do I request vacation"],
    "docs-finder": ["explain the pricing on https://shop.example/pricing",
                    "which page of the handbook covers travel"],
    "web-reader": ["put Hooli into the CRM asap", "where are the onboarding steps documented asap"],
}  # fmt: skip


def test_what_generate_keeps_draws_no_overlap_warning(go, cards, scripted_server) -> None:
    _answer(scripted_server, SHIFTING)
    result = go("learn", "--generate", "--per-card", "4")
    assert result.exit_code == 0, result.output
    checked = go("validate")
    assert checked.exit_code == 0, checked.output
    assert "generated example" not in checked.output
    again = go("learn", "--generate", "--per-card", "4")
    assert "unchanged" in again.stdout and "0 dropped as closer" in again.stdout


# --- 3: validate reports every bad line of learned.jsonl --------------------------------


def test_validate_reports_each_bad_line_of_learned(go, cards) -> None:
    path = cards / LEARNED_FILENAME
    rows = [{"task": "book a taxi", "card": "nobody"},
            {"task": "book a train", "card": "web-reader", "note": "x"}]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows) + "{not json\n", "utf-8")
    result = go("validate")
    assert result.exit_code == 1
    for line, said in ((1, "card"), (2, "note"), (3, "file")):
        assert f"{path}:{line}: {said}:" in result.output, result.output


# --- 4: tiny never writes a learned.jsonl it would refuse to read -----------------------


def test_a_files_generated_line_past_the_per_line_limit_is_not_carried(go, cards, tmp_path):
    source = tmp_path / "other" / LEARNED_FILENAME
    source.parent.mkdir()
    kept = "find the parental leave page"
    long = "where is " + "x" * MAX_GENERATED_CHARS
    rows = [{"task": t, "card": "docs-finder", "source": "generated", "key": "k"}
            for t in (kept, long)]  # fmt: skip
    write_rows(source, HEADER, *rows)
    report = json.loads(go("learn", str(source), "--json").stdout)
    assert report["carried"] == 1
    assert load_learned(cards).generated == {"docs-finder": (kept,)}


@pytest.mark.slow  # reads and compares 16 MiB of tasks: seconds
def test_learn_refuses_a_file_past_the_size_its_readers_read(go, cards, tmp_path) -> None:
    path = cards / LEARNED_FILENAME
    task = "please find " + "word " * 1500  # under route's 8,000 characters

    def made(n: int) -> str:  # written as tiny writes it: the rewrite is as long
        row = {"task": f"{n:05d} {task}", "card": "docs-finder", "source": "generated", "key": "k"}
        return json.dumps(row) + "\n"

    head = json.dumps(HEADER) + "\n"
    count = (MAX_LEARNED_BYTES - len(head)) // len(made(0))  # as many as the reader reads
    path.write_text(head + "".join(map(made, range(count))), "utf-8")
    before = path.read_bytes()
    lesson = tmp_path / "lesson.jsonl"
    taught = write_rows(lesson, {"task": task + "x" * 200, "card": "web-reader"})
    assert len(before) + len(taught) - len(head) > MAX_LEARNED_BYTES  # one line more: past it
    error = one_error_line(go("learn", str(lesson)))
    assert error.startswith(f"{path}: would be ") and "nothing written" in error
    assert path.read_bytes() == before


# --- 5: a task taught twice under one label stays as written ----------------------------


def test_learn_keeps_both_lines_of_a_task_taught_twice(go, cards) -> None:
    path = cards / LEARNED_FILENAME
    rows = [{"task": "add acme corp", "card": "crm-writer"},
            {"task": "Add  ACME corp", "card": "crm-writer"}]  # fmt: skip
    write_rows(path, *rows)
    result = go("learn")
    assert result.exit_code == 0, result.output
    assert sorted(load_learned(cards).examples["crm-writer"]) == ["Add  ACME corp", "add acme corp"]


# --- 6: an overlap warning finds its line when the line holds a secret ------------------


def test_an_overlap_warning_keeps_its_line_when_the_task_holds_a_secret(go, cards) -> None:
    task = "Summarise the article at https://example.net/story api_key=hunter2secretvalue"
    write_rows(cards / LEARNED_FILENAME, HEADER, {"task": task, "card": "crm-writer"})
    result = go("validate")
    assert result.exit_code == 0, result.output
    assert f"{cards / LEARNED_FILENAME}:2: routing: learned example" in result.output
    assert "hunter2secretvalue" not in result.output


# --- 7: the cost says when the server reported no tokens --------------------------------


def test_the_cost_says_no_tokens_were_reported(go, scripted_server) -> None:
    _answer(scripted_server, {"web-reader": ["read https://example.net/a"]}, tokens_in=0,
            tokens_out=0)  # fmt: skip
    text = go("learn", "--generate", "--card", "web-reader").stdout
    assert "temperature 0, no model tokens reported, " in text
    assert "0 tokens in" not in text
