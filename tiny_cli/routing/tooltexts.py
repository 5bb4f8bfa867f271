"""Tools as routing texts: each tool a card allows is one more view of what the card can do.

A tool's view is its name split into words ("crm_find_company" → "crm find company",
"getWeather" → "get weather") and its description. Descriptions come from where they are
without running anything: the built-in tools' docstrings (static), the functions a card
declares itself, and a mapping the caller passes in (the user's @tool functions when their
module is imported anyway, an MCP server's last tool list kept beside the cards). A tool
with no known description routes by its name alone. A tool that more than MAX_TOOL_SHARE of
the cards allow says nothing about which of them a task wants, so it is no view of any.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tiny_cli.cards.load import Card
from tiny_cli.errors import ConfigError
from tiny_cli.routing.space import Nearest
from tiny_cli.settings import Settings
from tiny_cli.text import age
from tiny_cli.tools.builtin import builtin_descriptions, default_registry
from tiny_cli.tools.mcp_config import McpServer, mcp_settings, original, qualified
from tiny_cli.userfiles import locked, read_json, write_json

__all__ = [
    "MAX_TOOL_SHARE",
    "MCP_TOOLS_FILE",
    "ToolTexts",
    "card_tools",
    "described",
    "gathered",
    "mcp_definition",
    "mcp_definitions",
    "mcp_tool_lists",
    "parameter_values",
    "save_mcp_tools",
    "split_name",
    "tool_named",
    "tool_views",
]

# A tool allowed by more than this share of the cards (and by more than one) is left out of
# every card's views: a placeholder every card lists (HWU64's docs_search) is no evidence.
MAX_TOOL_SHARE = 0.5
MCP_TOOLS_FILE = "mcp-tools.json"  # in the cache dir: the servers' last tool lists
MCP_TOOLS_SALT = "mcp-tools 1"
_HOW = " (validate --connect, cards import or sync)"  # what keeps a server's tool list
# A declared function's view names the values its parameters list: an `enum`, or the examples
# a parameter's description gives after "e.g." ("Type of the artwork. E.g., painting,
# sculpture"). A request names values ("sculptures", "veterans"), seldom a parameter.
MAX_VALUES = 12  # per function: a long enum is a lookup table, not what the tool is about
MAX_VALUE_WORDS = 3  # longer "examples" are prose, not a value
MAX_VALUE_CHARS = 40  # nor is one long token (an id, a blob)
EXAMPLES = re.compile(r"(?i)\be\.\s?g\.?,?:?\s+(.+?)(?:\.(?:\s|$)|\)|$)")
VALUE_SEPARATOR = re.compile(r",|;|\s(?:or|and)\s")
TRAILING_ETC = re.compile(r"(?i)\s*\betc\.?\s*$")


@dataclass(frozen=True)
class ToolTexts:
    """Descriptions of tools cards do not declare themselves, and where they came from."""

    descriptions: Mapping[str, str] = field(default_factory=dict)
    source: str = ""  # said by `tiny route --explain`: e.g. how old the MCP tool list is

    def key(self, cards: Sequence[Card] | None = None) -> str:
        """Hash what routing reads of these; with `cards`, only the tool texts they route by."""
        if cards is not None:
            views = json.dumps(tool_views(cards, self.descriptions), ensure_ascii=False)
            return hashlib.sha256(views.encode()).hexdigest()[:32]
        text = json.dumps(sorted(self.descriptions.items()), ensure_ascii=False)
        builtin = json.dumps(sorted(builtin_descriptions().items()), ensure_ascii=False)
        return hashlib.sha256(f"{text}\0{builtin}\0{MAX_TOOL_SHARE}".encode()).hexdigest()[:32]


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")
_SEPARATORS = re.compile(r"[^0-9A-Za-z]+")


def split_name(name: str) -> str:
    """Split a tool name into lower-case words: "crm_find_company" → "crm find company"."""
    words = _SEPARATORS.split(_CAMEL.sub(" ", name))
    return " ".join(word.lower() for word in words if word)


def card_tools(card: Card, descriptions: Mapping[str, str]) -> list[tuple[str, str]]:
    """Return (tool name, description) for each tool `card` allows; "" when none is known."""
    # an MCP tool is named as the card writes it (`server.tool`), not by its wire name
    own = {f["name"]: described(f) for f in card.functions}
    builtin = builtin_descriptions()
    return [
        (original(tool), own.get(tool) or _given(descriptions, tool) or builtin.get(tool, ""))
        for tool in dict.fromkeys(card.tools)
    ]


def tool_views(
    cards: Sequence[Card], descriptions: Mapping[str, str]
) -> list[list[tuple[str, str]]]:
    """Return each card's tool views as (tool name, routing text), shared tools left out."""
    tools = [card_tools(card, descriptions) for card in cards]
    held = Counter(name for rows in tools for name, _ in rows)
    limit = max(1, int(MAX_TOOL_SHARE * len(cards)))
    return [[(name, view_text(name, text)) for name, text in rows if held[name] <= limit]
            for rows in tools]  # fmt: skip


