"""Review fixes in `tiny bench`: a resumed bench says it replayed, recordings that could never
answer together are refused up front, a bad value in a replayed header is blamed on the
header, a bar the options leave without a figure is refused before any model request, and an
empty --sizes is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_bench import TURNS, model, respond, write_tasks
from tests.test_scale_bench import SCALE


def _record(tiny, server, tmp_path: Path, name: str, *args: str):
    """Record the example bench to `name` in tmp_path; return the file."""
    server.add(*[respond(model)] * TURNS)
    tasks = write_tasks(tmp_path / "bench")
    recording = tmp_path / name
    args = ("--tasks", str(tasks), "--json", "--record", str(recording), *args)
    result = tiny("bench", *args, env={"TINY_BASE_URL": server.url})
    assert result.exit_code == 0, result.output
    return recording


def _edited(recording: Path, to: Path, bench: dict | None = None, **top: object) -> Path:
    """A copy of `recording` whose header has `top` and, in its `bench` part, `bench`."""
    head, *rows = recording.read_text("utf-8").splitlines(keepends=True)
    header = {**json.loads(head), **top}
    header["bench"] = {**header.get("bench", {}), **(bench or {})}
    to.write_text(json.dumps(header) + "\n" + "".join(rows), "utf-8")
    return to


def _one_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    line = result.output.strip()
    assert "\n" not in line, line
    return line


@pytest.mark.slow
def test_a_resumed_bench_says_it_replayed_and_shows_no_wall_times(
    tiny, scripted_server, tmp_path
) -> None:
    first = _record(tiny, scripted_server, tmp_path, "first.jsonl")
    asked = len(scripted_server.requests)
    tasks = tmp_path / "bench" / "tasks.yaml"
    env = {"TINY_BASE_URL": scripted_server.url}
    again = ("--resume", str(first), "--record", str(tmp_path / "again.jsonl"))
    result = tiny("bench", "--tasks", str(tasks), "--json", *again, env=env)
    assert result.exit_code == 0, result.output
    assert len(scripted_server.requests) == asked  # every answer came from the recording
    assert json.loads(result.stdout)["replayed"] is True
    shown = ("--resume", str(first), "--record", str(tmp_path / "shown.jsonl"))
    table = tiny("bench", "--tasks", str(tasks), "-q", *shown, env=env).stdout
    assert "resumed (the rest live)" in " ".join(table.split())
    assert "wall seconds" not in table


@pytest.mark.slow
def test_recordings_made_at_other_temperatures_are_refused_together_up_front(
    tiny, scripted_server, tmp_path
) -> None:
    greedy = _record(tiny, scripted_server, tmp_path, "t0.jsonl")
    sampled = _edited(greedy, tmp_path / "t7.jsonl", temperature=0.7)
    result = tiny("bench", "--replay", str(greedy), "--replay", str(sampled), "--arm", "both")
    line = _one_line(result)
    assert "temperatures" in line and str(greedy) in line and str(sampled) in line
    assert "0.7" in line and "no recorded answer" not in line


def test_resume_refuses_a_recording_made_in_another_tool_mode(
    tiny, scripted_server, tmp_path
) -> None:
    native = _record(tiny, scripted_server, tmp_path, "tn.jsonl", "--tool-mode", "native")
    asked = len(scripted_server.requests)
    tasks = tmp_path / "bench" / "tasks.yaml"
    again = tmp_path / "tj.jsonl"
    args = ("--tool-mode", "json", "--resume", str(native), "--record", str(again))
    result = tiny("bench", "--tasks", str(tasks), *args, env={"TINY_BASE_URL": scripted_server.url})
    line = _one_line(result)
    assert str(native) in line and "native tool mode" in line and "json tool mode" in line
    assert len(scripted_server.requests) == asked and not again.exists()  # nothing asked


@pytest.mark.parametrize(
    ("field", "value", "flag"),
    [
        ("repeat", 500, "--repeat"),
        ("temperature", 5, "--temperature"),
        ("cards", "nowhere", "--cards"),
    ],
)
@pytest.mark.slow
def test_a_bad_value_in_a_replayed_header_is_blamed_on_the_header(
    tiny, scripted_server, tmp_path, field, value, flag
) -> None:
    recording = _record(tiny, scripted_server, tmp_path, "run.jsonl")
    bad = _edited(recording, tmp_path / "bad.jsonl", bench={field: value})
    line = _one_line(tiny("bench", "--replay", str(bad), "-q"))
    assert f"{bad}: header bench.{field}" in line and flag not in line


@pytest.mark.slow
def test_a_flag_given_replaces_a_bad_value_of_a_replayed_header(
    tiny, scripted_server, tmp_path
) -> None:
    recording = _record(tiny, scripted_server, tmp_path, "run.jsonl")
    bad = _edited(recording, tmp_path / "bad.jsonl", bench={"repeat": 500})
    result = tiny("bench", "--replay", str(bad), "--repeat", "1", "--json")
    assert result.exit_code == 0, result.output


def test_a_bar_on_irrelevance_with_no_irrelevance_question_is_refused_up_front(
    tiny, scripted_server
) -> None:
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
    args = [*SCALE]
    args += ["--sizes", "10", "--sample", "1", "--irrelevance", "0", "--arm", "tiny"]
    result = tiny(*args, "--fail-under", "tiny.irrelevance=0.5", "--no-log", env=env)
    line = _one_line(result)
    assert "--fail-under tiny.irrelevance=0.5" in line and "--irrelevance 0" in line
    assert scripted_server.requests == []  # refused before the first model request


def test_empty_sizes_are_refused_not_read_as_the_default(tiny, scripted_server) -> None:
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
    args = [*SCALE]
    result = tiny(*args, "--sizes", "", "--sample", "1", "--irrelevance", "0", env=env)
    line = _one_line(result)
    assert "--all-tools-sizes" in line and "''" in line
    assert scripted_server.requests == []
