"""Odd environments, run as a shell runs the real `tiny`: a deleted working folder, a COLUMNS
of 0 or 1, and a terminal too narrow for the Digest's title."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiny_cli.cli.render import MIN_WIDTH
from tiny_cli.testing import ScriptedServer, reply, tool_call

REPO = Path(__file__).resolve().parent.parent
SEED_CARDS = REPO / "cards"
TINY = Path(sys.executable).with_name("tiny")  # the console script pip installed beside python
ONBOARDING = "how did the onboarding process work again"
CRM_TASK = "add Mustermann GmbH in Berlin as a new customer"
ANSWER = {"status": "ok", "summary": "Two weeks, with a buddy.", "source": "onboarding.md"}


def _tiny(
    home: Path, *args: str, columns: str | None = None, url: str = "http://127.0.0.1:9/v1"
) -> subprocess.CompletedProcess[str]:
    """Run the real `tiny ARGS` with its own home, the seed cards and no project file."""
    env = {
        **os.environ,
        "TINY_HOME": str(home),
        "TINY_PROJECT": "none",
        "TINY_CARDS": str(SEED_CARDS),
        "TINY_DOCS": str(REPO / "examples" / "handbook"),
        "TINY_BASE_URL": url,
        "TINY_EMBEDDER": "hashing",
    }
    env.pop("COLUMNS", None)
    if columns is not None:
        env["COLUMNS"] = columns
    command = [str(TINY), *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.skipif(sys.platform == "win32", reason="a folder in use cannot be deleted there")
@pytest.mark.parametrize(
    "args",
    [
        ["route", "x", "--cards", str(SEED_CARDS)],
        ["runs"],
        ["validate"],
        ["invoke", "docs-finder", "x"],
    ],
)
def test_a_deleted_working_folder_is_one_line(tmp_path: Path, args: list[str]) -> None:
    gone = tmp_path / "gone"
    gone.mkdir()
    script = 'cd "$1" && rmdir "$1" && shift && exec "$@"'  # as a shell left in a deleted folder
    env = {**os.environ, "TINY_HOME": str(tmp_path / "home"), "TINY_PROJECT": "none"}
    done = subprocess.run(
        ["sh", "-c", script, "sh", str(gone), str(TINY), *args],
        env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert not gone.exists()
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    said = "tiny: error: the current folder no longer exists; cd to one that does\n"
    assert done.stderr == said


@pytest.mark.parametrize("columns", ["0", "1"])
def test_a_columns_below_the_least_width_is_raised_to_it(tmp_path: Path, columns: str) -> None:
    done = _tiny(tmp_path / "home", "route", ONBOARDING, columns=columns)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert any(line.startswith(("route → ", "abstain: ")) for line in lines), done.stdout
    assert max(map(len, lines)) == MIN_WIDTH  # the table fills it, nothing wider
    assert "route: how did the" in done.stdout  # its title reads in words, not a cell a line


def _title(stdout: str) -> str:
    """The Digest panel's top line, its title between `╭─ ` and ` ─╮`."""
    return next(line for line in stdout.splitlines() if line.startswith("╭"))


def test_a_narrow_digest_title_cuts_the_card_id_not_the_status(tmp_path: Path) -> None:
    turns = [tool_call("docs_search", {"query": "onboarding"}), reply(json.dumps(ANSWER))]
    with ScriptedServer(turns) as server:
        done = _tiny(tmp_path / "home", "invoke", "docs-finder", "x", "-q", columns="20",
                     url=server.url)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert _title(done.stdout) == "╭─ docs-fin… · ok ─╮"


@pytest.mark.parametrize(
    ("columns", "title"),
    [
        ("24", "╭─ … · needs_confirm… ─╮"),  # too narrow for the status: cut, and said so
        ("32", "╭─ crm-… · needs_confirmation ─╮"),
        ("80", "╭─ crm-writer · needs_confirmation "),
    ],
)
def test_a_status_is_never_cut_unsaid(tmp_path: Path, columns: str, title: str) -> None:
    # no terminal to approve the write: needs_confirmation before any model is asked
    done = _tiny(tmp_path / "home", "invoke", "crm-writer", CRM_TASK, "-q", columns=columns)
    assert done.returncode == 7, done.stderr
    top = _title(done.stdout)
    assert top.startswith(title) and len(top) == int(columns)
