"""What the commands share: settings from flags, the console, JSON or human output, the session,
and whether a person sits at stdin to answer a prompt.

`tiny --help` imports no command module (cli/root.py lists each by name and help), so each
command's module imports the library it uses at its top; rich is imported only where output is
drawn for a person, never for --json.

A command that would ask (approve a write, confirm a deletion) asks `stdin_is_terminal()`.
It is the stdin's own answer unless whoever invoked the command passed a `Terminal` as the
click context's object (`CliRunner().invoke(app, args, obj=Terminal(True))`): a parameter of
the invocation, as the provider and the clock are parameters of the library.
"""

from __future__ import annotations

import json
import os
import select
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

# typer runs its own copy of click: the context is on its stack, not on the click package's
from typer.main import get_current_context

from tiny_cli.settings import Settings, load_settings

if TYPE_CHECKING:  # rich: a person's output only; the session: for commands that run cards
    from rich.console import Console

    from tiny_cli.cli.live import LiveView
    from tiny_cli.session import Session

ANSWER_POLL_SECONDS = 0.1  # the longest a Ctrl-C at a [y/N] prompt waits for its handler

Human = Callable[[], object]
"""Print the human rendering of a result (called only without --json)."""


def console(stderr: bool = False) -> Console:
    """Return the console for stdout (or stderr): under a live view, the view's own."""
    from rich.console import Console  # rich: a person's output only

    live = sys.modules.get("tiny_cli.cli.live")  # loaded only once a live view was made
    shared = live.active_console() if live is not None and stderr else None
    # one console under a live view: rich stacks its displays (bench's progress bar) in it
    return shared or Console(stderr=stderr)


def settings_from(**flags: Any) -> Settings:
    """Return the settings (environment, then config) with the command's flags on top."""
    names = {"cards": "cards_dir", "tools": "tools_spec"}
    return load_settings().with_flags(**{names.get(k, k): v for k, v in flags.items()})


def wants_live(quiet: bool, json_out: bool, stderr: Any = None) -> bool:
    """Show the live view only to a person: not with --quiet or --json, only on a terminal
    (`stderr`, default the process's, is where it would draw)."""
    return not quiet and not json_out and (stderr or sys.stderr).isatty()


@contextmanager
def run_session(
    settings: Settings,
    command: str,
    *,
    record: Path | None,
    replay: Sequence[Path] | None,
    no_log: bool,
    live: bool,
    handles: Sequence[str] = (),
    resume: Sequence[Path] = (),
    log_replay: bool = False,
    upgrade: bool = False,
) -> Iterator[Session]:
    """Open the command's session, with the live view on stderr while it runs when `live`.

    A replay is not a run: it stays out of the run log unless `log_replay` (`--log`).
    """
    view = _live_view() if live else None
    opened: list[Session] = []
    no_log = no_log or (bool(replay) and not log_replay)
    try:
        with _session(
            settings, command, record, replay, resume, no_log, view, handles, upgrade
        ) as s:
            opened.append(s)
            yield s
    except KeyboardInterrupt:
        kept = opened[0].exchanges.kept_on_interrupt() if opened else None
        if kept is not None:
            warn(f"the exchanges recorded so far are in {kept}: pass it to --resume to go on")
        raise


@contextmanager
def _session(
    settings: Settings,
    command: str,
    record: Path | None,
    replay: Sequence[Path] | None,
    resume: Sequence[Path],
    no_log: bool,
    view: LiveView | None,
    handles: Sequence[str],
    upgrade: bool = False,
) -> Iterator[Session]:
    """Open the session itself, the live view inside it."""
    from tiny_cli.session import open_session  # the model client: not for route or runs

    with open_session(
        settings,
        command,
        record=record,
        replay=replay,
        resume=resume,
        log=not no_log,
        watchers=[view.observer] if view is not None else [],
        on_log_error=warn,
        on_warning=warn,
        handles=handles,
        upgrade=upgrade,
    ) as session:
        if view is None:
            yield session
            return
        with view:  # ends before the run log closes: a warning then reads below the runs
            yield session


def warn_unused(exchanges: Any) -> None:
    """Warn when a replay asked for fewer answers than its recording holds."""
    left = exchanges.unused()
    if left:
        warn(
            f"the recording holds {left} exchange(s) this replay never asked for: fewer runs "
            "(other --repeat, --arm, sizes or sample) or shorter ones (a turn this tiny no "
            "longer takes, such as a repair) than when it was recorded"
        )


def _live_view() -> LiveView:
    from tiny_cli.cli.live import LiveView

    return LiveView(console(stderr=True))


def warn(message: str) -> None:
    """Print `tiny: warning: message` on stderr: the command goes on."""
    typer.echo(f"tiny: warning: {message}", err=True)


def emit(json_out: bool, document: Any, human: Human) -> None:
    """Print `document` as indented JSON with --json, else the human rendering."""
    if json_out:
        typer.echo(json.dumps(document, ensure_ascii=False, indent=2))
    else:
        human()


def confirm(question: str) -> bool:
    """Ask [y/N] on stderr: y approves; Enter or the end of input is no; Ctrl-C ends it all.

    Not click's prompt: it turns Ctrl-C into "Aborted!" (exit 1) instead of the 130 every
    other Ctrl-C ends with, and the end of input into that too.
    """
    while True:
        typer.echo(f"{question} [y/N]: ", nl=False, err=True)
        line = _read_line()
        if line is None:
            typer.echo(err=True)  # the end of input (Ctrl-D) left the cursor on the prompt
            return False
        answer = line.strip().lower()
        if answer in ("y", "yes"):
            return True
        if answer in ("", "n", "no"):
            return False
        typer.echo("Error: invalid input", err=True)


def _read_line() -> str | None:
    """Read one line of stdin, None at its end, while a Ctrl-C can always end the wait.

    Python runs a signal's handler between bytecodes: a SIGINT that lands just before a
    blocking read began would wait for that read to end, that is for a line nobody types.
    Waiting in short selects gives the handler its turn at least every ANSWER_POLL_SECONDS.
    """
    try:
        fd = sys.stdin.fileno()
    except (AttributeError, OSError, ValueError):  # not a file (a test's input): read it plainly
        fd = -1
    if fd < 0 or sys.platform == "win32":  # Windows: select takes sockets only
        return sys.stdin.readline() or None
    line = b""
    while not line.endswith(b"\n"):
        if not select.select([fd], [], [], ANSWER_POLL_SECONDS)[0]:
            continue
        byte = os.read(fd, 1)  # one at a time: the next prompt's typed-ahead answer stays
        if not byte:
            return None  # ended before the line did: no answer, so no
        line += byte
    return line.decode("utf-8", "replace")


# --- whether a person sits at stdin to answer a prompt ------------------------------------


@dataclass(frozen=True)
class Terminal:
    """What the invoker says about stdin: True, a person can answer there."""

    stdin_is_terminal: bool


def stdin_is_terminal() -> bool:
    """Whether a prompt on stdin can be answered: the invoker's Terminal, else stdin's isatty."""
    context = get_current_context(silent=True)
    said = context.find_object(Terminal) if context is not None else None
    return said.stdin_is_terminal if said is not None else sys.stdin.isatty()
