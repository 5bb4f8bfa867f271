"""The bench at scale on the shipped BFCL set, against the scripted server: wire and scores."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from tiny_cli.bench.universe import sample_tasks
from tiny_cli.provider.replay import Replayer
from tiny_cli.testing import ScriptedServer, http_error, reply, respond, tool_call

# the bench at scale on 200 BFCL cards, routed, ~4 s a test on 2 cores: CI runs them (test-slow)
pytestmark = pytest.mark.slow

BFCL = Path(__file__).resolve().parent.parent / "examples" / "bfcl"
# the bench at scale over the shipped BFCL tasks and cards
SCALE = ("bench", "--scale", "--tasks", str(BFCL / "tasks.jsonl"), "--cards", str(BFCL / "cards"))
TASKS = [json.loads(line) for line in (BFCL / "tasks.jsonl").read_text().splitlines()]
CARDS = {
    d["id"]: d for d in (yaml.safe_load(p.read_text()) for p in (BFCL / "cards").glob("*.yaml"))
}
SIZES = "10,30,all"


def _task_of(request: dict) -> dict:
    user = next(m["content"] for m in request["messages"] if m["role"] == "user")
    return next(t for t in TASKS if t["task"] in user)


def _right_arguments(expected: dict) -> dict[str, Any]:
    """The first accepted value of every argument that must be given."""
    return {
        name: next(v for v in values if v != "")
        for name, values in expected["arguments"].items()
        if "" not in values
    }


def _policy(plan: dict[str, str]):
    """Answer each request as the plan says for its task (default: right when offered)."""

    def answer(request: dict):
        task = _task_of(request)
        offered = [t["function"]["name"] for t in request.get("tools", [])]
        expected = task["expect_call"]
        how = plan.get(task["id"], "right")
        if how == "error":
            return http_error(400)  # not retried: the run fails before the model chose
        if expected is None or expected["name"] not in offered or how == "none":
            return reply(json.dumps({"status": "refused", "summary": "not something my tools do"}))
        arguments = _right_arguments(expected)
        if how == "wrong_tool":
            other = next(name for name in offered if name != expected["name"])
            return tool_call(other, arguments)
        if how == "missing" and arguments:
            arguments.pop(next(iter(arguments)))
        if how == "outside" and arguments:
            arguments[next(iter(arguments))] = "a value nobody accepts"
        if how == "not_object":
            return tool_call(expected["name"], "[5, 4, 3]")  # the right function, no object
        return tool_call(expected["name"], arguments)

    return answer


@pytest.fixture
def bench(tiny, scripted_server):
    """Run the bench at scale (native mode: the request's `tools` are what was offered)."""

    def go(plan: dict[str, str], *extra: str) -> dict:
        scripted_server.add(*[respond(_policy(plan))] * 400)
        env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
        args = ["bench", "--scale", "--tasks", str(BFCL / "tasks.jsonl")]
        args += ["--cards", str(BFCL / "cards")]
        args += ["--all-tools-sizes", SIZES, "--sample", "6", "--irrelevance", "3"]
        args += ["--context-tokens", "131072"]  # all 557 native schemas fit: no arm is cut
        result = tiny(*args, "--tool-mode", "native", "--json", "--no-log", *extra, env=env)
        assert result.exit_code == 0, result.output
        assert "warning" not in result.stderr  # the new spelling: no note
        assert scripted_server.errors == []
        return json.loads(result.stdout)

    return go


def _tools(cards: list[str]) -> set[str]:
    return {tool for card in cards for tool in CARDS[card]["tools"]}


def test_each_arm_offers_its_tools_from_one_universe(bench, scripted_server) -> None:
    report = bench({})
    offered = {}
    for request in scripted_server.requests:
        names = frozenset(t["function"]["name"] for t in request.get("tools", []))
        offered.setdefault(_task_of(request)["id"], set()).add(names)
    runs = report["runs"]
    for run in runs:
        task = next(t for t in TASKS if t["id"] == run["task"])
        same = [r for r in runs if r["task"] == run["task"] and r["size"] == run["size"]]
        assert {r["universe"] for r in same} == {run["universe"]}  # one universe per size
        world = next(r for r in same if r["arm"] == "all-tools")["offered_cards"]
        if run["card"] is None:
            continue
        tools = _tools(run["offered_cards"])
        assert frozenset(tools) in offered[run["task"]]  # exactly these went over the wire
        assert set(run["offered_cards"]) <= set(world)
        if run["arm"] == "oracle":
            assert run["offered_cards"] == [task["expected_agent"]]
        elif run["arm"] == "tiny":
            assert len(run["offered_cards"]) == 1
        elif run["arm"] == "top-k":
            assert len(run["offered_cards"]) == 3
        elif run["arm"] == "all-tools":
            size = run["size"] or sum(len(c["tools"]) for c in CARDS.values())
            assert len(tools) == run["tools"] <= max(size, len(tools))
            assert run["tools"] > size - max(len(c["tools"]) for c in CARDS.values())
    assert {r["size"] for r in report["rows"]} == {10, 30, 0}
    assert {r["arm"] for r in report["rows"]} == {"oracle", "tiny", "top-k", "hybrid", "all-tools"}


def test_a_right_call_is_right_and_each_wrong_one_is_not(bench) -> None:
    ids = sample_tasks([t["id"] for t in TASKS if t["expect_call"]], 6, seed=0)  # as --sample

    def has_args(i: str) -> bool:
        return bool(_right_arguments(next(t for t in TASKS if t["id"] == i)["expect_call"]))

    with_args = [i for i in ids[1:-1] if has_args(i)]  # distinct from the first and the last
    plan = {ids[0]: "wrong_tool", with_args[0]: "missing", with_args[1]: "outside", ids[-1]: "none"}
    report = bench(plan)
    oracle = {r["task"]: r for r in report["runs"] if r["arm"] == "oracle"}
    assert oracle[ids[0]]["status"] == "wrong_tool"
    assert (
        oracle[with_args[0]]["status"] == "right_tool"
        and "missing" in oracle[with_args[0]]["reason"]
    )
    assert oracle[with_args[1]]["status"] == "right_tool"
    assert oracle[ids[-1]]["status"] == "no_call"
    rest = [t for t in oracle if t not in plan]
    assert rest and all(oracle[t]["status"] == "right" for t in rest)
    row = next(r for r in report["rows"] if r["arm"] == "oracle" and r["size"] == 10)
    assert row["right_call"] == len(rest) and row["right_tool"] == len(rest) + 2


def test_irrelevance_without_a_call_is_right_and_nothing_ever_runs(bench, scripted_server) -> None:
    report = bench({})
    irrelevant = [r for r in report["runs"] if not r["relevant"]]
    assert irrelevant and all(r["status"] == "right" for r in irrelevant)
    for request in scripted_server.requests:  # one request per run: the call stopped it
        roles = [m["role"] for m in request["messages"]]
        assert roles == ["system", "user"]
    assert {r["digest_status"] for r in report["runs"]} <= {"partial", "refused", "abstain"}


@pytest.mark.parametrize("where", ["first", "last"])
def test_the_expected_tools_can_be_put_first_or_last(bench, scripted_server, where: str) -> None:
    bench({}, "--arm", "all-tools", "--expected-tools", where)
    checked = 0
    for request in scripted_server.requests:
        task = _task_of(request)
        if task["expect_call"] is None:
            continue
        names = [t["function"]["name"] for t in request["tools"]]
        own = CARDS[task["expected_agent"]]["tools"]
        assert (names[: len(own)] if where == "first" else names[-len(own) :]) == own
        checked += 1
    assert checked >= 6


def test_a_run_the_server_failed_is_never_right(bench) -> None:
    irrelevant = sample_tasks([t["id"] for t in TASKS if t["expect_call"] is None], 3, seed=0)
    report = bench({irrelevant[0]: "error"}, "--arm", "all-tools")
    failed = [r for r in report["runs"] if r["task"] == irrelevant[0]]
    assert failed and all(r["status"] == "failed" for r in failed if r["card"] is not None)
    row = next(r for r in report["rows"] if r["size"] == 10)
    assert row["failed"] == 1 and row["irrelevance_right"] == row["irrelevance_tasks"] - 1


def test_a_sweep_resumes_size_by_size_and_replays_from_several_recordings(
    tiny, scripted_server, tmp_path
) -> None:
    """A sweep recorded in parts: the later part asks only what the first did not hold."""
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
    base = ["bench", "--scale", "--tasks", str(BFCL / "tasks.jsonl")]
    base += ["--cards", str(BFCL / "cards")]
    base += ["--sample", "6", "--irrelevance", "3", "--tool-mode", "native", "--json", "--no-log"]
    scripted_server.add(*[respond(_policy({}))] * 400)
    part, whole = tmp_path / "part.jsonl", tmp_path / "whole.jsonl"
    first = tiny(*base, "--all-tools-sizes", "10", "--record", str(part), env=env)
    assert first.exit_code == 0, first.output
    asked_first = len(scripted_server.requests)
    args = [*base, "--all-tools-sizes", "10,30", "--resume", str(part), "--record", str(whole)]
    resumed = tiny(*args, env=env)
    assert resumed.exit_code == 0, resumed.output
    held = len(part.read_text().splitlines()) - 1
    entries = [json.loads(line) for line in whole.read_text().splitlines()[1:]]
    assert sum(e.get("resumed", False) for e in entries) == held  # all of size 10, not asked
    assert len(scripted_server.requests) - asked_first == len(entries) - held
    assert all("/u30." in e["run"] for e in entries if not e.get("resumed"))
    report = json.loads(resumed.stdout)
    assert "resumed" in report["replayed_from"]  # its wall times are partly a file's: not shown
    replay = tiny(*base, "--all-tools-sizes", "10,30", "--replay", str(whole), env=env)
    assert replay.exit_code == 0, replay.output
    assert json.loads(replay.stdout)["rows"] == report["rows"]
    alone = tmp_path / "size30.jsonl"  # size 30 recorded on its own: two files make the sweep
    assert tiny(*base, "--all-tools-sizes", "30", "--record", str(alone), env=env).exit_code == 0
    both = ["--replay", str(part), "--replay", str(alone)]
    again = tiny(*base, "--all-tools-sizes", "10,30", *both, env=env)
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["rows"] == report["rows"]


def test_a_sweep_stopped_mid_request_keeps_what_it_recorded(tmp_path: Path) -> None:
    """SIGTERM while a slow answer is awaited: out in 5 s, the answers so far kept for --resume."""
    record = tmp_path / "sweep.jsonl"
    args = ["bench", "--scale", "--tasks", str(BFCL / "tasks.jsonl")]
    args += ["--cards", str(BFCL / "cards")]
    args += ["--all-tools-sizes", "10", "--sample", "4", "--irrelevance", "0", "--arm", "all-tools"]
    args += ["--tool-mode", "native", "--no-log", "--record", str(record)]
    with ScriptedServer() as server:
        server.add(*[respond(_policy({}))] * 2)
        server.add(*[respond(lambda r: reply("{}", delay=20.0))] * 10)
        env = {**os.environ, "TINY_BASE_URL": server.url, "TINY_EMBEDDER": "hashing",
               "TINY_HOME": str(tmp_path / "home")}  # fmt: skip
        child = subprocess.Popen([sys.executable, "-m", "tiny_cli", *args], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
        try:
            deadline = time.monotonic() + 60
            while len(server.requests) < 3 and time.monotonic() < deadline:
                time.sleep(0.05)  # two answered, the third under way
            child.send_signal(signal.SIGTERM)
            sent = time.monotonic()
            code = child.wait(timeout=10)
            waited = time.monotonic() - sent
        finally:
            child.kill()
            _, stderr = child.communicate()
    assert code == 130 and waited < 5, stderr.decode()
    kept = tmp_path / "sweep.interrupted.jsonl"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["home", kept.name]
    assert "pass it to --resume" in stderr.decode()
    assert Replayer.load(kept).unused() == 2
