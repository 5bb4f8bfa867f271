"""A hand-edited or cut recording is one line naming the file, never a traceback."""

from __future__ import annotations

import json
from pathlib import Path

from .conftest import REPO, one_error_line

SHIPPED = REPO / "examples" / "bench" / "recordings" / "qwen2.5-coder-1.5b-json.jsonl"
TASKS = REPO / "examples" / "bench" / "tasks.yaml"


def _copy(tmp_path: Path, edit) -> Path:
    """The shipped recording beside its task file's place, its header edited by `edit`."""
    header, *rest = SHIPPED.read_text("utf-8").split("\n")
    data = json.loads(header)
    data["bench"].update(tasks=str(TASKS), cards=str(REPO / "cards"))  # the copy is elsewhere
    edit(data)
    path = tmp_path / "edited.jsonl"
    path.write_text("\n".join([json.dumps(data), *rest]), "utf-8")
    return path


def test_a_header_whose_card_digests_are_no_mapping_is_one_line(tiny, tmp_path) -> None:
    for cards in ("x", ["web-reader"]):
        path = _copy(tmp_path, lambda d, c=cards: d["digests"].update(cards=c))
        result = tiny("bench", "--replay", str(path))
        line = one_error_line(result)
        assert line == f"{path}: the header's digests.cards must map card files to digests"


def test_a_recording_cut_mid_line_says_where_once(tiny, tmp_path) -> None:
    text = _copy(tmp_path, lambda d: None).read_text("utf-8")
    cut = tmp_path / "cut.jsonl"
    second = text.index("\n") + 1
    cut.write_text(text[: second + 40], "utf-8")  # the first exchange cut inside a string
    line = one_error_line(tiny("bench", "--replay", str(cut)))
    assert line.startswith(f"{cut}:2: not JSON: ") and " at at " not in line, line
