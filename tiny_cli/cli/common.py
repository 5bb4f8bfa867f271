"""What the commands share: the options (one name, one help text each), settings from flags,
JSON or human output, warnings, a [y/N] question, and whether a person sits at stdin.

Nothing here draws: rich is imported by the modules that print for a person (`live`,
`render`, ...), never for --json. Typer needs one parameter per option, so each command
declares its own from the aliases below.

A command that would ask (approve a write, confirm a deletion) asks `stdin_is_terminal()`:
stdin's own answer unless the invoker passed a `Terminal` as the click context's object
(`CliRunner().invoke(app, args, obj=Terminal(True))`).
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import select
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

# typer runs its own copy of click: the context is on its stack, not on the click package's
from typer.main import get_current_context

from tiny_cli.cli import warn as warn  # the face's one warning line, the library's too
from tiny_cli.setting_rules import BLANK
from tiny_cli.settings import Settings, load_settings
from tiny_cli.text import ascii_json, holds_all


def _folder(text: str) -> Path:
    """A folder flag's path; blank is refused (`Path("")` would be the working folder)."""
    if not text.strip():
        raise typer.BadParameter(BLANK)
    return Path(text)


CardsOpt = Annotated[
    Path | None,
    typer.Option(
        "--cards",
        parser=_folder,
        metavar="PATH",
        help="Cards directory [env TINY_CARDS; default ./cards].",
    ),
]
ToolsOpt = Annotated[
    str | None,
    typer.Option("--tools", help="Your tool module: a .py path or dotted name [env TINY_TOOLS]."),
]

_DOCUMENT_OUT = "tiny.document_out"  # the command's stdout, kept for its --json document


def _json_only(ctx: typer.Context, value: bool) -> bool:
    """--json: stdout holds the document alone; whatever else prints while the command runs
    (a tools module, a program a tool starts) goes to stderr."""
    if value and not ctx.resilient_parsing:
        ctx.meta[_DOCUMENT_OUT] = ctx.with_resource(_stdout_kept())
    return value


@contextlib.contextmanager
def _stdout_kept() -> Iterator[Any]:
    """Yield a stream on the command's stdout while sys.stdout, and fd 1 where it is the
    process's (a subprocess writes there, not to sys.stdout), write to stderr."""
    stdout = sys.stdout
    if _fd_of(stdout) != 1:  # not the process's stdout (CliRunner's, or closed): Python's alone
        with contextlib.redirect_stdout(sys.stderr):
            yield stdout
        return
    stdout.flush()
    document = open(os.dup(1), "w", encoding=stdout.encoding, errors=stdout.errors)  # noqa: SIM115
    try:
        _to_stderr(1)
        with contextlib.redirect_stdout(sys.stderr):
            yield document
    finally:
        stdout.flush()  # what was written to it meanwhile goes to stderr, as it would have
        with document:  # closed even when its flush fails (a reader that went away)
            os.dup2(document.fileno(), 1)


def _fd_of(stream: Any) -> int:
    """The file descriptor a stream writes to; -1 for none (None, or not a file)."""
    try:
        return int(stream.fileno())
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is both
        return -1


def _to_stderr(fd: int) -> None:
    """Point `fd` at stderr (at the null device, with no stderr)."""
    try:
        os.dup2(2, fd)
    except OSError:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, fd)
        os.close(null)


JsonOpt = Annotated[
    bool,
    typer.Option("--json", help="Print one JSON document, nothing else.", callback=_json_only),
]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="OpenAI-compatible endpoint [env TINY_BASE_URL; default "
        "http://127.0.0.1:11434/v1, Ollama].",
    ),
]
ModelOpt = Annotated[
    str | None,
    typer.Option("--model", help="Model name [env TINY_MODEL > tiny.toml > card > default]."),
]
MustReturnOpt = Annotated[
    str | None, typer.Option("--must-return", help="Extra fields to return, comma-separated.")
]
InputOpt = Annotated[
    list[str] | None, typer.Option("--input", help="An input as key=value; repeatable.")
]
HintOpt = Annotated[str | None, typer.Option("--hint", help="Context hint, cut to 800 characters.")]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-output-tokens", min=16, help="Lower the card's token budget (never raise)."
    ),
]
RecordOpt = Annotated[
    Path | None,
    typer.Option("--record", help="Store every model exchange in FILE (JSONL) for --replay."),
]
ReplayOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--replay",
        help="Answer from a --record FILE instead of the model server; repeatable "
        "(recordings of one model, answered from together).",
    ),
]
ResumeOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--resume",
        help="With --record: reuse the answers an earlier recording (or its .partial) holds "
        "for the same runs and ask the model only the rest; repeatable.",
    ),
]
AllowHostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        metavar="HOST[:PORT]",
        help="A host or host:port the web tools may fetch besides public addresses "
        "(loopback, private network); repeatable [env TINY_ALLOW_HOSTS, comma-separated].",
    ),
]
ToolModeOpt = Annotated[
    str | None,
    typer.Option(
        "--tool-mode",
        metavar="native|json|auto",
        help="How the model calls tools: OpenAI tool_calls, a json_schema-constrained reply, "
        "or native switching to json on calls written as text [env TINY_TOOL_MODE; "
        "else tiny.toml's, else the card's tool_mode; default auto].",
    ),
]
WallScaleOpt = Annotated[
    float | None,
    typer.Option(
        "--wall-scale",
        metavar="FACTOR",
        help="Multiply every card's max_wall_seconds, e.g. 3 for a slow CPU server "
        "[env TINY_WALL_SCALE; default 1].",
    ),
]
TemperatureOpt = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        metavar="T",
        help="Sampling temperature sent with every request, 0 (greedy) to 2 [default: none "
        "sent, the server's own; a replay: the recording's].",
    ),
]
BenchTemperatureOpt = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        metavar="T",
        help="Sampling temperature sent with every request, 0 (greedy) to 2 [default: 0; "
        "a replay: the recording's, none for one made before tiny sent it].",
    ),
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="Show no live view of the run on stderr.")
]
NoLogOpt = Annotated[
    bool,
    typer.Option("--no-log", help="Keep this command out of the run log [env TINY_NO_LOG=1]."),
]
LogOpt = Annotated[
    bool, typer.Option("--log", help="Keep a replay in the run log too (a replay is not a run).")
]
ArtifactOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--artifact",
        metavar="HANDLE",
        help="An earlier stored tool result the agent may read (read_artifact); repeatable.",
    ),
]
BriefOpt = Annotated[
    Path | None, typer.Option("--brief", help="Read the Brief from a YAML or JSON file.")
]
YesOpt = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Approve every write call of this command (each is listed in the Digest). "
        "Without it each write is asked at the terminal; with no terminal or --json, "
        "a writer card stops with needs_confirmation.",
    ),
]
WideOpt = Annotated[
    bool,
    typer.Option("--wide", help="Print tables whole, names uncut, however wide the terminal."),
]
ANSWER_POLL_SECONDS = 0.1  # the longest a Ctrl-C at a [y/N] prompt waits for its handler


