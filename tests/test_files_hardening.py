"""User files survive Ctrl-C, keep their permissions, and read the same with CRLF or a BOM.

Each test works on real files in a temporary folder: the CLI run in-process, or the function
that reads or writes the file. Ctrl-C is a KeyboardInterrupt raised where a real one lands.
"""

from __future__ import annotations

import json
import shutil
import stat
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tiny_cli.cards.generated import read_generated
from tiny_cli.errors import ConfigError
from tiny_cli.scaffold import STARTER_CARD, init_project
from tiny_cli.settings import PROJECT_FILE, load_settings
from tiny_cli.tools.mcp_client import stop_servers
from tiny_cli.tools.mcp_config import load_mcp_config
from tiny_cli.tools.mcp_hosts import merge_mcp_yaml
from tiny_cli.userfiles import read_text, write_text

from .conftest import REPO, SEED_CARDS

BOM = b"\xef\xbb\xbf"
CATALOGUE = REPO / "tests" / "mcp_servers" / "catalogue.py"
BOX = {"command": sys.executable, "args": ["box.py"]}
TOOLS = [
    ("create_event", "Create a calendar event and invite attendees.", "write"),
    ("list_events", "List the calendar events of a week.", "read"),
]


def _interrupt(*_: Any, **__: Any) -> None:
    """Stand in for a call that Ctrl-C stops."""
    raise KeyboardInterrupt


# --- writing: permissions kept, nothing left behind on Ctrl-C -----------------------------


def test_tiny_learn_keeps_the_learned_files_permissions(
    tiny: Callable[..., Any], tmp_path: Path
) -> None:
    cards = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    for n, task in enumerate(["where is the expense policy", "how does on-call work"]):
        (tmp_path / f"{n}.jsonl").write_text(json.dumps({"task": task, "card": "docs-finder"}))
    assert tiny("learn", str(tmp_path / "0.jsonl"), env=env).exit_code == 0
    learned = cards / "learned.jsonl"
    learned.chmod(0o600)
    result = tiny("learn", str(tmp_path / "1.jsonl"), env=env)
    assert result.exit_code == 0, result.output
    assert "how does on-call work" in learned.read_text(encoding="utf-8")
    assert stat.S_IMODE(learned.stat().st_mode) == 0o600


def test_ctrl_c_while_a_user_file_is_written_leaves_it_and_no_temporary_file(
    tmp_path: Path,
) -> None:
    path = tmp_path / "learned.jsonl"
    path.write_text("as the user left it\n", encoding="utf-8")
    with pytest.raises(KeyboardInterrupt):  # at the sync, the slowest step of a write
        write_text(path, "half of a new file\n", sync=_interrupt)
    assert path.read_text(encoding="utf-8") == "as the user left it\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["learned.jsonl"]


