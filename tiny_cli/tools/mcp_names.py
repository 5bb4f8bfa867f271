"""MCP's names: which file declares the servers, and how a card names a server's tool.

A card writes `server.tool` (its qualified name); the model sees a wire name with no dot.
These are strings only: a command whose cards name no MCP tool reads no mcp.yaml and builds
none of tiny_cli.tools.mcp_config's types.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from tiny_cli.errors import ConfigError

__all__ = [
    "MCP_FILENAMES",
    "QUALIFIED_NAME",
    "WIRE_NAME",
    "WireName",
    "mcp_path",
    "offered",
    "original",
    "qualified",
    "wire_name",
]

MCP_FILENAMES = ("mcp.yaml", "mcp.yml")  # in the cards folder; never read as cards
# `server.tool`: MCP tool names are 1-128 of letters, digits, '_', '-' and '.' (the spec's).
# Patterns as text: `re` compiles each on first use (tiny_cli.tools.mcp_config says why).
QUALIFIED_NAME = r"^([A-Za-z0-9][A-Za-z0-9_-]{0,31})\.([A-Za-z0-9_.-]{1,128})$"
WIRE_NAME = r"^[A-Za-z0-9_-]{1,64}$"  # what OpenAI-compatible servers accept
WIRE_SEPARATOR = "__"
WIRE_HASH_CHARS = 8


def mcp_path(cards_dir: Path, explicit: str | None) -> Path | None:
    """Return the mcp.yaml to read: TINY_MCP's file, else one in the cards folder, else None."""
    if explicit:
        path = Path(explicit)
        if not path.is_file():
            raise ConfigError(f"TINY_MCP={explicit}: no such file")
        return path
    return next((cards_dir / n for n in MCP_FILENAMES if (cards_dir / n).is_file()), None)


def qualified(name: str) -> tuple[str, str] | None:
    """Split `server.tool` into its parts; None for a plain (built-in or user) tool name."""
    if "." not in name:  # most names: no pattern to match (cards load by the thousand)
        return None
    found = re.match(QUALIFIED_NAME, name)
    return (found.group(1), found.group(2)) if found and "\n" not in name else None


def wire_name(name: str) -> str:
    """Return the function name the model sees for `server.tool` (a dot cannot go on the wire).

    `time.get_current_time` is `time__get_current_time`. A name that would still break the
    rule (a '.' inside the tool's name, over 64 characters) keeps a readable head and gets a
    hash of the whole qualified name. Two qualified names can still meet on one wire name
    (`a__b.c` and `a.b__c` are both `a__b__c`): card validation refuses that.
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
    """A card's name for one of its MCP tools: the wire name, holding the qualified name.

    Each card's tools carry their own qualified names, so a wire name is resolved through the
    card that lists it, never through a map every card loaded shares (where the last card
    loaded would decide which server a colliding wire name reaches).
    """

    qualified: str

    def __new__(cls, name: str) -> WireName:
        """Return the wire name of the qualified `name`, holding `name`."""
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
