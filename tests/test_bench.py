"""`tiny bench` through the real CLI against the scripted server: the wire, the numbers, speed."""

from __future__ import annotations

import json
import os
import re
import signal
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tiny_cli.bench.tasks import load_tasks
from tiny_cli.errors import ConfigError
from tiny_cli.provider.replay import Replayer
from tiny_cli.testing import ScriptedServer, Turn, reply, respond, tool_call

from .conftest import REPO, SEED_CARDS

TASKS = [
    {
        "id": "onboarding",
        "task": "how did the onboarding process work again",
        "expected_agent": "docs-finder",
        "expect": {"source": {"regex": "onboarding"}},
    },
    {"id": "sandwich", "task": "make me a sandwich", "expected_agent": None},
    {
        "id": "acme-page",
        "task": "read {site}/acme.html and tell me in two sentences what it is about",
        "expected_agent": "web-reader",
        "expect": {"url": "{site}/acme.html", "title": "Acme Corp"},
    },
    {
        "id": "mustermann",
        "task": "please add Mustermann GmbH from Köln as a new customer",
        "expected_agent": "crm-writer",
        "writes": True,
        "expect": {"name": "Mustermann GmbH"},
    },
]
ACME = (
    "<html><head><title>Acme Corp</title></head><body><p>Acme Corp sells anvils.</p></body></html>"
)
KEYS = ("onboarding", "sandwich", "acme.html", "Mustermann")  # a word only its task has
ALL_TOOLS = "You are all-tools"
TURNS = 200  # more turns than any bench here asks for
CONTRACT = re.compile(r"^\{\"status\".*\}$", re.M)


def write_tasks(folder: Path, tasks: list[dict] = TASKS) -> Path:
    """Write a task file and its pages folder; return the task file."""
    (folder / "pages").mkdir(parents=True, exist_ok=True)
    (folder / "pages" / "acme.html").write_text(ACME)
    path = folder / "tasks.yaml"
    path.write_text(yaml.safe_dump(tasks, allow_unicode=True))
    return path


def model(request: dict, delay: float = 0.0) -> Turn:
    """A deterministic stand-in model: one fitting tool, then the contract's JSON.

    Offered more than three tools (the all-tools arm), it first calls `web_search`, which no
    card has, and on the Acme page it also adds Acme Corp to the CRM: a ghost and an unwanted
    write the tests can count.
    """
    messages, tools = request["messages"], [t["function"]["name"] for t in request.get("tools", [])]
    task = messages[1]["content"].splitlines()[0]
    calls = [c["function"]["name"] for m in messages for c in m.get("tool_calls") or ()]
    n = len(calls) + 1
    if len(tools) > 3 and not calls:
        return tool_call("web_search", {"query": task}, call_id=f"c{n}", delay=delay)
    wanted = _fitting_tool(task, tools)
    if wanted and wanted[0] not in calls:
        return tool_call(*wanted, call_id=f"c{n}", delay=delay)
    return reply(json.dumps(_answer(task, messages[0]["content"])), delay=delay)


def _fitting_tool(task: str, tools: list[str]) -> tuple[str, dict] | None:
    url = re.search(r"https?://\S+", task)
    if "acme" in task and "crm_add_company" in tools and len(tools) > 3:
        return "crm_add_company", {"name": "Acme Corp", "city": ""}
    if url and "http_get" in tools:
        return "http_get", {"url": url.group(0)}
    if "Mustermann" in task and "crm_add_company" in tools:
        return "crm_add_company", {"name": "Mustermann GmbH", "city": "Köln"}
    if "onboarding" in task and "docs_search" in tools:
        return "docs_search", {"query": "onboarding"}
    return None


def _answer(task: str, system: str) -> dict:
    if "sandwich" in task:
        return {"status": "refused", "summary": "I cannot make food."}
    url = re.search(r"https?://\S+", task)
    values = {
        "source": "onboarding.md",
        "url": url.group(0) if url else "",
        "title": "Acme Corp",
        "company_id": 1,
        "name": "Mustermann GmbH",
    }
    required = [
        k for k in json.loads(CONTRACT.search(system).group(0)) if k not in ("status", "summary")
    ]
    return {"status": "ok", "summary": "Done.", **{k: values.get(k, "x") for k in required}}


@pytest.fixture
def bench(tiny, scripted_server, tmp_path):
    """Run `tiny bench ARGS --json` on the test task file; return (result, report)."""
    scripted_server.add(*[respond(model)] * TURNS)
    tasks = write_tasks(tmp_path / "bench")

    def go(*args: str, env: dict[str, str] | None = None):
        env = {"TINY_BASE_URL": scripted_server.url, **(env or {})}
        result = tiny("bench", "--tasks", str(tasks), *args, env=env)
        return result, (json.loads(result.stdout) if "--json" in args else None)

    return go


