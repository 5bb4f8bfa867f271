"""tiny: run tiny agents defined by YAML cards, and measure them."""

from tiny_cli.tools import Tool, tool

__version__ = "0.1.0"
__all__ = ["Tool", "__version__", "tool"]