def described(spec: Mapping[str, object]) -> str:
    """A declared function's description, its parameters' names and the values they list (not
    the parameters' descriptions: with them BFCL ranked worse, docs/routing.md "Tools")."""
    text = str(spec.get("description") or "")
    schema = spec.get("parameters")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return text
    text = f"{text} Parameters: {', '.join(split_name(str(name)) for name in properties)}."
    values = parameter_values(properties)
    return f"{text} Values: {', '.join(values)}." if values else text


def parameter_values(properties: Mapping[str, object]) -> list[str]:
    """The string values parameters list (`enum`, "e.g." in a description), first MAX_VALUES."""
    found: list[str] = []
    for schema in properties.values():
        if not isinstance(schema, dict):
            continue
        enum = schema.get("enum")
        found += [v for v in enum if isinstance(v, str)] if isinstance(enum, list) else []
        examples = EXAMPLES.search(str(schema.get("description") or ""))
        if examples:
            found += VALUE_SEPARATOR.split(examples.group(1))
    values = (" ".join(TRAILING_ETC.sub("", v).strip(" '\"`").split()) for v in found)
    kept = (
        v for v in values if 0 < len(v) <= MAX_VALUE_CHARS and len(v.split()) <= MAX_VALUE_WORDS
    )
    return list(dict.fromkeys(kept))[:MAX_VALUES]


def tool_named(
    cards: Sequence[Card], card: int, descriptions: Mapping[str, str], near: Nearest
) -> str | None:
    """The tool of card `card` whose view is the text nearest a task, if a tool's view is."""
    if near.source != "tool":
        return None
    tools = card_tools(cards[card], descriptions)
    return next((name for name, about in tools if view_text(name, about) == near.text), None)


def view_text(name: str, description: str) -> str:
    """One tool's routing text: its name as words, then its description."""
    words = split_name(name)
    return f"{words}: {' '.join(description.split())}" if description.strip() else words


def _given(descriptions: Mapping[str, str], tool: str) -> str:
    """A tool's description from the caller: by the card's name for it, or `server.tool`."""
    return descriptions.get(tool) or descriptions.get(original(tool), "")


def gathered(
    settings: Settings, now: float | None = None, cards: Iterable[Card] | None = None
) -> ToolTexts:
    """The descriptions a route can have without starting anything, and how old the MCP ones are."""
    # the user's @tool functions (their module is imported to check cards anyway), and the
    # MCP tool lists `tiny validate --connect` kept in the cache dir
    descriptions: dict[str, str] = {}
    if settings.tools_spec:
        registry = default_registry(settings)
        builtin = builtin_descriptions()
        descriptions.update(
            (name, registry[name].description) for name in registry if name not in builtin
        )
    now = time.time() if now is None else now
    mcp, ages = mcp_tool_lists(settings.cache_dir, now, _definitions(settings))
    descriptions.update(mcp)
    never: list[str] = []
    if cards is not None:  # the cache is every project's: another's servers are not these cards'
        named = {
            parts[0] for card in cards for t in card.tools if (parts := qualified(original(t)))
        }
        ages = {server: age for server, age in ages.items() if server in named}
        never = sorted(named - set(ages))
    return ToolTexts(descriptions, _cached(ages, never))


def _definitions(settings: Settings) -> dict[str, str] | None:
    """Each server of the settings' mcp.yaml by its definition; None without an mcp.yaml."""
    config = mcp_settings(settings)
    return None if config is None else mcp_definitions(config.servers)


def mcp_definitions(servers: Mapping[str, McpServer]) -> dict[str, str]:
    """Each server by its definition (`mcp_definition`): whose tool list a kept one is."""
    return {name: mcp_definition(server) for name, server in servers.items()}


