"""A small MCP server for tests/test_mcp_tools.py, built with the SDK's MCPServer.

python toolbox.py [stdio]      serve over stdio
python toolbox.py http PORT    serve streamable HTTP on 127.0.0.1:PORT (path /mcp)
python toolbox.py crash        write a line with $TOOLBOX_TOKEN to stderr and exit 3
python toolbox.py silent       start, then never answer anything
"""

from __future__ import annotations

import os
import sys
import time

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

READ_ONLY = ToolAnnotations(read_only_hint=True)


def build() -> MCPServer:
    """Return the server: readers, a writer, one that leaks, one that dies, one that hangs."""
    server = MCPServer("toolbox")

    @server.tool(annotations=READ_ONLY)
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool(annotations=READ_ONLY)
    def pid() -> int:
        """Return the server's process id."""
        return os.getpid()

    @server.tool(annotations=READ_ONLY)
    def authorized(ctx: Context) -> bool:
        """Say whether the HTTP request carried the token in $TOOLBOX_TOKEN as a bearer."""
        headers = ctx.headers or {}
        return headers.get("authorization") == f"Bearer {os.environ.get('TOOLBOX_TOKEN')}"

    @server.tool()  # no annotations: a writer, as far as tiny knows
    def note(text: str) -> str:
        """Store a note."""
        return f"stored: {text}"

    @server.tool(annotations=READ_ONLY)
    def leak() -> str:
        """Fail with an error that quotes $TOOLBOX_TOKEN (a server that says too much)."""
        raise ToolError(f"cannot log in with token {os.environ.get('TOOLBOX_TOKEN')}")

    @server.tool(annotations=READ_ONLY)
    def explode() -> str:
        """Die in the middle of the call."""
        os._exit(1)

    @server.tool(annotations=READ_ONLY)
    def wait() -> str:
        """Never answer."""
        time.sleep(3600)
        return "late"

    return server


def main(args: list[str]) -> None:
    mode = args[0] if args else "stdio"
    if mode == "crash":
        print(f"boom: cannot log in with token {os.environ.get('TOOLBOX_TOKEN')}", file=sys.stderr)
        sys.exit(3)
    if mode == "silent":
        time.sleep(3600)
    if mode == "http":
        build().run("streamable-http", host="127.0.0.1", port=int(args[1]))
    else:
        build().run()


if __name__ == "__main__":
    main(sys.argv[1:])
