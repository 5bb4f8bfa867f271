"""`tiny bench --replay FILE` alone: the recording's own options, --upgrade and --log.

A recording made by this tiny holds the bench's options in its header (tiny_cli.bench.making).
The `--replay` option is eager: it reads that header first and makes those options the
defaults of the command, so a flag given on the command line still wins.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from tiny_cli.bench.making import changed_since, recorded_options
from tiny_cli.cli.common import warn
from tiny_cli.errors import ConfigError
from tiny_cli.provider.replay import read_header
from tiny_cli.text import printable
from tiny_cli.workspace import open_workspace

# the header names an option as its flag reads; the command's parameter is named otherwise
PARAMETERS = {"all_tools_sizes": "sizes"}


def recorded_defaults(ctx: typer.Context, value: list[Path] | None) -> list[Path] | None:
    """Make the first recording's options the command's defaults (flags given still win)."""
    if value:
        options = recorded_options(read_header(value[0]), value[0])
        named = {PARAMETERS.get(k, k): v for k, v in options.items()}
        ctx.default_map = {**(ctx.default_map or {}), **named}
    return value


def blamed(ctx: typer.Context, error: typer.BadParameter) -> Exception:
    """A bad value the recording's header gave is the header's: name its field, not the flag."""
    replay = ctx.params.get("replay")
    for param in ctx.command.params:
        # by name: typer may bring its own copy of click, and with it its own ParameterSource
        gave = getattr(param.name and ctx.get_parameter_source(param.name), "name", None)
        if error.param_hint in param.opts and gave == "DEFAULT_MAP" and replay:
            field = {v: k for k, v in PARAMETERS.items()}.get(param.name, param.name)
            where = f"{printable(str(replay[0]))}: header bench.{field}"
            return ConfigError(f"{where}: {error.message}")
    return error


BenchReplayOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--replay",
        help="Answer from a --record FILE instead of the model server; repeatable "
        "(recordings of one model). A recording holds its options: FILE alone replays it.",
        callback=recorded_defaults,
        is_eager=True,
    ),
]
UpgradeOpt = Annotated[
    bool,
    typer.Option(
        "--upgrade",
        help="With --replay of an older recording and its options: rewrite it in place with "
        "its options, digests and routing decisions in the header (answers unchanged).",
    ),
]


def warn_changed(replay: Sequence[Path] | None, tasks: Path, settings: Any, upgrade: bool) -> None:
    """Warn in one line of the tasks, cards or learned examples changed since the recording;
    --upgrade needs a --replay."""
    if upgrade and not replay:
        raise ConfigError("--upgrade rewrites a recording: name it with --replay")
    if not replay or not tasks.is_file():
        return
    recorded = read_header(replay[0]).get("digests")
    line = None if recorded is None else changed_since(recorded, tasks, open_workspace(settings))
    if line is not None:
        warn(line)
