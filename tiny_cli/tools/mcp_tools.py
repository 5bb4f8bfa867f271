"""MCP servers' tools as one source of the registry: named at once, bound when a run needs them.

`McpTools` knows a tool by the name a card gives it and which server offers it, from mcp.yaml
alone. Binding a tool starts its server (tiny_cli.tools.mcp_client, imported only then: a run
whose card names no MCP tool never loads the MCP SDK).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tiny_cli.errors import ConfigError, ToolServerError
from tiny_cli.tools.mcp_config import McpConfig, McpServer, WireName, original, qualified
from tiny_cli.tools.registry import Tool

__all__ = ["LISTED_TWICE", "Check", "McpTools"]

# a name listed twice: which of the two a call of it runs is the server's choice, not tiny's
LISTED_TWICE = "the server lists it more than once, and a call could run either"


@dataclass(frozen=True)
class Check:
    """What `tiny validate --connect` found wrong with one MCP tool a card names."""

    index: int  # position in the card's tools
    name: str  # the qualified name, as the card writes it
    message: str


Opener = Callable[[McpServer, float, Mapping[str, str] | None], Any]  # -> a running session


class McpTools:
    """The tools of the servers in one mcp.yaml, as a ToolSource: each bound when a run needs it."""

    def __init__(
        self,
        config: McpConfig,
        environ: Mapping[str, str] | None = None,
        opener: Opener | None = None,
    ) -> None:
        self.config = config
        self.environ = environ
        self._open = opener or _open_session  # starts (or finds) a server's session
        self._tools: dict[str, Tool] = {}  # by qualified name: two may share a wire name
        self._unusable: dict[str, str] = {}  # `check`: server -> why it could not be started
        self._listed: dict[str, Any] = {}  # `check`: server -> its session (started, so listed)

    def owns(self, name: str) -> bool:
        """Say whether `name` is a card's name (a WireName) for a tool of a server in this file."""
        return any(server in self.config.servers for server in _by_server([name]))

    def bind(self, names: Sequence[str], seconds: float, may_write: bool) -> None:
        """Start the servers `names` need and bind their tools; ToolServerError if impossible."""
        deadline = time.monotonic() + seconds
        for server, wanted in _by_server(names).items():
            left = max(0.0, deadline - time.monotonic())
            session = self._open(self.config.servers[server], left, self.environ)
            for wire, tool_name in wanted:
                problem = self._bind_one(session, wire, tool_name, may_write)
                if problem:
                    raise ToolServerError(problem, server=server)

    def bound(self, name: str) -> Tool | None:
        """Return the tool a card's `name` stands for once bound, else None."""
        return self._tools.get(original(name)) if self.owns(name) else None

    def check(self, tools: Sequence[str], may_write: bool, seconds: float) -> list[Check]:
        """Start the servers a card's `tools` need, each within `seconds` of its own (one that
        hangs leaves the next its time); name each tool missing or not allowed."""
        found: list[Check] = []
        for server, wanted in _by_server([t for t in tools if self.owns(t)]).items():
            try:
                if server in self._unusable:  # one wait per server, not one per card naming it
                    raise ToolServerError(self._unusable[server], server=server)
                session = self._open(self.config.servers[server], seconds, self.environ)
            except (ToolServerError, ConfigError) as exc:
                self._unusable[server] = str(exc)
                found.append(_check(tools, wanted[0][0], str(exc)))  # once a server, a card
                continue
            self._listed[server] = session
            for wire, tool_name in wanted:
                problem = self._bind_one(session, wire, tool_name, may_write)
                found += [_check(tools, wire, problem)] if problem else []
        return found

    def listed(self) -> dict[str, dict[str, str]]:
        """Each server `check` started: every tool it lists now (`server.tool`) with its
        description, as import keeps them (not only those the cards name)."""
        return {
            server: session.descriptions(session.tools) for server, session in self._listed.items()
        }

    def _bind_one(self, session: Any, wire: str, tool_name: str, may_write: bool) -> str | None:
        """Bind one tool from the server's listing; return what is wrong instead, if anything."""
        published = session.tools.get(tool_name)
        name = f"{session.server.name}.{tool_name}"
        if published is None:
            have = ", ".join(sorted(session.tools)) or "none"
            return f"MCP server {session.server.name!r} has no tool {tool_name!r} (it has: {have})"
        if tool_name in session.twice:
            return f"tool {name!r} cannot be offered: {LISTED_TWICE}"
        tool = session.tool(wire, name, published)
        if isinstance(tool, str):
            return tool
        if tool.writes and not may_write:
            return (
                f"tool {name!r} writes (its MCP annotations do not say readOnlyHint, or say "
                "destructiveHint), so the card needs 'side_effects: write'"
            )
        self._tools[name] = tool
        return None


def _by_server(names: Iterable[str]) -> dict[str, list[tuple[str, str]]]:
    """Group wire names by server: server -> [(wire name, tool name on that server)]."""
    grouped: dict[str, list[tuple[str, str]]] = {}
    for wire in names:
        parts = qualified(original(wire)) if isinstance(wire, WireName) else None
        if parts is not None:
            grouped.setdefault(parts[0], []).append((wire, parts[1]))
    return grouped


def _check(tools: Sequence[str], wire: str, message: str) -> Check:
    return Check(tools.index(wire), original(wire), message)


def _open_session(server: McpServer, seconds: float, environ: Mapping[str, str] | None) -> Any:
    """Start (or find) `server`'s session: the first use of the MCP SDK in a process."""
    from tiny_cli.tools.mcp_client import open_session  # the SDK: only once a server starts

    return open_session(server, seconds, environ)
