"""tiny: run tiny agents defined by YAML cards, and measure them."""

from typing import Any

__version__ = "0.1.0"
__all__ = ["Tool", "__version__", "tool"]


def __getattr__(name: str) -> Any:
    """Import `tool` and `Tool` on first use: pydantic is not needed to print `tiny --help`."""
    if name in ("Tool", "tool"):
        from tiny_cli import tools

        return getattr(tools, name)
    raise AttributeError(f"module 'tiny_cli' has no attribute {name!r}")
