"""What `tiny learn` takes in: a learned file it cannot rewrite whole is refused, unchanged.

A newer learned.jsonl or a line with a field tiny does not know, a task route refuses,
and `--prune-generated` with an unknown card: one error line, exit 2, and
learned.jsonl byte for byte as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from tiny_cli.digest import Digest, Routing
from tiny_cli.events import Finished
from tiny_cli.routing.examples_file import LEARNED_FILENAME
from tiny_cli.runs import RunLog

HEADER = {"kind": "tiny learned routing examples", "version": 1}
LONG = "x" * 100_000
TOO_LONG = (
    "the task is 100,000 characters; at most 8,000 "
    "(put long material in a file the agent reads, not in the task)"
)


@pytest.fixture
def cards(seed_copy: Path) -> Path:
    """The seed cards copied (conftest)."""
    return seed_copy


@pytest.fixture
def go(tiny_on_copy: Callable[..., Result]) -> Callable[..., Result]:
    """`tiny ARGS` on the copy, hashing embedder (conftest)."""
    return tiny_on_copy


@pytest.fixture
def one(tmp_path: Path) -> Path:
    """A valid file to learn."""
    path = tmp_path / "one.jsonl"
    path.write_text(json.dumps({"task": "add acme to the crm", "card": "crm-writer"}) + "\n")
    return path


def write_rows(path: Path, *rows: object) -> bytes:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), "utf-8")
    return path.read_bytes()


def refused_line(result: Result, line: str) -> None:
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"tiny: error: {line}"]


# --- a learned file tiny would not write back whole ------------------------------------


def test_a_newer_learned_file_is_refused_and_left_unchanged(
    go: Callable[..., Result], cards: Path, one: Path
) -> None:
    learned = cards / LEARNED_FILENAME
    before = write_rows(learned, {**HEADER, "version": 99}, {"task": "keep", "card": "crm-writer"})
    refused_line(go("learn", str(one)), f"{learned}: version 99 is newer than this tiny reads (1); "
             "upgrade tiny")  # fmt: skip
    assert learned.read_bytes() == before


def test_a_field_tiny_does_not_know_is_refused_not_dropped(
    go: Callable[..., Result], cards: Path, one: Path
) -> None:
    learned = cards / LEARNED_FILENAME
    before = write_rows(learned, HEADER, {"task": "keep", "card": "crm-writer", "note": "why"})
    refused_line(go("learn", str(one)), f"{learned}:2: note: unknown field (fields: task, card, "
             "source, key); tiny rewrites this file and would drop it")  # fmt: skip
    assert learned.read_bytes() == before


# --- what route refuses is not learned -------------------------------------------------


def test_a_task_route_refuses_is_not_learned_from_a_file(
    go: Callable[..., Result], cards: Path, tmp_path: Path
) -> None:
    learned = cards / LEARNED_FILENAME
    before = write_rows(learned, HEADER, {"task": "keep", "card": "crm-writer"})
    lesson = tmp_path / "one.jsonl"
    write_rows(lesson, {"task": "a", "card": "crm-writer"}, {"task": "b", "card": None},
           {"task": LONG, "card": None})  # fmt: skip
    refused_line(go("learn", str(lesson)), f"{lesson}:3: {TOO_LONG}")
    assert learned.read_bytes() == before


def test_a_generated_task_route_refuses_is_not_learned(
    go: Callable[..., Result], cards: Path
) -> None:
    learned = cards / LEARNED_FILENAME
    made = {"task": LONG, "card": "docs-finder", "source": "generated", "key": "k"}
    before = write_rows(learned, HEADER, {"task": "keep", "card": "crm-writer"}, made)
    said = (
        "task: the task is 100,000 characters; at most 8,000 (this tiny no longer learns such "
        "a task); `tiny learn --prune-generated` removes this generated line, or delete it"
    )
    refused_line(go("learn"), f"{learned}:3: {said}")
    assert learned.read_bytes() == before


def test_a_correction_route_refuses_is_not_learned_from_the_runs(
    go: Callable[..., Result], cards: Path, home: Path
) -> None:
    learned = cards / LEARNED_FILENAME
    before = write_rows(learned, HEADER, {"task": "keep", "card": "crm-writer"})
    with RunLog.open(home) as log:
        observe = log.observer("delegate", "delegate", "127.0.0.1", goal=LONG)
        observe(Finished(Digest(None, "abstain", routing=Routing("abstain", None, 0.1))))
        [run_id] = log.recorded()
        log.correct(run_id, None)
    refused_line(go("learn", "--from-runs"), f"run {run_id}: {TOO_LONG}; "
             f"`tiny runs delete {run_id}` drops its correction")  # fmt: skip
    assert learned.read_bytes() == before
    with RunLog.open(home) as log:
        assert [c.run_id for c in log.corrections()] == [run_id]  # still pending


# --- --prune-generated names an unknown card as --generate does ----------------------


def test_prune_generated_with_an_unknown_card_is_refused_as_generate_is(
    go: Callable[..., Result], cards: Path
) -> None:
    learned = cards / LEARNED_FILENAME
    made = {"task": "where is the onboarding page", "card": "docs-finder",
            "source": "generated", "key": "k"}  # fmt: skip
    before = write_rows(learned, HEADER, {"task": "keep", "card": "crm-writer"}, made)
    error = "--card 'nope': no such card in the cards folder"
    refused_line(go("learn", "--generate", "--card", "nope"), error)
    refused_line(go("learn", "--prune-generated", "--card", "nope"), error)
    assert learned.read_bytes() == before
