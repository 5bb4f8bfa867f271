"""MCP servers from a host's own config, carried into mcp.yaml with their secrets lifted out.

Claude Code's `.mcp.json`, Claude Desktop's and Cursor's configs hold `mcpServers`; VS Code's
`.vscode/mcp.json` holds `servers` (with `type`). Each server becomes an mcp.yaml entry. A
literal secret (a header or env entry named like one, an argument after a flag named like one,
a value shaped like a key) becomes `${VAR}`, a variable named from the server and the key; the
value itself is kept only in memory, for starting the server during this import, and is never
written or shown.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tiny_cli import yamlsafe
from tiny_cli.errors import ConfigError
from tiny_cli.secrets import Scrubber
from tiny_cli.tools.mcp_config import REFERENCE, SCHEMES, SECRET_NAME, SERVER_NAME, _server
from tiny_cli.userfiles import write_text

__all__ = ["HostServers", "Lifted", "merge_mcp_yaml", "read_host_config"]

# a value shaped like a key, wherever it stands: a well-known prefix, or a long random run
KEY_PREFIX = (
    r"^(?:sk-|ghp_|gho_|ghs_|github_pat_|xox[abposr]-|glpat-|AKIA|AIza|hf_|pk_live|sk_live)"
    r"[A-Za-z0-9_-]{6,}"
)
LONG_RUN = r"^[A-Za-z0-9_+=-][A-Za-z0-9_+/=.-]{31,}$"
SECRET_FLAG_WORDS = frozenset(
    ("key", "apikey", "token", "secret", "password", "passwd", "pat", "auth", "credential",
     "credentials", "authorization", "cookie")
)  # fmt: skip
MIN_TOKEN_DIGITS = 4  # a long run counts as a key only with digits in it (not a long word)
HOST_KEYS = ("mcpServers", "servers")  # Claude Code/Desktop and Cursor; VS Code
# VS Code's and Claude Code's own placeholders, as mcp.yaml writes them
HOST_REFERENCE = r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}"
INPUT_REFERENCE = r"\$\{input:([A-Za-z0-9_.-]+)\}"
TINY_ITSELF = re.compile(r"(^|[/\\])tiny(\.exe)?$")


@dataclass(frozen=True)
class Lifted:
    """One literal secret taken out of a host config: where it was and the variable to set."""

    server: str
    where: str  # e.g. `env.GITHUB_TOKEN`, `headers.Authorization`, `args[3]`
    variable: str


@dataclass(frozen=True)
class HostServers:
    """The servers of a host config as mcp.yaml entries, and what was lifted or left out."""

    source: Path
    servers: Mapping[str, dict[str, Any]] = field(default_factory=dict, hash=False)
    lifted: tuple[Lifted, ...] = ()
    values: Mapping[str, str] = field(default_factory=dict, hash=False, repr=False)
    skipped: tuple[tuple[str, str], ...] = ()  # (server, why)


def read_host_config(path: Path) -> HostServers:
    """Read a host's MCP config; ConfigError naming the file for one tiny cannot read."""
    try:
        # JSON is YAML; VS Code's file may hold // comment lines (JSONC)
        _, data = yamlsafe.load(re.sub(r"(?m)^\s*//.*$", "", yamlsafe.read_bounded(path)))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not JSON: {getattr(exc, 'problem', None) or exc}") from None
    key = next((k for k in HOST_KEYS if isinstance(data, dict) and k in data), None)
    if key is None or not isinstance(data[key], dict):
        raise ConfigError(
            f"{path}: no 'mcpServers' (Claude, Cursor) or 'servers' (VS Code) mapping of servers"
        )
    lifter = _Lifter()
    servers: dict[str, dict[str, Any]] = {}
    skipped: list[tuple[str, str]] = []
    for raw_name, spec in data[key].items():
        name = _server_name(str(raw_name))
        why = _why_not(spec)
        if why:
            skipped.append((name, why))
            continue
        entry = lifter.server(name, spec)
        try:
            _server(path, name, entry)  # as mcp.yaml will check it
        except ConfigError as exc:
            skipped.append((name, str(exc)))
            continue
        servers[name] = entry
    return HostServers(path, servers, tuple(lifter.lifted), dict(lifter.values), tuple(skipped))


