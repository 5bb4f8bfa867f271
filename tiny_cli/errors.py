"""The exception tree: every error tiny raises is a TinyError, turned into an exit code at a face.

    TinyError                   exit 2 at a face, one line on stderr
    ├── ConfigError             a setting, flag, path or file the user gave is wrong
    ├── CardError               cards failed to load (every problem in `problems`)
    ├── ToolError               a tool module or tool definition is broken
    ├── ToolCallError           one tool call failed; its message goes back to the model
    │   └── AddressRefused      a web tool refused a non-public address
    ├── CrmDuplicate            the CRM already holds that company (also a ValueError: the
    │                           model reads it as `CrmDuplicate: …`, as recordings hold it)
    ├── ToolServerError         an MCP server did not start, died or did not answer
    ├── ProviderError           the model endpoint could not be used
    │   └── ProviderTimeout     the time budget ran out before the model answered
    ├── EmbedderError           the embedder could not be loaded or did not answer
    ├── ReplayError             a replay asked for an exchange the recording lacks
    └── DeadlineExceeded        a blocking call outlived its deadline (also a TimeoutError)

Failures split three ways: what the model can fix is a ToolCallError and goes back to it as a
tool result; model misbehaviour is counted in the Digest, never raised; programmer and config
errors raise, and only the faces (`tiny_cli.cli`, `tiny_cli.serve`) catch TinyError.
"""

from __future__ import annotations

__all__ = [
    "AddressRefused",
    "CardError",
    "ConfigError",
    "CrmDuplicate",
    "DeadlineExceeded",
    "EmbedderError",
    "ProviderError",
    "ProviderTimeout",
    "ReplayError",
    "TinyError",
    "ToolCallError",
    "ToolError",
    "ToolServerError",
]


class TinyError(Exception):
    """Base of every error tiny raises; `exit_code` is what a face exits with."""

    exit_code = 2


class ConfigError(TinyError):
    """A setting, flag, path or file the user gave is wrong."""


class CardError(TinyError):
    """One or more cards failed to load; `problems` holds every one of them.

    A command that needs the cards stops with the usage exit code; `tiny validate` reports
    the same problems itself and exits 1.
    """

    def __init__(self, problems: list, loaded: tuple = ()) -> None:
        self.problems = problems
        self.loaded = loaded  # the cards that did load: a command may still name what it needs
        super().__init__(_one_line(problems))


def _one_line(problems: list) -> str:
    """The problem, or how many there are and the first: an error is one line."""
    if len(problems) == 1:
        return str(problems[0])
    first = f"; the first: {problems[0]}" if problems else ""
    return f"{len(problems)} problems in the cards (tiny validate lists them all){first}"


class ToolError(TinyError):
    """A tool module or tool definition is broken (not a failing tool call)."""


class ToolCallError(TinyError):
    """A tool call failed in a way the model can act on; the message says what to do."""


class AddressRefused(ToolCallError):
    """The host is not public and not allowed: a model-visible refusal, never a fetch."""


class CrmDuplicate(TinyError, ValueError):
    """A company with the same (normalised) name already exists."""


class ToolServerError(TinyError):
    """A tool server (MCP) could not be used: it did not start, died or did not answer.

    The runner ends the run `failed` with this message as its reason; elsewhere it is a
    one-line error like any other.
    """


class ProviderError(TinyError):
    """The model endpoint could not be used: unreachable, refusing, or malformed."""


class ProviderTimeout(ProviderError):
    """The caller's time budget ran out before the model answered."""


class EmbedderError(TinyError):
    """The embedder could not be loaded or did not answer."""


class ReplayError(TinyError):
    """A replayed run asked for a model exchange the recording does not hold."""


class DeadlineExceeded(TinyError, TimeoutError):
    """The call was still running when its time was up (it is left behind, not killed)."""
