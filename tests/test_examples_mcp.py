"""examples/mcp: the shipped clock card on mcp-server-time validates offline, names real tools."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

from tiny_cli.tools.mcp_client import stop_servers

from .conftest import REPO

EXAMPLE = REPO / "examples" / "mcp" / "cards"


def test_the_example_validates_offline_without_starting_a_server(tiny) -> None:
    result = tiny("validate", "--cards", str(EXAMPLE), "--json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["ok"] and report["problems"] == []
    assert [c["id"] for c in report["cards"]] == ["clock"]


def test_validate_json_lists_mcp_tools_as_the_card_writes_them(tiny) -> None:
    report = json.loads(tiny("validate", "--cards", str(EXAMPLE), "--json").stdout)
    assert report["cards"][0]["tools"] == ["time.get_current_time", "time.convert_time"]


def test_validating_the_example_never_imports_the_mcp_sdk(cli_env) -> None:
    """Offline means offline: no server starts, and the SDK that would start one is not loaded."""
    probe = (
        "import sys; from typer.testing import CliRunner; from tiny_cli.cli import app; "
        f"r = CliRunner().invoke(app, ['validate', '--cards', {str(EXAMPLE)!r}]); "
        "print(r.exit_code, 'mcp' in sys.modules)"
    )
    env = {**os.environ, **cli_env}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True)
    assert done.stdout.split() == ["0", "False"], done.stdout + done.stderr


def test_the_example_declares_the_time_server_as_hosts_do() -> None:
    servers = yaml.safe_load((EXAMPLE / "mcp.yaml").read_text(encoding="utf-8"))["servers"]
    assert servers == {
        "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone=Europe/Berlin"]}
    }
    assert not (REPO / "cards" / "mcp.yaml").exists()  # the seed cards stay MCP-free


def test_the_example_routes_a_time_question_to_the_clock(tiny) -> None:
    result = tiny("route", "what time is it in Tokyo", "--cards", str(EXAMPLE), "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["agent_id"] == "clock"


def test_the_clock_tools_exist_on_the_real_server(tiny, tmp_path: Path) -> None:
    """--connect, with the file's documented `python -m mcp_server_time` line (no uv here)."""
    text = (EXAMPLE / "mcp.yaml").read_text(encoding="utf-8")
    line = re.search(r"^#\s+(time: \{command: python, .*\})$", text, re.MULTILINE)
    assert line is not None, "mcp.yaml lost its comment for running without uv"
    variant = tmp_path / "mcp.yaml"
    server = line.group(1).replace("command: python", f"command: {sys.executable}")
    variant.write_text(f"servers:\n  {server}\n", encoding="utf-8")
    try:
        result = tiny(
            "validate", "--cards", str(EXAMPLE), "--connect", env={"TINY_MCP": str(variant)}
        )
    finally:
        stop_servers()
    assert result.exit_code == 0, result.output


def test_validating_the_folder_by_path_reads_its_own_mcp_yaml(tiny) -> None:
    """As pre-commit calls it: files of one folder, checked against that folder's servers."""
    by_folder = tiny("validate", str(EXAMPLE))
    by_file = tiny("validate", str(EXAMPLE / "clock.yaml"))
    assert by_folder.exit_code == 0 and by_file.exit_code == 0, by_folder.output + by_file.output