def _tools(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def _seed_tools() -> set[str]:
    return {t for p in SEED_CARDS.glob("*.yaml") for t in yaml.safe_load(p.read_text())["tools"]}


# --- the wire -----------------------------------------------------------------------------


@pytest.mark.slow
def test_arms_send_their_own_tools_from_a_fresh_context(bench, scripted_server, home) -> None:
    result, _ = bench("--json")
    assert result.exit_code == 0, result.output
    requests = scripted_server.requests
    by_agent = Counter(
        r["messages"][0]["content"].split(",")[0] for r in requests if len(r["messages"]) == 2
    )
    # three tiny runs (the sandwich abstains: no request) and four all-tools runs started
    assert by_agent == {
        "You are docs-finder": 1,
        "You are web-reader": 1,
        "You are crm-writer": 1,
        ALL_TOOLS: 4,
    }
    cards = {p.stem: yaml.safe_load(p.read_text())["tools"] for p in SEED_CARDS.glob("*.yaml")}
    for r in requests:
        system = r["messages"][0]["content"]
        assert [m["role"] for m in r["messages"][:2]] == ["system", "user"]
        own = [k for k in KEYS if k in r["messages"][1]["content"]]
        assert len(own) == 1  # one task per context, and nothing of the other runs in it:
        assert not any(k in json.dumps(r["messages"]) for k in set(KEYS) - set(own))
        if system.startswith(ALL_TOOLS):
            assert set(_tools(r)) == _seed_tools() and len(_tools(r)) == len(_seed_tools())
        else:
            card = system.split(",")[0].removeprefix("You are ")
            assert _tools(r) == cards[card]  # only the chosen card's tools, in its order
    assert not (home / "crm.sqlite3").exists()  # writes went to scratch homes


def test_report_counts_ghosts_writes_routing_and_fields(bench) -> None:
    _result, report = bench("--json")
    assert set(report) == {
        "arms",
        "tasks",
        "model",
        "base_url",
        "started_at",
        "tiny_version",
        "replayed",
        "temperature",
        "tool_mode",
    }
    assert report["base_url"] == "127.0.0.1" and report["replayed"] is False
    tiny, everything = report["arms"]["tiny"], report["arms"]["all-tools"]
    assert tiny["outcomes"]["abstain"] == 1 and tiny["outcomes"]["ok"] == 3
    assert tiny["routing_accuracy"] == 1.0 and everything["routing_accuracy"] is None
    assert tiny["ghost_calls"] == 0 and tiny["unwanted_writes"] == 0
    assert everything["ghost_calls"] == 4 and everything["ghost_names"] == {"web_search": 4}
    assert everything["unwanted_writes"] == 1  # Acme added while only reading its page
    assert everything["outcomes"]["refused"] == 1  # the generalist refuses the sandwich
    runs = {t["id"]: t["runs"] for t in report["tasks"]}
    # the generalist holds the CRM tools but may answer without writing (write_optional):
    # its `ok` on a reading task stands on the tool it ran
    onboarding = runs["onboarding"]["all-tools"][0]
    assert (onboarding["status"], onboarding["reason"]) == ("ok", None)
    assert onboarding["fabricated"] is False and onboarding["right"] is True
    # all-tools never fetched the Acme page: the URL it returns is only the task's
    acme_all = runs["acme-page"]["all-tools"][0]
    assert acme_all["field_sources"] == {"url": "task", "title": "tool"}
    assert acme_all["fabricated"] is True and acme_all["missing_evidence"] == ["field_source"]
    assert acme_all["wrong_tool_calls"] == 1  # crm_add_company is no web-reader tool
    assert tiny["right"] == 4 and everything["right"] == 3
    assert [t["id"] for t in report["tasks"] if t["runs"]["all-tools"][0]["right"]] == [
        "onboarding",
        "sandwich",
        "mustermann",
    ]
    assert tiny["fabricated"] == 0 and everything["fabricated"] == 1
    assert tiny["wrong_tool_calls"] == 0 and everything["wrong_tool_calls"] == 1
    acme = runs["acme-page"]["tiny"][0]
    assert acme["fields"] == {"url": "{site}/acme.html", "title": "Acme Corp"}  # site masked
    assert acme["fields_correct"] == acme["fields_expected"] == 2
    assert runs["mustermann"]["tiny"][0]["writes"] == ["crm_add_company"]
    assert runs["mustermann"]["tiny"][0]["unwanted_writes"] == 0
    assert runs["sandwich"]["tiny"][0]["first_request"] == {"system": 0, "tools": 0, "task": 0}
    split = runs["onboarding"]["all-tools"][0]["first_request"]
    assert split["tools"] > 3 * runs["onboarding"]["tiny"][0]["first_request"]["tools"] > 0


@pytest.mark.slow
def test_aggregates_are_the_sums_and_medians_of_the_runs(bench) -> None:
    _result, report = bench("--json", "--repeat", "2", "--concurrency", "3")
    for arm, summary in report["arms"].items():
        runs = [r for t in report["tasks"] for r in t["runs"][arm]]
        assert summary["runs"] == len(runs) == 2 * len(TASKS)
        assert sorted(r["repeat"] for r in runs) == [0] * 4 + [1] * 4
        for name in (
            "tokens_in",
            "tokens_out",
            "tool_calls",
            "ghost_calls",
            "unwanted_writes",
            "caller_tokens",
            "fields_expected",
            "fields_filled",
            "fields_matching",
            "fields_correct",
            "right",
            "fabricated",
            "recovered_calls",
            "wrong_tool_calls",
        ):
            assert summary[name] == sum(r[name] for r in runs), name
        assert summary["missing_evidence"] == {
            e: sum(e in r["missing_evidence"] for r in runs) for e in summary["missing_evidence"]
        }
        for part in ("system", "tools", "task"):
            assert summary["first_request"][part] == sum(r["first_request"][part] for r in runs)
        assert summary["outcomes"] == {
            s: sum(r["status"] == s for r in runs) for s in summary["outcomes"]
        }
        assert sum(summary["outcomes"].values()) == len(runs)
        walls = [r["wall_seconds"] for r in runs]
        assert summary["wall_seconds"] == pytest.approx(sum(walls), abs=1e-3)
        assert summary["wall_median"] == pytest.approx(statistics.median(walls), abs=1e-3)
        assert summary["ghost_names"] == dict(Counter(n for r in runs for n in r["ghost_names"]))


def test_human_output_compares_arms(bench, tmp_path) -> None:
    out = tmp_path / "report.json"
    result, _ = bench("--out", str(out), env={"COLUMNS": "200"})  # no wrapped cells
    assert result.exit_code == 0
    text = result.stdout
    for expected in (
        "better ┃",  # the column naming the arm whose figure is better, and by how much
        "ghost calls",
        "unwanted writes",
        "routing accuracy",
        "right outcome (on evidence)",
        "fabricated (looks right, no evidence)",
        "claimed, a field not from a tool",
        "wrong-tool calls",
        "recovered from text",
        "wall seconds (median)",  # a live run: wall times are measurements
        "task(s) where the arms disagree",
        "ghost calls per task",
        "tokens per task",
    ):
        assert expected in text, expected
    disagreements = text.split("where the arms disagree")[1].split("ghost calls per task")[0]
    assert "2 task(s) where the arms disagree" in text
    assert "sandwich" in disagreements  # abstain vs refused
    assert "acme-page" in disagreements and "1 unwanted write(s)" in disagreements  # both ok
    assert "1 fabricated" in disagreements  # acme-page: all-tools never fetched the page
    assert "onboarding" not in disagreements  # both ok, both from docs_search
    assert "mustermann" not in disagreements
    assert set(json.loads(out.read_text())) >= {"arms", "tasks"}


@pytest.mark.slow
def test_a_recordings_model_name_is_shown_not_obeyed(bench, tmp_path) -> None:
    evil = "m\x1b]8;;http://evil.example\x07click\x1b]8;;\x07\x1b[2J\u202e"
    recording = tmp_path / "rec.jsonl"
    recorded, _ = bench("--arm", "tiny", "--record", str(recording), env={"TINY_MODEL": evil})
    assert recorded.exit_code == 0, recorded.output
    replayed, _ = bench("--arm", "tiny", "--replay", str(recording), env={"COLUMNS": "300"})
    assert replayed.exit_code == 0, replayed.output
    assert "\x1b" not in replayed.output and "\u202e" not in replayed.output
    assert "modelm\\u001b]8;;http://evil.example" in "".join(replayed.stdout.split())  # as text


def test_one_arm_only(bench, scripted_server) -> None:
    result, report = bench("--json", "--arm", "all-tools")
    assert result.exit_code == 0 and list(report["arms"]) == ["all-tools"]
    assert all(r["messages"][0]["content"].startswith(ALL_TOOLS) for r in scripted_server.requests)


# --- concurrency --------------------------------------------------------------------------


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_concurrency_overlaps_slow_model_calls(tiny, tmp_path) -> None:
    """Four runs of three slow turns each: four at once must take well under half as long."""
    same = [{**TASKS[0], "id": f"onboarding-{i}"} for i in range(4)]
    tasks = write_tasks(tmp_path / "bench", same)
    elapsed = {}
    for k in ("1", "4"):
        with ScriptedServer() as server:
            server.add(*[respond(lambda r: model(r, delay=0.2))] * TURNS)
            start = time.perf_counter()
            result = tiny(
                "bench",
                "--tasks",
                str(tasks),
                "--arm",
                "all-tools",
                "--json",
                "--concurrency",
                k,
                env={"TINY_BASE_URL": server.url},
            )
            elapsed[k] = time.perf_counter() - start
        assert result.exit_code == 0 and not server.errors
        assert len(server.requests) == 4 * 3  # ghost, docs_search, answer per run
    assert elapsed["4"] / elapsed["1"] < 0.5, elapsed


# --- the task file ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        (
            {"id": "a", "task": "t", "expected_agent": None, "expcet": {}},
            "task 1 (a): expcet: unknown field",
        ),
        ({"id": "a", "task": "t"}, "task 1 (a): expected_agent: missing"),
        ({"id": "a b", "task": "t", "expected_agent": None}, "task 1 (a b): id: must be a name"),
        ({"id": "a", "task": "", "expected_agent": None}, "task 1 (a): task: must be"),
        (
            {"id": "a", "task": "t", "expected_agent": None, "writes": "yes"},
            "writes: must be true or false",
        ),
        (
            {"id": "a", "task": "t", "expected_agent": None, "expect": {"x": {"regex": "("}}},
            "task 1 (a): expect.x: regex '('",
        ),
        (
            {"id": "a", "task": "t", "expected_agent": None, "expect": {"x": {"re": "a"}}},
            "expect.x: write an exact value, or {regex: PATTERN}",
        ),
        (
            {"id": "a", "task": "t", "expected_agent": None, "must_return": [1]},
            "must_return: must be",
        ),
    ],
)
def test_task_file_errors_name_file_entry_and_field(tmp_path, entry, message) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text(yaml.safe_dump([entry]))
    with pytest.raises(ConfigError) as err:
        load_tasks(path)
    assert str(err.value).startswith(f"{path}: ") and message in str(err.value)
    assert "\n" not in str(err.value)


