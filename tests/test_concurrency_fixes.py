"""Concurrency fixes: a dead run's pid held by another process, files merged by several
processes at once (mcp.yaml, the MCP tool list, the router-state cache), and a correction
replaced or deleted while it was taught."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
import threading
from collections.abc import Sequence
from pathlib import Path

import httpx
import pytest
import yaml

from tiny_cli.cards.card import Card
from tiny_cli.errors import ConfigError
from tiny_cli.events import RunStarted
from tiny_cli.routing.embed import HashingEmbedder
from tiny_cli.routing.factory import MIN_OUT_OF_SCOPE
from tiny_cli.routing.router import Router
from tiny_cli.routing.state import STATE_DIR
from tiny_cli.routing.tooltexts import mcp_tool_lists
from tiny_cli.runs import DB_NAME, RunLog
from tiny_cli.runs.log import GONE
from tiny_cli.runs.store import now, this_process
from tiny_cli.settings import Settings, load_settings
from tiny_cli.teach import correct_run, learn, learn_from
from tiny_cli.tools.web import AddressPolicy, shared_client

from .conftest import REPO, SEED_CARDS, run_at_once

SANDWICH = "make me a sandwich"  # abstains on the seed cards (hashing embedder)


# --- a run whose pid another process holds now ----------------------------------------------

IDENTITY = this_process()
needs_proc = pytest.mark.skipif(IDENTITY is None, reason="no /proc: the pid alone tells")


def _running_row(home: Path, pid: object, process: str | None, started: str = "") -> int:
    """Insert a `running` row as a process `process` with pid `pid` would have written it,
    started at `started` (ISO 8601; by default now)."""
    RunLog.open(home).close()  # the schema, as this tiny makes it
    with sqlite3.connect(home / DB_NAME) as db:
        cursor = db.execute(
            "INSERT INTO runs (started_at, command, label, endpoint, goal, status, transcript, "
            "calls, pid, process) VALUES (?, 'invoke', 'invoke', "
            "'127.0.0.1', 'a task', 'running', '[]', '[]', ?, ?)",
            (started or now(), pid, process),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid


def _other(part: int, value: str) -> str:
    """This process's identity with one part (0 boot, 1 PID namespace, 2 start) replaced."""
    assert IDENTITY is not None
    parts = IDENTITY.split(" ")
    parts[part] = value
    return " ".join(parts)


def _later(start: str) -> str:
    return str(int(start) + 1)


@needs_proc
@pytest.mark.parametrize(
    ("pid", "part", "value"),
    [
        ("me", 2, "later"),  # this process's pid, held before by another (a reboot, a container)
        (1, 1, "1"),  # a container's pid 1, written in a PID namespace out of sight
        ("me", 0, "00000000-0000-0000-0000-000000000000"),  # before a reboot
    ],
)
def test_a_run_whose_pid_another_process_holds_is_interrupted_and_deletable(
    home: Path, pid: object, part: int, value: str
) -> None:
    assert IDENTITY is not None
    pid = os.getpid() if pid == "me" else pid
    stored = _other(part, _later(IDENTITY.split(" ")[2]) if value == "later" else value)
    run_id = _running_row(home, pid, stored)
    with RunLog.open(home) as log:
        row = log.run(run_id).summary
        assert (row.status, row.reason) == ("interrupted", GONE)
        assert log.delete([run_id]).runs == (run_id,)


@needs_proc
def test_a_run_of_this_process_stays_running_and_is_not_deleted(home: Path) -> None:
    mine = _running_row(home, os.getpid(), IDENTITY)
    legacy = _running_row(home, os.getpid(), None)  # before v6: the pid alone tells, as before
    with RunLog.open(home) as log:
        assert {log.run(mine).status, log.run(legacy).status} == {"running"}
        with pytest.raises(ConfigError, match="still running"):
            log.delete([mine])


@needs_proc
def test_a_run_from_before_v6_that_started_before_this_boot_is_interrupted(home: Path) -> None:
    # no identity kept: its pid, alive now (this process's), was another process's then
    legacy = _running_row(home, os.getpid(), None, started="2000-01-01T00:00:00.000+00:00")
    with RunLog.open(home) as log:
        row = log.run(legacy).summary
        assert (row.status, row.reason) == ("interrupted", GONE)
        assert log.delete([legacy]).runs == (legacy,)


