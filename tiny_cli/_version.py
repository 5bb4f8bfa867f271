"""The version of tiny, alone in a module: every layer may name it without importing tools."""

__version__ = "0.1.0"
