"""Every warning tiny gives is a TinyWarning through the `warnings` module: a library caller
records, filters or silences it; the command line prints each as `tiny: warning: …`.

The three the library gives: a run logged without its transcript (a full disk, simulated with
RLIMIT_FSIZE in a child process), tracing asked for without OpenTelemetry (a child whose
`opentelemetry` cannot be imported) and the MCP SDK's own logging (a real raw server that
prints lines that are not JSON-RPC).
"""

from __future__ import annotations

import json
import os
import resource
import signal
import sqlite3
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from typer.testing import Result

from tests.conftest import HANDBOOK, SEED_CARDS
from tests.mcp_servers.raw import entry
from tiny_cli import TinyWarning
from tiny_cli.events import RunStarted
from tiny_cli.runs import RunLog
from tiny_cli.session import open_session
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, reply, tool_call
from tiny_cli.workspace import open_workspace

ROOM = 128 * 1024  # bytes a file may grow to: the log's tables and a row without them fit
SDK_LINE = "MCP SDK: Failed to parse JSONRPC message from server"


def _full_disk() -> None:
    """What a child runs before it starts: no file it writes grows past ROOM bytes."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (ROOM, ROOM))


def _child(script: str, *args: str, **popen: Any) -> subprocess.CompletedProcess[str]:
    """Run `script` in a fresh interpreter; its stdout, stderr and exit code."""
    command = [sys.executable, "-c", script, *args]
    return subprocess.run(command, capture_output=True, text=True, timeout=120, **popen)


# --- the library: a TinyWarning, which pytest.warns records --------------------------------

# a run whose transcript the full disk cannot take: logged slim, and warned of
RUN_LOG = """
import sys
from pathlib import Path
import pytest
from tiny_cli import TinyWarning
from tiny_cli.digest import Cost, Digest
from tiny_cli.events import Finished, RunStarted
from tiny_cli.runs import RunLog

with pytest.warns(TinyWarning, match="a run is logged without its transcript") as caught:
    with RunLog.open(Path(sys.argv[1])) as log:
        observe = log.observer("bench", "onboarding/tiny/0", "127.0.0.1")
        observe(RunStarted("docs-finder", "m", "native", "onboarding first", 4, 30.0, 400, ()))
        messages = [{"role": "user", "content": "x" * 200_000}]
        observe(Finished(Digest("docs-finder", "ok", cost=Cost(tokens_in=7)), messages))
print(len(caught))
"""


def test_a_run_logged_without_its_transcript_is_a_tiny_warning(tmp_path: Path) -> None:
    home = tmp_path / "home"
    RunLog.open(home).close()  # the log's tables, before the disk is full
    done = _child(RUN_LOG, str(home), preexec_fn=_full_disk)
    assert (done.returncode, done.stdout, done.stderr) == (0, "1\n", "")  # recorded, not printed


SESSION = """
import sys
import pytest
from tiny_cli import TinyWarning, load_settings
from tiny_cli.session import open_session

settings = load_settings({"TINY_HOME": sys.argv[1], "OTEL_TRACES_EXPORTER": "console"})
with pytest.warns(TinyWarning, match="tracing is on but OpenTelemetry is not installed"):
    with open_session(settings, "invoke", log=False) as session:
        assert session.tracing is None  # the runs go on, untraced
