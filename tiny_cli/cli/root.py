"""The `tiny` app: the root command with --version, and every command in --help's order."""

from __future__ import annotations

import importlib
from typing import Annotated, Any

import typer

from tiny_cli._version import __version__
from tiny_cli.cli.process import TinyGroup, run

# Every command in --help's order: name -> (module, attribute, the help --help lists). A
# command's module is imported, and its click command built, only when that command runs:
# typer would otherwise build all of them, each option's type included, for every run. The
# help is written here so --help imports no command module; a test keeps it equal to the
# command's docstring (a group's: its Typer's help).
COMMANDS = {
    "init": (
        "tiny_cli.cli.cards",
        "init",
        "Start a project: tiny.toml, a starter card and a tool module (existing files are kept).",
    ),
    "validate": (
        "tiny_cli.cli.route",
        "validate",
        "Check cards: YAML, schema, unknown keys, tool names, duplicate ids, budgets.",
    ),
    "route": (
        "tiny_cli.cli.route",
        "route",
        "Pick the card for a task by embedding similarity, or abstain; no model call.",
    ),
    "learn": (
        "tiny_cli.cli.learn",
        "learn",
        "Teach the router: tasks into the cards folder's learned.jsonl, the threshold derived "
        "again.",
    ),
    "invoke": (
        "tiny_cli.cli.run",
        "invoke",
        "Run one card on a task in a fresh context under its budget; print the Digest.",
    ),
    "delegate": (
        "tiny_cli.cli.run",
        "delegate",
        "Route a task to the right card and run it; abstain, or ask before each write call.",
    ),
    "serve": (
        "tiny_cli.cli.serve",
        "serve",
        "Serve the cards to MCP hosts: delegate, invoke and route tools; cards as resources.",
    ),
    "bench": (
        "tiny_cli.cli.bench",
        "bench",
        "Run the task file as tiny agents and as one all-tools agent; compare them side by side.",
    ),
    "cards": (
        "tiny_cli.cli.cards",
        "cards_app",
        "The cards of this project: list them, or show one as the model gets it.",
    ),
    "runs": (
        "tiny_cli.cli.runs",
        "runs_app",
        "The run log: every invoke, delegate and bench run, kept under the data directory.",
    ),
    "artifacts": (
        "tiny_cli.cli.runs",
        "artifacts_app",
        "Tool results too long for an agent's context, kept whole under a handle.",
    ),
}


# Examples under each command's --help (its epilog): what a user types first.
EXAMPLES = {
    "init": """\b
Examples:
  tiny init                  # tiny.toml, cards/word-counter.yaml, my_tools.py here
  tiny init my-project""",
    "validate": """\b
Examples:
  tiny validate
  tiny validate cards/new.yaml --json
  tiny validate --format github   # annotations in a GitHub Actions job""",
    "route": """\b
Examples:
  tiny route "how did the onboarding process work again"
  tiny route "..." --explain --top 3
  tiny route - < tasks.txt
  tiny route --eval labelled.jsonl""",
    "invoke": """\b
Examples:
  tiny invoke docs-finder "how did the onboarding process work again"
  tiny invoke web-reader "read https://example.org/" --json --record run.jsonl""",
    "delegate": """\b
Examples:
  tiny delegate "what is our policy on expenses and travel"
  tiny delegate "add the company ACME to the CRM" --yes --json""",
    "bench": """\b
Examples:
  tiny bench --repeat 3 --record run.jsonl --fail-under tiny.right=0.8
  tiny bench --replay examples/bench/recordings/qwen2.5-coder-1.5b-json.jsonl
  tiny bench --scale --tasks examples/bfcl/tasks.jsonl --cards examples/bfcl/cards \\
      --all-tools-sizes 10,100,all --record sweep.jsonl --html report.html
  tiny bench ... --resume .sweep.jsonl.1234.partial --record sweep.jsonl""",
    "runs search": """\b
Examples:
  tiny runs search "vacation personio"
  tiny runs search onboard* --card docs-finder --json""",
    "runs delete": """\b
Examples:
  tiny runs delete 12 13
  tiny runs delete --older-than 30d --yes""",
    "runs export": """\b
Examples:
  tiny runs export --since 7d --out week.jsonl
  tiny runs export --card crm-writer | jq .digest.status""",
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
    """A command as --help lists it: its name and help text from COMMANDS, no module imported."""
    return typer.core.TyperCommand(name, help=COMMANDS[name][2])


def _build(names: list[str]) -> dict[str, Any]:
    """Import the commands' modules and build their click commands, as `app.command` would."""
    holder = typer.Typer(add_completion=False, rich_markup_mode=None)
    holder.callback()(_holder)  # a group, so a one-command group stays a group
    for name in names:
        module, attribute, _ = COMMANDS[name]
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


def main() -> None:
    """Run the `tiny` command line."""
    run(app)