def merge_mcp_yaml(path: Path, servers: Mapping[str, dict[str, Any]]) -> list[str]:
    """Add `servers` that mcp.yaml lacks (appended: its comments stay); return their names.

    A server mcp.yaml already declares keeps mcp.yaml's settings.
    """
    text = yamlsafe.read_bounded(path) if path.is_file() else ""
    try:
        _, data = yamlsafe.load(text) if text else (None, None)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {getattr(exc, 'problem', exc)}") from None
    have = (data or {}).get("servers") or {} if isinstance(data, dict) else {}
    new = {name: spec for name, spec in servers.items() if name not in have}
    if not new:
        return []
    block = yaml.safe_dump({"servers": new}, sort_keys=False, allow_unicode=True, width=1000)
    merged = _appended(text, block) if text.strip() else _HEADER + block
    if not _holds(merged, set(have) | set(new)):
        # the file's own layout does not take an appended block: write it whole
        merged = _HEADER + yaml.safe_dump(
            {"servers": {**have, **new}}, sort_keys=False, allow_unicode=True, width=1000
        )
    write_text(path, merged)
    return list(new)


_HEADER = "# MCP servers (docs/mcp.md); `tiny cards import` adds the ones it carries over.\n"


def _holds(text: str, names: set[str]) -> bool:
    """Tell whether mcp.yaml's text declares exactly the servers `names`."""
    try:
        _, data = yamlsafe.load(text)
    except yaml.YAMLError:
        return False
    return isinstance(data, dict) and set(data.get("servers") or {}) == names


def _appended(text: str, block: str) -> str:
    """Append the new servers' entries under the file's `servers:` mapping."""
    entries = block.split("\n", 1)[1]  # without its own `servers:` line
    if re.search(r"(?m)^servers:\s*(#.*)?$", text) is None:
        return text  # `servers: {}` or no servers key: the caller rewrites the file
    return text.rstrip("\n") + "\n" + entries


def _why_not(spec: Any) -> str:
    """Say why a host's server cannot be carried over (empty when it can)."""
    if not isinstance(spec, dict):
        return "its settings are not a mapping"
    if spec.get("disabled") is True:
        return "disabled in the host config"
    if spec.get("type") == "sse" or (spec.get("transport") == "sse"):
        return "SSE transport: tiny speaks stdio and streamable HTTP"
    if not isinstance(spec.get("command"), str) and not isinstance(spec.get("url"), str):
        return "neither a command nor a url"
    command, args = str(spec.get("command") or ""), spec.get("args") or []
    if TINY_ITSELF.search(command) or (args[:2] == ["-m", "tiny_cli"]):
        return "tiny itself (tiny serve): not a server of tools for cards"
    return ""


def _server_name(name: str) -> str:
    """The host's server name as mcp.yaml allows one (letters, digits, '_' or '-')."""
    if re.match(SERVER_NAME, name):
        return name
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-_")[:32] or "server"
    return slug if slug[0].isalnum() else f"s{slug}"[:32]


