"""MCP servers from a host's own config, carried into mcp.yaml with their secrets lifted out.

Claude Code's `.mcp.json`, Claude Desktop's and Cursor's configs hold `mcpServers`; VS Code's
`.vscode/mcp.json` holds `servers` (with `type`). A literal secret (a header or env entry named
like one, an argument after a flag named like one, a value shaped like a key) becomes `${VAR}`,
named from the server and the key; the value is kept only in memory, for starting the server
during this import.
"""

from __future__ import annotations

import json
import os
import re
import textwrap
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import yaml

from tiny_cli import userfiles
from tiny_cli.errors import ConfigError
from tiny_cli.secrets import Scrubber
from tiny_cli.setting_rules import credential_param
from tiny_cli.text import kind_of, printable
from tiny_cli.tools.mcp_config import (
    REFERENCE,
    SCHEME,
    SERVER_NAME,
    URL_PASSWORD,
    URL_SCHEME,
    McpServer,
    _server,
    env_name,
    load_mcp_config,
    read_config,
    secret_name,
)
from tiny_cli.userfiles import load_json, locked, write_text

__all__ = ["HostServers", "Lifted", "literal_secrets", "merge_mcp_yaml", "read_host_config"]

# a value shaped like a key, wherever it stands: a well-known prefix, or a long random run
KEY_PREFIX = (
    r"^(?:sk-|ghp_|gho_|ghs_|github_pat_|xox[abposr]-|glpat-|AKIA|AIza|hf_|pk_live|sk_live)"
    r"[A-Za-z0-9_-]{6,}"
)
LONG_RUN = r"^[A-Za-z0-9_+=-][A-Za-z0-9_+/=.-]{31,}$"
SECRET_FLAG_WORDS = frozenset(
    ("key", "apikey", "token", "secret", "password", "passwd", "pat", "auth", "credential",
     "credentials", "authorization", "cookie", "passphrase")
)  # fmt: skip
# ...but not a path: one with a file extension at its end (`logs/server-2024.log`), or a '/'
# beside a '.', '_' or '-', which base64, the one key alphabet holding '/', never holds
FILE_EXTENSION = r"\.[A-Za-z][A-Za-z0-9]{0,7}$"
MIN_TOKEN_DIGITS = 4  # a long run counts as a key only with digits in it (not a long word)
# a URL's query parameter: group 2 its name (setting_rules.credential_param reads it: a pattern
# in it would cost a long one its length squared), group 3 its value
QUERY_PARAMETER = r"([?&]([^=&#?\s]*)=)([^&#\s]+)"
# a URL's path (group 2), after its scheme and host (group 1): a segment shaped like a key in
# it (`/mcp/sk-…/`, as hosted servers hand them out) is lifted
URL_PATH = rf"(?i)({URL_SCHEME}[^/?#\s]*)(/[^?#\s]*)"
# `NAME=value` (docker's `-e`): a variable's name, its value lifted as an env entry's would be
VARIABLE_NAME = r"[A-Za-z_][A-Za-z0-9_]*"
HOST_KEYS = ("mcpServers", "servers")  # Claude Code/Desktop and Cursor; VS Code
# VS Code's and Claude Code's own placeholders, as mcp.yaml writes them
HOST_REFERENCE = r"\$\{(?:env:)?([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}"
INPUT_REFERENCE = r"\$\{input:([A-Za-z0-9_.-]+)\}"
# VS Code's (and Cursor's) predefined variables: written out on import (no environment holds
# them), but those only the editor knows (the open file, the selection), which are refused
PREDEFINED_REFERENCE = r"\$\{(workspaceFolder|workspaceFolderBasename|userHome|pathSeparator|/)\}"
EDITOR_REFERENCE = (
    r"\$\{(file|fileWorkspaceFolder|relativeFile|relativeFileDirname|fileBasename"
    r"|fileBasenameNoExtension|fileExtname|fileDirname|fileDirnameBasename|cwd|lineNumber"
    r"|selectedText|execPath|defaultBuildTask)\}"
)
HOST_FOLDERS = (".vscode", ".cursor")  # a project's: the workspace folder is the one above
# JSONC (VS Code's files): a string, kept as it is (group 1), else a comment; then a string,
# else a comma before a closing bracket (trailing commas, which JSONC allows)
JSON_STRING = r'"(?:[^"\\\n]|\\.)*"'
JSONC_COMMENT = rf"({JSON_STRING})|//[^\n]*|/\*[\s\S]*?(?:\*/|$)"
TRAILING_COMMA = rf"({JSON_STRING})|,(?=\s*[}}\]])"
TINY_ITSELF = re.compile(r"(^|[/\\])tiny(\.exe)?$")
TRANSPORT_KEYS = ("type", "transport", "transportType")  # VS Code, Claude Code; others; Cline
HOST_TYPES = ("stdio", "http", "sse", "streamable-http", "streamable_http", "streamableHttp")
# the key each transport needs, as mcp.yaml's `type` does (mcp_config.TYPES)
HOST_TYPE_NEEDS = {"stdio": "command", **dict.fromkeys(HOST_TYPES[1:], "url")}
# what each setting of a host's server must be; every other key is an error, but these
SHAPES = {
    **dict.fromkeys(("command", "url", "cwd"), "a non-empty string"),
    "args": "a list of strings",
    **dict.fromkeys(("env", "headers"), "an object of strings"),
    "disabled": "true or false",
    **dict.fromkeys(TRANSPORT_KEYS, "stdio, http or sse"),
}
# ...the host's own settings, which starting the server does not need (docs/mcp.md): ignored
HOST_ONLY = ("alwaysAllow", "autoApprove", "timeout", "dev")


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


