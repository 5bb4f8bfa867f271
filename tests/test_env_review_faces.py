"""The faces in odd environments, through the real `tiny` in its own process (its descriptors,
encodings and pipes are what is tested): a path the OS refuses and an output device that fails
are one line and exit 2; a reader that goes away leaves the command's exit code; JSON on a
stdout that is not UTF-8 is escaped, as is text on a console that cannot hold it; under an
ASCII locale a UTF-8 path is taken as it is.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from tiny_cli.testing import ScriptedServer, tool_call

from .conftest import REPO
from .test_approval import _read_until

TINY = [sys.executable, "-m", "tiny_cli"]
SECONDS = 60  # a generous cap on one command: a hung one fails the test
FULL = Path("/dev/full")  # Linux: every write fails with ENOSPC
NO_SPACE = os.strerror(errno.ENOSPC)
# root ignores a folder's permissions: setpriv drops the capabilities that let it
AS_USER = [
    *("setpriv", "--inh-caps=-dac_override,-dac_read_search"),
    "--bounding-set=-dac_override,-dac_read_search",
]


def _env(cli_env: dict[str, str], **extra: str) -> dict[str, str]:
    """The environment of a child `tiny`: no project file, stdout's own encoding unless `extra`
    names one."""
    env = {**os.environ, **cli_env, "TINY_PROJECT": "none"}
    env.pop("PYTHONIOENCODING", None)
    return {**env, **extra}


def _tiny(
    env: dict[str, str], *args: str | bytes, stdout: int = subprocess.PIPE, input: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run the real `tiny ARGS` in its own process, `input` its stdin."""
    return subprocess.run(
        [*TINY, *args],
        input=input,
        stdout=stdout,
        stderr=subprocess.PIPE,
        env=env,
        encoding="utf-8",
        timeout=SECONDS,
    )