class _Lifter:
    """Turn a host's server settings into an mcp.yaml entry, lifting literal secrets."""

    def __init__(self) -> None:
        self.lifted: list[Lifted] = []
        self.values: dict[str, str] = {}

    def server(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Return the mcp.yaml entry for one host server."""
        entry: dict[str, Any] = {}
        if isinstance(spec.get("command"), str):
            entry["command"] = _references(spec["command"], name)
            args = [str(a) for a in spec.get("args") or []]
            entry["args"] = [self._arg(name, args, i) for i in range(len(args))]
            entry["env"] = self._mapping(name, "env", spec.get("env"))
            if isinstance(spec.get("cwd"), str):
                entry["cwd"] = _references(spec["cwd"], name)
        else:
            entry["url"] = self._url(name, spec["url"])
            entry["headers"] = self._mapping(name, "headers", spec.get("headers"))
        return {k: v for k, v in entry.items() if v}

    def _mapping(self, server: str, section: str, raw: Any) -> dict[str, str]:
        out = {}
        for key, value in (raw or {}).items() if isinstance(raw, dict) else []:
            text = _references(str(value), server)
            if re.search(SECRET_NAME, str(key)) or _looks_secret(text):
                text = self._lift(server, f"{section}.{key}", str(key), text)
            out[str(key)] = text
        return out

    def _arg(self, server: str, args: list[str], at: int) -> str:
        text = _references(args[at], server)
        flag, eq, value = text.partition("=")
        if eq and _secret_flag(flag):  # --api-key=VALUE
            return f"{flag}={self._lift(server, f'args[{at}]', flag, value)}"
        after_flag = at > 0 and _secret_flag(args[at - 1]) and not text.startswith("-")
        if after_flag or _looks_secret(text):  # --token VALUE, or a value shaped like a key
            return self._lift(server, f"args[{at}]", args[at - 1] if after_flag else "arg", text)
        return text

    def _url(self, server: str, url: str) -> str:
        text = _references(url, server)
        found = re.match(r"^([a-z][a-z0-9+.-]*://[^/@:]*:)([^/@]*)(@.*)$", text, re.I)
        if found and not re.fullmatch(REFERENCE, found.group(2)):
            text = (
                found.group(1)
                + self._lift(server, "url", "password", found.group(2))
                + found.group(3)
            )
        return re.sub(
            r"(?i)([?&][^=&#]*(?:key|token|secret|passw|auth)[^=&#]*=)([^&#]+)",
            lambda m: m.group(1) + self._lift(server, "url", m.group(1)[1:-1], m.group(2)),
            text,
        )

    def _lift(self, server: str, where: str, key: str, value: str) -> str:
        """Replace a literal secret by `${VAR}` (a scheme in front stays); keep the value."""
        if not re.search(r"\S", value) or re.fullmatch(REFERENCE, value):
            return value
        scheme = re.match(rf"(?i)^((?:{'|'.join(SCHEMES)}) )(\S.*)$", value)
        prefix, secret = (scheme.group(1), scheme.group(2)) if scheme else ("", value)
        if re.fullmatch(REFERENCE, secret):
            return value
        variable = self._variable(server, key)
        self.values[variable] = secret
        self.lifted.append(Lifted(server, where, variable))
        return f"{prefix}${{{variable}}}"

    def _variable(self, server: str, key: str) -> str:
        """`SERVER_KEY` in capitals; the server's name once, a number when taken."""
        words = re.sub(r"[^A-Za-z0-9]+", "_", key).strip("_").upper() or "SECRET"
        head = re.sub(r"[^A-Za-z0-9]+", "_", server).strip("_").upper() or "SERVER"
        name = words if words.startswith(head + "_") else f"{head}_{words}"
        name = name if re.match(r"^[A-Za-z_]", name) else f"MCP_{name}"
        taken, n = name, 2
        while taken in self.values:
            taken, n = f"{name}_{n}", n + 1
        return taken


def _references(value: str, server: str) -> str:
    """Write a host's `${env:VAR}`, `${VAR:-default}` and `${input:id}` as mcp.yaml's `${VAR}`."""
    value = re.sub(HOST_REFERENCE, lambda m: f"${{{m.group(1)}}}", value)
    head = re.sub(r"[^A-Za-z0-9]+", "_", server).strip("_").upper()
    return re.sub(
        INPUT_REFERENCE,
        lambda m: "${" + f"{head}_{re.sub(r'[^A-Za-z0-9]+', '_', m.group(1)).upper()}" + "}",
        value,
    )


def _secret_flag(arg: str) -> bool:
    """`--api-key`, `--token`, `-p`assword-like flags: a word of the flag names a secret."""
    if not arg.startswith("-"):
        return False
    words = set(re.split(r"[-_.]+", arg.lower().lstrip("-")))
    return bool(words & SECRET_FLAG_WORDS)


def _looks_secret(value: str) -> bool:
    """A value shaped like a key: what the scrubber hides, a known prefix, a long random run."""
    if re.search(REFERENCE, value) and re.fullmatch(rf"(?:\S+ )?{REFERENCE}", value):
        return False
    if Scrubber([]).text(value) != value:
        return True
    if re.match(KEY_PREFIX, value):
        return True
    digits = sum(ch.isdigit() for ch in value)
    return bool(re.match(LONG_RUN, value)) and digits >= MIN_TOKEN_DIGITS