def test_jsonl_tasks_and_their_errors_by_line(tmp_path) -> None:
    path = tmp_path / "tasks.jsonl"
    path.write_text(
        '{"id": "a", "task": "t", "expected_agent": null}\n\n{"id": "a", "task": "u", '
        '"expected_agent": null}\n'
    )
    with pytest.raises(ConfigError, match=r"tasks.jsonl: line 3 \(a\): id: duplicate task id 'a'"):
        load_tasks(path)
    path.write_text('{"id": "a", "task": "t", "expected_agent": null, "must_return": "x, y"}\n')
    (task,) = load_tasks(path)
    assert task.must_return == ("x", "y") and task.expected_agent is None


def test_unknown_expected_agent_is_one_line_exit_2(tiny, tmp_path) -> None:
    tasks = write_tasks(tmp_path, [{"id": "a", "task": "t", "expected_agent": "nobody"}])
    result = tiny("bench", "--tasks", str(tasks))
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines() == [
        f"tiny: error: {tasks}: task 1 (a): expected_agent: no card 'nobody' "
        "(known: crm-writer, docs-finder, web-reader)"
    ]


def test_the_shipped_example_bench_is_complete() -> None:
    folder = REPO / "examples" / "bench"
    tasks = load_tasks(folder / "tasks.yaml")
    assert len(tasks) >= 12
    assert sum(t.expected_agent is None for t in tasks) >= 3
    assert sum(t.writes for t in tasks) >= 2
    assert sum(t.id.endswith("-de") for t in tasks) >= 2  # German tasks are marked -de
    assert {t.expected_agent for t in tasks} == {"web-reader", "docs-finder", "crm-writer", None}
    for t in tasks:
        for page in re.findall(r"\{site\}(/\S*)", t.task):
            assert (folder / "pages" / page.lstrip("/")).is_file(), page


