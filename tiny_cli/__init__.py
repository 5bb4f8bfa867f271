"""tiny: run tiny agents defined by YAML cards, and measure them.

The API is what this package exports (`__all__`, docs/library.md): open a workspace, build its
router, make a Brief, run a card or delegate a task against a provider, read the Digest; the
scripted model server for tests; the error tree and TinyWarning. Import from `tiny_cli`: every
other module is internal and may change or move without notice.

Only the errors are imported here; every other name when first asked for (`__getattr__`):
the `tiny` command runs through this package too, and `tiny --help` must not load httpx,
numpy and pytest, nor read settings.
"""

import importlib
from typing import TYPE_CHECKING, Any

from tiny_cli._version import __version__
from tiny_cli.errors import (
    AddressRefused,
    CardError,
    ConfigError,
    CrmDuplicate,
    DeadlineExceeded,
    EmbedderError,
    ProviderError,
    ProviderTimeout,
    ReplayError,
    TinyError,
    TinyWarning,
    ToolCallError,
    ToolError,
    ToolServerError,
)

if TYPE_CHECKING:  # the names `__getattr__` imports, as type checkers and editors see them
    from tiny_cli.agent.loop import approve_writes, decline_writes, invoke
    from tiny_cli.delegation import delegate, run_card
    from tiny_cli.digest import Brief, Digest, make_brief
    from tiny_cli.provider.client import ChatRequest, Completion, OpenAIProvider, Provider, ToolCall
    from tiny_cli.routing.factory import build_router
    from tiny_cli.routing.router import Decision, Router
    from tiny_cli.settings import Settings, load_settings
    from tiny_cli.testing import ScriptedServer, http_error, reply, tool_call
    from tiny_cli.tools.registry import Registry, Tool, tool
    from tiny_cli.workspace import Workspace, open_cards, open_workspace

# where each name `__getattr__` gives comes from (tests/test_library.py keeps it and the
# block above the same)
_FROM = {
    "tiny_cli.settings": ("Settings", "load_settings"),
    "tiny_cli.workspace": ("Workspace", "open_workspace", "open_cards"),
    "tiny_cli.routing.factory": ("build_router",),
    "tiny_cli.routing.router": ("Router", "Decision"),
    "tiny_cli.digest": ("Brief", "Digest", "make_brief"),
    "tiny_cli.agent.loop": ("invoke", "approve_writes", "decline_writes"),
    "tiny_cli.delegation": ("delegate", "run_card"),
    "tiny_cli.provider.client": (
        "OpenAIProvider",
        "Provider",
        "ChatRequest",
        "Completion",
        "ToolCall",
    ),
    "tiny_cli.testing": ("ScriptedServer", "reply", "tool_call", "http_error"),
    "tiny_cli.tools.registry": ("Tool", "Registry", "tool"),
}
_MODULE_OF = {name: module for module, names in _FROM.items() for name in names}

__all__ = [
    "AddressRefused",
    "Brief",
    "CardError",
    "ChatRequest",
    "Completion",
    "ConfigError",
    "CrmDuplicate",
    "DeadlineExceeded",
    "Decision",
    "Digest",
    "EmbedderError",
    "OpenAIProvider",
    "Provider",
    "ProviderError",
    "ProviderTimeout",
    "Registry",
    "ReplayError",
    "Router",
    "ScriptedServer",
    "Settings",
    "TinyError",
    "TinyWarning",
    "Tool",
    "ToolCall",
    "ToolCallError",
    "ToolError",
    "ToolServerError",
    "Workspace",
    "__version__",
    "approve_writes",
    "build_router",
    "decline_writes",
    "delegate",
    "http_error",
    "invoke",
    "load_settings",
    "make_brief",
    "open_cards",
    "open_workspace",
    "reply",
    "run_card",
    "tool",
    "tool_call",
]


def __getattr__(name: str) -> Any:
    """Import an exported name from its module on first use (see the module's docstring)."""
    if name not in _MODULE_OF:
        raise AttributeError(f"module 'tiny_cli' has no attribute {name!r}")
    module = importlib.import_module(_MODULE_OF[name])
    globals().update({n: getattr(module, n) for n in _FROM[_MODULE_OF[name]]})
    return globals()[name]


def __dir__() -> list[str]:
    """List what the package exports, imported yet or not."""
    return sorted({*globals(), *__all__})
