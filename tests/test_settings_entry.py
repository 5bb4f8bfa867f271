"""Settings and arguments as the real `tiny` entry point reads them: a flag or a path holding a
byte that is not UTF-8 is one line naming it while a task's is read as U+FFFD; a blank
TINY_API_KEY or TINY_PROJECT is refused, as every TINY_ variable is; an MCP file that is a folder
is said to be one; a usage error's echo of the arguments is escaped."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiny_cli.testing import ScriptedServer, reply

from .conftest import one_error_line

ANSWER = '{"status": "ok", "summary": "2 words.", "count": 2}'
BAD = b"ab\xffcd"  # a value with a byte that is not UTF-8, as a shell passes it
NOT_UTF8 = "holds a byte that is not UTF-8 (the value is not shown)"
RLO = "\u202e"  # right-to-left override: reverses what a terminal shows after it


def run_tiny(
    args: list[bytes | str], env: dict[str, str], cwd: Path
) -> subprocess.CompletedProcess:
    """`python -m tiny_cli ARGS` as a shell runs it: through `main()`, argv as bytes."""
    command: list[bytes | str] = [sys.executable, "-m", "tiny_cli", *args]
    environ = {**os.environ, **env, "TINY_PROJECT": "none"}
    return subprocess.run(command, capture_output=True, env=environ, cwd=cwd, timeout=120)


def error_line(done: subprocess.CompletedProcess) -> str:
    """The one line a refused process printed on stderr, exit 2 and nothing on stdout."""
    assert done.returncode == 2 and done.stdout == b"", done.stderr.decode(errors="replace")
    (line,) = done.stderr.decode().strip().splitlines()
    return line.removeprefix("tiny: error: ")


# --- 1. a flag's byte that is not UTF-8: an error through the real entry point ---------------


@pytest.mark.parametrize("flag", [[b"--model", BAD], [b"--record", BAD], [b"--record=" + BAD]])
def test_a_flag_not_utf8_is_one_line_through_the_entry_point(
    cli_env: dict[str, str], tmp_path: Path, flag: list[bytes]
) -> None:
    """It was read as U+FFFD: sent as the model, or the name of the file written."""
    work = tmp_path / "work"  # where --record would write
    work.mkdir()
    with ScriptedServer([reply(ANSWER)]) as server:
        env = {**cli_env, "TINY_BASE_URL": server.url}
        done = run_tiny([b"invoke", b"word-counter", b"count a b", *flag], env, work)
    name = flag[0].split(b"=")[0].decode()
    assert error_line(done) == f"{name}: {NOT_UTF8}; give it again in UTF-8"
    assert server.requests == [] and list(work.iterdir()) == []


def test_a_task_not_utf8_is_read_as_replacement_while_its_flag_is_refused(
    cli_env: dict[str, str], tmp_path: Path
) -> None:
    """The same command: a task's stray byte is tolerated, the filter's is not."""
    found = run_tiny([b"runs", b"search", BAD], cli_env, tmp_path)
    assert found.returncode == 0, found.stderr.decode(errors="replace")
    assert "ab\ufffdcd" in found.stdout.decode()
    refused = run_tiny([b"runs", b"search", b"word", b"--card", BAD], cli_env, tmp_path)
    assert error_line(refused) == f"--card: {NOT_UTF8}; give it again in UTF-8"


@pytest.mark.parametrize(
    ("args", "name"),
    [([b"learn", BAD], "FILE"), ([b"init", BAD], "folder"), ([b"validate", b"x", BAD], "paths")],
    ids=["learn", "init", "validate"],
)
def test_a_path_argument_not_utf8_is_one_line_not_another_path(
    cli_env: dict[str, str], tmp_path: Path, args: list[bytes], name: str
) -> None:
    """It was read as U+FFFD: `init` started a project in a folder the user never named."""
    work = tmp_path / "work"  # where `init` would start the project
    work.mkdir()
    done = run_tiny(args, cli_env, work)
    assert error_line(done) == f"{name}: {NOT_UTF8}; give it again in UTF-8"
    assert list(work.iterdir()) == []


# --- 2. a blank TINY_API_KEY: refused, not skipped for the next variable's key -----------------


def test_a_blank_tiny_api_key_is_refused_not_sending_another_key(tiny) -> None:
    with ScriptedServer([reply(ANSWER)]) as server:
        env = {
            "TINY_BASE_URL": server.url,
            "TINY_API_KEY": " ",
            "OPENAI_API_KEY": "sk-openaiother1234567890",
        }
        line = one_error_line(tiny("invoke", "word-counter", "count a b", env=env))
    assert line == "TINY_API_KEY: blank; give a value or unset it"
    assert server.requests == []


# --- 3. TINY_PROJECT read as every TINY_ variable; an MCP file that is a folder ----------------


@pytest.mark.parametrize(
    ("value", "said"),
    [
        (" ", "TINY_PROJECT: blank; give a value or unset it"),
        ("ab\udcffcd", f"TINY_PROJECT: {NOT_UTF8}; set it again in UTF-8"),
    ],
    ids=["blank", "not-utf8"],
)
def test_tiny_project_is_read_as_every_tiny_variable(tiny, value: str, said: str) -> None:
    assert one_error_line(tiny("validate", env={"TINY_PROJECT": value})) == said


def test_an_mcp_file_that_is_a_folder_is_said_to_be_one(tiny, tmp_path: Path) -> None:
    folder = tmp_path / "sub"
    folder.mkdir()
    line = one_error_line(tiny("validate", env={"TINY_PROJECT": "none", "TINY_MCP": str(folder)}))
    assert line == f"TINY_MCP={folder}: is a folder, not a file"
    toml = tmp_path / "tiny.toml"
    toml.write_text('mcp = "sub"\n', "utf-8")
    line = one_error_line(tiny("validate", env={"TINY_PROJECT": str(toml), "TINY_CARDS": ""}))
    assert line == f"{folder} (from mcp in {toml}): is a folder, not a file"


# --- 4. a usage error's echo of the arguments: escaped -----------------------------------------


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["invoke", f"--{RLO}abc", "a", "b"], "No such option: --\\u202eabc"),
        (["route", "a", "b", f"{RLO}X"], "Got unexpected extra argument(s) (b \\u202eX)"),
    ],
    ids=["option", "extra-argument"],
)
def test_a_usage_error_escapes_the_arguments_it_quotes(tiny, args: list[str], said: str) -> None:
    line = one_error_line(tiny(*args))
    assert line.startswith(said) and RLO not in line
