"""What the bench prints is true to its numbers: a margin given to a replay is the one used, an
abstain's score reads apart from the threshold it missed, a token mean is rounded once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_cli.bench.scale import ScaleOptions
from tiny_cli.bench.scale_report import RunRecord, build_report, markdown_table

REPO = Path(__file__).resolve().parent.parent
SAME_PROMPT = REPO / "examples/bfcl/recordings/qwen2.5-coder-1.5b-json-same-prompt.jsonl"
BENCH = REPO / "examples/bench/recordings/qwen2.5-coder-1.5b-json.jsonl"
OFFLINE = {"TINY_BASE_URL": "http://127.0.0.1:9/v1"}  # nothing listens there


@pytest.mark.slow  # a shipped recording replayed (~5 s)
def test_a_hybrid_margin_given_to_a_replay_decides_hybrid_at_that_margin(tiny) -> None:
    # all/multiple_66 routed with a margin of 0.513: not clear at the recorded 1.0, clear at 0.5
    args = ("bench", "--scale", "--replay", str(SAME_PROMPT), "--json")
    result = tiny(*args, "--hybrid-margin", "0.5", env=OFFLINE)
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    runs = {(r["task"], r["arm"], r["universe"]): r for r in report["runs"]}
    hybrid, tiny_run = runs["multiple_66", "hybrid", "all"], runs["multiple_66", "tiny", "all"]
    assert report["hybrid_margin"] == 0.5
    assert len(hybrid["offered_cards"]) == 1  # the routed card alone, as tiny's run
    assert hybrid["offered_cards"] == tiny_run["offered_cards"]


@pytest.mark.slow  # a shipped recording replayed (~5 s)
def test_a_margin_that_needs_runs_the_recording_lacks_is_the_missing_answer_error(tiny) -> None:
    args = ("bench", "--scale", "--replay", str(SAME_PROMPT), "--markdown")
    result = tiny(*args, "--hybrid-margin", "5", env=OFFLINE)  # no card is ever clear
    assert result.exit_code != 0 and "Traceback" not in result.output
    said = result.stderr.strip().splitlines()
    assert len(said) == 1 and "no recorded answer for run" in said[0] and "/hybrid/" in said[0]


def _near(tmp_path: Path, score: float, threshold: float) -> Path:
    """The bench's shipped recording, its sandwich task abstaining at `score` < `threshold`."""
    lines = BENCH.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    header["bench"]["tasks"] = str(BENCH.parent / header["bench"]["tasks"])
    header["bench"]["cards"] = str(BENCH.parent / header["bench"]["cards"])
    route = header["routes"]["abstain-sandwich"]
    route.update(score=score, threshold=threshold)
    route["candidates"][0][1] = score
    path = tmp_path / "near.jsonl"
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow  # a shipped recording replayed (~3 s each)
@pytest.mark.parametrize(
    ("score", "threshold", "said"),
    [
        (1.49997, 1.5, "best score 1.49997 < threshold 1.50000"),
        (1.23455, 1.23456, "best score 1.23455 < threshold 1.23456"),
    ],
)
def test_an_abstain_prints_its_score_apart_from_the_threshold_it_missed(
    tiny, tmp_path: Path, score: float, threshold: float, said: str
) -> None:
    result = tiny("bench", "--replay", str(_near(tmp_path, score, threshold)), "--json",
                  env=OFFLINE)  # fmt: skip
    assert result.exit_code == 0, result.output
    task = next(t for t in json.loads(result.stdout)["tasks"] if t["id"] == "abstain-sandwich")
    assert task["runs"]["tiny"][0]["reason"] == f"no card fits: {said}"


def _run(prompt: int) -> RunRecord:
    return RunRecord("t", True, 10, "u", 10, "tiny", "right", "", "f", "c", ("c",), True, None,
                     True, 1, prompt, prompt, prompt, 1.0, 0, "ok")  # fmt: skip


@pytest.mark.parametrize(
    ("prompts", "shown"),
    [
        ([227] * 16 + [228] * 14, "227"),  # 227.47: once rounded 227, not 227.5 then 228
        ([226, 227], "227"),  # 226.5 exactly: half up, the same on every machine
        ([138] * 49 + [139] * 51, "139"),  # 138.51: not 138.5 then 138 (half to even)
    ],
)
def test_a_token_mean_is_rounded_once_from_its_exact_value(prompts: list[int], shown: str) -> None:
    report = build_report([_run(p) for p in prompts], ScaleOptions(), "m", "now", 10)
    row = markdown_table(report).splitlines()[2].split(" | ")
    assert row[9:12] == [shown, shown, shown]  # prompt, schema and completion tokens / task
    assert report.to_json()["rows"][0]["prompt_tokens"] == int(shown)  # JSON says it too
