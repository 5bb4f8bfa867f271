"""tiny: run tiny agents defined by YAML cards, and measure them."""

from typing import Any

from tiny_cli._version import __version__

__all__ = ["Tool", "__version__", "tool"]


def __getattr__(name: str) -> Any:
    """Import `tool` and `Tool` on first use: pydantic is not needed to print `tiny --help`."""
    if name in ("Tool", "tool"):
        from tiny_cli.tools import registry as tools

        return getattr(tools, name)
    raise AttributeError(f"module 'tiny_cli' has no attribute {name!r}")
