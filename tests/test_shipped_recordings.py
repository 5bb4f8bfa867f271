"""Every recording shipped in examples/bench/recordings replays offline to the table in the docs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

# each replays a whole recorded bench, ~3-4 s a test on 2 cores: CI runs them (make test-slow)
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parent.parent
RECORDINGS = sorted((REPO / "examples" / "bench" / "recordings").glob("*.jsonl"))
BENCH_DOC = REPO / "docs" / "bench.md"
# <!-- replay: PATH [more bench options, e.g. --repeat 3] -->, the table, <!-- /replay -->
BLOCK = re.compile(r"<!-- replay: (\S+)((?: \S+)*) -->\n(.*?)<!-- /replay -->", re.S)


def _documented() -> dict[str, tuple[list[str], str]]:
    found = BLOCK.findall(BENCH_DOC.read_text(encoding="utf-8"))
    return {name: (options.split(), table) for name, options, table in found}


def test_every_mode_of_the_real_bench_is_shipped_and_documented() -> None:
    names = {p.name for p in RECORDINGS}
    assert {f"qwen2.5-coder-1.5b-{mode}.jsonl" for mode in ("auto", "json", "native")} <= names
    assert set(_documented()) == {f"examples/bench/recordings/{n}" for n in names}


@pytest.mark.parametrize("recording", RECORDINGS, ids=lambda p: p.stem)
def test_a_shipped_recording_replays_to_its_documented_table(tiny, recording: Path) -> None:
    relative = recording.relative_to(REPO).as_posix()
    options, table = _documented()[relative]
    result = tiny(
        "bench",
        "--tasks",
        str(REPO / "examples" / "bench" / "tasks.yaml"),
        "--replay",
        str(recording),
        "--markdown",
        *options,
        env={"TINY_BASE_URL": "http://127.0.0.1:9/v1"},  # nothing listens: offline
    )
    assert result.exit_code == 0, result.output
    assert result.stdout == table
