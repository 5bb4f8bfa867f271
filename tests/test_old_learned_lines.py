"""learned.jsonl lines an older tiny wrote that today's task checks refuse (a generated
request with no letter or digit, a taught task past 8,000 characters): the error names the
line and the way out, and `tiny learn --prune-generated` removes generated ones whatever
their task."""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import Result

from tiny_cli.runs import RunLog
from tiny_cli.text import MAX_GOAL_CHARS

from .conftest import SEED_CARDS

HEADER = {"kind": "tiny learned routing examples", "version": 1}
ONBOARDING = "how did the onboarding process work again"  # routes to docs-finder
SANDWICH = "make me a sandwich"  # abstains on the seed cards (hashing embedder)
EMOJI = "🙂🙂🙂"
LONG = "count the words " * (MAX_GOAL_CHARS // 16 + 2)  # 8,032 characters: an older bound
KEY = "9f8d626a3c128ed1"
TYPING_HINT = "say what the agent should do"


@pytest.fixture
def cards(tmp_path: Path) -> Path:
    """The seed cards copied: learned.jsonl is written beside the copy."""
    return Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))


@pytest.fixture
def go(tiny: Callable[..., Result], cards: Path, scripted_server) -> Callable[..., Result]:
    """Run `tiny ARGS` on the copied cards with the hashing embedder; no traceback."""

    def run(*args: str) -> Result:
        env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
        result = tiny(*args, env={"TINY_BASE_URL": scripted_server.url, **env})
        assert "Traceback" not in result.output
        return result

    return run


def _line(task: str, card: str | None, generated: bool = False) -> str:
    """A line as tiny writes it (JSON, not ASCII-escaped): an older tiny wrote the same."""
    row = {"task": task, "card": card, **({"source": "generated", "key": KEY} if generated else {})}
    return json.dumps(row, ensure_ascii=False) + "\n"


def _write(cards: Path, *lines: str) -> Path:
    path = cards / "learned.jsonl"
    path.write_text(json.dumps(HEADER) + "\n" + "".join(lines), "utf-8")
    return path


def test_a_generated_line_route_refuses_names_its_line_and_the_prune(go, cards) -> None:
    path = _write(
        cards, _line("find the onboarding page in the handbook", "docs-finder", True),
        _line(EMOJI, "docs-finder", True),
    )  # fmt: skip
    for args in (("route", ONBOARDING), ("delegate", ONBOARDING), ("learn",)):
        result = go(*args)
        assert result.exit_code == 2, (args, result.output)
        assert f"{path}:3: task: the task has no letter or digit" in result.output
        assert "`tiny learn --prune-generated` removes this generated line" in result.output
        assert TYPING_HINT not in result.output
    checked = go("validate")
    assert checked.exit_code == 1
    assert "learned.jsonl:3: task: the task has no letter or digit" in checked.output
    assert "--prune-generated" in checked.output and TYPING_HINT not in checked.output


def test_prune_removes_every_generated_line_whatever_its_task(go, cards) -> None:
    taught = [
        _line("where is the handbook page on onboarding", "docs-finder"),
        _line("grüß mir die neue kundin", None),  # out of scope
    ]
    path = _write(
        cards, *taught, _line(EMOJI, "docs-finder", True),
        _line(LONG, "docs-finder", True), _line("ok find the handbook", "docs-finder", True),
    )  # fmt: skip
    pruned = go("learn", "--prune-generated", "--json")
    assert pruned.exit_code == 0, pruned.output
    assert json.loads(pruned.stdout)["removed"] == 3
    lines = path.read_text("utf-8").splitlines(keepends=True)
    assert lines[1:] == taught  # every other line as it was, byte for byte
    assert go("route", ONBOARDING).exit_code == 0
    assert go("validate").exit_code == 0


def test_a_taught_line_past_the_bound_says_edit_or_delete_it(go, cards) -> None:
    path = _write(cards, _line(LONG, "docs-finder"))
    for args in (("route", ONBOARDING), ("learn", "--prune-generated")):
        result = go(*args)
        assert result.exit_code == 2, (args, result.output)
        said = f"{path}:2: task: the task is {len(LONG):,} characters; at most {MAX_GOAL_CHARS:,}"
        assert said in result.output
        assert "edit this taught line or delete it" in result.output
        assert "put long material" not in result.output


def test_runs_correct_says_the_correction_stays_pending(go, cards, home) -> None:
    assert go("delegate", SANDWICH, "--json").exit_code == 6  # abstained: a run to correct
    [row] = json.loads(go("runs", "--json").stdout)
    path = _write(cards, _line(EMOJI, "docs-finder", True))
    result = go("runs", "correct", str(row["id"]), "--card", "docs-finder")
    assert result.exit_code == 2, result.output
    assert f"{path}:2: task: the task has no letter or digit" in result.output
    assert f"the correction of run {row['id']} is recorded, not taught" in result.output
    assert "`tiny learn --from-runs` teaches it" in result.output
    with RunLog.open(home) as log:
        [pending] = log.corrections()
    assert (pending.run_id, pending.card) == (row["id"], "docs-finder")
