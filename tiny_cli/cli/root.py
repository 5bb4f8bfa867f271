"""The `tiny` app: the root command with --version, and every command in --help's order."""

from __future__ import annotations

from typing import Annotated

import typer

from tiny_cli._version import __version__
from tiny_cli.cli.bench import bench
from tiny_cli.cli.examples import EXAMPLES
from tiny_cli.cli.learn import learn
from tiny_cli.cli.process import TinyGroup
from tiny_cli.cli.project import cards_app, init
from tiny_cli.cli.route import route, validate
from tiny_cli.cli.run import delegate, invoke
from tiny_cli.cli.runs import artifacts_app, runs_app
from tiny_cli.cli.serve import serve

app = typer.Typer(
    cls=TinyGroup,
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


for command in (init, validate, route, learn, invoke, delegate, serve, bench):
    app.command(epilog=EXAMPLES.get(command.__name__))(command)
app.add_typer(cards_app, name="cards")
app.add_typer(runs_app, name="runs")
app.add_typer(artifacts_app, name="artifacts")
