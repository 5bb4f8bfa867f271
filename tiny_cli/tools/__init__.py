"""Edge: the tools an agent may call — the registry and `@tool`, the built-ins, MCP servers.

Rule: tools never import `tiny_cli.provider` (nor anything above the edges). The public
names below are the registry's.
"""

from __future__ import annotations

from tiny_cli.errors import ToolCallError
from tiny_cli.tools.registry import Registry, Tool, load_tool_module, tool

__all__ = ["Registry", "Tool", "ToolCallError", "load_tool_module", "tool"]
