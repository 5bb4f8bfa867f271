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
from tiny_cli.cli.common import parameter_source, warn
from tiny_cli.errors import ConfigError
from tiny_cli.provider.replay import read_header
from tiny_cli.setting_rules import check_temperature
from tiny_cli.text import printable
from tiny_cli.workspace import open_workspace

# the header names an option as its flag reads; the command's parameter is named otherwise
PARAMETERS = {"all_tools_sizes": "sizes"}
REFUSED = "tiny.header_refused"  # ctx.meta: the header's values the command would refuse


def recorded_defaults(ctx: typer.Context, value: list[Path] | None) -> list[Path] | None:
    """Make the first recording's options the command's defaults (flags given still win).

    A value the command would refuse is kept out, and refused by `refuse_header` unless a
    flag given replaces it: the header is to blame, not the flag the user never gave.
    """
    if value:
        options = recorded_options(read_header(value[0]), value[0])
        named = {PARAMETERS.get(k, k): v for k, v in options.items()}
        refused = {n: why for n, v in named.items() if (why := _refused(ctx, value[0], n, v))}
        ctx.meta[REFUSED] = refused
        kept = {k: v for k, v in named.items() if k not in refused}
        ctx.default_map = {**(ctx.default_map or {}), **kept}
    return value


def refuse_header(ctx: typer.Context) -> None:
    """Raise the first bad value of the replayed header that no flag given replaced."""
    for name, line in ctx.meta.get(REFUSED, {}).items():
        if parameter_source(ctx, name) != "COMMANDLINE":
            raise ConfigError(line)


def blamed(ctx: typer.Context, error: typer.BadParameter) -> Exception:
    """A bad value the recording's header gave is the header's: name its field, not the flag."""
    replay = ctx.params.get("replay")
    for param in ctx.command.params:
        gave = parameter_source(ctx, param.name) if param.name else None
        if error.param_hint in param.opts and gave == "DEFAULT_MAP" and replay:
            return ConfigError(f"{_where(replay[0], str(param.name))}: {error.message}")
    return error


def _refused(ctx: typer.Context, path: Path, name: str, value: object) -> str | None:
    """The line refusing a header's value as the command would (its option's range or
    choice, the settings' temperature, a cards path that is there); None when it is good."""
    where = _where(path, name)
    param = next((p for p in ctx.command.params if p.name == name), None)
    try:
        if param is not None:
            param.process_value(ctx, value)
        if name == "temperature":
            check_temperature(where, value)
    except typer.BadParameter as error:
        return f"{where}: {error.message}"
    except ConfigError as error:
        return str(error)
    if name == "cards" and not Path(str(value)).exists():
        return f"{where}: no cards folder or card file {printable(str(value))}"
    return None


def _where(path: Path, name: str) -> str:
    """The header field that gave the parameter `name`, with its file."""
    field = {v: k for k, v in PARAMETERS.items()}.get(name, name)
    return f"{printable(str(path))}: header bench.{field}"


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
    cards = recorded.get("cards", {}) if isinstance(recorded, dict) else {}
    if not isinstance(cards, dict) or not all(isinstance(v, str) for v in cards.values()):
        raise ConfigError(f"{replay[0]}: the header's digests.cards must map card files to digests")
    line = None if recorded is None else changed_since(recorded, tasks, open_workspace(settings))
    if line is not None:
        warn(line)