def settings_from(**flags: Any) -> Settings:
    """Return the settings (environment, then config) with the command's flags on top."""
    names = {"cards": "cards_dir", "tools": "tools_spec"}
    given = {names.get(k, k): v for k, v in flags.items()}
    return load_settings().with_flags(from_cli=True, **given)


def wants_live(quiet: bool, json_out: bool, stderr: Any = None) -> bool:
    """Show the live view only to a person: not with --quiet or --json, only on a terminal
    (`stderr`) whose encoding holds every character (an escaped one, \\u00fc, grows the line
    past the screen and the view cannot redraw it)."""
    err = stderr or sys.stderr
    return not quiet and not json_out and err.isatty() and holds_all(err)


def print_json(document: Any, indent: int | None = None) -> None:
    """Print `document` as JSON on the command's stdout: past ASCII as \\u escapes on a
    terminal or a stdout that is not UTF-8 (text.ascii_json), as written to a UTF-8 pipe."""
    out: Any = get_current_context().meta.get(_DOCUMENT_OUT) or sys.stdout
    typer.echo(json.dumps(document, ensure_ascii=ascii_json(out), indent=indent), file=out)


def emit(json_out: bool, document: Any, human: Callable[[], object]) -> None:
    """Print `document` as indented JSON with --json, else the human rendering (`human()`)."""
    if json_out:
        print_json(document, indent=2)
    else:
        human()


def draw(renderer: str, *args: Any) -> None:
    """Print on stdout with `tiny_cli.cli.<renderer>` ("render.evaluation"), loaded now."""
    from tiny_cli.cli.render import new_console  # rich: only for a person, never for --json

    module, _, function = renderer.rpartition(".")
    getattr(importlib.import_module(f"tiny_cli.cli.{module}"), function)(new_console(), *args)


def confirm(question: str) -> bool:
    """Ask [y/N] on stderr: y approves; Enter or the end of input is no; Ctrl-C ends it all."""
    # not click's prompt: it turns Ctrl-C and the end of input into "Aborted!", exit 1
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
    """Read one line of stdin, None at its end, while a Ctrl-C can always end the wait: a
    SIGINT just before a blocking read would wait for a line nobody types, so it waits in
    short selects."""
    if sys.stdin is None:  # started with stdin closed: no answer, so no
        return None
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


@dataclass(frozen=True)
class Terminal:
    """What the invoker says about stdin: True, a person can answer there."""

    stdin_is_terminal: bool


def stdin_is_terminal() -> bool:
    """Whether a prompt on stdin can be answered: the invoker's Terminal, else stdin's isatty."""
    context = get_current_context(silent=True)
    said = context.find_object(Terminal) if context is not None else None
    if said is not None:
        return said.stdin_is_terminal
    return sys.stdin is not None and sys.stdin.isatty()  # None: started with stdin closed


def option_given(ctx: typer.Context, name: str) -> bool:
    """Tell whether the command line set option `name` (not left at its default)."""
    return parameter_source(ctx, name) not in (None, "DEFAULT", "DEFAULT_MAP")


def parameter_source(ctx: typer.Context, name: str) -> str | None:
    """Where parameter `name`'s value came from: COMMANDLINE, ENVIRONMENT, DEFAULT_MAP…"""
    # by name: typer may bring its own copy of click, and with it its own ParameterSource
    return getattr(ctx.get_parameter_source(name), "name", None)
