"""Review fixes in `tiny bench`: a resumed bench says it replayed, recordings that could never
answer together are refused up front, a bad value in a replayed header is blamed on the
header, a bar the options leave without a figure is refused before any model request, an
empty --sizes is refused; the default sizes fit a small catalogue, --repeat at scale and a nan
accepted value are refused, and a task file with a BOM or a `.JSONL` suffix is read."""

from __future__ import annotations

import codecs
import json
import shutil
from pathlib import Path

import pytest

from tests.test_bench import TURNS, model, respond, write_tasks
from tests.test_scale_bench import BFCL, SCALE, TASKS, _policy


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


# a small catalogue: 10 BFCL cards (27 tools) and three of their tasks, one an irrelevance one
SMALL_TASKS = ("multiple_0", "multiple_1", "irrelevance_0")
SMALL_CARDS = ("triangle-properties-circle", "math-triangle-area-circle-base-height")


def _small(tmp_path: Path, name: str = "tasks.jsonl", head: bytes = b"") -> tuple[Path, Path]:
    """Write the small catalogue's cards and task file (`head` before its first line)."""
    cards = tmp_path / "cards"
    cards.mkdir(exist_ok=True)
    for card in [*SMALL_CARDS, *sorted(p.stem for p in (BFCL / "cards").glob("*.yaml"))[:8]]:
        shutil.copy(BFCL / "cards" / f"{card}.yaml", cards)
    lines = "".join(json.dumps(t) + "\n" for t in TASKS if t["id"] in SMALL_TASKS)
    tasks = tmp_path / name
    tasks.write_bytes(head + lines.encode("utf-8"))
    return tasks, cards


def _at_scale(tiny, server, tasks: Path, cards: Path, *args: str, scale: str = "--scale"):
    """Run the bench at scale on `tasks` (`scale` "": the old spelling, a selection file alone)."""
    server.add(*[respond(_policy({}))] * 100)
    env = {"TINY_BASE_URL": server.url, "TINY_EMBEDDER": "hashing"}
    common = ("--tasks", str(tasks), "--cards", str(cards), "--tool-mode", "native", "--no-log")
    return tiny("bench", *filter(None, [scale]), *common, *args, env=env)


@pytest.mark.slow  # a bench run or two: 2 s and more on 2 cores, in `make test-slow`
def test_the_default_sizes_run_a_catalogue_under_100_tools_and_replay(
    tiny, scripted_server, tmp_path
) -> None:
    tasks, cards = _small(tmp_path)
    recording = tmp_path / "run.jsonl"
    result = _at_scale(tiny, scripted_server, tasks, cards, "--json", "--record", str(recording))
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["catalogue_tools"] == 27
    assert [r["label"] for r in report["rows"] if r["arm"] == "oracle"] == ["10", "all"]
    header = json.loads(recording.read_text("utf-8").splitlines()[0])
    assert header["bench"]["all_tools_sizes"] == "10,all"  # what ran, so the replay runs it
    again = tiny("bench", "--replay", str(recording), "--json")
    assert again.exit_code == 0, again.output
    scored = [(r["label"], r["arm"], r["right_call"]) for r in report["rows"]]
    assert [
        (r["label"], r["arm"], r["right_call"]) for r in json.loads(again.stdout)["rows"]
    ] == scored


def test_sizes_given_that_name_the_catalogue_twice_are_still_refused(
    tiny, scripted_server, tmp_path
) -> None:
    tasks, cards = _small(tmp_path)
    line = _one_line(_at_scale(tiny, scripted_server, tasks, cards, "--sizes", "10,30,all"))
    assert "--all-tools-sizes: 30 and all are the same catalogue (27 tools)" in line


def test_repeat_is_refused_at_scale_where_it_would_change_nothing(
    tiny, scripted_server, tmp_path
) -> None:
    tasks, cards = _small(tmp_path)
    result = _at_scale(tiny, scripted_server, tasks, cards, "--sizes", "10,all", "--repeat", "5")
    line = _one_line(result)
    assert "--repeat" in line and "only the plain bench reads it" in line
    assert scripted_server.requests == []
    once = ("--sizes", "all", "--arm", "oracle", "--repeat", "1")  # given at all, as --top-k is
    assert "only the plain bench reads it" in _one_line(
        _at_scale(tiny, scripted_server, tasks, cards, *once)
    )


