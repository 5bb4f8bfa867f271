"""A replay logged (--log) that misses an exchange is logged as failed, with the miss as its reason
(issue 21; a replay is logged only when asked, issue 30)."""

from __future__ import annotations

import json
from pathlib import Path

from tiny_cli.testing import ScriptedServer, reply, tool_call

TASK = "how did the onboarding process work again"
ANSWER = {"status": "ok", "summary": "Day one: laptop and buddy.", "source": "onboarding.md"}
MISS = "no recorded answer for run invoke (agent docs-finder)"


def _recorded_without_its_answer(tiny, tmp_path: Path) -> Path:
    """Record a run (a search, then the answer); drop the answer's exchange from the file."""
    recording = tmp_path / "rec.jsonl"
    with ScriptedServer() as server:
        server.add(tool_call("docs_search", {"query": "onboarding"}), reply(json.dumps(ANSWER)))
        env = {"TINY_BASE_URL": server.url}
        recorded = tiny("invoke", "docs-finder", TASK, "--record", str(recording), env=env)
        assert recorded.exit_code == 0, recorded.output
        server.assert_done()
    header, search, _answer = recording.read_text(encoding="utf-8").splitlines()
    recording.write_text(f"{header}\n{search}\n", encoding="utf-8")
    return recording


def replay_misses(tiny, tmp_path: Path) -> None:
    """Replay the cut recording: the same one-line usage error as ever, exit 2."""
    recording = _recorded_without_its_answer(tiny, tmp_path)
    result = tiny("invoke", "docs-finder", TASK, "--json", "--replay", str(recording), "--log")
    assert result.exit_code == 2 and result.stdout == "", result.output
    (line,) = result.stderr.strip().splitlines()
    assert MISS in line and "Traceback" not in result.output


def test_a_replay_miss_is_a_failed_row_with_its_reason(tiny, tmp_path: Path) -> None:
    replay_misses(tiny, tmp_path)
    listed = tiny("runs", "--json")
    assert listed.exit_code == 0, listed.output
    replayed, recorded = json.loads(listed.stdout)  # newest first
    assert recorded["status"] == "ok"
    assert replayed["status"] == "failed" and replayed["ended_at"] is not None
    assert MISS in replayed["reason"] and "the command ended" not in replayed["reason"]
    assert replayed["tool_calls"] == 1  # the docs_search call it made before the miss
    failed = json.loads(tiny("runs", "--status", "failed", "--json").stdout)
    assert [r["id"] for r in failed] == [replayed["id"]]
    assert json.loads(tiny("runs", "--status", "interrupted", "--json").stdout) == []


def test_runs_show_says_failed_and_why(tiny, tmp_path: Path) -> None:
    replay_misses(tiny, tmp_path)
    run_id = json.loads(tiny("runs", "--json").stdout)[0]["id"]
    shown = tiny("runs", "show", str(run_id), "--json")
    assert shown.exit_code == 0, shown.output
    doc = json.loads(shown.stdout)
    assert doc["status"] == "failed" and MISS in doc["reason"]
    human = tiny("runs", "show", str(run_id), env={"COLUMNS": "400"})
    assert human.exit_code == 0, human.output
    assert "failed" in human.stdout and MISS in " ".join(human.stdout.split())
    assert "interrupted" not in human.stdout and "the command ended" not in human.stdout
