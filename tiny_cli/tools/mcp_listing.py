"""A server's tools as `tools/list` gives them now: what `tiny cards import` makes cards from.

A server this process already started is asked again (its list may have changed since);
one that cannot be started is a Listing with the reason, never an exception: one server
that fails does not stop the others.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

from tiny_cli.errors import ConfigError, ToolServerError
from tiny_cli.tools.args_check import schema_problem
from tiny_cli.tools.mcp_client import description_of, listing, open_session, writes
from tiny_cli.tools.mcp_config import McpServer
from tiny_cli.tools.mcp_tools import LISTED_TWICE

__all__ = ["LIST_SECONDS", "ListedTool", "Listing", "list_servers"]

LIST_SECONDS = 30.0  # how long one server may take to start and list its tools
LIST_THREADS = 4  # servers started at once


@dataclass(frozen=True)
class ListedTool:
    """One published tool: its name on the server, its description, whether it writes."""

    name: str
    description: str
    writes: bool  # MCP annotations: not readOnlyHint, or destructiveHint (no hint: writes)
    parameters: tuple[str, ...] = ()
    problem: str = ""  # why no call of it could run (an inputSchema that is no JSON Schema)


@dataclass(frozen=True)
class Listing:
    """One server's tools, or why it could not be reached."""

    server: str
    status: Literal["ok", "unreachable"]
    tools: tuple[ListedTool, ...] = ()
    why: str = ""
    secrets: frozenset[str] = field(default_factory=frozenset, repr=False)


def list_servers(
    servers: Sequence[McpServer],
    environ: Mapping[str, str] | None = None,
    seconds: float = LIST_SECONDS,
) -> list[Listing]:
    """Start each server (a few at once), list its tools; in the order given."""
    pool = ThreadPoolExecutor(max_workers=LIST_THREADS)
    try:
        return list(pool.map(lambda s: _list_one(s, environ, seconds), servers))
    finally:  # not waiting on a server still starting: Ctrl-C must reach stop_servers now
        pool.shutdown(wait=False, cancel_futures=True)


def _list_one(server: McpServer, environ: Mapping[str, str] | None, seconds: float) -> Listing:
    try:
        session = open_session(server, seconds, environ)
        tools, twice = session.host.run(listing(session.client), seconds)
    except (ToolServerError, ConfigError) as exc:
        return Listing(server.name, "unreachable", why=str(exc))
    except TimeoutError:
        why = f"MCP server {server.name!r} did not list its tools within {seconds:.0f}s"
        return Listing(server.name, "unreachable", why=why)
    except Exception as exc:  # the SDK's own errors: the server is unusable, the rest go on
        why = f"MCP server {server.name!r} could not list its tools ({type(exc).__name__})"
        return Listing(server.name, "unreachable", why=why)
    session.tools, session.twice = tools, twice
    listed = tuple(_listed(tools[name], name in twice) for name in sorted(tools))
    return Listing(server.name, "ok", listed, secrets=frozenset(session.secrets))


def _listed(published: Any, twice: bool) -> ListedTool:
    schema = published.input_schema if isinstance(published.input_schema, dict) else {}
    properties = schema.get("properties")
    return ListedTool(
        published.name,
        description_of(published),
        writes=writes(published),
        parameters=tuple(properties) if isinstance(properties, dict) else (),
        problem=LISTED_TWICE if twice else _schema_problem(published.input_schema),
    )


def _schema_problem(schema: Any) -> str:
    """Why no call of a published tool could run (its inputSchema); '' when one can."""
    problem = schema_problem(schema)
    return f"its inputSchema cannot be applied: {problem}" if problem else ""
