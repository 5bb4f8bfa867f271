"""Every recording shipped in examples/bench/recordings replays offline to the table in the docs,
with its file name alone, writing nothing under TINY_HOME but its cache (issue 30)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

# each replays a whole recorded bench, ~3-4 s a test on 2 cores: CI runs them (make test-slow)
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
RECORDINGS = sorted((REPO / "examples" / "bench" / "recordings").glob("*.jsonl"))
BENCH_DOC = REPO / "docs" / "bench.md"
# <!-- replay: PATH -->, the table, <!-- /replay -->: the recording holds its options
BLOCK = re.compile(r"<!-- replay: (\S+) -->\n(.*?)<!-- /replay -->", re.S)


def _documented() -> dict[str, str]:
    return dict(BLOCK.findall(BENCH_DOC.read_text(encoding="utf-8")))


def test_every_mode_of_the_real_bench_is_shipped_and_documented() -> None:
    names = {p.name for p in RECORDINGS}
    assert {f"qwen2.5-coder-1.5b-{mode}.jsonl" for mode in ("auto", "json", "native")} <= names
    assert set(_documented()) == {f"examples/bench/recordings/{n}" for n in names}


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_a_shipped_recording_replays_to_its_documented_table(
    tiny, tmp_path: Path, recording: Path
) -> None:
    table = _documented()[recording.relative_to(REPO).as_posix()]
    home = tmp_path / "fresh-home"
    offline = {"TINY_BASE_URL": "http://127.0.0.1:9/v1", "TINY_HOME": str(home)}
    result = tiny("bench", "--replay", str(recording), "--markdown", env=offline)
    assert result.exit_code == 0, result.output
    assert result.stdout == table
    written = {p.relative_to(home).parts[0] for p in home.rglob("*") if p.is_file()}
    assert written <= {"cache"}  # docs/bench.md: a replay writes only its cache
    assert json.loads(tiny("runs", "--json", env=offline).stdout) == []  # and is not a run
