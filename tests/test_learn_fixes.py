"""`tiny learn` and `--generate` fixes: a dead server stops at once, the cost says what it
counts, a learned file keeps its generated lines, a mark tiny would not write back is refused,
another card's own example is not taught, and an answer's list is found past prose; generation
writes only what the file's readers read and what passes validate's overlap check, validate
reports every bad line, tiny never writes a learned.jsonl it would refuse to read, a line taught
twice is kept, an overlap warning keeps its line when the line holds a secret, and the cost says
when no tokens were reported.

A scripted model server on loopback answers; the cards, learned.jsonl and the hashing
embedder are real.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from tiny_cli.digest import Digest, Routing
from tiny_cli.errors import ProviderError
from tiny_cli.events import Finished
from tiny_cli.example_writer import _strings_listed, generate
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.routing.examples_file import (
    LEARNED_FILENAME,
    MAX_GENERATED_CHARS,
    MAX_LEARNED_BYTES,
    check_learned,
    load_learned,
)
from tiny_cli.runs import RunLog
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, http_error, reply

from .conftest import one_error_line
from .test_generate import ANSWERS, TOOL_OF, _script, load_cards, user_text
from .test_learn_input import refused_line, write_rows

HEADER = {"kind": "tiny learned routing examples", "version": 1}
DEAD = "http://127.0.0.1:9/v1"  # the discard port: nothing listens (as test_bench's)
CRM_OWN = "please add mustermann gmbh as a new customer"  # one of crm-writer's own examples


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


# --- 1: a server no card can use stops the run at once ---------------------------------


def test_generate_against_a_dead_server_stops_before_the_first_card(go, cards) -> None:
    result = go("learn", "--generate", TINY_BASE_URL=DEAD)
    refused_line(result, f"cannot reach {DEAD} — is the server running? set TINY_BASE_URL")
    assert not (cards / LEARNED_FILENAME).exists()


@pytest.mark.parametrize("status", [401, 403, 404])
def test_generate_stops_at_the_first_answer_no_card_would_get_past(
    go, cards, scripted_server, status
) -> None:
    scripted_server.add(http_error(status))  # one turn: a second request is the fixture's failure
    result = go("learn", "--generate")
    assert result.exit_code == 2, result.output
    [line] = result.stderr.splitlines()
    assert line.startswith("tiny: error: ") and f"HTTP {status}" in line
    assert len(scripted_server.requests) == 1
    assert not (cards / LEARNED_FILENAME).exists()


def test_a_server_gone_mid_run_stops_the_run_and_the_next_one_finishes(
    cli_env, env, cards, scripted_server
) -> None:
    _script(scripted_server, {c: [json.dumps(a)] for c, a in ANSWERS.items()})
    settings = load_settings(env={**cli_env, **env})
    provider = OpenAIProvider(scripted_server.url, backoff=0)  # its retries, without the waits
    with pytest.raises(ProviderError, match="cannot reach"):
        generate(settings, provider=provider, progress=lambda line: scripted_server.stop())
    assert len(scripted_server.requests) == 1  # the second card found no server: no third
    assert len(load_learned(cards).generated) == 1  # the first card's examples stay
    scripted_server.start()
    again = generate(settings, provider=OpenAIProvider(scripted_server.url))
    assert again.status == "generated" and sorted(load_learned(cards).generated) == sorted(ANSWERS)


# --- 2: the cost counts what it says it counts ------------------------------------------


def test_the_cost_counts_card_requests_and_says_retries_are_not_in_it(go, scripted_server) -> None:
    now = {"Retry-After": "0"}
    scripted_server.on(
        lambda body: TOOL_OF["web-reader"] in user_text(body),
        http_error(503, headers=now), http_error(503, headers=now),
        reply(json.dumps(ANSWERS["web-reader"])),
    )  # fmt: skip
    data = json.loads(go("learn", "--generate", "--card", "web-reader", "--json").stdout)
    assert len(scripted_server.requests) == 3  # what went over the wire, retries and all
    assert data["card_requests"] == 1 and "requests" not in data
    text = go("learn", "--generate", "--card", "web-reader").stdout
    assert "cost: 0 card request(s) (the provider's retries not counted) to tiny-test-model" in text


# --- 3: a learned file taught to another folder keeps its generated lines --------------


def test_a_learned_files_generated_lines_stay_generated_in_another_folder(
    go, cards, tmp_path
) -> None:
    made = ["find the parental leave page", "where are the travel rules written down"]
    source = tmp_path / "other" / LEARNED_FILENAME
    source.parent.mkdir()
    rows = [{"task": t, "card": "docs-finder", "source": "generated", "key": "k1"} for t in made]
    own = {"task": CRM_OWN, "card": "crm-writer", "source": "generated", "key": "k2"}
    write_rows(source, HEADER, {"task": "book a taxi", "card": "web-reader"}, *rows, own)
    report = json.loads(go("learn", str(source), "--json").stdout)
    assert (report["added"], report["carried"], report["from_file"]) == (1, 2, 4)
    learned = load_learned(cards)
    assert learned.examples == {"web-reader": ("book a taxi",)}
    # what --generate drops (here: a copy of crm-writer's own example) is not carried over
    assert learned.generated == {"docs-finder": tuple(made)}
    # not yet checked among this folder's cards: the next --generate runs the overlap check
    assert learned.generation == {"docs-finder": "k1+unchecked"}
    text = go("learn", str(source)).stdout
    assert f"taught: 4 from {source}, 2 of them kept as generated examples" in text
    assert go("learn", "--prune-generated").exit_code == 0  # still generated: prunable
    assert load_learned(cards).generated == {}
    assert load_learned(cards).examples == {"web-reader": ("book a taxi",)}


# --- 4: a mark tiny would not write back as it is, refused -------------------------------

MADE = {"task": "where is the onboarding page", "card": "docs-finder"}


@pytest.mark.parametrize(
    ("rows", "error"),
    [
        ([{**MADE, "source": "Generated", "key": "k"}],
         "source: expected \"generated\" (the only source tiny writes), got 'Generated'"),
        ([{**MADE, "source": "generated", "key": 5}],
         "key: expected the text key of what the line was written from, got 5"),
        ([{**MADE, "source": "generated"}],
         "key: expected the text key of what the line was written from, got none"),
        ([{**MADE, "key": "k"}], 'key: only on a generated line ("source": "generated")'),
        ([{**MADE, "card": None, "source": "generated", "key": "k"}],
         "source: a generated line names its card (card null is a taught out-of-scope line)"),
        ([{**MADE, "source": "generated", "key": "a"},
          {**MADE, "task": "where is the wiki", "source": "generated", "key": "b"}],
         "key: 'b', where line 2 gives card 'docs-finder' key 'a': one key per card"),
    ],
    ids=["source-case", "key-number", "key-missing", "key-alone", "card-null", "two-keys"],
)  # fmt: skip
def test_a_mark_tiny_would_change_on_its_next_write_is_refused(go, cards, rows, error) -> None:
    learned = cards / LEARNED_FILENAME
    before = write_rows(learned, HEADER, *rows)
    number = len(rows) + 1  # the last line is the bad one
    refused_line(go("learn"), f"{learned}:{number}: {error}")
    assert learned.read_bytes() == before
    [problem] = check_learned(cards, load_cards(cards))  # `tiny validate` names it alike
    field, _, why = error.partition(": ")
    assert (problem.line, problem.field, problem.message) == (number, field, why)


# --- 5: another card's own example is not taught -----------------------------------------


@pytest.mark.parametrize("card", ["docs-finder", None], ids=["other-card", "out-of-scope"])
def test_learn_refuses_another_cards_own_example(go, cards, tmp_path, card) -> None:
    lesson = tmp_path / "teach.jsonl"
    write_rows(lesson, {"task": "book a taxi", "card": "web-reader"},
           {"task": CRM_OWN.upper(), "card": card})  # fmt: skip
    label = "out of scope" if card is None else repr(card)
    error = (f"task: an example of card 'crm-writer' in its own file, labelled {label} here; "
             "teach it to crm-writer or leave it out")  # fmt: skip
    refused_line(go("learn", str(lesson)), f"{lesson}:2: {error}")
    assert not (cards / LEARNED_FILENAME).exists()


def test_a_correction_to_another_cards_own_example_is_refused_and_stays_pending(
    go, cards, home
) -> None:
    with RunLog.open(home) as log:
        observe = log.observer("delegate", "delegate", "127.0.0.1", goal=CRM_OWN)
        observe(Finished(Digest(None, "abstain", routing=Routing("abstain", None, 0.1))))
        [run_id] = log.recorded()
    error = (f"run {run_id}: task: an example of card 'crm-writer' in its own file, labelled "
             f"'docs-finder' here; the correction stays pending: `tiny runs correct {run_id} "
             f"--card crm-writer` teaches it, `tiny runs delete {run_id}` drops it")  # fmt: skip
    refused_line(go("runs", "correct", str(run_id), "--card", "docs-finder"), error)
    assert not (cards / LEARNED_FILENAME).exists()
    with RunLog.open(home) as log:
        assert [(c.run_id, c.card) for c in log.corrections()] == [(run_id, "docs-finder")]
    refused_line(go("learn", "--from-runs"), error)  # refused again, still not lost
    with RunLog.open(home) as log:
        assert [c.run_id for c in log.corrections()] == [run_id]
    assert go("runs", "correct", str(run_id), "--card", "crm-writer").exit_code == 0


# --- 6: the answer's list, found and judged truly ----------------------------------------


def test_the_list_after_a_bracket_in_prose_is_read() -> None:
    answer = 'Here are the requests [as JSON]:\n["add acme to the crm", "find the leave policy"]'
    assert _strings_listed(answer) == ["add acme to the crm", "find the leave policy"]
    assert _strings_listed('[1, 2] and [] then ["one"]') == ["one"]
    assert _strings_listed("no list [at all]") is None


def test_a_list_of_only_unusable_requests_says_so(go, scripted_server) -> None:
    unusable = json.dumps(["", "  ", "x" * (MAX_GENERATED_CHARS + 1)])
    _script(scripted_server, {"web-reader": [unusable, unusable]})
    result = go("learn", "--generate", "--card", "web-reader")
    assert result.exit_code == 1, result.output
    assert (
        "failed web-reader: the answer's list held 3 string(s), each empty or over "
        f"{MAX_GENERATED_CHARS} characters" in result.stdout
    )


# --- what generation writes, validate's every line, the file's size, a task taught twice ---


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
