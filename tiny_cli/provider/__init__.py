"""Edge: the model provider — one chat completion from an OpenAI-compatible endpoint.

`client` speaks HTTP, `replay` records and replays exchanges, `factory` picks live, recording
or replaying for a command. Rule: the provider never imports `tiny_cli.tools`.
"""

from tiny_cli.errors import ProviderTimeout
from tiny_cli.provider.client import ChatRequest, Completion, OpenAIProvider, Provider, ToolCall

__all__ = ["ChatRequest", "Completion", "OpenAIProvider", "Provider", "ProviderTimeout", "ToolCall"]