def _reader_gone(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run `tiny ARGS` with stdout a pipe whose reader has gone away before it writes."""
    read, write = os.pipe()
    os.close(read)
    try:
        return _tiny(env, *args, stdout=write)
    finally:
        os.close(write)


def _one_error(done: subprocess.CompletedProcess[str]) -> str:
    """The error line of a command that must fail with exit 2 and say one line, no traceback."""
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tiny: error: "), done.stderr
    return lines[0].removeprefix("tiny: error: ")


# --- 1. a path the OS refuses: one line naming it and the OS's reason, exit 2 -----------------


def test_a_name_too_long_is_one_line_naming_it(cli_env, tmp_path) -> None:
    env, long = _env(cli_env), str(tmp_path / ("q" * 300))
    too_long = os.strerror(errno.ENAMETOOLONG)
    for args, path in (
        (("route", "x", "--cards", long), long),
        (("validate", long), long),
        (("route", "x", "--tools", f"{long}.py"), f"{long}.py"),
    ):
        assert _one_error(_tiny(env, *args)) == f"{path}: {too_long}", args


def test_an_unreadable_folder_is_one_line_naming_it(cli_env, tmp_path) -> None:
    as_user = AS_USER if os.geteuid() == 0 else []
    if as_user and shutil.which("setpriv") is None:
        pytest.skip("root reads any folder, and setpriv is not here to drop that")
    inner = tmp_path / "inner"
    (inner / "cards").mkdir(parents=True)
    inner.chmod(0)
    try:
        command = [*as_user, *TINY, "route", "x", "--cards", str(inner / "cards")]
        done = subprocess.run(
            command, capture_output=True, text=True, env=_env(cli_env), timeout=SECONDS
        )
    finally:
        inner.chmod(0o700)
    assert _one_error(done) == f"{inner / 'cards'}: {os.strerror(errno.EACCES)}"


# --- 2. an output device that fails: one line, exit 2 -----------------------------------------


@pytest.mark.skipif(not FULL.exists(), reason="no /dev/full here")
def test_output_to_a_full_device_is_one_line(cli_env) -> None:
    env = _env(cli_env)
    with FULL.open("w") as full:
        shown = _one_error(_tiny(env, "--version", stdout=full.fileno()))
        assert shown.endswith(NO_SPACE), shown
        said = _one_error(_tiny(env, "route", "x", "--json", stdout=full.fileno()))
    assert said.endswith(NO_SPACE), said


def test_json_on_a_stdout_that_is_not_utf8_is_escaped(cli_env) -> None:
    task = "urlaub für 🥪"
    routed = _tiny(_env(cli_env, PYTHONIOENCODING="ascii"), "route", "-", "--json", input=task)
    assert json.loads(routed.stdout)["task"] == task, routed.stdout


def test_runs_export_on_a_stdout_that_is_not_utf8_is_escaped(cli_env) -> None:
    env = _env(cli_env, PYTHONIOENCODING="ascii")
    assert _tiny(env, "delegate", "make me a sändwich 🥪").returncode == 6  # one run logged
    exported = _tiny(env, "runs", "export")
    assert json.loads(exported.stdout)["goal"] == "make me a sändwich 🥪", exported.stdout


def test_a_console_that_cannot_hold_a_character_shows_it_escaped(cli_env) -> None:
    done = _tiny(_env(cli_env, PYTHONIOENCODING="ascii"), "route", "für urlaub 🥪")
    assert done.returncode == 0, done.stderr
    assert "route: f\\u00fcr urlaub \\U0001f96a" in done.stdout and "?" not in done.stdout


@pytest.mark.slow
def test_the_write_prompt_on_an_ascii_terminal_shows_the_arguments_escaped(cli_env) -> None:
    arguments = {"name": "Müller GmbH", "city": "Köln"}
    with ScriptedServer([tool_call("crm_add_company", arguments)]) as server:
        env = _env(cli_env, PYTHONIOENCODING="ascii", TINY_BASE_URL=server.url, TINY_MODEL="m")
        seen = _on_a_terminal(env, ["invoke", "crm-writer", "add Müller GmbH in Köln"])
    assert '"name": "M\\u00fcller GmbH", "city": "K\\u00f6ln"' in seen, seen
    assert "M?ller" not in seen and "turn 1" not in seen, seen  # no live view to outgrow


def _on_a_terminal(env: dict[str, str], args: Sequence[str]) -> str:
    """Run `tiny ARGS` on a pseudo-terminal; answer `n` to the first write prompt."""
    import pty  # POSIX only

    leader, follower = pty.openpty()
    ends = {"stdin": follower, "stdout": follower, "stderr": follower}
    process = subprocess.Popen([*TINY, *args], env=env, **ends)
    os.close(follower)
    try:
        seen = _read_until(leader, b"[y/N]: ", SECONDS)
        os.write(leader, b"n\n")
        process.wait(timeout=SECONDS)
        return (seen + _read_until(leader, None, SECONDS)).decode("utf-8", "replace")
    finally:
        process.kill()
        process.wait()
        os.close(leader)


# --- 7. under an ASCII locale a UTF-8 path is taken as Python gives it ------------------------


def test_a_utf8_path_under_an_ascii_locale_is_taken(cli_env, tmp_path) -> None:
    folder = tmp_path / "ünï"
    env = _env(cli_env, LC_ALL="C", PYTHONUTF8="0", PYTHONCOERCECLOCALE="0")
    env["TINY_HOME"] = str(folder / "home")  # a variable
    routed = _tiny(env, "route", "für urlaub", "--json")  # the task is read as its text
    assert json.loads(routed.stdout)["task"] == "für urlaub", routed.stderr
    out = folder / "runs.jsonl"
    assert _tiny(env, "runs", "export", "--out", str(out)).returncode == 0  # a flag
    assert out.exists() and (folder / "home").is_dir()
    cards = shutil.copytree(REPO / "cards", folder / "cards")  # a folder of cards
    assert _tiny(env, "validate", str(cards)).returncode == 0
    assert (
        "docs-finder"
        in _tiny(env, "route", "how do I request vacation", "--cards", str(cards)).stdout
    )
    # a byte that is not UTF-8 is still refused, naming the flag
    bad = _one_error(_tiny(env, "runs", "export", "--out", os.fsencode(tmp_path) + b"/\xff"))
    assert bad.startswith("--out: holds a byte that is not UTF-8"), bad
