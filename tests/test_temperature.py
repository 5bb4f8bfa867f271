"""The bench asks greedy by default: temperature 0 on the wire, --temperature to change it,
the value kept in the recording and sent again by its replay; invoke sends none unless asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_cli.testing import reply

from .test_bench import TURNS, model, respond, write_tasks


def _bench(tiny, server, tmp_path: Path, *args: str):
    server.add(*[respond(model)] * TURNS)
    tasks = write_tasks(tmp_path / "bench")
    env = {"TINY_BASE_URL": server.url}
    return tiny("bench", "--tasks", str(tasks), "--json", *args, env=env)


def _temperatures(server) -> set:
    return {r.get("temperature", "absent") for r in server.requests}


@pytest.mark.slow
def test_the_bench_sends_temperature_0_with_every_request(tiny, scripted_server, tmp_path) -> None:
    result = _bench(tiny, scripted_server, tmp_path)
    assert result.exit_code == 0, result.output
    assert scripted_server.requests and _temperatures(scripted_server) == {0.0}
    assert json.loads(result.stdout)["temperature"] == 0.0


@pytest.mark.slow
def test_temperature_flag_goes_on_the_wire_and_into_the_recording(
    tiny, scripted_server, tmp_path
) -> None:
    recording = tmp_path / "run.jsonl"
    result = _bench(
        tiny, scripted_server, tmp_path, "--temperature", "0.7", "--record", str(recording)
    )
    assert result.exit_code == 0, result.output
    assert _temperatures(scripted_server) == {0.7}
    header = json.loads(recording.read_text().splitlines()[0])
    assert header["temperature"] == 0.7
    asked = len(scripted_server.requests)
    replayed = tiny("bench", "--replay", str(recording), "--json")  # no server: all from the file
    assert replayed.exit_code == 0, replayed.output
    assert json.loads(replayed.stdout)["temperature"] == 0.7
    assert len(scripted_server.requests) == asked


@pytest.mark.parametrize("value", ["-0.1", "2.5"])
def test_a_temperature_out_of_range_is_one_line(tiny, tmp_path, value) -> None:
    result = tiny("bench", "--tasks", str(write_tasks(tmp_path / "b")), "--temperature", value)
    assert result.exit_code != 0
    assert "--temperature" in result.output and "from 0 (greedy) to 2" in result.output
    assert "Traceback" not in result.output


def test_invoke_sends_no_temperature_unless_asked(tiny, scripted_server) -> None:
    env = {"TINY_BASE_URL": scripted_server.url}
    scripted_server.add(reply({"status": "partial", "summary": "Nothing done."}))
    tiny("invoke", "docs-finder", "who approves expenses", "--json", env=env)
    scripted_server.add(reply({"status": "partial", "summary": "Nothing done."}))
    tiny("invoke", "docs-finder", "who approves expenses", "--json", "--temperature", "0", env=env)
    first, second = scripted_server.requests
    assert "temperature" not in first and second["temperature"] == 0.0


@pytest.mark.slow  # replays the 60-task sweep: CI runs it with -m slow
def test_a_recording_made_before_temperature_replays_labelled_sampled(tiny) -> None:
    shipped = Path(__file__).resolve().parent.parent / "examples/bfcl/recordings"
    recording = shipped / "qwen2.5-coder-1.5b-json-60.jsonl"
    assert json.loads(recording.open().readline()).get("temperature") is None
    result = tiny("bench", "--replay", str(recording))  # every answer from the file
    assert result.exit_code == 0, result.output
    assert "sampled (server default)" in result.output.replace("\n", " ")


def _sampled_recording(tiny, server, tmp_path: Path) -> tuple[Path, int]:
    """A bench recorded at temperature 0.7, and how many requests it asked."""
    first = tmp_path / "sampled.jsonl"
    made = _bench(tiny, server, tmp_path, "--temperature", "0.7", "--record", str(first))
    assert made.exit_code == 0, made.output
    return first, len(server.requests)


@pytest.mark.slow
def test_resume_refuses_a_recording_made_at_another_temperature(
    tiny, scripted_server, tmp_path
) -> None:
    first, asked = _sampled_recording(tiny, scripted_server, tmp_path)
    again = tmp_path / "greedy.jsonl"
    greedy = ("--temperature", "0", "--resume", str(first), "--record", str(again))
    result = _bench(tiny, scripted_server, tmp_path, *greedy)
    assert result.exit_code == 2  # a setting that cannot hold: EXIT_USAGE
    line = result.output.strip()
    assert str(first) in line and "0.7" in line and "temperature asked now" in line
    assert "Traceback" not in result.output and "\n" not in line
    assert len(scripted_server.requests) == asked and not again.exists()  # nothing asked, kept


@pytest.mark.slow
def test_resume_asks_at_the_temperature_the_recording_was_made_at(
    tiny, scripted_server, tmp_path
) -> None:
    first, asked = _sampled_recording(tiny, scripted_server, tmp_path)
    again = tmp_path / "again.jsonl"
    result = _bench(tiny, scripted_server, tmp_path, "--resume", str(first), "--record", str(again))
    assert result.exit_code == 0, result.output
    assert len(scripted_server.requests) == asked  # every answer reused, at 0.7
    # a recording made before tiny sent a temperature: resumed at the server's own default
    head, *rows = first.read_text("utf-8").splitlines(keepends=True)
    header = json.loads(head)
    del header["temperature"]
    first.write_text(json.dumps(header) + "\n" + "".join(rows), "utf-8")
    later = tmp_path / "later.jsonl"
    result = _bench(tiny, scripted_server, tmp_path, "--resume", str(first), "--record", str(later))
    assert result.exit_code == 0, result.output
    assert {r.get("temperature", "absent") for r in scripted_server.requests[asked:]} == {"absent"}