@pytest.mark.parametrize("value", ["NaN", "Infinity", "[1, -Infinity]"])
def test_an_accepted_value_no_call_can_hold_is_refused(
    tiny, scripted_server, tmp_path, value
) -> None:
    tasks, cards = _small(tmp_path)
    text = tasks.read_text("utf-8").replace('"side1": [5]', f'"side1": [{value}]')
    tasks.write_text(text, "utf-8")
    line = _one_line(_at_scale(tiny, scripted_server, tasks, cards, "--sizes", "all"))
    assert f"{tasks}:1: task 'multiple_0': expect_call.arguments.side1: " in line
    assert "is no number an answer holds; quote it as text" in line
    assert scripted_server.requests == []


@pytest.mark.slow  # a bench run or two: 2 s and more on 2 cores, in `make test-slow`
@pytest.mark.parametrize(
    ("name", "head", "scale"),
    # a BOM, and an upper-case suffix where it decides (a selection file without --scale)
    [("t.jsonl", codecs.BOM_UTF8, "--scale"), ("T.JSONL", b"", "")],
)
def test_the_bench_at_scale_reads_a_task_file_as_route_eval_does(
    tiny, scripted_server, tmp_path, name, head, scale
) -> None:
    tasks, cards = _small(tmp_path, name, head)
    evaluated = tiny("route", "--eval", str(tasks), "--cards", str(cards), "--json",
                     env={"TINY_EMBEDDER": "hashing"})  # fmt: skip
    assert evaluated.exit_code == 0, evaluated.output
    result = _at_scale(tiny, scripted_server, tasks, cards, "--arm", "tiny", "--json", scale=scale)
    assert result.exit_code == 0, result.output
    assert {r["task"] for r in json.loads(result.stdout)["runs"]} == set(SMALL_TASKS)


@pytest.mark.slow  # a bench run or two: 2 s and more on 2 cores, in `make test-slow`
@pytest.mark.parametrize(("name", "head"), [("t.jsonl", codecs.BOM_UTF8), ("T.JSONL", b"")])
def test_the_plain_bench_reads_a_jsonl_task_file_as_route_eval_does(
    tiny, scripted_server, tmp_path, name, head
) -> None:
    tasks = tmp_path / name
    entry = {"id": "sandwich", "task": "make me a sandwich", "expected_agent": None}
    tasks.write_bytes(head + (json.dumps(entry) + "\n").encode("utf-8"))
    scripted_server.add(*[respond(model)] * TURNS)
    env = {"TINY_BASE_URL": scripted_server.url}
    result = tiny("bench", "--tasks", str(tasks), "--arm", "tiny", "--json", env=env)
    assert result.exit_code == 0, result.output
    assert [t["id"] for t in json.loads(result.stdout)["tasks"]] == ["sandwich"]


@pytest.mark.slow  # a bench run or two: 2 s and more on 2 cores, in `make test-slow`
@pytest.mark.parametrize(
    ("flags", "written"), [((), ["cache", "runs.sqlite3"]), (("--no-log",), ["cache"])]
)
def test_a_live_bench_writes_the_run_log_and_the_caches_under_tiny_home(
    tiny, scripted_server, tmp_path, home, flags, written
) -> None:
    # docs/bench.md, "The two arms", says what a live bench writes under TINY_HOME
    scripted_server.add(*[respond(model)] * TURNS)
    tasks = write_tasks(tmp_path / "bench")
    env = {"TINY_BASE_URL": scripted_server.url}
    result = tiny("bench", "--tasks", str(tasks), "--arm", "both", "-q", *flags, env=env)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in home.iterdir()) == written
    assert {p.name for p in (home / "cache").iterdir()} <= {"cards", "router", "vectors.sqlite3"}
