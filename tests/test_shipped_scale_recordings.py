"""The bench at scale's shipped real-model recordings replay offline to the tables in the docs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
BFCL = REPO / "examples" / "bfcl"
RECORDINGS = sorted((BFCL / "recordings").glob("*.jsonl"))
BENCH_DOC = REPO / "docs" / "bench.md"
# <!-- replay-scale: PATH -->, the table, <!-- /replay-scale -->: the recording holds its options
BLOCK = re.compile(r"<!-- replay-scale: (\S+) -->\n(.*?)<!-- /replay-scale -->", re.S)


def _documented() -> dict[str, str]:
    return dict(BLOCK.findall(BENCH_DOC.read_text(encoding="utf-8")))


def test_every_shipped_scale_recording_is_documented() -> None:
    assert RECORDINGS, "a real-model recording of the bench at scale ships"
    assert set(_documented()) == {p.relative_to(REPO).as_posix() for p in RECORDINGS}


@pytest.mark.slow  # a whole bench at scale replayed, the largest from a 23 MB recording
@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_a_scale_recording_replays_to_its_documented_table(
    tiny, tmp_path: Path, recording: Path
) -> None:
    table = _documented()[recording.relative_to(REPO).as_posix()]
    page = tmp_path / "report.html"
    result = tiny(
        "bench",
        "--replay",
        str(recording),  # alone: the recording holds its tasks, cards and options
        "--markdown",
        "--html",
        str(page),
        "--out",
        str(tmp_path / "report.json"),
        env={"TINY_BASE_URL": "http://127.0.0.1:9/v1"},  # nothing listens: offline
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == table
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["replayed_from"] and all(r["wall_p50"] is None for r in report["rows"])
    assert "<svg" in page.read_text()
