"""A project file's comma-separated `tools` list, and `--json` keeping stdout for the document
when something writes to file descriptor 1 (a subprocess, `os.system`), not to sys.stdout."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, reply, tool_call
from tiny_cli.tools.builtin import default_registry

TOOL = '''
from tiny_cli.tools import tool

@tool
def {name}(text: str) -> str:
    """Echo a text.

    Args:
        text: The text.
    """
    return text
'''


def _project(root: Path, tools: str) -> Path:
    """A project folder with two tool modules, a subfolder and `tools = "<tools>"`."""
    (root / "extra").mkdir(parents=True)
    (root / "sub").mkdir()
    (root / "my_tools.py").write_text(TOOL.format(name="first_tool"))
    (root / "extra" / "more_tools.py").write_text(TOOL.format(name="second_tool"))
    (root / "tiny.toml").write_text(f'tools = "{tools}"\n')
    return root


@pytest.mark.parametrize("chosen", [False, True], ids=["from-a-subfolder", "TINY_PROJECT"])
def test_every_py_entry_of_a_project_tools_list_is_relative_to_the_file(
    tmp_path: Path, chosen: bool
) -> None:
    root = _project(tmp_path / "proj", "my_tools.py, extra/more_tools.py")
    env = {"TINY_HOME": str(tmp_path / "home")}
    if chosen:  # as an MCP host starts `tiny serve`: from anywhere, the file named
        env["TINY_PROJECT"] = str(root / "tiny.toml")
    settings = load_settings(env, cwd=tmp_path if chosen else root / "sub")
    assert settings.tools_spec == f"{root / 'my_tools.py'},{root / 'extra' / 'more_tools.py'}"
    names = set(default_registry(settings))
    assert {"first_tool", "second_tool"} <= names


def test_a_dotted_module_name_in_a_project_tools_list_stays_as_written(tmp_path: Path) -> None:
    root = _project(tmp_path / "proj", "json.decoder,my_tools.py")
    settings = load_settings({"TINY_HOME": str(tmp_path / "home")}, cwd=root / "sub")
    assert settings.tools_spec == f"json.decoder,{root / 'my_tools.py'}"


# --- --json with output on file descriptor 1 ------------------------------------------------

SUBPROCESS_TOOL = '''
import subprocess
from tiny_cli.tools import tool

@tool
def disk_usage(path: str) -> str:
    """Report how much disk space a folder uses.

    Args:
        path: The folder.
    """
    subprocess.run(["echo", "scanning", path], check=True)
    return "12K"
'''
PRINTS_AS_IMPORTED = '''
import os
os.system("echo warming cache")
from tiny_cli.tools import tool

@tool
def disk_usage(path: str) -> str:
    """Report how much disk space a folder uses."""
    return path
'''
CARD = """id: du
summary: Reports disk usage of folders.
examples: [how big is my downloads folder]
tools: [disk_usage]
returns_required: [answer]
side_effects: none
"""


def _tiny(folder: Path, tools: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run the real `tiny` in `folder` with a card calling disk_usage from `tools`."""
    (folder / "cards").mkdir()
    (folder / "cards" / "du.yaml").write_text(CARD)
    (folder / "du_tools.py").write_text(tools)
    env = {**os.environ, "TINY_HOME": str(folder / "home"), "TINY_PROJECT": "none", **env}
    return subprocess.run(
        [sys.executable, "-m", "tiny_cli", *args, "--cards", "cards", "--tools", "du_tools.py"],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.slow
def test_json_stdout_is_one_document_when_a_tool_runs_a_program(tmp_path: Path) -> None:
    answer = reply('{"status": "ok", "summary": "s", "answer": "12K"}')
    with ScriptedServer([tool_call("disk_usage", {"path": "."}), answer]) as server:
        done = _tiny(
            tmp_path,
            SUBPROCESS_TOOL,
            *("invoke", "du", "how big is this folder", "--json"),
            TINY_BASE_URL=server.url,
            TINY_MODEL="m",
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "ok"
    assert "scanning .\n" in done.stderr


@pytest.mark.slow
def test_json_stdout_is_one_document_when_a_module_runs_a_program_as_imported(
    tmp_path: Path,
) -> None:
    done = _tiny(
        tmp_path,
        PRINTS_AS_IMPORTED,
        *("route", "how big is my downloads folder", "--json"),
        TINY_EMBEDDER="hashing",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["task"] == "how big is my downloads folder"
    assert "warming cache\n" in done.stderr