def _cached(ages: Mapping[str, float], never: Sequence[str] = ()) -> str:
    """Say how old the kept MCP tool lists are, and which servers have none."""
    if not ages:  # none kept yet: the cards' MCP tools route by their names
        return f"MCP tool list never cached for {', '.join(never)}{_HOW}" if never else ""
    # by each server's own age: the file's time is that of the newest list of any server
    oldest = max(ages, key=lambda server: (ages[server], server))
    span = f"{age(min(ages.values()))} to {age(ages[oldest])}" if len(ages) > 1 else ""
    when = f"{span or age(ages[oldest])} ago" + (f" (oldest: {oldest})" if span else "")
    none = f", never for {', '.join(never)}" if never else ""
    return f"MCP tool list cached {when}{none}{_HOW}"


def mcp_definition(server: McpServer) -> str:
    """A digest of how mcp.yaml starts `server`, `${VAR}`s as written, never their values."""
    # a kept tool list is that definition's: a server of the same name elsewhere is another
    spec = [server.command, list(server.args), server.cwd, server.url]
    return hashlib.sha256(json.dumps(spec).encode()).hexdigest()[:16]


def save_mcp_tools(
    cache_dir: Path,
    tools: Mapping[str, str],
    now: float | None = None,
    servers: Iterable[str] | None = None,
    definitions: Mapping[str, str] | None = None,
) -> None:
    """Keep the servers' tool descriptions (`server.tool` → text) for routes to read."""
    # each server listed (default: those `tools` names) has its kept list replaced, not
    # merged: a server of the same name in another project leaves nothing behind
    listed = set(servers) if servers is not None else {_server(name) for name in tools}
    now = time.time() if now is None else now
    try:
        cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError:
        return  # a cache: not being able to write it is no error
    # read, merge and write under the lock: two lists saved at once would each write the
    # file as it was plus their own servers, and the one written first would lose its servers
    with contextlib.suppress(ConfigError), locked(cache_dir / MCP_TOOLS_FILE):
        found, _, times, defined = _kept(cache_dir)
        kept = {name: text for name, text in found.items() if _server(name) not in listed}
        times.update(dict.fromkeys(listed, now))
        defined = {s: d for s, d in defined.items() if s not in listed}
        defined.update((s, d) for s, d in (definitions or {}).items() if s in listed)
        data = {"salt": MCP_TOOLS_SALT, "written": now, "tools": {**kept, **tools},
                "servers": times, "definitions": defined}  # fmt: skip
        write_json(cache_dir / MCP_TOOLS_FILE, data)


def _server(name: str) -> str:
    """The server of a kept tool's name, `server.tool`."""
    return name.split(".", 1)[0]


def mcp_tool_lists(
    cache_dir: Path, now: float, definitions: Mapping[str, str] | None = None
) -> tuple[dict[str, str], dict[str, float]]:
    """The kept MCP tool descriptions, and how many seconds ago each server's were listed."""
    # with `definitions`, only those servers' lists as defined there (or kept with none)
    tools, written, times, defined = _kept(cache_dir)
    for name in tools:  # a list kept before servers had their own times: the file's time
        server = _server(name)
        if server not in times and written is not None:
            times[server] = written
    if definitions is not None:
        mine = {
            s
            for s in times
            if s in definitions and defined.get(s, definitions[s]) == definitions[s]
        }
        tools = {name: text for name, text in tools.items() if _server(name) in mine}
        times = {server: at for server, at in times.items() if server in mine}
    return tools, {server: max(0.0, now - at) for server, at in times.items()}


def _kept(cache_dir: Path) -> tuple[dict[str, str], float | None, dict[str, float], dict[str, str]]:
    """The kept tool descriptions, when written, when each server's were listed, its definition."""
    data: dict[str, Any] = read_json(cache_dir / MCP_TOOLS_FILE, MCP_TOOLS_SALT) or {}
    tools, written, servers = data.get("tools"), data.get("written"), data.get("servers")
    times = {str(k): float(v) for k, v in _mapping(servers).items() if isinstance(v, int | float)}
    defined = {
        str(k): v for k, v in _mapping(data.get("definitions")).items() if isinstance(v, str)
    }
    if not isinstance(tools, dict) or not isinstance(written, int | float):
        return {}, None, times, defined
    found = {str(k): str(v) for k, v in tools.items() if isinstance(v, str)}
    return found, float(written), times, defined


def _mapping(value: Any) -> dict[Any, Any]:
    return value if isinstance(value, dict) else {}