def read_host_config(path: Path, mcp_file: Path | None = None) -> HostServers:
    """Read a host's MCP config (to be carried into `mcp_file`); ConfigError naming the fault."""
    key, hosted = _host_servers(path)
    have, used = _existing(mcp_file)
    lifter = _Lifter(used)
    predefined = _predefined(path)
    servers: dict[str, dict[str, Any]] = {}
    skipped: list[tuple[str, str]] = []
    carried_as: dict[str, str] = {}  # mcp.yaml's name -> the host's, of each server carried
    for raw_name, spec in hosted.items():
        where = f"{path}: {key}.{printable(str(raw_name))}"
        _check_spec(where, spec)
        spec = _written_out(where, spec, predefined)
        name = _server_name(str(raw_name))
        why = _why_not(spec) or _taken(name, carried_as) or _held(name, str(raw_name), spec, have)
        if why:  # a server whose name is taken is listed by its own, not the one it lost to
            lost = name in carried_as or name in have
            skipped.append((printable(str(raw_name)) if lost else name, why))
            continue
        carried_as[name] = str(raw_name)
        servers[name] = lifter.server(name, spec)
        _server(path, name, servers[name])  # as mcp.yaml will check it
    return HostServers(path, servers, tuple(lifter.lifted), dict(lifter.values), tuple(skipped))


def _taken(name: str, carried_as: Mapping[str, str]) -> str:
    if name not in carried_as:
        return ""
    return f"mcp.yaml's name for it, {name}, is taken by {printable(carried_as[name])}: rename one"


def _predefined(path: Path) -> dict[str, str]:
    """The values of VS Code's predefined variables for a host config at `path`: the workspace
    is the folder holding its `.vscode/` (or `.cursor/`), else the config's own folder."""
    folder = path.resolve().parent
    folder = folder.parent if folder.name in HOST_FOLDERS else folder
    return {
        "workspaceFolder": str(folder),
        "workspaceFolderBasename": folder.name,
        "userHome": str(Path.home()),
        **dict.fromkeys(("pathSeparator", "/"), os.sep),
    }