@needs_proc
def test_a_run_being_recorded_keeps_this_process_as_its_identity(home: Path) -> None:
    with RunLog.open(home) as log:
        observe = log.observer("invoke", "invoke", "127.0.0.1")
        observe(RunStarted("docs-finder", "m", "native", "a task", 4, 30.0, 400, ()))
        [running] = log.runs()
        with sqlite3.connect(home / DB_NAME) as db:
            [(stored,)] = db.execute("SELECT process FROM runs").fetchall()
        assert stored == IDENTITY and running.status == "running"
        with RunLog.open(home) as other:  # another command opening the log: still running
            assert other.run(running.id).status == "running"


# --- several processes at once ----------------------------------------------------------------


def _at_once(script: str, args: Sequence[Sequence[str]], seconds: float = 60) -> list[str]:
    """Run `script` in one process per entry of `args`, all released at once (each waits for
    a line on stdin after its imports); return their stdouts. A traceback fails the test."""
    children = [
        subprocess.Popen(
            [sys.executable, "-c", textwrap.dedent(script), *a],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for a in args
    ]
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    outs = [child.communicate(timeout=seconds) for child in children]
    for child, (_, err) in zip(children, outs, strict=True):
        assert child.returncode == 0 and "Traceback" not in err, err
    return [out for out, _ in outs]


def test_imports_at_once_into_one_mcp_yaml_lose_no_server(tmp_path: Path) -> None:
    path = tmp_path / "mcp.yaml"
    script = """
        import json, sys
        from pathlib import Path
        from tiny_cli.tools.mcp_hosts import merge_mcp_yaml
        path, me = Path(sys.argv[1]), sys.argv[2]
        sys.stdin.readline()
        carried = []
        for i in range(15):
            carried += merge_mcp_yaml(path, {f"s{me}x{i}": {"command": "server", "args": [me]}})
        print(json.dumps(carried))
    """
    outs = _at_once(script, [(str(path), str(k)) for k in range(4)])
    carried = {name for out in outs for name in json.loads(out)}
    assert len(carried) == 60  # each reported as carried …
    assert set(yaml.safe_load(path.read_text("utf-8"))["servers"]) == carried  # … is there


def test_tool_lists_saved_at_once_lose_no_server(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    script = """
        import sys
        from pathlib import Path
        from tiny_cli.routing.tooltexts import save_mcp_tools
        cache, me = Path(sys.argv[1]), sys.argv[2]
        sys.stdin.readline()
        for i in range(40):
            save_mcp_tools(cache, {f"s{me}x{i}.tool": f"tool of server {me}x{i}"})
    """
    _at_once(script, [(str(cache), str(k)) for k in range(4)])
    tools, servers = mcp_tool_lists(cache, 0.0)
    assert len(tools) == len(servers) == 160


@pytest.mark.slow
def test_router_states_saved_at_once_never_fail(seed_cards: list[Card], tmp_path: Path) -> None:
    source = tmp_path / "source"
    Router(seed_cards, HashingEmbedder(), source)
    [key] = [p.name for p in (source / STATE_DIR).iterdir()]
    cache = tmp_path / "cache"
    script = """
        import sys
        from pathlib import Path
        from tiny_cli.routing.state import load_state, save_state
        source, key, cache, me = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3]), sys.argv[4]
        saved = load_state(source, key)
        assert saved is not None
        sys.stdin.readline()
        for i in range(150):  # each save prunes what the others saved: they rmtree at once
            save_state(cache, f"{me}x{i}", saved)
    """
    _at_once(script, [(str(source), key, str(cache), str(k)) for k in range(4)])
    states = [p for p in (cache / STATE_DIR).iterdir() if not p.name.startswith(".")]
    assert states  # the cache still works: states were saved, each prune kept some


# --- a correction replaced or deleted while it was taught -----------------------------------


@pytest.fixture
def cards(tmp_path: Path) -> Path:
    """The seed cards copied into tmp_path: learned.jsonl is written there."""
    return Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))


