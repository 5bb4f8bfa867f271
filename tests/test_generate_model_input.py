"""`tiny learn` fixes: half a UTF-16 pair in a model's answer is one unusable request, a
learned file tiny cannot write stops `--generate` before a paid request, and
`--prune-generated --card` accepts a deleted card whose generated lines the file still holds.

A scripted model server on loopback answers; the cards, learned.jsonl and the hashing
embedder are real.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from tiny_cli.routing.examples_file import LEARNED_FILENAME, load_learned
from tiny_cli.testing import ScriptedServer, reply

from .test_generate import TOOL_OF, user_text
from .test_learn_input import refused_line, write_rows

HEADER = {"kind": "tiny learned routing examples", "version": 1}
HALF_PAIR = '["lone \\ud800 request", "Add Globex Ltd from Hamburg as a customer"]'


@pytest.fixture
def cards(seed_copy: Path) -> Path:
    """The seed cards copied (conftest): learned.jsonl is written beside them."""
    return seed_copy


@pytest.fixture
def go(
    tiny: Callable[..., Result], cards: Path, scripted_server: ScriptedServer
) -> Callable[..., Result]:
    """Run `tiny ARGS` on the copied cards against the scripted server; never a traceback."""
    env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing",
           "TINY_BASE_URL": scripted_server.url, "TINY_MODEL": "tiny-test-model"}  # fmt: skip

    def run(*args: str) -> Result:
        result = tiny(*args, env=env)
        assert "Traceback" not in result.output
        return result

    return run


def _answer(server: ScriptedServer, card: str, *texts: str) -> None:
    """Answer `card`'s request (told apart by its tool's name) with `texts`, in turn."""
    server.on(lambda body, tool=TOOL_OF[card]: tool in user_text(body), *map(reply, texts))


# --- 1: half a UTF-16 pair is an unusable request, not a crash --------------------------


def test_a_half_pair_in_an_answer_is_dropped_and_the_run_goes_on(go, cards, scripted_server):
    _answer(scripted_server, "crm-writer", HALF_PAIR)  # the first card asked
    _answer(scripted_server, "docs-finder", json.dumps(["where is the leave policy written"]))
    result = go("learn", "--generate", "--card", "crm-writer", "--card", "docs-finder")
    assert result.exit_code == 0, result.output
    assert len(scripted_server.requests) == 2  # the card after it was asked too
    assert "cost: 2 card request(s)" in result.stdout
    made = load_learned(cards).generated
    assert made["crm-writer"] == ("Add Globex Ltd from Hamburg as a customer",)
    assert made["docs-finder"] == ("where is the leave policy written",)


def test_an_answer_of_only_half_pairs_is_the_cards_failure(go, cards, scripted_server):
    only_half = json.dumps(["\ud800 alone"])
    _answer(scripted_server, "web-reader", only_half, only_half)
    result = go("learn", "--generate", "--card", "web-reader")
    assert result.exit_code == 1, result.output
    assert (
        "failed web-reader: the answer's list held 1 string(s), each empty or over 300 "
        "characters, or holding half of a UTF-16 pair" in result.stdout
    )


# --- 2: a learned file tiny cannot write is found before a paid request -----------------


def test_generate_into_a_linked_learned_file_asks_nothing(go, cards, scripted_server, tmp_path):
    target = tmp_path / "elsewhere.jsonl"
    before = write_rows(target, HEADER)
    (cards / LEARNED_FILENAME).symlink_to(target)
    scripted_server.add(reply(json.dumps(["read https://example.net/a for me"])))  # would pay
    result = go("learn", "--generate", "--card", "web-reader")
    refused_line(
        result,
        f"{cards / LEARNED_FILENAME}: is a link; tiny writes only regular files, not through links",
    )
    assert scripted_server.requests == []  # no chat request went out, so none is unpaid-for
    assert target.read_bytes() == before


# --- 3: --prune-generated --card takes a deleted card the file still holds ---------------


def test_prune_a_deleted_cards_generated_lines(go, cards) -> None:
    learned = cards / LEARNED_FILENAME
    made = {"task": "summarise https://example.net/story", "card": "web-reader",
            "source": "generated", "key": "k"}  # fmt: skip
    other = {"task": "where is the onboarding page", "card": "docs-finder",
             "source": "generated", "key": "k"}  # fmt: skip
    write_rows(learned, HEADER, {"task": "keep", "card": "crm-writer"}, made, other)
    (cards / "web-reader.yaml").unlink()
    result = go("learn", "--prune-generated", "--card", "web-reader")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("pruned 1 generated example(s)")
    kept = load_learned(cards)
    assert "web-reader" not in kept.generated
    assert kept.generated["docs-finder"] == ("where is the onboarding page",)
    assert go("validate").exit_code == 0
    refused_line(
        go("learn", "--prune-generated", "--card", "web-reader"),
        "--card 'web-reader': no such card in the cards folder",
    )  # neither a card nor in the file any more