def test_ctrl_c_during_tiny_init_leaves_nothing_and_a_rerun_writes_every_file(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "proj"
    synced: list[int] = []

    def second_file_stopped(fd: int) -> None:  # one file written, the next one's bytes out
        synced.append(fd)
        if len(synced) == 2:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        init_project(folder, sync=second_file_stopped)
    assert not folder.exists()  # the folders it made are gone too
    report = init_project(folder)
    assert {status for _, status in report.files} == {"written"}
    assert "id: word-counter" in (folder / STARTER_CARD).read_text(encoding="utf-8")


# --- reading: a BOM, CRLF line ends ------------------------------------------------------


def test_a_bom_is_read_past_in_jsonl_and_toml_files(
    tiny: Callable[..., Any], tmp_path: Path
) -> None:
    cards = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    taught = tmp_path / "bom.jsonl"
    row = {"task": "how many vacation days do I have", "card": "docs-finder"}
    taught.write_bytes(BOM + json.dumps(row).encode() + b"\n")
    result = tiny("learn", str(taught), env=env)
    assert result.exit_code == 0, result.output
    (cards / "learned.jsonl").write_bytes(BOM + (cards / "learned.jsonl").read_bytes())
    routed = tiny("route", "how do I request vacation", "--json", env=env)
    assert routed.exit_code == 0, routed.output
    seed = (REPO / "examples" / "routing" / "seed-tasks.jsonl").read_bytes()
    (tmp_path / "seed.jsonl").write_bytes(BOM + seed)
    scored = tiny("route", "--eval", str(tmp_path / "seed.jsonl"), env=env)
    assert scored.exit_code == 0, scored.output
    project = tmp_path / "proj"
    project.mkdir()
    (project / PROJECT_FILE).write_bytes(BOM + b'cards = "my-cards"\n')
    settings = load_settings(env={"TINY_HOME": str(tmp_path / "home")}, cwd=project)
    assert settings.cards_dir == project / "my-cards"


def test_bytes_that_are_not_utf8_are_named_by_their_place_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "x.jsonl"
    path.write_bytes(BOM + b"ab\xff")
    with pytest.raises(ConfigError, match=r"x\.jsonl:1: not UTF-8 \(byte 5\)"):
        read_text(path)


@pytest.mark.parametrize(("start", "end"), [(b"", b"\r\n"), (BOM, b"\n"), (BOM, b"\r\n")])
def test_an_mcp_yaml_with_crlf_or_a_bom_takes_new_servers_in_its_own_style(
    tmp_path: Path, start: bytes, end: bytes
) -> None:
    mcp = tmp_path / "mcp.yaml"
    lines = ["# mine", "servers:", "  time:  # the clock", "    command: uvx"]
    mcp.write_bytes(start + end.join(line.encode() for line in lines) + end)
    before = mcp.read_bytes()
    assert merge_mcp_yaml(mcp, {"box": BOX}) == ["box"]
    after = mcp.read_bytes()
    assert after.startswith(before)  # what was there stays, byte for byte
    added = after[len(before) :]
    assert added.startswith(b"  box:" + end) and added.count(end) == added.count(b"\n")
    config = load_mcp_config(mcp)
    assert config is not None and set(config.servers) == {"time", "box"}


# --- cards `tiny cards import` wrote ------------------------------------------------------


@pytest.fixture
def imported(tmp_path: Path, tiny: Callable[..., Any]) -> Iterator[Callable[[], dict[str, Any]]]:
    """A cards folder whose mcp.yaml names a catalogue server of two tools; the function
    imports it and returns the report's cards by id."""
    tools = tmp_path / "tools.json"
    tools.write_text(json.dumps([{"name": n, "description": d, "kind": k} for n, d, k in TOOLS]))
    cards = tmp_path / "cards"
    cards.mkdir()
    server = {"command": sys.executable, "args": [str(CATALOGUE)],
              "env": {"CATALOGUE_FILE": str(tools)}}  # fmt: skip
    (cards / "mcp.yaml").write_text(yaml.safe_dump({"servers": {"office": server}}))

    def run() -> dict[str, Any]:
        result = tiny("cards", "import", "--json", env={"TINY_CARDS": str(cards)})
        assert result.exit_code == 0, result.output
        return {c["card_id"]: c for c in json.loads(result.stdout)["cards"]}

    yield run
    stop_servers()


@pytest.mark.slow
def test_imported_cards_checked_out_with_crlf_are_not_taken_for_edited(
    imported: Callable[[], dict[str, Any]], tmp_path: Path
) -> None:
    made = imported()
    files = [Path(c["file"]) for c in made.values()]
    assert files
    for file in files:
        file.write_bytes(BOM + file.read_bytes().replace(b"\n", b"\r\n"))  # git autocrlf
        generated = read_generated(file)
        assert generated is not None and not generated.edited, file
    again = imported()
    assert {c["action"] for c in again.values()} <= {"unchanged", "updated"}


def test_an_edited_writer_card_that_import_keeps_is_reported_writing(
    imported: Callable[[], dict[str, Any]],
) -> None:
    made = imported()
    writer = next(c for c in made.values() if c["writes"])
    file = Path(writer["file"])
    file.write_text(file.read_text(encoding="utf-8") + "examples: [book a room]\n", "utf-8")
    kept = imported()[writer["card_id"]]
    assert (kept["action"], kept["writes"]) == ("kept", True)
