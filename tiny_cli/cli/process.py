"""The process around the commands: exit codes, errors as one line, Ctrl-C and SIGTERM, `main`."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any, NoReturn

import typer

from tiny_cli.errors import TinyError

EXIT_OK = 0
EXIT_PROBLEMS = 1
EXIT_USAGE = 2  # bad flags, settings or files (every TinyError without its own code)
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
# the exit code of an error that ends a command: its class's, or its nearest base class's;
# the library's errors carry no codes, the face decides what each one means to a shell
EXIT_BY_ERROR: dict[type[TinyError], int] = {TinyError: EXIT_USAGE}


# the framework's usage error (typer vendors click, so it is found through a public subclass)
UsageError: Any = next(c for c in typer.BadParameter.__mro__ if c.__name__ == "UsageError")
# what a group raises when called bare (`tiny`, `tiny cards`): no mistake, a request for help
NoArgsIsHelp: Any = getattr(sys.modules[UsageError.__module__], "NoArgsIsHelpError", ())


def _usage_error(exc: Any) -> typer.Exit:
    """Say a usage error in one line, as every other error is, with where to find help.

    A bare group (`tiny`) prints its help on stdout and exits 0, as `tiny --help` does.
    """
    if isinstance(exc, NoArgsIsHelp) and exc.ctx is not None:
        typer.echo(exc.ctx.get_help())
        return typer.Exit(EXIT_OK)
    where = exc.ctx.command_path if exc.ctx is not None else "tiny"
    typer.echo(f"tiny: error: {exc.format_message()} (see '{where} --help')", err=True)
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
        """Run the command; Ctrl-C, a usage error and a TinyError end it as described above."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            _interrupted()
        except UsageError as exc:
            raise _usage_error(exc) from None
        except TinyError as exc:
            first, *rest = str(exc).splitlines() or [type(exc).__name__]
            typer.echo(f"tiny: error: {first}", err=True)
            for line in rest:
                typer.echo(f"  {line}", err=True)
            raise typer.Exit(exit_code(exc)) from None


def exit_code(exc: TinyError) -> int:
    """Return the code a command that ended with `exc` exits with (EXIT_BY_ERROR)."""
    return next(EXIT_BY_ERROR[c] for c in type(exc).__mro__ if c in EXIT_BY_ERROR)


def run(app: Callable[[], object]) -> None:
    """Run `app` as the `tiny` command line: bad bytes read as U+FFFD, Ctrl-C bounded."""
    _tolerate_bad_bytes()
    _bound_interrupts()
    app()


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
    """End the process now: the grace after Ctrl-C is over."""
    os.write(2, b"tiny: interrupted\n")
    os._exit(EXIT_INTERRUPTED)


def _tolerate_bad_bytes() -> None:
    """Read invalid UTF-8 in arguments and stdin as U+FFFD, as a terminal would show it.

    Python keeps undecodable argv bytes as lone surrogates, which no encoder accepts: one
    stray byte in a task would end the command with a UnicodeEncodeError.
    """
    sys.argv = [a.encode("utf-8", "surrogateescape").decode("utf-8", "replace") for a in sys.argv]
    for stream in (sys.stdin, sys.stdout, sys.stderr):
        if hasattr(stream, "reconfigure"):
            stream.reconfigure(errors="replace")
