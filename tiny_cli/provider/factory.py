"""The provider factory: where a command's model answers come from — live, recorded or replayed."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from urllib.parse import urlsplit

from tiny_cli.errors import ConfigError
from tiny_cli.provider.client import DEFAULT_TIMEOUT, OpenAIProvider
from tiny_cli.provider.replay import ExchangeSource, LiveSource, Recorder, Replayer, read_header
from tiny_cli.settings import Settings


def open_exchanges(
    settings: Settings, *, record: Path | None = None, replay: Path | None = None
) -> ExchangeSource:
    """Return where model answers come from: the endpoint, the endpoint recorded, or a file."""
    _one_of(record, replay)
    if replay is not None:
        return Replayer.load(replay)
    # --wall-scale is for slow servers: one request may take as much longer as the whole run
    timeout = DEFAULT_TIMEOUT * settings.wall_scale
    provider = OpenAIProvider(settings.base_url, settings.api_key, timeout=timeout)
    if record is not None:
        host = endpoint_host(settings.base_url)
        return Recorder(
            provider, record, settings.model, host, settings.tool_mode, settings.wall_scale
        )
    return LiveSource(provider, endpoint_host(settings.base_url))


def replay_settings(
    settings: Settings, *, record: Path | None, replay: Path | None, model_flag: str | None
) -> Settings:
    """Replay with the recording's model and tool mode unless told otherwise (both shape keys).

    The tool mode decides what each request carries (tools or a response_format), so a replay
    in another mode would ask questions the recording never saw.
    """
    _one_of(record, replay)
    if replay is None:
        return settings
    header = read_header(replay)
    if model_flag is None:
        settings = replace(settings, model=header.get("model"))
    if settings.tool_mode is None and header.get("tool_mode") in ("native", "json", "auto"):
        settings = replace(settings, tool_mode=header["tool_mode"])
    return settings


def endpoint_host(base_url: str) -> str:
    """Return only the host of an endpoint URL (no scheme, port, path or credentials)."""
    return urlsplit(base_url).hostname or ""


def _one_of(record: Path | None, replay: Path | None) -> None:
    if record is not None and replay is not None:
        raise ConfigError("--record and --replay exclude each other: pick one")
