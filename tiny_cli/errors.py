"""The exception tree: every error a user can cause is a TinyError, caught at the CLI."""

from __future__ import annotations


class TinyError(Exception):
    """Base of every user-facing error; `exit_code` is what the CLI exits with."""

    exit_code = 2


class ConfigError(TinyError):
    """A setting, flag, path or file the user gave is wrong."""


class CardError(TinyError):
    """One or more cards failed to load; `problems` holds every one of them.

    A command that needs the cards stops with the usage exit code; `tiny validate` reports
    the same problems itself and exits 1.
    """

    def __init__(self, problems: list) -> None:
        self.problems = problems
        super().__init__("\n".join(str(p) for p in problems))


class ToolError(TinyError):
    """A tool module or tool definition is broken (not a failing tool call)."""


class ProviderError(TinyError):
    """The model endpoint could not be used: unreachable, refusing, or malformed."""


class EmbedderError(TinyError):
    """The embedder could not be loaded or did not answer."""


class ReplayError(TinyError):
    """A replayed run asked for a model exchange the recording does not hold."""


class ToolServerError(TinyError):
    """A tool server (MCP) could not be used: it did not start, died or did not answer.

    The runner ends the run `failed` with this message as its reason; elsewhere it is a
    one-line error like any other.
    """
