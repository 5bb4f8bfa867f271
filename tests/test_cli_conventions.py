"""The conventions users bring from other tools: --json everywhere, CI gates, help, completion."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RECORDINGS = REPO / "examples" / "bench" / "recordings"


def test_validate_json_is_one_document_with_cards_and_problems(tiny, tmp_path) -> None:
    ok = tiny("validate", "--json")
    doc = json.loads(ok.stdout)
    assert ok.exit_code == 0 and doc["ok"] is True and doc["problems"] == []
    assert {c["id"] for c in doc["cards"]} == {"crm-writer", "docs-finder", "web-reader"}
    (tmp_path / "bad.yaml").write_text("id: Bad Id\nsummary: x\ntools: []\n")
    bad = tiny("validate", str(tmp_path / "bad.yaml"), "--json")
    doc = json.loads(bad.stdout)  # nothing but the document on stdout
    assert bad.exit_code == 1 and doc["ok"] is False
    assert all(p["file"] == str(tmp_path / "bad.yaml") for p in doc["problems"])
    assert any(p["field"] == "id" for p in doc["problems"])


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_fail_under_fails_the_job_below_the_bar_and_passes_above(tiny) -> None:
    replay = ["bench", "--replay", str(RECORDINGS / "qwen2.5-coder-1.5b-json.jsonl"), "-q"]
    low = tiny(*replay, "--fail-under", "tiny.right=0.9", "--fail-under", "tiny.ok=0.0")
    assert low.exit_code == 1
    assert "tiny: below --fail-under: tiny.right: 0.266 < 0.9" in low.stderr  # 4/15, cut
    assert "tiny.ok" not in low.stderr  # a bar that is met says nothing
    met = tiny(*replay, "--fail-under", "tiny.right=0.2", "--json")
    assert met.exit_code == 0 and json.loads(met.stdout)["arms"]["tiny"]["right"] == 4
    # routed right 13 of 15 (shown 0.8667): a bar of 0.8667 is missed, and the line says so
    close = tiny(*replay, "--fail-under", "tiny.routing=0.8667")
    assert close.exit_code == 1
    assert "tiny: below --fail-under: tiny.routing: 0.866666 < 0.8667" in close.stderr
    assert tiny(*replay, "--fail-under", "tiny.routing=0.8666").exit_code == 0


def test_a_bad_bar_stops_before_any_run(tiny) -> None:
    for spec, words in [("tiny.bogus=0.5", "'bogus' is not a metric here"),
                        ("tiny.right=2", "write ARM.METRIC=SHARE"),
                        ("right=0.5", "write ARM.METRIC=SHARE")]:  # fmt: skip
        result = tiny("bench", "--fail-under", spec)  # no server: a run would fail differently
        assert result.exit_code == 2 and words in result.stderr, result.output


@pytest.mark.slow  # replays 15 and then 45 recorded runs: ~5 s on 2 cores
def test_a_replay_of_fewer_runs_than_recorded_warns(tiny) -> None:
    recording = str(RECORDINGS / "qwen2.5-coder-1.5b-json-repeat3.jsonl")
    fewer = tiny("bench", "--replay", recording, "--repeat", "1", "--json")
    assert fewer.exit_code == 0
    assert "never asked for" in fewer.stderr and "--repeat" in fewer.stderr
    whole = tiny("bench", "--replay", recording, "--json")  # its header says --repeat 3
    assert whole.exit_code == 0
    # the whole replay leaves only the repair turns a final partial no longer takes
    assert _unused(whole.stderr) < _unused(fewer.stderr)


def _unused(stderr: str) -> int:
    """The count in the replay's 'holds N exchange(s) … never asked for' warning (0: none)."""
    found = re.search(r"holds (\d+) exchange\(s\) this replay never asked for", stderr)
    return int(found.group(1)) if found else 0


def test_help_shows_choices_examples_and_completion(tiny) -> None:
    root = tiny("--help").stdout
    assert "--install-completion" in root and "init" in root and "cards" in root
    validate = tiny("validate", "--help").stdout
    assert "--format <text|github>" in validate and "Examples:" in validate
    bench = tiny("bench", "--help").stdout
    assert "<first|last>" in bench and "<same|card>" in bench and "--fail-under" in bench
    assert "tiny bench --repeat 3" in bench
    for sub in ("search", "delete", "export"):
        assert "Examples:" in tiny("runs", sub, "--help").stdout


def test_a_refused_address_shows_its_cause_in_the_digest(tiny) -> None:
    from tiny_cli.testing import ScriptedServer, reply, tool_call

    with ScriptedServer() as server:
        server.add(
            tool_call("http_get", {"url": "http://127.0.0.1:9/secret"}),
            reply('{"status": "partial", "summary": "could not read it", "url": "-"}'),
        )
        result = tiny("invoke", "web-reader", "read http://127.0.0.1:9/secret", "--json",
                      env={"TINY_BASE_URL": server.url})  # fmt: skip
    notes = json.loads(result.stdout)["notes_for_caller"]
    [refused] = [n for n in notes if n.startswith("http_get refused:")]
    assert "127.0.0.1" in refused and "--allow-host" in refused


def test_runs_path_names_the_log_file_a_run_wrote(tiny, cli_env) -> None:
    path = Path(tiny("runs", "path").stdout.strip())
    assert path == Path(cli_env["TINY_HOME"]) / "runs.sqlite3"
    tiny("runs")  # opening the log makes the file
    assert path.is_file()


def test_a_usage_error_is_one_line_naming_the_help(tiny) -> None:
    for args, words in [(["validate", "--format", "nope"], "'--format'"),
                        (["--bogus"], "No such option: --bogus"),
                        (["invoke"], "Missing argument")]:  # fmt: skip
        result = tiny(*args)
        assert result.exit_code == 2
        [line] = result.stderr.splitlines()  # one line, not usage + hint + error
        assert line.startswith("tiny: error: ") and words in line and "--help" in line


def test_a_missing_card_is_said_first_even_when_another_card_is_broken(tiny, tmp_path) -> None:
    folder = tmp_path / "cards"
    folder.mkdir()
    (folder / "docs.yaml").write_text(
        (REPO / "cards" / "docs-finder.yaml").read_text(), encoding="utf-8"
    )
    (folder / "weather.yaml").write_text(
        "id: weather\nsummary: Says the weather for a city.\ntools: [get_weather]\n"
        "returns_required: [answer]\nside_effects: none\n"
    )
    env = {"TINY_CARDS": str(folder)}
    nope = tiny("invoke", "nope", "x", env=env)
    assert nope.exit_code == 2
    assert (
        nope.stderr.startswith("tiny: error: no card 'nope'")
        and "known: docs-finder" in nope.stderr
    )
    assert "unknown tool 'get_weather'" in nope.stderr  # the broken card is still said
    broken = tiny("invoke", "weather", "x", env=env)  # the card asked for is the broken one
    assert broken.exit_code == 2 and "weather.yaml:3: tools[0]: unknown tool" in broken.stderr
