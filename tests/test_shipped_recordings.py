"""Every recording shipped in examples/bench/recordings replays offline to the table in the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
RECORDINGS = sorted((REPO / "examples" / "bench" / "recordings").glob("*.jsonl"))
BENCH_DOC = REPO / "docs" / "bench.md"
BLOCK = re.compile(r"<!-- replay: (\S+) -->\n(.*?)<!-- /replay -->", re.S)


def _documented() -> dict[str, str]:
    return {name: table for name, table in BLOCK.findall(BENCH_DOC.read_text(encoding="utf-8"))}


def test_every_mode_of_the_real_bench_is_shipped_and_documented() -> None:
    names = {p.name for p in RECORDINGS}
    assert {f"qwen2.5-coder-1.5b-{mode}.jsonl" for mode in ("auto", "json", "native")} <= names
    assert set(_documented()) == {f"examples/bench/recordings/{n}" for n in names}


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_a_shipped_recording_replays_to_its_documented_table(tiny, recording: Path) -> None:
    relative = recording.relative_to(REPO).as_posix()
    result = tiny(
        "bench",
        "--tasks",
        str(REPO / "examples" / "bench" / "tasks.yaml"),
        "--replay",
        str(recording),
        "--markdown",
        env={"TINY_BASE_URL": "http://127.0.0.1:9/v1"},  # nothing listens: offline
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == _documented()[relative]
