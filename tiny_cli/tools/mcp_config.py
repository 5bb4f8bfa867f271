"""mcp.yaml: the MCP servers cards may take tools from, read and checked, and MCP's names.

A card writes `server.tool` (its qualified name); the model sees a wire name with no dot.
This module never imports the `mcp` SDK: cards are checked against the file offline, and a
command that runs no MCP tool pays nothing for it (tiny_cli.tools.mcp_client does the talking).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote

import yaml

from tiny_cli import userfiles
from tiny_cli.errors import ConfigError
from tiny_cli.settings import Origin, Settings
from tiny_cli.text import printable

MCP_FILENAMES = ("mcp.yaml", "mcp.yml")  # in the cards folder; never read as cards
# Patterns as text: `re` compiles each on first use, not at every start of every command.
# `server.tool`: MCP tool names are 1-128 of letters, digits, '_', '-' and '.' (the spec's).
QUALIFIED_NAME = r"^([A-Za-z0-9][A-Za-z0-9_-]{0,31})\.([A-Za-z0-9_.-]{1,128})$"
WIRE_NAME = r"^[A-Za-z0-9_-]{1,64}$"  # what OpenAI-compatible servers accept
WIRE_SEPARATOR = "__"
WIRE_HASH_CHARS = 8
SERVER_NAME = r"[A-Za-z0-9][A-Za-z0-9_-]{0,31}"  # fullmatch: `$` would let a final "\n" by
REFERENCE = r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}"
# a header or env entry whose name says it holds a secret must take it from the environment
# (a host's flag is read word by word instead: mcp_hosts._secret_flag); `pat` and `pass` only
# as words of their own (`GITHUB_PAT`, `MYSQL_PASS`; not `PATH`, `PASSPORT` or `BYPASS`), and
# no `tokenizer`, `keyword`, `keyboard` or a count of tokens (`--max-tokens`, `NUM_TOKENS`)
SECRET_NAME = (
    r"(?i)key(?!word|board)|(?<!max)(?<!max[-_])(?<!num)(?<!num[-_])token(?!i[sz])|secret|passw|passphrase|credential|authorization"
    r"|^auth|cookie|(?<![a-z])(?:pat|pass)(?![a-z])"
)
# ...and hold nothing but `${VAR}`, after an auth scheme at most: no literal part to leak
SCHEME = r"(?:(?:Bearer|Basic|Token|Bot|Digest|ApiKey|Key|JWT|OAuth) )"  # with its space
SECRET_VALUE = rf"(?i){SCHEME}?{REFERENCE}"
SERVER_KEYS = ("command", "args", "env", "cwd", "url", "headers", "type")
# a URL's scheme, tried only where a word starts (else a long word costs its length squared)
URL_SCHEME = r"(?<![a-z0-9+.-])[a-z][a-z0-9+.-]*://"
# a URL's userinfo (`user:password` before `@`), wherever a URL stands in a value
URL_USERINFO = rf"(?i)({URL_SCHEME})([^/?#@\s]*)@"
# ...and its password: group 1 is all before it, group 2 the password itself
URL_PASSWORD = rf"(?i)({URL_SCHEME}[^/?#@:\s]*:)([^/?#@\s]*)(?=@)"
TYPES = {"stdio": "command", "http": "url", "streamable-http": "url", "streamable_http": "url"}


def mcp_path(cards_dir: Path, explicit: str | None, origin: Origin | None = None) -> Path | None:
    """The mcp.yaml to read: the file named (by `origin`), else the cards folder's, else None."""
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            origin = origin or Origin("env", "TINY_MCP")
            said = f"{origin}={explicit}" if origin.kind == "env" else f"{explicit} (from {origin})"
            raise ConfigError(f"{said}: {_not_a_file(path)}", path=path, field=origin.name)
        return path
    return next((cards_dir / n for n in MCP_FILENAMES if (cards_dir / n).is_file()), None)


def _not_a_file(path: Path) -> str:
    """What `path`, no regular file, is instead, as an error says it."""
    if path.is_dir():
        return "is a folder, not a file"
    return "is not a regular file" if path.exists() else "no such file"


def qualified(name: str) -> tuple[str, str] | None:
    """Split `server.tool` into its parts; None for a plain (built-in or user) tool name."""
    if "." not in name:  # most names: no pattern to match (cards load by the thousand)
        return None
    found = re.match(QUALIFIED_NAME, name)
    return (found.group(1), found.group(2)) if found and "\n" not in name else None


def wire_name(name: str) -> str:
    """Return the function name the model sees for `server.tool`: `server__tool`, no dot.

    One still against the rule (a '.' in the tool's name, over 64 characters) keeps a readable
    head and a hash of the whole name. `a__b.c` and `a.b__c` meet: card validation refuses that.
    """
    parts = qualified(name)
    if parts is None:
        return name
    plain = WIRE_SEPARATOR.join(parts)
    if re.match(WIRE_NAME, plain):
        return plain
    digest = hashlib.sha1(name.encode()).hexdigest()[:WIRE_HASH_CHARS]
    head = re.sub(r"[^A-Za-z0-9_-]", "_", plain)[: 64 - WIRE_HASH_CHARS - 1]
    return f"{head}_{digest}"


