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
# <!-- replay-scale: PATH bench options -->, the table, <!-- /replay-scale -->
BLOCK = re.compile(r"<!-- replay-scale: (\S+)((?: \S+)*) -->\n(.*?)<!-- /replay-scale -->", re.S)


def _documented() -> dict[str, tuple[list[str], str]]:
    found = BLOCK.findall(BENCH_DOC.read_text(encoding="utf-8"))
    return {name: (options.split(), table) for name, options, table in found}


def test_every_shipped_scale_recording_is_documented() -> None:
    assert RECORDINGS, "a real-model recording of the bench at scale ships"
    assert set(_documented()) == {p.relative_to(REPO).as_posix() for p in RECORDINGS}


@pytest.mark.slow  # routing 200 cards with the real embedder: about a minute on 2 cores
@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_a_scale_recording_replays_to_its_documented_table(
    tiny, tmp_path: Path, recording: Path
) -> None:
    options, table = _documented()[recording.relative_to(REPO).as_posix()]
    args = ["bench", "--tasks", str(BFCL / "tasks.jsonl"), "--cards", str(BFCL / "cards")]
    page = tmp_path / "report.html"
    result = tiny(
        *args,
        "--replay",
        str(recording),
        "--markdown",
        "--html",
        str(page),
        "--out",
        str(tmp_path / "report.json"),
        *options,
        env={"TINY_BASE_URL": "http://127.0.0.1:9/v1"},  # nothing listens: offline
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == table
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["replayed_from"] and all(r["wall_p50"] is None for r in report["rows"])
    assert "<svg" in page.read_text()
