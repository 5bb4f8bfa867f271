"""A full disk, and a run log or a path tiny cannot use: one clear line, nothing older lost.

A full disk is simulated without root: the real `tiny` runs in a subprocess whose files may
not grow past RLIMIT_FSIZE (SIGXFSZ ignored, so a write past it fails with EFBIG).
"""

from __future__ import annotations

import json
import os
import pty
import resource
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from typer.testing import Result

from tests.conftest import HANDBOOK, SEED_CARDS, one_error_line
from tiny_cli.runs import RunLog
from tiny_cli.testing import ScriptedServer, Turn, reply, tool_call

# a tool call's arguments under the runner's 100,000-character limit: the transcript and the
# row's tool calls each hold them whole, so a finished row needs far more room than its Digest
PAD = "x" * 90_000
ROOM = 128 * 1024  # bytes a file may grow to: the log's tables and a row without them fit


def _turns() -> list[Turn]:
    """A docs-finder run: one call holding PAD, one plain call, then its answer."""
    return [
        tool_call("docs_search", {"query": "onboarding", "note": PAD}),
        tool_call("docs_search", {"query": "onboarding"}),
        reply('{"status": "ok", "summary": "Two weeks, with a buddy.", "source": "onboarding.md"}'),
    ]


def _full_disk(room: int) -> Callable[[], None]:
    """What a child runs before it starts: no file it writes grows past `room` bytes."""

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (room, room))

    return limit


def _tiny(home: Path, url: str, *args: str, room: int | None = None) -> subprocess.CompletedProcess:
    """Run the real `tiny` in its own process; with `room`, no file it writes grows past it."""

    env = {
        **os.environ,
        **{"TINY_HOME": str(home), "TINY_BASE_URL": url, "TINY_CARDS": str(SEED_CARDS)},
        **{"TINY_DOCS": str(HANDBOOK), "TINY_API_KEY": "", "OPENAI_API_KEY": ""},
        **{"TINY_NO_LOG": "", "TINY_TOOLS": "", "TINY_MCP": "", "TINY_MODEL": ""},
    }
    return subprocess.run(
        [sys.executable, "-m", "tiny_cli", *args],
        env=env,
        capture_output=True,
        text=True,
        preexec_fn=None if room is None else _full_disk(room),
        timeout=120,
    )


def test_record_on_a_full_disk_keeps_the_older_recording(tmp_path: Path) -> None:
    """Defect 1: one line naming the file, exit 2; the earlier recording and nothing else."""
    rec = tmp_path / "rec"
    recording = rec / "r.jsonl"
    invoke = ("invoke", "docs-finder", "onboarding first", "--record", str(recording), "--json")
    with ScriptedServer(_turns()[1:]) as server:
        assert _tiny(tmp_path / "home", server.url, *invoke).returncode == 0
    before = recording.read_bytes()
    with ScriptedServer(_turns()[:1]) as server:  # its first answer is more than the disk takes
        done = _tiny(tmp_path / "home", server.url, *invoke, "--no-log", room=64 * 1024)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"tiny: error: {recording}: cannot write the recording: "), line
    assert recording.read_bytes() == before
    assert sorted(p.name for p in rec.iterdir()) == ["r.jsonl"]  # no .partial left behind


def test_a_finished_run_the_full_log_cannot_hold_whole_is_not_interrupted(tmp_path: Path) -> None:
    """Defect 2: the run is logged as it ended (its Digest, no transcript), and it says so."""
    home = tmp_path / "home"
    with ScriptedServer(_turns()) as server:
        done = _tiny(home, server.url, "invoke", "docs-finder", "onboarding first", room=ROOM)
        listed = _tiny(home, server.url, "runs", "--json")
        shown = _tiny(home, server.url, "runs", "show", "1", "--json")
    assert done.returncode == 0, done.stderr
    assert "logged without its transcript and tool calls" in done.stderr
    (run,) = json.loads(listed.stdout)
    assert (run["id"], run["status"]) == (1, "ok")
    logged = json.loads(shown.stdout)
    assert logged["digest"]["summary"] == "Two weeks, with a buddy."
    assert (logged["transcript"], logged["calls"]) == ([], [])


# a bench or a library caller: RunLog used directly, as bench and serve do
LIBRARY_CALLER = """
import sys
from pathlib import Path
from tiny_cli.digest import Cost, Digest
from tiny_cli.events import Finished, RunStarted
from tiny_cli.runs import RunLog

with RunLog.open(Path(sys.argv[1])) as log:
    observe = log.observer("bench", "onboarding/tiny/0", "127.0.0.1")
    observe(RunStarted("docs-finder", "m", "native", "onboarding first", 4, 30.0, 400, ()))
    messages = [{"role": "user", "content": "x" * 200_000}]
    observe(Finished(Digest("docs-finder", "ok", cost=Cost(tokens_in=7)), messages))
print("closed")
"""


