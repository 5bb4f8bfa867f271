"""The `tiny` app: the root command with --version, and every command in --help's order."""

from __future__ import annotations

import importlib
import inspect
from typing import Annotated, Any

import typer

from tiny_cli._version import __version__
from tiny_cli.cli.examples import EXAMPLES
from tiny_cli.cli.process import TinyGroup

# Every command in --help's order: name -> (module, attribute). A command's module is imported,
# and its click command built, only when that command runs (or --help lists them all): typer
# would otherwise build all of them, each option's type included, for every run.
COMMANDS = {
    "init": ("tiny_cli.cli.cards", "init"),
    "validate": ("tiny_cli.cli.route", "validate"),
    "route": ("tiny_cli.cli.route", "route"),
    "learn": ("tiny_cli.cli.learn", "learn"),
    "invoke": ("tiny_cli.cli.run", "invoke"),
    "delegate": ("tiny_cli.cli.run", "delegate"),
    "serve": ("tiny_cli.cli.serve", "serve"),
    "bench": ("tiny_cli.cli.bench", "bench"),
    "cards": ("tiny_cli.cli.cards", "cards_app"),
    "runs": ("tiny_cli.cli.runs", "runs_app"),
    "artifacts": ("tiny_cli.cli.runs", "artifacts_app"),
}


class LazyGroup(TinyGroup):
    """The root group: its commands are listed by name and built on first use."""

    def list_commands(self, ctx: Any) -> list[str]:
        """Every command, in --help's order."""
        return list(COMMANDS)

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        """The command named `cmd_name`, built now; None for a name tiny has not."""
        if cmd_name not in self.commands and cmd_name in COMMANDS:
            self.commands.update(_build([cmd_name]))
        return super().get_command(ctx, cmd_name)

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        """List every command (--help) by its help text: listing builds none of them."""
        built = self.commands
        self.commands = {name: built.get(name) or _listed(name) for name in COMMANDS}
        try:
            super().format_commands(ctx, formatter)
        finally:
            self.commands = built


def _listed(name: str) -> Any:
    """A command as --help lists it: its name and help text, no options (none are parsed)."""
    module, attribute = COMMANDS[name]
    target = getattr(importlib.import_module(module), attribute)
    if isinstance(target, typer.Typer):  # a group's help is the one its Typer was given
        return typer.core.TyperGroup(name=name, help=target.info.help)
    return typer.core.TyperCommand(name, help=inspect.getdoc(target))


def _build(names: list[str]) -> dict[str, Any]:
    """Import the commands' modules and build their click commands, as `app.command` would."""
    holder = typer.Typer(add_completion=False, rich_markup_mode=None)
    holder.callback()(_holder)  # a group, so a one-command group stays a group
    for name in names:
        module, attribute = COMMANDS[name]
        target = getattr(importlib.import_module(module), attribute)
        if isinstance(target, typer.Typer):  # a command group (`tiny runs ...`)
            holder.add_typer(target, name=name)
        else:
            holder.command(epilog=EXAMPLES.get(name))(target)
    built = typer.main.get_command(holder).commands  # type: ignore[attr-defined]
    return {name: built[name] for name in names}


def _holder() -> None:
    """Hold one command while it is built."""


app = typer.Typer(
    cls=LazyGroup,
    help="Run tiny agents (YAML cards with a fresh context, few tools and a hard budget), "
    "route tasks to them offline, and measure them against one all-tools agent.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion for bash, zsh, fish
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"tiny {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Show the version."),
    ] = False,
) -> None:
    """Run tiny agents defined by YAML cards, route tasks to them, and bench them."""
