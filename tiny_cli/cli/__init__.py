"""Face: the `tiny` command line — a thin shell that parses options, calls the library, renders.

Only the faces (this package and `tiny_cli.serve`) import typer and rich and turn errors into
exit codes. This module is the program: the app with every command in --help's order (one
module per command group: `route`, `run`, `serve`, `bench`, `runs`, `cards`, `learn`, built
only when it runs), and the process around them (exit codes, errors and warnings as one line
each, Ctrl-C and SIGTERM, `main`). `common` holds what the commands share; `live` (a run on the
terminal), `render`, `render_bench` and `render_runs` draw the results.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import signal
import sys
import threading
import warnings
from typing import Annotated, Any, NoReturn, TextIO

import typer

from tiny_cli._version import __version__
from tiny_cli.errors import ConfigError, TinyError, TinyWarning
from tiny_cli.text import half_pair, not_utf8, printable, printable_errors

__all__ = ["app", "main"]

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2  # bad flags, settings or files (every TinyError without its own code), and a
# path or device the OS refuses (unreadable, a name too long, a full disk)
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as shells report it
INTERRUPT_GRACE_SECONDS = 2.0  # Ctrl-C: time to close files before the process ends regardless
EXIT_BY_STATUS = {
    "ok": EXIT_OK,
    "partial": 3,
    "refused": 4,
    "failed": 5,
    "abstain": 6,
    "needs_confirmation": 7,
}


# the framework's usage error (typer vendors click, so it is found through a public subclass)
UsageError: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
# what a group raises when called bare (`tiny`, `tiny cards`): no mistake, a request for help
NoArgsIsHelp: Any = getattr(sys.modules[UsageError.__module__], "NoArgsIsHelpError", ())


def _usage_error(exc: Any) -> typer.Exit:
    """A usage error in one line with where to find help; a bare group prints its help, exit 0."""
    if isinstance(exc, NoArgsIsHelp) and exc.ctx is not None:
        typer.echo(exc.ctx.get_help())
        return typer.Exit(EXIT_OK)
    where = exc.ctx.command_path if exc.ctx is not None else "tiny"
    # the message quotes the arguments; typer escapes only C0 controls, not a bidi override
    said = printable(exc.format_message())
    typer.echo(f"tiny: error: {said} (see '{where} --help')", err=True)
    return typer.Exit(exc.exit_code)


class TinyGroup(typer.core.TyperGroup):
    """Catch every TinyError in one place: one line on stderr, its exit code, no traceback."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        """Parse the root's options; a usage error is one line."""
        try:
            return super().make_context(*args, **kwargs)
        except UsageError as exc:
            raise _usage_error(exc) from None

    def invoke(self, ctx: Any) -> Any:
        """Run the command; Ctrl-C, a usage error and a TinyError end it in one line each."""
        show_warnings()
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _interrupted()
        except UsageError as exc:
            raise _usage_error(exc) from None
        except TinyError as exc:
            _say_error(exc)
            raise typer.Exit(EXIT_USAGE) from None  # the library's errors carry no codes

    def resolve_command(self, ctx: Any, args: list[str]) -> Any:
        """Find the subcommand; its arguments' bytes that are not UTF-8 sorted (_not_utf8)."""
        name, command, rest = super().resolve_command(ctx, args)
        return name, command, _not_utf8(ctx, command, rest)


def _not_utf8(ctx: Any, command: Any, args: list[str]) -> list[str]:
    """`args` for `command`, each byte that is not UTF-8 (Python's half a UTF-16 pair) sorted:
    in a task it reads as U+FFFD, as a terminal shows it; in a flag's value or another argument
    it is an error (a model, file or host altered unsaid is wrong). Under an ASCII locale UTF-8
    bytes come as half pairs too: they are UTF-8 (not_utf8), a path kept, a task read as text."""
    if not any(half_pair(arg) for arg in args):
        return args
    context = command.context_class(command, parent=ctx)
    try:
        opts, _, _ = command.make_parser(context).parse_args(args=list(args))
    except UsageError:
        return args
    tasks: set[str] = set()
    for param in command.get_params(context):
        given = opts.get(param.name)
        values = given if isinstance(given, list | tuple) else [given]
        texts = [v for v in values if isinstance(v, str)]
        if param.param_type_name == "argument" and param.name in TEXT_ARGUMENTS:
            tasks.update(texts)
        elif any(map(not_utf8, texts)):
            # a flag by its long name; an argument as its usage line shows it
            option = param.param_type_name == "option"
            name = max(param.opts, key=len) if option else param.metavar or param.name
            said = "holds a byte that is not UTF-8 (the value is not shown)"
            raise ConfigError(f"{name}: {said}; give it again in UTF-8", field=name)
    if isinstance(command, typer.core.TyperGroup):
        return args
    # what still holds such a byte is a task's (or an extra argument the parse refuses)
    return [_as_text(arg) if arg in tasks or not_utf8(arg) else arg for arg in args]


def _as_text(arg: str) -> str:
    """An argument as the text its bytes spell in UTF-8, a byte that is not UTF-8 as U+FFFD."""
    return arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


# the arguments that are text a person wrote (a task, `runs search`'s words): a byte that is not
# UTF-8 there reads as U+FFFD; in any other (a path, an id) it is an error
TEXT_ARGUMENTS = ("task", "text")


def _say_error(exc: TinyError) -> None:
    """Print the error's lines on stderr, escaped: they may quote a file, a model or a page."""
    first, *rest = str(exc).splitlines() or [type(exc).__name__]
    typer.echo(f"tiny: error: {printable(first)}", err=True)
    for line in rest:
        typer.echo(f"  {printable(line)}", err=True)