def test_a_library_caller_is_warned_not_raised_at_when_the_transcript_is_left_out(
    tmp_path: Path,
) -> None:
    """Review 2: a library caller ends normally; the row holds its status."""
    home = tmp_path / "home"
    RunLog.open(home).close()  # the log's tables, before the disk is full
    done = subprocess.run(
        [sys.executable, "-c", LIBRARY_CALLER, str(home)],
        capture_output=True,
        text=True,
        preexec_fn=_full_disk(ROOM),
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (0, "closed\n"), done.stderr
    # a library caller gets a TinyWarning through Python's warnings (the CLI prints it as its line)
    assert f"TinyWarning: {home / 'runs.sqlite3'}: a run is logged without its" in done.stderr
    with RunLog.open(home) as log:
        (run,) = log.runs()
        logged = log.run(run.id)
    assert (logged.status, list(logged.transcript), list(logged.calls)) == ("ok", [], [])


def test_a_log_refusing_for_another_reason_than_the_disk_keeps_no_slim_row(
    tmp_path: Path,
) -> None:
    """Review 1: only a disk that will not take the write drops the transcript; any other
    refusal (here a trigger someone added to the file) is a write that failed."""
    home = tmp_path / "home"
    RunLog.open(home).close()
    with sqlite3.connect(home / "runs.sqlite3") as db:
        for event in ("INSERT", "UPDATE"):
            db.execute(
                f"CREATE TRIGGER big_{event} BEFORE {event} ON runs WHEN length(NEW.calls) > "
                "50000 BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
            )
    db.close()
    with ScriptedServer(_turns()) as server:
        done = _tiny(home, server.url, "invoke", "docs-finder", "onboarding first")
        listed = _tiny(home, server.url, "runs", "--json")
    assert done.returncode == 0, done.stderr  # invoke reports a failed log write as a warning
    assert "could not record a run: refused by a trigger" in done.stderr
    assert "without its transcript" not in done.stderr
    assert "ok" not in {run["status"] for run in json.loads(listed.stdout)}


def _unopenable(home: Path) -> None:
    """A run log no SQLite opens: a file of text where the database should be."""
    home.mkdir(exist_ok=True)
    (home / "runs.sqlite3").write_text("not a database\n" * 100)


def test_reading_an_unopenable_log_suggests_no_flag_it_lacks(
    tiny: Callable[..., Result], home: Path
) -> None:
    """Defect 3: `tiny runs`, `runs show`, `runs export` have no --no-log to suggest."""
    _unopenable(home)
    for args in (("runs",), ("runs", "show", "1"), ("runs", "export")):
        line = one_error_line(tiny(*args))
        assert line.startswith(f"{home / 'runs.sqlite3'}: cannot open the run log: "), line
        assert "no-log" not in line and "TINY_NO_LOG" not in line


def test_a_run_still_suggests_running_without_the_log(
    tiny: Callable[..., Result], home: Path
) -> None:
    """A command that writes runs keeps the hint: --no-log does help it."""
    _unopenable(home)
    result = tiny("invoke", "docs-finder", "onboarding first")
    assert "--no-log or TINY_NO_LOG=1" in one_error_line(result)


def test_runs_path_prints_the_exact_path_through_a_pipe(
    tiny: Callable[..., Result], tmp_path: Path
) -> None:
    """Defect 4: `sqlite3 "$(tiny runs path)"` opens the log, even with an ESC in TINY_HOME."""
    home = tmp_path / "ctl\x1b[31mred"
    result = tiny("runs", "path", env={"TINY_HOME": str(home)})
    assert result.exit_code == 0
    assert result.stdout_bytes == os.fsencode(home / "runs.sqlite3") + b"\n"


def test_runs_path_is_escaped_on_a_terminal(tmp_path: Path) -> None:
    """On a terminal the ESC is shown, not obeyed."""
    home = tmp_path / "ctl\x1b[31mred"
    leader, follower = pty.openpty()
    env = {**os.environ, "TINY_HOME": str(home)}
    with subprocess.Popen(
        [sys.executable, "-m", "tiny_cli", "runs", "path"], env=env, stdout=follower
    ) as process:
        os.close(follower)
        shown = _read_all(leader)
        assert process.wait(timeout=60) == 0
    assert b"\x1b" not in shown
    assert shown.strip() == f"{tmp_path}/ctl\\u001b[31mred/runs.sqlite3".encode()


def _read_all(fd: int) -> bytes:
    """Everything the terminal's other end wrote, until it closed."""
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the writer closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)