def _written_out(where: str, spec: dict[str, Any], values: Mapping[str, str]) -> dict[str, Any]:
    """A host's server with VS Code's predefined variables written out; ConfigError naming the
    setting of one only the editor knows."""

    def text(setting: str, value: str) -> str:
        editor = re.search(EDITOR_REFERENCE, value)
        if editor:
            raise ConfigError(
                f"{where}.{setting}: ${{{editor[1]}}} is known only inside the editor: write "
                "its value instead"
            )
        return re.sub(PREDEFINED_REFERENCE, lambda m: values[m[1]], value)

    out = dict(spec)
    for key in ("command", "url", "cwd"):
        if key in spec:
            out[key] = text(key, spec[key])
    if "args" in spec:
        out["args"] = [text(f"args[{i}]", arg) for i, arg in enumerate(spec["args"])]
    for key in ("env", "headers"):
        if key in spec:
            out[key] = {k: text(f"{key}.{printable(k)}", v) for k, v in spec[key].items()}
    return out


def _existing(mcp_file: Path | None) -> tuple[dict[str, McpServer], dict[str, set[str]]]:
    """The servers mcp.yaml declares now, and the `${VAR}`s each names: taken for another
    server's secret (two servers' secrets in one variable would be one value for both)."""
    if mcp_file is None:
        return {}, {}
    declared = _declared(mcp_file)[1]
    used = {n: set(re.findall(REFERENCE, json.dumps(s, default=str))) for n, s in declared.items()}
    return {n: _server(mcp_file, n, spec) for n, spec in declared.items()}, used


def _held(name: str, raw_name: str, spec: dict[str, Any], have: Mapping[str, McpServer]) -> str:
    """Say why a renamed server cannot be carried as `name`, which mcp.yaml gives another
    server; else ''. One the host names as mcp.yaml does keeps mcp.yaml's settings instead;
    one carried before under its new name is the same server, and is carried again."""
    if name == raw_name or name not in have:
        return ""
    mine = _server(have[name].file, name, _Lifter().server(name, spec))
    if mine.key() == have[name].key():
        return ""
    file = have[name].file.name
    return f"mcp.yaml's name for it, {name}, is taken by another server in {file}: rename one"


def _host_servers(path: Path) -> tuple[str, dict[Any, Any]]:
    data = _read_json(path)
    key = next((k for k in HOST_KEYS if isinstance(data, dict) and k in data), None)
    if key is None or not isinstance(data[key], dict):
        raise ConfigError(
            f"{path}: no 'mcpServers' (Claude, Cursor) or 'servers' (VS Code) mapping of servers"
        )
    return key, data[key]


def _read_json(path: Path) -> Any:
    """A host config's JSON (JSONC: VS Code's); ConfigError naming the file and line if not."""
    try:  # a key twice: the host keeps the last, and so does its import
        return load_json(_plain_json(read_config(path)), str(path), keys_once=False)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{exc.lineno}: not JSON: {exc.msg}") from None
    except RecursionError:
        raise ConfigError(f"{path}: not JSON tiny can read: nested too deep") from None


def _plain_json(text: str) -> str:
    """A JSONC text as JSON: its comments blanked and its trailing commas gone outside strings,
    its line ends kept (an error names the line it is on), a byte order mark dropped."""
    text = re.sub(
        JSONC_COMMENT, lambda m: m[1] or re.sub(r"[^\n]", " ", m[0]), text.removeprefix("\ufeff")
    )
    return re.sub(TRAILING_COMMA, lambda m: m[1] or "", text)


def _check_spec(where: str, spec: Any) -> None:
    """Refuse a host's server whose settings are not what its host takes; name the setting
    and the kind of value it holds, never the value (it may be a secret)."""
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: must be an object (command or url), got {kind_of(spec)}")
    for key in (k for k in SHAPES if k in spec):
        fault = _fault(SHAPES[key], spec[key])
        if fault is not None:
            inner, value = fault
            shape = "a string" if inner else SHAPES[key]
            raise ConfigError(f"{where}.{key}{inner}: must be {shape}, got {kind_of(value)}")
    if ("command" in spec) == ("url" in spec):
        raise ConfigError(f"{where}: needs either command (stdio) or url (HTTP), not both")
    for key in (k for k in TRANSPORT_KEYS if k in spec):  # dropped on import: it must agree
        needs = HOST_TYPE_NEEDS[spec[key]]
        if needs not in spec:
            raise ConfigError(f"{where}.{key}: {spec[key]} needs '{needs}'")


