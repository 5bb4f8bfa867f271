"""The provider factory: where a command's model answers come from — live, recorded or replayed."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tiny_cli.errors import ConfigError
from tiny_cli.provider.client import DEFAULT_TIMEOUT, OpenAIProvider
from tiny_cli.provider.replay import (
    ExchangeSource,
    LiveSource,
    Recorder,
    Replayer,
    Upgrader,
    read_header,
)
from tiny_cli.setting_rules import TOOL_MODES, check_temperature
from tiny_cli.settings import Settings, sampling

Replays = Path | Sequence[Path] | None  # one recording, or several answered from together


def open_exchanges(
    settings: Settings,
    *,
    record: Path | None = None,
    replay: Replays = None,
    resume: Sequence[Path] = (),
    upgrade: bool = False,
) -> ExchangeSource:
    """Return where model answers come from: the endpoint, the endpoint recorded, or files."""
    _one_of(record, replay)
    if resume and record is None:
        raise ConfigError("--resume needs --record: the file that gathers old and new answers")
    if upgrade:
        paths = _paths(replay)
        if len(paths) != 1:
            raise ConfigError(
                "--upgrade needs --replay with exactly one recording: the one to rewrite"
            )
        return Upgrader.open(paths[0])
    if replay:
        return Replayer.load(_paths(replay))
    # a request's timeout where its caller gives no deadline (a run's is the time it has left);
    # --wall-scale is for slow servers: one request may take as much longer as the whole run
    timeout = DEFAULT_TIMEOUT * settings.wall_scale
    provider = OpenAIProvider(settings.base_url, settings.api_key, timeout=timeout)
    host = endpoint_host(settings.base_url)
    if record is None:
        return LiveSource(provider, host)
    earlier = _resumed(settings, resume)
    made = (settings.model, host, settings.tool_mode, settings.wall_scale, earlier)
    return Recorder(provider, record, *made, temperature=settings.temperature)


def replay_settings(
    settings: Settings, *, record: Path | None, replay: Replays, model_flag: str | None
) -> Settings:
    """Replay with the recording's model, tool mode and temperature unless told otherwise: each
    shapes the keys (its tool mode wins over TINY_TOOL_MODE and the project file)."""
    _one_of(record, replay)
    if not replay:
        return settings
    path = _paths(replay)[0]
    header = read_header(path)
    if model_flag is None:
        settings = replace(settings, model=header.get("model"))
    settings = _recorded_tool_mode(settings, header, path)
    if settings.temperature is None:
        settings = replace(settings, temperature=recorded_temperature(header, path))
    return settings


def _recorded_tool_mode(settings: Settings, header: Mapping[str, Any], path: Path) -> Settings:
    """The settings with the recording's tool mode (null: each card's own), when it says one;
    a flag naming another is refused up front: every request would miss."""
    recorded = header.get("tool_mode", "")  # "": an older recording that does not say
    if (recorded is not None and recorded not in TOOL_MODES) or recorded == settings.tool_mode:
        return settings
    flag = settings.origin("tool_mode")  # --tool-mode, or a library caller's tool_mode
    if flag is not None and flag.kind in ("flag", "keyword"):
        raise ConfigError(
            f"{flag} {settings.tool_mode}: {path} was recorded in {_mode(recorded)} and "
            f"holds no answer to requests made in another; leave {flag} out to replay it",
            path=path,
            field=flag.name,
        )
    return replace(settings, tool_mode=recorded)


def recorded_temperature(header: Mapping[str, Any], path: Path) -> float | None:
    """The temperature a recording was made at (None: none was sent); ConfigError if bad."""
    value = header.get("temperature")
    if value is None:
        return None
    try:
        return check_temperature(f"{path}: header 'temperature'", value)
    except ConfigError as exc:
        raise ConfigError(str(exc), path=path) from None


def endpoint_host(base_url: str) -> str:
    """Return only the host of an endpoint URL (no scheme, port, path or credentials)."""
    return urlsplit(base_url).hostname or ""


def _paths(replay: Replays) -> list[Path]:
    if replay is None:
        return []
    return [Path(replay)] if isinstance(replay, str | Path) else [Path(p) for p in replay]


def _resumed(settings: Settings, resume: Sequence[Path]) -> Replayer | None:
    """The earlier recordings a resumed one reuses: of the model, tool mode and temperature
    asked now (each shapes the requests: with another, no answer would match)."""
    if not resume:
        return None
    earlier = Replayer.load(list(resume))
    if earlier.model != settings.model:
        raise ConfigError(
            f"{earlier.path}: recorded model {earlier.model!r}, not {settings.model!r}: "
            "resume a recording of the model asked now"
        )
    was = recorded_temperature(earlier.header, earlier.path)
    if was != settings.temperature:  # no key would match: none reused
        raise ConfigError(
            f"{earlier.path}: recorded at {sampling(was)}, not {sampling(settings.temperature)}: "
            "resume a recording made at the temperature asked now"
        )
    mode = earlier.header.get("tool_mode")
    if mode != settings.tool_mode:  # no key would match: none reused
        raise ConfigError(
            f"{earlier.path}: recorded in {_mode(mode)}, not {_mode(settings.tool_mode)}: "
            "resume a recording made in the tool mode asked now"
        )
    return earlier


def _mode(tool_mode: str | None) -> str:
    """A tool mode as an error names it (None: none was set, each card used its own)."""
    return f"{tool_mode} tool mode" if tool_mode else "each card's own tool mode"


def _one_of(record: Path | None, replay: Replays) -> None:
    if record is not None and replay:
        raise ConfigError("--record and --replay exclude each other: pick one")
