"""A fast slice of the bench at scale in the default run: three BFCL tasks, one universe size.

tests/test_scale_bench.py holds the whole bench at scale (slow: `make test-slow`); this slice
runs it end to end on every `make test` (~ a few seconds): routing over the 200 BFCL cards,
each arm's request on the wire, the report.
"""

from __future__ import annotations

import json
import shutil

import pytest

from tests.test_scale_bench import BFCL, CARDS, TASKS, _policy, _task_of, _tools
from tiny_cli.testing import respond

ARMS = {"oracle", "tiny", "top-k", "hybrid", "all-tools"}
SCALE = ("bench", "--scale", "--tasks", str(BFCL / "tasks.jsonl"), "--cards", str(BFCL / "cards"))


@pytest.mark.slow
def test_the_bench_at_scale_runs_three_tasks_end_to_end(tiny, scripted_server) -> None:
    scripted_server.add(*[respond(_policy({}))] * 100)
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
    args = ["bench", "--tasks", str(BFCL / "tasks.jsonl"), "--cards", str(BFCL / "cards")]
    args += ["--all-tools-sizes", "10", "--sample", "2", "--irrelevance", "1"]
    result = tiny(*args, "--tool-mode", "native", "--json", "--no-log", env=env)
    assert result.exit_code == 0, result.output
    assert scripted_server.errors == []
    report = json.loads(result.stdout)
    runs = report["runs"]
    assert len({r["task"] for r in runs}) == 3 and {r["arm"] for r in runs} == ARMS
    assert {r["size"] for r in report["rows"]} == {10}
    wire = {}
    for request in scripted_server.requests:
        names = frozenset(t["function"]["name"] for t in request.get("tools", []))
        wire.setdefault(_task_of(request)["id"], set()).add(names)
    for run in runs:
        if run["card"] is None:
            continue
        assert frozenset(_tools(run["offered_cards"])) in wire[run["task"]]  # what was sent
        task = next(t for t in TASKS if t["id"] == run["task"])
        if run["arm"] == "oracle":
            assert run["offered_cards"] == [task["expected_agent"]]
            assert task["expected_agent"] in CARDS
    oracle = next(r for r in report["rows"] if r["arm"] == "oracle")
    assert oracle["tasks"] == 2 and oracle["right_call"] == 2  # scored from the wire's answers


def test_the_tiny_arm_routes_with_the_cards_folders_learned_examples(
    tiny, scripted_server, tmp_path
) -> None:
    # every task taught to one card: the bench at scale must route as `tiny route` does,
    # reading the folder's learned.jsonl, so the tiny arm offers that card whatever it scores
    taught_to, picked = "lcm-gcd", [t for t in TASKS if t["expected_agent"]][:3]
    cards = tmp_path / "cards"
    cards.mkdir()
    for card in {taught_to, *(t["expected_agent"] for t in picked)}:
        shutil.copy(BFCL / "cards" / f"{card}.yaml", cards)
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in picked), "utf-8")
    lines = [{"kind": "tiny learned routing examples", "version": 1}]
    lines += [{"task": t["task"], "card": taught_to} for t in picked]
    (cards / "learned.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), "utf-8")
    scripted_server.add(*[respond(_policy({}))] * 3)
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
    args = ["bench", "--scale", "--tasks", str(tasks), "--cards", str(cards), "--json"]
    args += ["--all-tools-sizes", "all", "--sample", "3", "--irrelevance", "0", "--arm", "tiny"]
    result = tiny(*args, "--tool-mode", "native", "--no-log", env=env)
    assert result.exit_code == 0, result.output
    runs = json.loads(result.stdout)["runs"]
    assert len(runs) == 3 and all(r["offered_cards"] == [taught_to] for r in runs), runs
    sent = {frozenset(t["function"]["name"] for t in r["tools"]) for r in scripted_server.requests}
    assert sent == {frozenset(_tools([taught_to]))}  # what went over the wire


@pytest.mark.slow
def test_the_right_function_with_arguments_that_are_no_object_is_the_right_tool(
    tiny, scripted_server
) -> None:
    every = {t["id"]: "not_object" for t in TASKS}  # whichever two the sample draws
    scripted_server.add(*[respond(_policy(every))] * 20)
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
    args = list(SCALE)
    args += ["--all-tools-sizes", "10", "--sample", "2", "--irrelevance", "0", "--arm", "oracle"]
    result = tiny(*args, "--tool-mode", "native", "--json", "--no-log", env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert {r["status"] for r in report["runs"]} == {"bad_arguments"}
    [row] = report["rows"]
    assert (row["tasks"], row["right_tool"], row["right_call"]) == (2, 2, 0)


@pytest.mark.slow
def test_a_size_or_arm_given_twice_is_refused_before_any_run(tiny, scripted_server) -> None:
    args = list(SCALE)
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
    for flags, said in [
        (["--all-tools-sizes", "10,10"], "'10' is given twice"),
        (["--arm", "tiny,tiny"], "'tiny' is given twice"),
        (["--all-tools-sizes", "557,all"], "557 and all are the same catalogue (557 tools)"),
    ]:
        result = tiny(*args, *flags, "--sample", "2", "--irrelevance", "0", "--no-log", env=env)
        assert result.exit_code == 2 and said in result.stderr, result.output
    assert scripted_server.requests == []


def test_a_run_that_failed_before_any_answer_has_no_token_count_in_the_mean() -> None:
    from tiny_cli.bench.scale_report import RunRecord, _row

    def run(status: str, prompt: int, completion: int) -> RunRecord:
        return RunRecord("t", True, 10, "u", 10, "all-tools", status, "", None, "c", ("c",),
                         None, None, True, 10, prompt, 300, completion, 1.0, 0, "ok")  # fmt: skip

    row = _row([run("right", 1000, 40), run("failed", 0, 0), run("failed", 600, 20)])
    assert (row.prompt_tokens, row.completion_tokens, row.failed) == (800.0, 30.0, 2)
    assert row.schema_tokens == 300.0  # known for every run