def _fault(shape: str, value: Any) -> tuple[str, Any] | None:
    """(where inside the setting, the wrong value) when `value` is not `shape`; else None."""
    if shape == "a list of strings" and isinstance(value, list):
        return next(((f"[{i}]", v) for i, v in enumerate(value) if not isinstance(v, str)), None)
    if shape == "an object of strings" and isinstance(value, dict):
        wrong = ((f".{printable(str(k))}", v) for k, v in value.items() if not isinstance(v, str))
        return next(wrong, None)
    fits = {
        "a non-empty string": isinstance(value, str) and bool(value.strip()),
        "true or false": isinstance(value, bool),
        "stdio, http or sse": value in HOST_TYPES,
    }
    return None if fits.get(shape, False) else ("", value)


def merge_mcp_yaml(path: Path, servers: Mapping[str, dict[str, Any]]) -> list[str]:
    """Add `servers` that mcp.yaml lacks after its own text, kept as it is; return their names."""
    # read, merge and write under the lock: two imports at once would each write the file as
    # it was plus their own servers, and the one written first would lose its servers
    with locked(path):
        text, have = _declared(path)
        new = {name: spec for name, spec in servers.items() if name not in have}
        if not new:
            return []
        merged = _appended(text, new)
        if not _holds(merged, {**have, **new}):
            raise ConfigError(
                f"{path}: cannot add {', '.join(new)} without rewriting the file: write its "
                "servers one a line under 'servers:' (block style), or add them by hand; left "
                "as it is",
                path=path,
            )
        write_text(path, merged)
    return list(new)


_HEADER = "# MCP servers (docs/mcp.md); `tiny cards import` adds the ones it carries over.\n"


def _declared(path: Path) -> tuple[str, dict[str, Any]]:
    """mcp.yaml's text and its servers as written; ConfigError naming the first fault."""
    if not path.is_file():
        return "", {}
    text = read_config(path)
    if re.search(r"(?m)^[ \t]*[^\s#]", text) is None:
        return text, {}  # empty, or comments only: the servers go after them
    load_mcp_config(path)  # a mapping with one key, `servers`, of servers that check
    return text, dict(userfiles.load_yaml(text)[1].get("servers") or {})


def _holds(text: str, servers: dict[str, Any]) -> bool:
    """Tell whether mcp.yaml's text declares exactly `servers`, as they are."""
    try:
        _, data = userfiles.load_yaml(text)
    except yaml.YAMLError:
        return False
    return bool(data == {"servers": servers})


def _appended(text: str, new: dict[str, Any]) -> str:
    """mcp.yaml's text with the new servers' entries under its `servers:` line, indented as its
    own entries are, in its own line ends and with its byte order mark, if it has them."""
    bom = "\ufeff" if text.startswith("\ufeff") else ""
    plain = _appended_plain(text.removeprefix(bom).replace("\r\n", "\n"), new)
    return bom + (plain.replace("\n", "\r\n") if "\r\n" in text else plain)


def _appended_plain(text: str, new: dict[str, Any]) -> str:
    block = yaml.safe_dump({"servers": new}, sort_keys=False, allow_unicode=True, width=1000)
    if not text.strip():
        return _HEADER + block
    text = re.sub(r"(?m)^servers:[ \t]*\{\s*\}", "servers:", text, count=1)  # `servers: {}`
    if re.search(r"(?m)^servers:[ \t]*(#.*)?$", text) is None:
        return text.rstrip("\n") + "\n" + block  # comments only, or flow style: _holds tells
    first = re.search(r"(?m)^servers:.*\n(?:[ \t]*(?:#.*)?\n)*( +)[^\s#]", text)
    indent = " " * (len(first.group(1)) - 2) if first else ""
    return text.rstrip("\n") + "\n" + textwrap.indent(block.split("\n", 1)[1], indent)