def warn(message: str) -> None:
    """Print `tiny: warning: message` on stderr, escaped (it may quote a file)."""
    typer.echo(f"tiny: warning: {printable(message)}", err=True)


class _ShownWarnings:
    """`warnings.showwarning`: a TinyWarning is one `warn` line, others shown as before."""

    def __init__(self, before: Any) -> None:
        self.before = before

    def __call__(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        if not issubclass(category, TinyWarning):
            self.before(message, category, filename, lineno, file, line)
            return
        with contextlib.suppress(OSError, ValueError):  # stderr closed: nobody left to tell
            warn(str(message))


def show_warnings() -> None:
    """Show each TinyWarning given (not once per place) as a `tiny: warning:` line."""
    # it stays for the process: the MCP servers stop, and warn, at its exit
    warnings.filterwarnings("always", category=TinyWarning)
    if not isinstance(warnings.showwarning, _ShownWarnings):
        warnings.showwarning = _ShownWarnings(warnings.showwarning)


def _interrupted() -> NoReturn:
    """Ctrl-C: files were closed on the way out; end now, not when stuck requests give up."""
    typer.echo("tiny: interrupted", err=True)
    sys.stdout.flush()
    sys.stderr.flush()
    mcp = sys.modules.get("tiny_cli.tools.mcp_client")
    if mcp is not None:  # os._exit skips atexit: stop the MCP servers here (bounded), not leak them
        mcp.stop_servers(quick=True)
    os._exit(EXIT_INTERRUPTED)  # threads blocked on the network cannot be joined quickly


def _bound_interrupts() -> None:
    """Make Ctrl-C (or SIGTERM) end the process within INTERRUPT_GRACE_SECONDS, whatever hangs."""

    def on_sigint(signum: int, frame: object) -> None:
        # the normal way out closes files and exits at once; this is the net under it
        timer = threading.Timer(INTERRUPT_GRACE_SECONDS, _exit_interrupted)
        timer.daemon = True
        timer.start()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    # a service manager's or `timeout`'s stop: the same way out (MCP servers stopped, log closed)
    signal.signal(signal.SIGTERM, on_sigint)


def _exit_interrupted() -> None:
    os.write(2, b"tiny: interrupted\n")
    os._exit(EXIT_INTERRUPTED)


def _closed_streams() -> None:
    """Stderr closed (`2>&-`): as `2>/dev/null`. Stdout closed: nothing printed could arrive,
    so it ends before any work, EXIT_USAGE (Python leaves a closed stream's `sys` one None)."""
    if sys.stderr is None:
        # it takes the lowest free descriptor, 2 when only stderr was closed: no file opened
        # later (the run log) becomes the stderr a tool server writes to
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - the process's own
    if sys.stdout is None:
        said = "stdout is closed: nothing tiny prints could arrive; to discard it: >/dev/null"
        typer.echo(f"tiny: error: {said}", err=True)
        raise SystemExit(EXIT_USAGE)


def _tolerate_bad_bytes() -> None:
    """Read invalid UTF-8 on stdin as U+FFFD, and print what the encoding cannot hold (ü on
    an ASCII terminal) as printable's escape, \\u00fc; the arguments are sorted later
    (TinyGroup.resolve_command)."""
    shown = printable_errors()
    for stream, errors in ((sys.stdin, "replace"), (sys.stdout, shown), (sys.stderr, shown)):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors=errors)


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
    """A command as --help lists it, from COMMANDS: no module imported."""
    return typer.core.TyperCommand(name, help=COMMANDS[name][2])


def _build(names: list[str]) -> dict[str, Any]:
    """Import the commands' modules and build their click commands, as `app.command` would."""
    holder = typer.Typer(add_completion=False, rich_markup_mode=None)
    holder.callback()(lambda: None)  # a group, so a one-command group stays a group
    for name in names:
        module, attribute, _ = COMMANDS[name]
        target = getattr(importlib.import_module(module), attribute)
        if isinstance(target, typer.Typer):  # a command group (`tiny runs ...`)
            holder.add_typer(target, name=name)
        else:
            holder.command(epilog=EXAMPLES.get(name))(target)
    built = typer.main.get_command(holder).commands  # type: ignore[attr-defined]
    return {name: built[name] for name in names}


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
    _closed_streams()
    _tolerate_bad_bytes()
    _bound_interrupts()
    try:
        app()
    except OSError as exc:  # a path the OS refuses (unreadable, too long), a device that fails
        _os_error(exc)


def _os_error(exc: OSError) -> NoReturn:
    """End as on a TinyError: `tiny: error: PATH: reason` (`stdout` when that fails)."""
    paths = [p for p in (exc.filename, exc.filename2) if p is not None]
    if not _settled(sys.stdout):  # what it printed could not be written (a full disk)
        paths = paths or ["stdout"]
    where = " -> ".join(str(p) if isinstance(p, int) else os.fsdecode(p) for p in paths)
    why = exc.strerror or str(exc) or type(exc).__name__
    with contextlib.suppress(OSError, ValueError):  # stderr fails too: nobody left to tell
        typer.echo(f"tiny: error: {printable(f'{where}: {why}' if where else why)}", err=True)
    _settled(sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _settled(stream: TextIO) -> bool:
    """Flush `stream`; False where it fails, the stream then pointed at the null device (what
    it holds is lost) so that the exit's flush does not fail again."""

    try:
        stream.flush()
    except (OSError, ValueError):
        with contextlib.suppress(OSError, ValueError):
            null = os.open(os.devnull, os.O_WRONLY)
            os.dup2(null, stream.fileno())
            os.close(null)
        return False
    return True
