"""An MCP server whose tool list grows by one tool each time it is listed, and which tells
clients they may cache that list for an hour (SEP-2549 `ttlMs`): for tests/test_cards_import.py.

python growing.py    serve over stdio
"""

from __future__ import annotations

from mcp.server.caching import CacheHint
from mcp.server.mcpserver import MCPServer
from mcp_types import Tool


class Growing(MCPServer):
    """Lists `listed_1`, then `listed_1` and `listed_2`, …: a list that shows who answered it."""

    listed = 0

    async def list_tools(self) -> list[Tool]:
        self.listed += 1
        self.add_tool(lambda: "ok", name=f"listed_{self.listed}", description="Say ok.")
        return await super().list_tools()


if __name__ == "__main__":
    Growing("growing", cache_hints={"tools/list": CacheHint(ttl_ms=3_600_000)}).run()
