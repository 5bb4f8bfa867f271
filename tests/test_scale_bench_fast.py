"""A fast slice of the bench at scale in the default run: three BFCL tasks, one universe size.

tests/test_scale_bench.py holds the whole bench at scale (slow: `make test-slow`); this slice
runs it end to end on every `make test` (~ a few seconds): routing over the 200 BFCL cards,
each arm's request on the wire, the report.
"""

from __future__ import annotations

import json

from tests.test_scale_bench import BFCL, CARDS, TASKS, _policy, _task_of, _tools
from tiny_cli.testing import respond

ARMS = {"oracle", "tiny", "top-k", "hybrid", "all-tools"}


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
