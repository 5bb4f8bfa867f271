"""The bench at scale: one request per prompt under --concurrency, abstentions cost no
prompt tokens, and the Wilson interval is rounded once."""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from tests.test_scale_bench import BFCL, SCALE, TASKS, _policy
from tiny_cli.bench.html import write_html
from tiny_cli.bench.scale import ScaleOptions
from tiny_cli.bench.scale_report import (
    RunRecord,
    ScaleReport,
    build_report,
    markdown_table,
    wilson,
)
from tiny_cli.testing import respond

REPO = BFCL.parent.parent
SAME_PROMPT = "examples/bfcl/recordings/qwen2.5-coder-1.5b-json-same-prompt.jsonl"
BLOCK = re.compile(r"<!-- replay-scale: (\S+) -->\n(.*?)<!-- /replay-scale -->", re.S)
OFFLINE = {"TINY_BASE_URL": "http://127.0.0.1:9/v1"}  # nothing listens there


def _taught_folder(tmp_path: Path, tasks: list[dict]) -> tuple[Path, Path]:
    """A cards folder holding the tasks' cards, each task taught to its own card (so tiny
    routes to the expected card and asks the oracle's very request), and the task file."""
    cards = tmp_path / "cards"
    cards.mkdir()
    for task in tasks:
        shutil.copy(BFCL / "cards" / f"{task['expected_agent']}.yaml", cards)
    lines = [{"kind": "tiny learned routing examples", "version": 1}]
    lines += [{"task": t["task"], "card": t["expected_agent"]} for t in tasks]
    (cards / "learned.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), "utf-8")
    path = tmp_path / "tasks.jsonl"
    path.write_text("".join(json.dumps(t) + "\n" for t in tasks), "utf-8")
    return cards, path


def test_one_prompt_is_asked_once_under_its_first_run_whatever_the_concurrency(
    tiny, scripted_server, tmp_path: Path
) -> None:
    task = next(t for t in TASKS if t["expected_agent"])
    cards, tasks = _taught_folder(tmp_path, [task])
    # the answer takes a while, so the tiny job comes while the oracle's request is in flight
    slow = respond(lambda request: replace(_policy({})(request), delay=0.5))
    scripted_server.add(slow, slow)
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
    args = ["bench", "--scale", "--tasks", str(tasks), "--cards", str(cards), "--json"]
    args += ["--all-tools-sizes", "all", "--sample", "1", "--irrelevance", "0"]
    args += ["--arm", "oracle,tiny", "--tool-mode", "native", "--no-log", "--concurrency", "2"]
    recording = tmp_path / "run.jsonl"
    live = tiny(*args, "--record", str(recording), env=env)
    assert live.exit_code == 0, live.output
    assert len(scripted_server.requests) == 1  # one prompt, asked once, its answer shared
    exchanges = [json.loads(line) for line in recording.read_text().splitlines()[1:]]
    runs = json.loads(live.stdout)["runs"]
    oracle = next(r for r in runs if r["arm"] == "oracle")
    assert [e["run"] for e in exchanges] == [f"{task['id']}/oracle/{oracle['universe']}"]
    assert {r["status"] for r in runs} == {"right"}
    for _ in range(3):  # the replay asks it under the same run, at any concurrency
        again = tiny(*args, "--replay", str(recording), env=OFFLINE)
        assert again.exit_code == 0, again.output
        assert json.loads(again.stdout)["rows"][0]["right_call"] == 1


@pytest.mark.slow  # a shipped recording replayed at --concurrency 4 (~3 s)
def test_a_shipped_recording_replays_at_concurrency_4_to_its_documented_table(tiny) -> None:
    documented = dict(BLOCK.findall((REPO / "docs" / "bench.md").read_text(encoding="utf-8")))
    result = tiny(
        "bench", "--replay", str(REPO / SAME_PROMPT), "--markdown", "--concurrency", "4",
        env=OFFLINE,
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout == documented[SAME_PROMPT]


@pytest.mark.slow
def test_a_run_that_abstains_sends_no_prompt_and_counts_none(
    tiny, scripted_server, tmp_path: Path
) -> None:
    scripted_server.add(*[respond(_policy({}))] * 10)
    # a threshold no score passes: tiny and hybrid abstain on every task, and ask nothing
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
    env["TINY_THRESHOLD"] = "1000"
    args = [*SCALE]
    args += ["--all-tools-sizes", "10", "--sample", "2", "--irrelevance", "1", "--json"]
    args += ["--arm", "oracle,tiny,hybrid", "--tool-mode", "native", "--no-log"]
    result = tiny(*args, env=env)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    abstained = [r for r in report["runs"] if r["arm"] in ("tiny", "hybrid")]
    assert abstained and all(r["digest_status"] == "abstain" for r in abstained)
    assert all(r["prompt_tokens"] == 0 for r in abstained)
    rows = {r["arm"]: r for r in report["rows"]}
    assert rows["tiny"]["prompt_tokens"] == rows["hybrid"]["prompt_tokens"] == 0
    assert rows["oracle"]["prompt_tokens"] > 0  # what the server counted for a sent request


def _run(task: str, status: str) -> RunRecord:
    """One oracle run at size 10 with the given status."""
    sizes = {"size": 10, "universe": "u10.0", "tools": 10, "offered": 2, "fits": True}
    calls = {"called": "f", "card": "c", "offered_cards": ("c",), "ghost_calls": 0}
    costs = {"prompt_tokens": 300, "schema_tokens": 100, "completion_tokens": 30}
    return RunRecord(
        task=task, relevant=True, arm="oracle", status=status, reason="", routed_right=None,
        in_top=None, wall_seconds=1.0, digest_status="ok", **sizes, **calls, **costs,
    )  # fmt: skip


def _report(hits: int, n: int) -> ScaleReport:
    """A report of `n` selection runs, `hits` of them right."""
    runs = [_run(f"t{i}", "right" if i < hits else "wrong_tool") for i in range(n)]
    return build_report(runs, ScaleOptions(), "m", "2026-12-01T12:00:00+0000", 557)


@pytest.mark.parametrize(
    ("hits", "n", "shown", "page"),
    [(4, 8, "0.22-0.78", "22&ndash;78 %"), (6, 20, "0.15-0.52", "15&ndash;52 %")],
)
def test_the_wilson_interval_is_rounded_once_from_its_exact_bounds(
    tmp_path: Path, hits: int, n: int, shown: str, page: str
) -> None:
    low, high = wilson(hits, n)
    assert f"{low:.2f}-{high:.2f}" == shown  # exact bounds: 0.2152-0.7848, 0.1455-0.5190
    report = _report(hits, n)
    assert f"| {shown} |" in markdown_table(report)
    out = tmp_path / "report.html"
    write_html(report.to_json(), out)
    assert page in out.read_text(encoding="utf-8")
