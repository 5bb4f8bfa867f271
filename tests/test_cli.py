"""The command line as a shell: help texts, version, usage errors as one line."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tiny_cli import __version__
from tiny_cli.testing import ScriptedServer, reply, tool_call

COMMANDS = ["validate", "route", "learn", "invoke", "delegate", "bench"]


def test_top_level_help_lists_every_command(tiny) -> None:
    result = tiny("--help")
    assert result.exit_code == 0
    assert "Run tiny agents" in result.stdout
    for command in COMMANDS:
        assert command in result.stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_has_real_help(tiny, command: str) -> None:
    result = tiny(command, "--help")
    assert result.exit_code == 0
    body = result.stdout.split("Options")[0]
    description = [ln for ln in body.splitlines()[1:] if ln.strip()]
    assert len(" ".join(description)) > 40, result.stdout  # a sentence, not just usage
    assert "--json" in result.stdout or command == "validate"


def test_version(tiny) -> None:
    result = tiny("--version")
    assert result.exit_code == 0 and result.stdout.strip() == f"tiny {__version__}"


def test_config_errors_are_one_line_on_stderr(tiny) -> None:
    result = tiny("route", "hello", env={"TINY_THRESHOLD": "abc"})
    assert result.exit_code == 2
    assert result.stderr.strip() == "tiny: error: TINY_THRESHOLD='abc' is not a number"
    assert result.stdout == ""


def test_an_error_quoting_a_file_is_escaped_for_the_terminal(tiny, tmp_path) -> None:
    (tmp_path / "mcp.yaml").write_text('servers:\n  "red\\e[31mx":\n    command: x\n')
    result = tiny("validate", "--cards", str(tmp_path))
    assert result.exit_code == 1  # a problem validate reports, as a card's
    assert "servers.red\\u001b[31mx: a server name is 1-32 letters" in result.stdout


def _on_a_terminal(args: list[str], env: dict[str, str]) -> str:
    """Run tiny with stdout on a pseudo-terminal; return what the terminal got."""
    main, side = os.openpty()
    done = subprocess.run(
        [sys.executable, "-m", "tiny_cli", *args], stdout=side, env=env, timeout=300, check=True
    )
    os.close(side)
    got = b""
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the terminal's other side is closed and drained
            break
        if not chunk:
            break
        got += chunk
    os.close(main)
    assert done.returncode == 0
    return got.decode("utf-8")


def test_json_on_a_terminal_escapes_what_could_steer_it(tmp_path) -> None:
    env = {**os.environ, "TINY_HOME": str(tmp_path), "TINY_PROJECT": "none"}
    task = "look up \u202egnp.exe in the handbook"  # a bidi override would flip the line
    shown = _on_a_terminal(["route", task, "--json", "--embedder", "hashing"], env)
    assert "\u202e" not in shown and '"task": "look up \\u202egnp.exe' in shown
    assert json.loads(shown)["task"] == task  # still JSON, and what it holds


def test_route_without_task_is_a_usage_error_before_any_work(tiny) -> None:
    result = tiny("route", env={"TINY_CARDS": "/nonexistent"})
    assert result.exit_code == 2
    assert "give one of a TASK" in result.stderr


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["route", ""], None, "the task is empty"),
        (["route", "   "], None, "the task is empty"),
        (["route", "x" * 9_000], None, "the task is 9,000 characters; at most 8,000"),
        (["route", "-"], "\n  \n", "no tasks on stdin"),
        (["route", "hello", "--eval", "tasks.jsonl"], None, "give one of a TASK"),
        (["route", "--explain", ""], None, "the task is empty"),
        (["route", "-"], "\0" * (16 * 2**20 + 1), "stdin: more than 16,777,216 bytes"),
        (["invoke", "docs-finder", "x", "--model", " "], None, "--model: blank; give a value"),
    ],
)
@pytest.mark.slow
def test_route_refuses_bad_tasks_in_one_line(tiny, args, stdin, message) -> None:
    result = tiny(*args, input=stdin)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert result.stdout == "" and "Traceback" not in result.stderr


def test_a_broken_card_stops_route_with_the_usage_exit_code(tiny, tmp_path) -> None:
    (tmp_path / "bad.yaml").write_text("id: bad\nsummary: too short\ntool: [http_get]\n", "utf-8")
    result = tiny("route", "hello", "--cards", str(tmp_path))
    assert result.exit_code == 2  # README: 2 is "broken card on load"; only validate exits 1
    assert result.stderr.startswith("tiny: error: 3 problems in the cards")  # one line
    assert f"the first: {tmp_path / 'bad.yaml'}:" in result.stderr


def test_a_data_dir_that_cannot_be_made_still_routes(tiny, tmp_path) -> None:
    # docs/routing.md: a cache that cannot be written is still read, and routing goes on; a
    # home that cannot be made (read-only in a container; here a file where the folder should
    # be, the same OSError as root gets) keeps no vectors and routes all the same
    home = tmp_path / "not-a-dir"
    home.write_text("", "utf-8")
    result = tiny("route", "add acme gmbh as a customer", env={"TINY_HOME": str(home)})
    assert result.exit_code == 0, result.stderr
    assert "route → crm-writer" in result.stdout
    assert home.read_text("utf-8") == ""  # nothing written where the folder should be


@pytest.mark.slow  # seconds each on 2 cores: in `make test-slow`
@pytest.mark.parametrize("signum", ["SIGINT", "SIGTERM"])
def test_ctrl_c_ends_the_process_even_when_the_way_out_hangs(signum: str) -> None:
    """The net under Ctrl-C (and SIGTERM): cleanup that never returns cannot keep `tiny` alive."""
    import signal
    import subprocess
    import sys
    import time

    hangs_on_the_way_out = (
        "import sys, time\n"
        "from tiny_cli.cli import _bound_interrupts\n"
        "_bound_interrupts()\n"
        "try:\n"
        "    print('ready', flush=True); time.sleep(60)\n"
        "finally:\n"
        "    time.sleep(60)  # a close() stuck on a lock, a thread that never joins\n"
    )
    child = subprocess.Popen(
        [sys.executable, "-c", hangs_on_the_way_out],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        child.send_signal(getattr(signal, signum))
        sent = time.monotonic()
        code = child.wait(timeout=30)
        waited = time.monotonic() - sent
    finally:
        child.kill()
        _, stderr = child.communicate()
    assert code == 130
    assert waited < 20  # the grace is 2 s; generous for a busy machine, far below the 60 s hang
    assert b"tiny: interrupted" in stderr


# What only a person's output needs: rich (tables, panels) and what comes with it. httpx loads
# its own command-line client (click, pygments, rich) on `import httpx` when they are installed:
# that is httpx's cost, not a renderer tiny chose, so what httpx._main imports does not count.
HUMAN_ONLY = ("rich", "click", "pygments")
HTTPX_CLI = "httpx._main"
# typer from 0.29 converts every option with pydantic, loading it from this module
TYPER_ADAPTERS = "typer._adapters"
WEB_TASK = "what does https://example.org/ say"
WEB_FINAL = (
    '{"status": "ok", "summary": "A greeting.", "url": "https://example.org/", "title": "Hi"}'
)


def _imports(
    args: list[str], env: dict[str, str], leave_out: tuple[str, ...] = (HTTPX_CLI,)
) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `python -X importtime -m tiny_cli ARGS`; return it and what it imported itself.

    The modules in `leave_out`, and what they imported (directly or not), are left out.
    """
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tiny_cli", *args],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", **env},
        timeout=180,
    )
    lines = [
        ln.rsplit("|", 1)[1] for ln in done.stderr.splitlines() if ln.startswith("import time:")
    ]
    kept: list[tuple[int, str]] = []  # importtime prints a module's imports before it
    for line in lines:
        name, depth = line.strip(), len(line) - len(line.lstrip())
        if name in leave_out:  # leave out itself and what it imported: the deeper lines before it
            while kept and kept[-1][0] > depth:
                kept.pop()
        else:
            kept.append((depth, name))
    return done, {n for _, n in kept}


