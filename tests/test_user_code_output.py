"""A user's tool module is run once per process, and what it prints never reaches a --json
document's stdout; an interrupted `invoke --record` says what its partial file is good for.

The real `tiny` (in-process, and one child process for Ctrl-C) against the scripted model server.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import yaml

from tiny_cli.testing import ScriptedServer, reply, tool_call

MODULE = '''
from pathlib import Path
from tiny_cli.tools import tool

print("hello from import")
with open(Path(__file__).with_suffix(".imports"), "a") as counted:
    counted.write("x")


@tool
def count_words(text: str) -> int:
    """Count the words in a text.

    Args:
        text: The text.
    """
    print("tool stdout")
    return len(text.split())
'''
CARD = {
    "id": "noisy",
    "summary": "Counts the words in a text the user gives and reports the count of words.",
    "examples": ["count the words in this text"],
    "tools": ["count_words"],
    "returns_required": ["words"],
    "side_effects": "none",
    "budget": {"max_tool_calls": 3, "max_output_tokens": 200, "max_wall_seconds": 30},
}
ANSWER = {"status": "ok", "summary": "3 words", "words": 3}
TASK = "count the words in this text: a b c"


def _project(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A folder with the one card and a tools module that prints and counts its imports."""
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "noisy.yaml").write_text(yaml.safe_dump(CARD), encoding="utf-8")
    module = tmp_path / "noisy_tools.py"
    module.write_text(MODULE, encoding="utf-8")
    return module, {"TINY_CARDS": str(cards), "TINY_TOOLS": str(module)}


def test_json_stdout_is_one_document_when_user_code_prints(tiny, scripted_server, tmp_path):
    module, env = _project(tmp_path)
    scripted_server.add(tool_call("count_words", {"text": "a b c"}), reply(json.dumps(ANSWER)))
    result = tiny("delegate", TASK, "--json", env={**env, "TINY_BASE_URL": scripted_server.url})
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["fields"]["words"] == 3  # the document and nothing else
    assert "hello from import" in result.stderr and "tool stdout" in result.stderr
    # run once: for the workspace's registry, not again for the router's tool texts
    assert module.with_suffix(".imports").read_text() == "x"


def test_a_json_route_holds_only_its_document_when_the_tools_module_prints(tiny, tmp_path):
    _, env = _project(tmp_path)
    result = tiny("route", TASK, "--json", env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["agent_id"] == "noisy"
    assert "hello from import" in result.stderr


def test_without_json_what_user_code_prints_stays_on_stdout(tiny, tmp_path):
    _, env = _project(tmp_path)
    result = tiny("route", TASK, env=env)
    assert result.exit_code == 0 and "hello from import" in result.stdout


def test_a_changed_tools_module_is_run_again(tiny, tmp_path):
    module, env = _project(tmp_path)
    assert tiny("validate", env=env).exit_code == 0
    module.write_text(MODULE + "\n# edited\n", encoding="utf-8")
    assert tiny("validate", env=env).exit_code == 0
    assert module.with_suffix(".imports").read_text() == "xx"


def test_an_interrupted_invoke_recording_says_it_does_not_replay(cli_env, tmp_path):
    _, env = _project(tmp_path)
    record = tmp_path / "rec.jsonl"
    with ScriptedServer(
        [tool_call("count_words", {"text": "a b c"}), reply(json.dumps(ANSWER), delay=30.0)]
    ) as server:
        child = subprocess.Popen(
            [sys.executable, "-m", "tiny_cli", "invoke", "noisy", TASK, "--record", str(record)],
            env={**os.environ, **cli_env, **env, "TINY_BASE_URL": server.url},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            deadline = time.monotonic() + 60
            while len(server.requests) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)  # the slow second answer is under way
            child.send_signal(signal.SIGINT)
            code = child.wait(timeout=10)
        finally:
            child.kill()
            _, stderr = child.communicate()
    said = " ".join(stderr.decode().split())
    kept = tmp_path / "rec.interrupted.jsonl"
    assert code == 130 and kept.is_file(), said
    assert f"in {kept}: the run did not finish, so it does not replay" in said
    assert "--resume" not in said.replace("(invoke cannot resume it)", "")