def test_bench_stops_at_once_when_nothing_listens(tiny) -> None:
    start = time.monotonic()
    result = tiny("bench", env={"TINY_BASE_URL": "http://127.0.0.1:9/v1"})
    assert result.exit_code == 2
    assert "cannot reach http://127.0.0.1:9/v1" in result.stderr
    assert time.monotonic() - start < 30  # one probe, not 3.5 s of retries for every run


def _interrupted_bench(
    tmp_path: Path, quick: int, signum: int = signal.SIGINT
) -> tuple[int, float, str, Path]:
    """Start a recording bench, interrupt it once `quick` fast answers and one slow are asked.

    Returns the exit code, the seconds from signal to exit, stderr and the output folder.
    """
    tasks = write_tasks(tmp_path / "bench")
    out = tmp_path / "out"
    out.mkdir()
    env = {
        **os.environ,
        "TINY_HOME": str(tmp_path / "home"),
        "TINY_CARDS": str(SEED_CARDS),
        "TINY_EMBEDDER": "hashing",  # routing is not what this test is about: start fast
    }
    with ScriptedServer() as server:
        server.add(*[respond(model)] * quick)
        server.add(*[respond(lambda request: model(request, delay=20.0))] * TURNS)
        args = ["bench", "--tasks", str(tasks), "--arm", "all-tools", "--concurrency", "1"]
        args += ["--record", str(out / "run.jsonl"), "--out", str(out / "report.json")]
        child = subprocess.Popen(
            [sys.executable, "-m", "tiny_cli", *args],
            env={**env, "TINY_BASE_URL": server.url},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 60
            while len(server.requests) <= quick and time.monotonic() < deadline:
                time.sleep(0.05)  # the slow answer is under way
            assert len(server.requests) > quick, "the bench never asked the model"
            child.send_signal(signum)
            sent = time.monotonic()
            code = child.wait(timeout=10)  # queued runs and a 20 s answer must not hold it
            waited = time.monotonic() - sent
        finally:
            child.kill()
            _, stderr = child.communicate()
    return code, waited, stderr.decode(), out


def test_ctrl_c_stops_the_bench_at_once_with_130_and_no_partial_files(tmp_path: Path) -> None:
    code, waited, stderr, out = _interrupted_bench(tmp_path, quick=0)
    assert code == 130, stderr
    assert waited < 5
    assert "tiny: interrupted" in stderr and "Traceback" not in stderr
    assert list(out.iterdir()) == []  # no report, no recording, no partial file


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupted_recording_keeps_its_answers_for_resume(tmp_path, signum) -> None:
    code, _, stderr, out = _interrupted_bench(tmp_path, quick=2, signum=signum)
    assert code == 130, stderr
    kept = out / "run.interrupted.jsonl"
    assert sorted(p.name for p in out.iterdir()) == [kept.name]  # not on the target, no partial
    assert f"in {kept}: pass it to --resume" in " ".join(stderr.split())
    lines = [json.loads(line) for line in kept.read_text().splitlines()]
    assert lines[0]["tiny_recording"] and len(lines) == 3  # the header and the two answers
    assert all("completion" in line for line in lines[1:])
    assert Replayer.load(kept).unused() == 2  # a file --resume can read


def test_bench_passes_the_tool_mode_to_every_run(bench, scripted_server) -> None:
    result, report = bench("--json", "--tool-mode", "json", "--wall-scale", "2")
    assert result.exit_code == 0 and report["tool_mode"] == "json"
    assert scripted_server.requests  # the scripted model answers native calls: they go unread
    assert all("response_format" in r and "tools" not in r for r in scripted_server.requests)


def test_the_tiny_arm_logs_each_run_finished_with_its_routing(bench, home) -> None:
    """Each tiny-arm run is logged as `tiny delegate` would hand it over: routed or abstained
    (so `tiny runs correct` can teach from it), its size to the caller counted on that Digest."""
    import sqlite3

    from tiny_cli.digest import estimate_tokens
    from tiny_cli.runs import DB_NAME

    result, _report = bench("--arm", "tiny", "--json")
    assert result.exit_code == 0, result.output
    with sqlite3.connect(home / DB_NAME) as db:
        rows = db.execute("SELECT label, routing, caller_tokens, digest, goal FROM runs").fetchall()
    assert len(rows) == 4
    for label, routing, size, digest, goal in rows:
        assert json.loads(routing)["decision"] in ("route", "abstain"), label
        assert goal, label  # an abstain too: `tiny runs search` finds it, `correct` can teach
        stored = json.loads(digest)
        assert stored["routing"] == json.loads(routing)
        blank = {**stored, "cost": {**stored["cost"], "caller_tokens": 0}}
        assert size == estimate_tokens(json.dumps(blank, ensure_ascii=False)) > 0, label
