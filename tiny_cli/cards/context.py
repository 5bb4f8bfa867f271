"""The context a card file is checked in, besides the file itself, and the salt it makes.

Which files of a folder are cards, the Claude Code tool table a Markdown card's tools are read
by, the card schema, the registered tools and the MCP servers: a check of the same file in
the same context finds the same, so the card index (tiny_cli.cards.index) keys on the salt.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from functools import cache
from typing import Any

from tiny_cli._version import __version__
from tiny_cli.cards.schema_check import schema_text
from tiny_cli.tools.mcp_config import MCP_FILENAMES, McpConfig

__all__ = ["CARD_SUFFIXES", "CLAUDE_TOOLS", "NOT_CARDS", "card_salt", "card_schema"]

CARD_SUFFIXES = (".yaml", ".yml", ".md")
# a folder's MCP servers, and what the folder is for (its README.md): never read as cards
NOT_CARDS = {*MCP_FILENAMES, "README.md", "Readme.md", "readme.md"}
# Claude Code's tools -> tiny's built-in tools that do that job; any other Claude tool
# (Bash, Edit, Write, Task, WebSearch, ...) has none and is a problem, never dropped
CLAUDE_TOOLS: dict[str, tuple[str, ...]] = {
    "Read": ("docs_search",),  # over the knowledge folder (TINY_DOCS), not the file system
    "Grep": ("docs_search",),
    "Glob": ("docs_search",),
    "WebFetch": ("http_get", "html_to_text"),
}


def card_salt(known_tools: Mapping[str, bool], mcp: McpConfig | None) -> str:
    """Everything a card's check depends on besides its file (tiny_cli.cards.index)."""
    parts = [__version__, schema_text(), sorted(known_tools.items()),
             sorted(mcp.servers) if mcp is not None else None, CLAUDE_TOOLS]  # fmt: skip
    return hashlib.sha256(repr(parts).encode()).hexdigest()


@cache
def card_schema() -> dict[str, Any]:
    """Return the card JSON Schema shipped inside the package."""
    return json.loads(schema_text())
