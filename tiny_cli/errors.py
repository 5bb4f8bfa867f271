"""The exception tree: every error tiny raises is a TinyError, with its facts as attributes.

    TinyError                   one line on stderr at a face (the faces own the exit codes)
    ├── ConfigError             a setting, flag, path or file the user gave is wrong
    │                           (`path`, `field` where known)
    ├── CardError               cards failed to load (every problem in `problems`)
    ├── ToolError               a tool module or tool definition is broken
    ├── ToolCallError           one tool call failed; its message goes back to the model
    │   └── AddressRefused      a web tool refused a non-public address
    ├── CrmDuplicate            the CRM already holds that company (also a ValueError: the
    │                           model reads it as `CrmDuplicate: …`, as recordings hold it)
    ├── ToolServerError         an MCP server did not start, died or did not answer (`server`)
    ├── ProviderError           the model endpoint could not be used (`status`, `url`,
    │                           the tokens an unusable answer spent)
    │   └── ProviderTimeout     the time budget ran out before the model answered
    ├── EmbedderError           the embedder could not be loaded or did not answer
    ├── ReplayError             a replay asked for an exchange the recording lacks
    └── DeadlineExceeded        a blocking call outlived its deadline (also a TimeoutError)

    TinyWarning                 the work goes on, but something is lost or left out (a
                                UserWarning, never raised: given to `warnings.warn`)

Failures split three ways: what the model can fix is a ToolCallError, returned to it as a
tool result; model misbehaviour is counted in the Digest, never raised; programmer and config
errors raise, and only the faces (`tiny_cli.cli`, `tiny_cli.serve`) catch TinyError and pick
the exit code. An error carries what a caller may act on as attributes, so no caller parses a
message. What tiny goes on from is a TinyWarning, through `warnings` alone: the command line
prints it as `tiny: warning: …`.
"""

from __future__ import annotations

from pathlib import Path

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
    "TinyWarning",
    "ToolCallError",
    "ToolError",
    "ToolServerError",
]


class TinyError(Exception):
    """Base of every error tiny raises; its message is one line a person can act on."""


class ConfigError(TinyError):
    """A setting, flag, path or file the user gave is wrong: `path` the file that could not be
    used, `field` the setting, flag or variable (`TINY_THRESHOLD`, `--threshold`), else None."""

    def __init__(self, message: str, *, path: Path | None = None, field: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.field = field


class CardError(TinyError):
    """One or more cards failed to load; `problems` holds every one (`tiny validate` lists them)."""

    def __init__(self, problems: list, loaded: tuple = ()) -> None:
        self.problems = problems
        self.loaded = loaded  # the cards that did load: a command may still name what it needs
        first = f"; the first: {problems[0]}" if problems else ""
        many = f"{len(problems)} problems in the cards (tiny validate lists them all){first}"
        super().__init__(str(problems[0]) if len(problems) == 1 else many)


class ToolError(TinyError):
    """A tool module or tool definition is broken (not a failing tool call)."""


class ToolCallError(TinyError):
    """A tool call failed in a way the model can act on; the message says what to do."""


class AddressRefused(ToolCallError):
    """The host is not public and not allowed: a model-visible refusal, never a fetch."""


class CrmDuplicate(TinyError, ValueError):
    """A company with the same (normalised) name already exists."""


class ToolServerError(TinyError):
    """A tool server (MCP) did not start, died or did not answer; `server`: its name there."""

    def __init__(self, message: str, *, server: str) -> None:
        super().__init__(message)
        self.server = server


class ProviderError(TinyError):
    """The model endpoint could not be used: unreachable, refusing, or malformed.

    `status`: the HTTP status it refused with, None when no answer came or it was unusable;
    `url`: the base URL, credentials cut (None in a replay); `tokens_in`, `tokens_out`: what an
    unusable answer's `usage` said it spent.
    """

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        url: str | None = None,
        tokens: tuple[int, int] = (0, 0),
    ) -> None:
        super().__init__(message)
        self.status = status
        self.url = url
        self.tokens_in, self.tokens_out = tokens


class ProviderTimeout(ProviderError):
    """The caller's time budget ran out before the model answered."""


class EmbedderError(TinyError):
    """The embedder could not be loaded or did not answer."""


class ReplayError(TinyError):
    """A replayed run asked for a model exchange the recording does not hold."""


class DeadlineExceeded(TinyError, TimeoutError):
    """The call was still running when its time was up (it is left behind, not killed)."""


class TinyWarning(UserWarning):
    """Something tiny went on from, lost or left out; given to `warnings.warn`, never raised."""