def _settings(home: Path, cards: Path, embedder: str = "hashing") -> Settings:
    env = {"TINY_HOME": str(home), "TINY_CARDS": str(cards), "TINY_EMBEDDER": embedder,
           "TINY_BASE_URL": "http://embedder.invalid/v1", "TINY_API_KEY": ""}  # fmt: skip
    return load_settings(env=env)


def _abstained_run(tiny, home: Path, cards: Path) -> int:
    """A delegate run the router abstained on, and enough out-of-scope examples that
    teaching derives the threshold (it embeds)."""
    env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    assert tiny("delegate", SANDWICH, "--json", env=env).exit_code == 6
    outside = [(f"what is the weather on day {n} of the trip", None) for n in range(25)]
    assert len(outside) >= MIN_OUT_OF_SCOPE
    learn(_settings(home, cards), outside)
    with RunLog.open(home) as log:
        [run] = log.runs()
    return run.id


def _embedding(meanwhile) -> httpx.MockTransport:
    """An embeddings endpoint (the hashing embedder's vectors) that calls `meanwhile` first."""
    hashing = HashingEmbedder()

    def answer(request: httpx.Request) -> httpx.Response:
        meanwhile()
        texts = json.loads(request.content)["input"]
        vectors = hashing.embed(texts).tolist()
        data = [{"index": i, "embedding": v} for i, v in enumerate(vectors)]
        return httpx.Response(200, json={"data": data})

    return httpx.MockTransport(answer)


def _labels(cards: Path, task: str) -> list[str | None]:
    """Where learned.jsonl sends `task`: one entry per line that holds it."""
    lines = (cards / "learned.jsonl").read_text("utf-8").splitlines()[1:]
    return [d.get("card") for d in map(json.loads, lines) if d.get("task") == task]


@pytest.mark.slow
def test_a_run_deleted_while_its_correction_is_taught_is_one_line(tiny, home, cards) -> None:
    run_id = _abstained_run(tiny, home, cards)

    def delete() -> None:
        with RunLog.open(home) as log:
            if log.corrections():  # recorded, being taught: the run goes now
                log.delete([run_id])

    settings = _settings(home, cards, "openai:embed")
    with pytest.raises(ConfigError, match=f"run {run_id} was deleted while its correction"):
        correct_run(settings, run_id, "docs-finder", transport=_embedding(delete))
    assert _labels(cards, SANDWICH) == ["docs-finder"]  # taught once, as the error says
    with RunLog.open(home) as log:
        assert log.runs() == [] and log.corrections(pending_only=False) == []


@pytest.mark.slow
def test_a_run_corrected_again_while_taught_leaves_the_newer_correction_pending(
    tiny, home, cards
) -> None:
    run_id = _abstained_run(tiny, home, cards)

    def correct_again() -> None:
        with RunLog.open(home) as log:
            [pending] = log.corrections(pending_only=False) or [None]
            if pending is not None and pending.card == "docs-finder":
                log.correct(run_id, None)  # as the question after `tiny delegate` records it

    settings = _settings(home, cards, "openai:embed")
    with pytest.raises(ConfigError, match=r"corrected again.*`tiny learn --from-runs`") as err:
        correct_run(settings, run_id, "docs-finder", transport=_embedding(correct_again))
    assert "\n" not in str(err.value)
    assert _labels(cards, SANDWICH) == ["docs-finder"]
    with RunLog.open(home) as log:
        [newer] = log.corrections(pending_only=True)
    assert (newer.run_id, newer.card) == (run_id, None)
    taught = learn_from(_settings(home, cards), from_runs=True)
    assert taught.from_runs == 1
    assert _labels(cards, SANDWICH) == [None]  # the newer correction, once: nothing doubled


def test_threads_asking_at_once_share_one_web_client() -> None:
    policy = AddressPolicy.of(["concurrency-test.invalid:8123"])  # one no other test asks for
    start, got = threading.Barrier(8), []

    def ask() -> None:
        start.wait()
        got.append(shared_client(policy))

    run_at_once(ask, 8)
    assert len({id(client) for client in got}) == 1  # one pool, one TLS context