class WireName(str):
    """A card's name for one of its MCP tools: the wire name, holding the qualified name (so a
    wire name two servers' tools share is resolved through the card that lists it)."""

    qualified: str

    def __new__(cls, name: str) -> WireName:
        self = super().__new__(cls, wire_name(name))
        self.qualified = name
        return self

    def __getnewargs__(self) -> tuple[str]:  # pickled as its qualified name
        return (self.qualified,)


def offered(name: str) -> str:
    """Return the name the model calls a card's tool by: a WireName for `server.tool`."""
    return WireName(name) if qualified(name) is not None else name


def original(name: str) -> str:
    """Return the qualified name a card's tool name stands for (itself for a plain tool)."""
    return name.qualified if isinstance(name, WireName) else name


@dataclass(frozen=True)
class McpServer:
    """One server of mcp.yaml: a command to run (stdio) or a URL (streamable HTTP); values may
    hold `${VAR}` references, which `resolved` expands."""

    name: str
    file: Path
    command: str | None = None
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict, hash=False)
    cwd: str | None = None
    url: str | None = None
    headers: Mapping[str, str] = field(default_factory=dict, hash=False)

    def key(self) -> tuple:
        """Identify the server as started: two files naming the same thing share one process."""
        return (
            self.name,
            self.command,
            self.args,
            tuple(sorted(self.env.items())),
            self.cwd,
            self.url,
            tuple(sorted(self.headers.items())),
        )

    def resolved(
        self, environ: Mapping[str, str] | None = None
    ) -> tuple[McpServer, frozenset[str]]:
        """Expand every `${VAR}` (ConfigError if unset); return the server and their values."""
        environ = os.environ if environ is None else environ
        found: set[str] = set()

        def expand(value: str, where: str) -> str:
            return _expand(value, environ, found, f"{self.file}: servers.{self.name}.{where}")

        server = replace(
            self,
            command=expand(self.command, "command") if self.command is not None else None,
            args=tuple(expand(a, f"args[{i}]") for i, a in enumerate(self.args)),
            env={k: expand(v, f"env.{k}") for k, v in self.env.items()},
            cwd=expand(self.cwd, "cwd") if self.cwd is not None else None,
            url=expand(self.url, "url") if self.url is not None else None,
            headers={k: expand(v, f"headers.{k}") for k, v in self.headers.items()},
        )
        return server, frozenset(v for v in found if v)


@dataclass(frozen=True)
class McpConfig:
    """The servers declared in one mcp.yaml."""

    path: Path
    servers: Mapping[str, McpServer] = field(default_factory=dict, hash=False)


def mcp_settings(settings: Settings) -> McpConfig | None:
    """Read the MCP servers file (TINY_MCP, or mcp.yaml in the cards folder), if there is one."""
    path = mcp_path(settings.cards_dir, settings.mcp_file, settings.origin("mcp_file"))
    return None if path is None else load_mcp_config(path)


def load_mcp_config(path: Path | None) -> McpConfig | None:
    """Read and check mcp.yaml; raise ConfigError naming the file and key of the first fault."""
    if path is None:
        return None
    try:  # a key written twice is refused: YAML would keep the last one without a word
        _, data = userfiles.load_yaml(read_config(path), unique=True)
    except yaml.YAMLError as exc:  # at the line to fix, as a card's: where a `{` opened
        line = userfiles.yaml_error_line(exc)
        where = f"{path}:{line}" if line else str(path)
        raise ConfigError(f"{where}: {userfiles.yaml_error_message(exc)}") from None
    if not isinstance(data, dict) or set(data) - {"servers"}:
        raise ConfigError(f"{path}: must be a mapping with one key, 'servers'")
    servers = data.get("servers") or {}
    if not isinstance(servers, dict):
        raise ConfigError(f"{path}: servers: must be a mapping of server name -> settings")
    return McpConfig(path, {str(n): _server(path, n, s) for n, s in servers.items()})


def read_config(path: Path) -> str:
    """A config file's text, bounded; ConfigError naming the file when it cannot be read."""
    try:
        return userfiles.read_yaml_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


# --- helpers ------------------------------------------------------------------------------


def secret_name(name: str) -> bool:
    """Tell whether a setting's name (an env or header entry's, a flag's) says it holds a secret."""
    return re.search(SECRET_NAME, name.lstrip("-")) is not None