print("warned")
"""


def test_tracing_without_opentelemetry_is_a_tiny_warning(tmp_path: Path) -> None:
    shadow = tmp_path / "no-otel" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed (a test)')\n")
    path = os.pathsep.join([str(shadow.parent), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    done = _child(SESSION, str(tmp_path / "home"), env=env, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, "warned\n", "")


def _noisy_cards(where: Path, noise: int) -> Path:
    """A cards folder: the raw MCP server `n`, which prints `noise` lines that are not
    JSON-RPC before it answers, and the card `noisy` with its tool `n.t`."""
    where.mkdir(parents=True)
    server = entry("--name", "n", "--tool", "t", "--noise", str(noise))
    (where / "mcp.yaml").write_text(yaml.safe_dump({"servers": {"n": server}}), "utf-8")
    card = {"id": "noisy", "summary": "Calls n.t.", "tools": ["n.t"], "returns_required": []}
    (where / "noisy.yaml").write_text(yaml.safe_dump(card), "utf-8")
    return where


@pytest.mark.usefixtures("stop_mcp_servers")
def test_the_mcp_sdks_own_warnings_are_tiny_warnings(tmp_path: Path) -> None:
    from tiny_cli.tools.mcp_client import stop_servers  # the MCP SDK: only where servers run

    stop_servers()  # the SDK's warnings shown so far, counted per process, start over
    cards = _noisy_cards(tmp_path / "cards", noise=2)
    env = {"TINY_CARDS": str(cards), "TINY_HOME": str(tmp_path / "home")}
    ws = open_workspace(load_settings(env, cwd=tmp_path))
    with pytest.warns(TinyWarning) as caught:
        ws.registry.bind(ws.cards["noisy"].tools, 60.0)
    said = [str(warning.message) for warning in caught]
    assert len(said) == 2 and all(line.startswith(SDK_LINE) for line in said), said


# --- the command line: one `tiny: warning:` line each ---------------------------------------


def test_the_command_line_prints_a_tiny_warning_as_its_line_and_leaves_the_others(
    tiny: Callable[..., Result], capsys: pytest.CaptureFixture[str]
) -> None:
    others: list[tuple[type[Warning], str]] = []
    with warnings.catch_warnings():
        warnings.showwarning = lambda message, category, *_: others.append((category, str(message)))
        assert tiny("cards", "list").exit_code == 0  # any command shows them from then on
        for _ in range(2):  # each time, not once per place as Python's default would
            warnings.warn("a \x1b[2J b", TinyWarning, stacklevel=1)
        warnings.warn("not tiny's", UserWarning, stacklevel=1)
    assert capsys.readouterr().err == "tiny: warning: a \\u001b[2J b\n" * 2  # escaped
    assert others == [(UserWarning, "not tiny's")]  # as Python (here: pytest) would show it


@pytest.mark.usefixtures("stop_mcp_servers")
def test_each_mcp_sdk_warning_of_a_command_is_a_line(
    tiny: Callable[..., Result], scripted_server: ScriptedServer, tmp_path: Path
) -> None:
    cards = _noisy_cards(tmp_path / "cards", noise=3)
    scripted_server.add(tool_call("n__t", {}), reply('{"status": "ok", "summary": "Done."}'))
    env = {"TINY_CARDS": str(cards), "TINY_BASE_URL": scripted_server.url}
    result = tiny("invoke", "noisy", "do the thing", "--json", env=env)
    assert result.exit_code == 0, result.output
    lines = result.stderr.splitlines()  # the same words three times: three lines still
    assert len(lines) == 3 and all(line.startswith(f"tiny: warning: {SDK_LINE}") for line in lines)


PAD = "x" * 90_000  # a call's arguments: the transcript and the row's calls each hold them


def test_tiny_as_a_process_prints_the_run_logs_warning_as_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    answer = '{"status": "ok", "summary": "Two weeks, with a buddy.", "source": "onboarding.md"}'
    turns = [tool_call("docs_search", {"query": "onboarding", "note": PAD}), reply(answer)]
    with ScriptedServer(turns) as model:
        env = {
            **os.environ,
            **{"TINY_HOME": str(home), "TINY_BASE_URL": model.url, "TINY_CARDS": str(SEED_CARDS)},
            **{"TINY_DOCS": str(HANDBOOK), "TINY_API_KEY": "", "OPENAI_API_KEY": ""},
            **{"TINY_NO_LOG": "", "TINY_TOOLS": "", "TINY_MCP": "", "TINY_MODEL": ""},
        }
        command = [
            sys.executable,
            "-m",
            "tiny_cli",
            "invoke",
            "docs-finder",
            "onboarding",
            "--json",
        ]
        done = subprocess.run(
            command, env=env, capture_output=True, text=True, timeout=120, preexec_fn=_full_disk
        )
    assert done.returncode == 0 and json.loads(done.stdout)["status"] == "ok", done.stderr
    logged = f"tiny: warning: {home / 'runs.sqlite3'}: a run is logged without its transcript"
    (line,) = done.stderr.splitlines()
    assert line.startswith(logged + " and tool calls: "), line


def test_a_run_log_write_that_fails_is_a_tiny_warning_to_a_library_caller(tmp_path: Path) -> None:
    """The run stands and its caller is warned, through TinyWarning as every warning is."""
    home = tmp_path / "home"
    RunLog.open(home).close()
    with sqlite3.connect(home / "runs.sqlite3") as db:
        db.execute(
            "CREATE TRIGGER no_runs BEFORE INSERT ON runs "
            "BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END"
        )
    db.close()
    settings = load_settings({"TINY_HOME": str(home)})
    refused = pytest.warns(TinyWarning, match="could not record a run: refused by a trigger")
    with refused, open_session(settings, "invoke") as session:
        session.observe("invoke/0", "onboarding first")(
            RunStarted("docs-finder", "m", "native", "onboarding first", 4, 30.0, 400, ())
        )