def _human_only(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if m.split(".")[0] in HUMAN_ONLY)


@pytest.mark.parametrize(
    "args",
    [  # not invoke: httpx's own CLI module loads rich.console, so a run draws with plain imports
        ["route", WEB_TASK, "--json"],
        ["runs", "--json"],
        ["runs", "stats", "--json"],
    ],
    ids=lambda args: " ".join(a for a in args if a != WEB_TASK),
)
@pytest.mark.slow
def test_json_output_never_imports_rich(
    args: list[str], cli_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    """A real process, as a script or an agent runs it: --json never pays for the renderer."""
    done, modules = _imports(args, {**cli_env, "TINY_BASE_URL": scripted_server.url})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.lstrip().startswith(("{", "[")), done.stdout
    assert _human_only(modules) == []
    scripted_server.assert_done()


def test_the_import_check_sees_rich_when_a_person_reads_the_output(cli_env) -> None:
    """The check above is honest: the same command without --json does import rich."""
    done, modules = _imports(["runs"], cli_env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert any(m.split(".")[0] == "rich" for m in _human_only(modules))  # httpx may load its top


def test_a_run_whose_calls_convert_nothing_imports_no_pydantic(
    cli_env: dict[str, str], scripted_server: ScriptedServer
) -> None:
    """The built-in tools' schemas are literal; no call needs their models, not even the first.

    typer from 0.29 imports pydantic itself to convert every option: with it, the check is
    that tiny builds no spec (docstring_parser, which reads the tools' docstrings, stays out).
    """
    html = "<html><title>Hi</title><p>Hello there</p></html>"
    env = {**cli_env, "TINY_BASE_URL": scripted_server.url}
    scripted_server.add(tool_call("html_to_text", {"html": html}), reply(WEB_FINAL))
    done, modules = _imports(["invoke", "web-reader", WEB_TASK, "--json"], env)
    # HTML the model wrote, not fetched: no evidence, so an honest partial (exit 3)
    assert done.returncode == 3, done.stderr[-2000:]
    assert json.loads(done.stdout)["reason"] == "no_evidence"
    typer_brings = {"pydantic"} if TYPER_ADAPTERS in modules else set()
    loaded = {m.split(".")[0] for m in modules} & {"pydantic", "docstring_parser"}
    assert loaded - typer_brings == set()
    scripted_server.assert_done()
    tools = scripted_server.requests[-2]["tools"]  # the run still offered both tools
    assert [t["function"]["name"] for t in tools] == ["http_get", "html_to_text"]
    assert tools[1]["function"]["parameters"]["required"] == ["html"]


@pytest.mark.slow
def test_a_route_imports_no_http_client(cli_env: dict[str, str]) -> None:
    """A route calls no model: the HTTP client (and its own CLI) stays unloaded."""
    done, modules = _imports(["route", WEB_TASK, "--json"], cli_env, leave_out=())
    assert done.returncode == 0, done.stderr[-2000:]
    assert sorted(m for m in modules if m.split(".")[0] in ("httpx", "httpcore")) == []
