"""The rules every user file is read and written by (tiny_cli/userfiles.py), on real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tiny_cli import userfiles
from tiny_cli.errors import ConfigError


def test_a_device_is_read_only_up_to_the_bound() -> None:
    with pytest.raises(ConfigError, match=r"^/dev/zero: larger than 1,000 bytes; not read$"):
        userfiles.read_bytes(Path("/dev/zero"), limit=1000)


def test_a_pipe_is_read_only_up_to_the_bound(tmp_path: Path) -> None:
    writer = subprocess.Popen(["yes", "x"], stdout=subprocess.PIPE)
    try:
        assert writer.stdout is not None
        pipe = Path(f"/proc/self/fd/{writer.stdout.fileno()}")
        with pytest.raises(ConfigError, match="larger than 4,096 bytes"):
            userfiles.read_bytes(pipe, limit=4096)
    finally:
        writer.kill()
        writer.wait()


def test_a_fifo_with_no_writer_reads_as_empty_instead_of_hanging(tmp_path: Path) -> None:
    fifo = tmp_path / "tasks.jsonl"
    os.mkfifo(fifo)
    assert userfiles.read_bytes(fifo) == b""


def test_a_folder_and_a_missing_file_are_one_line_each(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"x\.jsonl: is a folder, not a file$"):
        (tmp_path / "x.jsonl").mkdir()
        userfiles.read_text(tmp_path / "x.jsonl")
    with pytest.raises(ConfigError, match=r"nope\.toml: no such file$"):
        userfiles.read_text(tmp_path / "nope.toml")


def test_bytes_that_are_not_utf8_name_the_file_the_line_and_the_byte(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'{"a": 1}\n\xff\n')
    with pytest.raises(ConfigError, match=r"bad\.jsonl:2: not UTF-8 \(byte 9\)$"):
        userfiles.read_text(bad)


def test_nesting_too_deep_for_the_parser_is_a_config_error(tmp_path: Path) -> None:
    text = "cards = " + "[" * 50_000 + "]" * 50_000
    with pytest.raises(ConfigError, match=r"tiny\.toml: nested too deeply to read$"):
        userfiles.parse_guarded(tomllib.loads, text, tmp_path / "tiny.toml")


def test_jsonl_escapes_the_separators_splitlines_would_split_on() -> None:
    record = {"task": "a\u2028b\u2029c\u0085d"}
    line = userfiles.jsonl_line(record)
    assert line.count("\n") == 1 and line.endswith("\n")
    assert len(line.splitlines()) == 1
    assert json.loads(userfiles.jsonl_lines(line)[0]) == record


def test_jsonl_lines_keep_a_raw_separator_inside_a_value() -> None:
    raw = '{"task": "a\u2028b"}\n{"task": "c"}\n'
    assert [json.loads(x) for x in userfiles.jsonl_lines(raw) if x] == [
        {"task": "a\u2028b"},
        {"task": "c"},
    ]


@pytest.mark.parametrize("kind", ["fifo", "symlink"])
def test_a_write_never_replaces_a_special_file(tmp_path: Path, kind: str) -> None:
    target = tmp_path / "out.jsonl"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to("/dev/null")
    with pytest.raises(ConfigError, match=r"out\.jsonl: (is a link|exists and is not a regular)"):
        userfiles.write_text(target, "x\n")
    assert target.is_symlink() if kind == "symlink" else not target.is_file()


def test_a_write_is_whole_and_leaves_no_temporary_file(tmp_path: Path) -> None:
    target = tmp_path / "learned.jsonl"
    target.write_text("old\n")
    userfiles.write_text(target, "new\n")
    assert target.read_text() == "new\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["learned.jsonl"]


def test_a_failed_write_keeps_the_old_file(tmp_path: Path) -> None:
    target = tmp_path / "learned.jsonl"
    target.write_text("kept\n")
    (tmp_path / f".learned.jsonl.{os.getpid()}.tmp").mkdir()  # the temporary file cannot be made
    with pytest.raises(ConfigError, match=r"learned\.jsonl: cannot be written"):
        userfiles.write_text(target, "lost?\n")
    assert target.read_text() == "kept\n"


_APPEND = """
import sys
from pathlib import Path
from tiny_cli import userfiles
target = Path(sys.argv[1])
for i in range(40):
    with userfiles.locked(target):
        old = target.read_text() if target.exists() else ""
        userfiles.write_text(target, old + f"{sys.argv[2]}-{i}\\n")
"""


def test_the_lock_beside_the_file_keeps_every_writer(tmp_path: Path) -> None:
    target = tmp_path / "learned.jsonl"
    writers = [
        subprocess.Popen([sys.executable, "-c", _APPEND, str(target), name]) for name in "ab"
    ]
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    lines = target.read_text().splitlines()
    assert sorted(lines) == sorted(f"{n}-{i}" for n in "ab" for i in range(40))


@given(st.binary(max_size=512))
def test_any_bytes_read_as_text_or_one_config_error(data: bytes) -> None:
    import tempfile

    with tempfile.NamedTemporaryFile() as handle:
        handle.write(data)
        handle.flush()
        try:
            text = userfiles.read_text(Path(handle.name), limit=256)
        except ConfigError as err:
            assert "\n" not in str(err)
        else:
            assert text.encode("utf-8") == data and len(data) <= 256