def _server(path: Path, name: Any, spec: Any) -> McpServer:
    """Check one server's settings and build it; ConfigError names the first fault."""
    where = f"{path}: servers.{printable(str(name))}"
    if not isinstance(name, str) or not re.fullmatch(SERVER_NAME, name):
        raise ConfigError(f"{where}: a server name is 1-32 letters, digits, '_' or '-'")
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: must be a mapping (command: ... or url: ...)")
    unknown = sorted(set(map(str, spec)) - set(SERVER_KEYS))
    if unknown:
        raise ConfigError(f"{where}.{unknown[0]}: unknown key; allowed: {', '.join(SERVER_KEYS)}")
    if ("command" in spec) == ("url" in spec):
        raise ConfigError(f"{where}: give either command (stdio) or url (streamable HTTP)")
    _check_type(where, spec)
    server = McpServer(
        name,
        path,
        command=_text(where, spec, "command"),
        args=tuple(_string_list(where, spec, "args")),
        env=_string_map(where, spec, "env"),
        cwd=_text(where, spec, "cwd"),
        url=_text(where, spec, "url"),
        headers=_string_map(where, spec, "headers"),
    )
    _check_secrets(where, server)
    return server


def _check_type(where: str, spec: dict) -> None:
    """`type` is optional (VS Code writes it); when given it must agree with the settings."""
    kind = spec.get("type")
    if kind is None:
        return
    if kind not in TYPES:
        raise ConfigError(f"{where}.type: {kind!r} is not stdio or http")
    if TYPES[kind] not in spec:
        raise ConfigError(f"{where}.type: {kind} needs '{TYPES[kind]}'")


def _text(where: str, spec: dict, key: str) -> str | None:
    value = spec.get(key)
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise ConfigError(f"{where}.{key}: must be a non-empty string")
    return value


def _string_list(where: str, spec: dict, key: str) -> list[str]:
    value = spec.get(key) or []
    if not isinstance(value, list):
        raise ConfigError(f"{where}.{key}: must be a list")
    if not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}.{key}: every value must be a string (quote numbers)")
    return value


def _string_map(where: str, spec: dict, key: str) -> dict[str, str]:
    value = spec.get(key) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}.{key}: must be a mapping")
    if not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ConfigError(f"{where}.{key}: every name and value must be a string (quote numbers)")
    return dict(value)


def _check_secrets(where: str, server: McpServer) -> None:
    """Refuse a secret written into the file, whole or in part (nothing would redact a literal
    part): it must be a `${VAR}`. The message never repeats the value."""
    entries = [("headers", k, v) for k, v in server.headers.items()]
    for section, key, value in entries + [("env", k, v) for k, v in server.env.items()]:
        # an empty value (a host's placeholder, `"GITHUB_TOKEN": ""`) holds no secret
        if secret_name(key) and value.strip() and not re.fullmatch(SECRET_VALUE, value):
            said = "part of a secret is" if re.search(REFERENCE, value) else "a secret cannot be"
            example = f"${{MY_{env_name(key)}}}"
            raise ConfigError(
                f"{where}.{section}.{key}: {said} written in the file; the value may be only "
                f"${{VAR}} from the environment, or a scheme and ${{VAR}}, e.g. {key}: {example} "
                f"or {key}: Bearer {example}"
            )
    for setting, value in _values(server):
        passwords = (found.group(2) for found in re.finditer(URL_PASSWORD, value))
        if any(not re.fullmatch(REFERENCE, password) for password in passwords):
            raise ConfigError(f"{where}.{setting}: a password in a URL must be exactly a ${{VAR}}")


def _values(server: McpServer) -> list[tuple[str, str]]:
    """(where, value) of each setting that may hold a URL: url, args, env and headers."""
    return [
        *([("url", server.url)] if server.url is not None else []),
        *((f"args[{i}]", arg) for i, arg in enumerate(server.args)),
        *((f"env.{k}", v) for k, v in server.env.items()),
        *((f"headers.{k}", v) for k, v in server.headers.items()),
    ]


def env_name(text: str, empty: str = "SECRET") -> str:
    """`text` as a variable's name: capitals, digits and '_' (`empty` when nothing is left)."""
    return re.sub(r"[^A-Za-z0-9]+", "_", text).strip("_").upper() or empty


def _expand(value: str, environ: Mapping[str, str], found: set[str], where: str) -> str:
    """Replace each `${VAR}` in `value`, adding what it stood for to `found`; in a URL's
    userinfo, percent-encoded (a `/` or `@` in a password would split the URL elsewhere)."""

    def userinfo(match: re.Match[str]) -> str:
        encoded = re.sub(REFERENCE, partial(_variable, environ, found, where, True), match[2])
        return f"{match[1]}{encoded}@"

    value = re.sub(URL_USERINFO, userinfo, value)  # what it puts in holds no `${` to expand
    return re.sub(REFERENCE, partial(_variable, environ, found, where, False), value)


def _variable(
    environ: Mapping[str, str], found: set[str], where: str, encode: bool, match: re.Match[str]
) -> str:
    """The value of the variable `match` names, percent-encoded if `encode`; both to `found`."""
    name = match.group(1)
    if name not in environ:
        raise ConfigError(f"{where}: environment variable {name} is not set")
    value = environ[name]
    found.add(value)
    if not encode:
        return value
    found.add(quote(value, safe=""))  # as a URL holds it: redacted from what quotes the URL
    return quote(value, safe="")
