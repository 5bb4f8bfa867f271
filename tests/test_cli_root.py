"""The root command: commands listed by name and built on first use, --help as before."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from tiny_cli.cli import COMMANDS, _build, _listed, app


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_lists_each_command_as_the_built_one_would(name: str) -> None:
    built = _build([name])[name]
    listed = _listed(name)
    assert listed.hidden == built.hidden
    for limit in (20, 45, 80, 200):
        assert listed.get_short_help_str(limit) == built.get_short_help_str(limit)


def _help_of(target: Any) -> str:
    """The first paragraph of a command's help: its docstring's, or the one its Typer was given."""
    text = target.info.help if isinstance(target, typer.Typer) else inspect.getdoc(target)
    return " ".join(str(text).split("\n\n")[0].split())


@pytest.mark.parametrize("name", list(COMMANDS))
def test_the_listed_help_is_the_commands_own(name: str) -> None:
    """The table's help cannot drift from the docstring (or group help) the command shows."""
    module, attribute, listed = COMMANDS[name]
    assert listed == _help_of(getattr(importlib.import_module(module), attribute))


def test_help_imports_no_command_module() -> None:
    """`tiny --help` lists every command from the table, importing none of their modules."""
    probe = (
        "import sys; from tiny_cli.cli import main; sys.argv = ['tiny', '--help']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in sys.modules if m.startswith('tiny_cli.')), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert "Commands:" in done.stdout
    # nor what the commands share (options, session), nor the settings (and the project file
    # they read): --help stays `import typer` and a table
    commands = {module for module, _, _ in COMMANDS.values()}
    commands |= {"tiny_cli.cli.common", "tiny_cli.cli.live", "tiny_cli.session"}
    commands |= {"tiny_cli.settings"}
    assert sorted(m for m in commands if f"'{m}'" in done.stderr) == []


def test_help_names_every_command_in_order() -> None:
    result = CliRunner().invoke(app, ["--help"])
    assert result.exit_code == 0
    section = result.output.split("Commands:", 1)[1].splitlines()
    names = [line.split()[0] for line in section if line.startswith("  ") and line.split()]
    assert names == list(COMMANDS)


def test_a_command_runs_after_help_was_listed() -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["--help"]).exit_code == 0
    result = runner.invoke(app, ["cards", "--help"])
    assert result.exit_code == 0
    assert "list" in result.output and "show" in result.output  # the real group, not a listing


def test_an_unknown_command_is_one_line() -> None:
    result = CliRunner().invoke(app, ["nosuch"])
    assert result.exit_code == 2
    assert "No such command 'nosuch'" in result.output


@pytest.mark.parametrize("group", [[], ["cards"]])
def test_a_bare_group_prints_its_help_and_exits_0(group: list[str]) -> None:
    """`tiny` alone asks what tiny can do: the help, as --help prints it, and no error."""
    runner = CliRunner()
    bare = runner.invoke(app, group)
    assert bare.exit_code == 0, bare.output
    assert bare.stdout == runner.invoke(app, [*group, "--help"]).stdout
    assert "error:" not in bare.output and bare.stdout.startswith("Usage: ")


def test_ctrl_c_while_the_command_line_loads_is_one_line_and_130() -> None:
    # the Ctrl-C arrives while typer loads: an import that raises it, as the signal would
    interrupt_on_load = (
        "import builtins, sys\n"
        "real = builtins.__import__\n"
        "def loading(name, *a, **k):\n"
        "    if name == 'typer':\n"
        "        raise KeyboardInterrupt\n"
        "    return real(name, *a, **k)\n"
        "builtins.__import__ = loading\n"
        "from tiny_cli.__main__ import main\n"
        "sys.argv = ['tiny', '--help']\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", interrupt_on_load], capture_output=True, text=True, timeout=60
    )
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "tiny: interrupted\n")


def test_the_script_and_python_m_run_the_same_command_line() -> None:
    for command in (["tiny"], [sys.executable, "-m", "tiny_cli"]):
        path = [str(Path(sys.executable).parent / command[0])] if command == ["tiny"] else command
        done = subprocess.run([*path, "--version"], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith("tiny "), done.stderr