def _why_not(spec: dict[str, Any]) -> str:
    """Say why a host's server (its settings checked) is not carried over; empty when it is."""
    unknown = sorted(str(k) for k in spec if k not in SHAPES and k not in HOST_ONLY)
    if unknown:  # a host's own setting tiny cannot carry over, named: never dropped unseen
        return f"a setting tiny does not carry over: {printable(unknown[0])}"
    if spec.get("disabled") is True:
        return "disabled in the host config"
    if "sse" in (spec.get(k) for k in TRANSPORT_KEYS):
        return "SSE transport: tiny speaks stdio and streamable HTTP"
    command, args = spec.get("command", ""), spec.get("args", [])
    if TINY_ITSELF.search(command) or (args[:2] == ["-m", "tiny_cli"]):
        return "tiny itself (tiny serve): not a server of tools for cards"
    return ""


def _server_name(name: str) -> str:
    """The host's server name as mcp.yaml allows one (letters, digits, '_' or '-')."""
    if re.fullmatch(SERVER_NAME, name):
        return name
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-_")[:32] or "server"
    return slug if slug[0].isalnum() else f"s{slug}"[:32]


def literal_secrets(name: str, spec: dict[str, Any]) -> frozenset[str]:
    """The literal secrets a server's spec holds, by the rule import lifts them with."""
    lifter = _Lifter()
    lifter.server(name, spec)
    return frozenset(lifter.values.values())


class _Lifter:
    """Turn a host's server settings into an mcp.yaml entry, lifting literal secrets."""

    def __init__(self, used: Mapping[str, set[str]] | None = None) -> None:
        self.lifted: list[Lifted] = []
        self.values: dict[str, str] = {}
        self.used = used or {}  # the variables mcp.yaml's servers name already, by server

    def server(self, name: str, spec: dict[str, Any]) -> dict[str, Any]:
        """Return the mcp.yaml entry for one host server."""
        entry: dict[str, Any] = {}
        if "command" in spec:
            entry["command"] = _references(spec["command"], name)
            args = list(spec.get("args") or [])
            entry["args"] = [self._arg(name, args, i) for i in range(len(args))]
            entry["env"] = self._mapping(name, "env", spec.get("env"))
            if "cwd" in spec:
                entry["cwd"] = _references(spec["cwd"], name)
        else:
            entry["url"] = self._urls(name, "url", "", _references(spec["url"], name))
            entry["headers"] = self._mapping(name, "headers", spec.get("headers"))
        return {k: v for k, v in entry.items() if v}

    def _mapping(self, server: str, section: str, raw: dict[str, str] | None) -> dict[str, str]:
        out = {}
        for key, value in (raw or {}).items():
            text, where = _references(value, server), f"{section}.{key}"
            lift = self._lift if secret_name(str(key)) else self._value
            out[str(key)] = lift(server, where, str(key), text)
        return out

    def _arg(self, server: str, args: list[str], at: int) -> str:
        text = _references(args[at], server)
        flag, eq, value = text.partition("=")
        if eq and (_secret_flag(flag) or _secret_variable(flag, value)):  # --api-key=VALUE
            return f"{flag}={self._lift(server, f'args[{at}]', flag, value)}"
        if at > 0 and _secret_flag(args[at - 1]) and not text.startswith("-"):  # --token VALUE
            return self._lift(server, f"args[{at}]", args[at - 1], text)
        return self._value(server, f"args[{at}]", "", text)

    def _value(self, server: str, where: str, key: str, text: str) -> str:
        """A value not named as a secret: its URLs' credentials lifted, or itself if key-shaped."""
        if "://" in text:
            lifted = self._urls(server, where, key, text)
            if lifted != text or re.search(REFERENCE, text):  # a `${VAR}` in it: as written
                return lifted
        return self._lift(server, where, key or "arg", text) if _looks_secret(text) else text

    def _urls(self, server: str, where: str, key: str, text: str) -> str:
        """Lift the password, secret query parameters and key-shaped path segments of URLs."""
        text = re.sub(
            URL_PASSWORD,
            lambda m: m[1] + self._lift(server, where, f"{key} password", m[2], decode=True),
            text,
        )
        text = re.sub(QUERY_PARAMETER, partial(self._parameter, server, where), text)
        return re.sub(URL_PATH, partial(self._path, server, where, key), text)

    def _parameter(self, server: str, where: str, found: re.Match[str]) -> str:
        """A query parameter, its value lifted if its name is a secret's or it is key-shaped."""
        if not credential_param(found[2]) and not _looks_secret(found[3]):
            return found[0]
        return found[1] + self._lift(server, where, found[2], found[3])

    def _path(self, server: str, where: str, key: str, found: re.Match[str]) -> str:
        segments = [
            self._lift(server, where, f"{key} key", part) if _looks_secret(part) else part
            for part in found[2].split("/")
        ]
        return found[1] + "/".join(segments)

    def _lift(self, server: str, where: str, key: str, value: str, decode: bool = False) -> str:
        """Replace a literal secret by `${VAR}` (a scheme in front stays) and keep its value;
        `decode`: a URL's password, which mcp.yaml encodes when the server starts."""
        if not re.search(r"\S", value):
            return value
        scheme = re.match(rf"(?i)^({SCHEME})(\S.*)$", value)
        prefix, secret = (scheme.group(1), scheme.group(2)) if scheme else ("", value)
        if re.fullmatch(REFERENCE, secret):
            return value
        variable = self._variable(server, key)
        self.values[variable] = unquote(secret) if decode else secret
        self.lifted.append(Lifted(server, where, variable))
        return f"{prefix}${{{variable}}}"

    def _variable(self, server: str, key: str) -> str:
        """`SERVER_KEY` in capitals; the server's name once, a number when taken."""
        words, head = env_name(key), env_name(server, "SERVER")
        name = _variable_name(words if words.startswith(head + "_") else f"{head}_{words}")
        taken, n = name, 2
        while taken in self.values or self._elsewhere(server, taken):
            taken, n = f"{name}_{n}", n + 1
        return taken

    def _elsewhere(self, server: str, variable: str) -> bool:
        """Tell whether mcp.yaml names `variable` for another server (not `server` itself)."""
        return any(variable in names for other, names in self.used.items() if other != server)


