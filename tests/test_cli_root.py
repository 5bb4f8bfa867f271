"""The root command: commands listed by name and built on first use, --help as before."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from tiny_cli.cli.root import COMMANDS, _build, _listed, app


@pytest.mark.parametrize("name", list(COMMANDS))
def test_help_lists_each_command_as_the_built_one_would(name: str) -> None:
    built = _build([name])[name]
    listed = _listed(name)
    assert listed.hidden == built.hidden
    for limit in (20, 45, 80, 200):
        assert listed.get_short_help_str(limit) == built.get_short_help_str(limit)


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
