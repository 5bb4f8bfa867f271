"""Edge: the tools an agent may call — the registry and `@tool`, the built-ins, MCP servers.

Rule: tools never import `tiny_cli.provider` (nor anything above the edges). The public
names below load on first use, so `import tiny_cli.tools.mcp_config` (cards do) stays light:
pydantic is imported only when a tool is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tiny_cli.errors import ToolCallError

if TYPE_CHECKING:
    from tiny_cli.tools.registry import Registry, Tool, load_tool_module, tool

__all__ = ["Registry", "Tool", "ToolCallError", "load_tool_module", "tool"]


def __getattr__(name: str) -> Any:
    """Load `tool`, `Tool`, `Registry` and `load_tool_module` from the registry on first use."""
    if name in __all__:
        from tiny_cli.tools import registry

        return getattr(registry, name)
    raise AttributeError(f"module 'tiny_cli.tools' has no attribute {name!r}")