def _references(value: str, server: str) -> str:
    """Write a host's `${env:VAR}`, `${VAR:-default}` and `${input:id}` as mcp.yaml's `${VAR}`."""
    value = re.sub(HOST_REFERENCE, lambda m: f"${{{m.group(1)}}}", value)
    head = env_name(server, "")
    return re.sub(
        INPUT_REFERENCE,
        lambda m: "${" + _variable_name(f"{head}_{env_name(m.group(1), '')}") + "}",
        value,
    )


def _variable_name(name: str) -> str:
    """`name` as a variable's name: `MCP_` in front of one that starts with a digit."""
    return name if re.match(r"^[A-Za-z_]", name) else f"MCP_{name}"


def _secret_flag(arg: str) -> bool:
    """`--api-key`, `--accessToken`, `--pat`: a word of the flag (camelCase split too) names a
    secret; whole words, since a flag's value is lifted only for them (`--max-tokens 4096`,
    `--author`, `--hotkey F5` are no secrets)."""
    words = {w.lower() for w in re.findall(r"[A-Z]?[a-z]+|[A-Z]+|\d+", arg.split("=", 1)[0])}
    return arg.startswith("-") and bool(words & SECRET_FLAG_WORDS)


def _secret_variable(name: str, value: str) -> bool:
    """`NAME=value` (docker's `-e`) holding a secret: by NAME, or a key-shaped value (no URL)."""
    if not re.fullmatch(VARIABLE_NAME, name):
        return False
    return secret_name(name) or ("://" not in value and _looks_secret(value))


def _looks_secret(value: str) -> bool:
    """A value shaped like a key: what the scrubber hides, a known prefix, a long random run."""
    if re.fullmatch(rf"(?:\S+ )?{REFERENCE}", value):  # a `${VAR}`, after a scheme at most
        return False
    if Scrubber([]).text(value) != value or re.match(KEY_PREFIX, value):
        return True
    digits = sum(ch.isdigit() for ch in value)
    long_run = bool(re.match(LONG_RUN, value)) and digits >= MIN_TOKEN_DIGITS
    return long_run and not _path(value)


def _path(value: str) -> bool:
    """Tell whether a value is shaped like a file's path, not a key (FILE_EXTENSION says why)."""
    return bool(re.search(FILE_EXTENSION, value)) or (
        "/" in value and bool(re.search(r"[._-]", value))
    )
