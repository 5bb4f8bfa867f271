"""Wing: the agent — one card, one Brief, a fresh context, a hard budget, a Digest back.

`loop` runs it and writes its prompts; `calls` runs one tool call under the budget and finds
where each answered value came from; `verdict` holds the honesty rules of a Digest's status;
`reply` reads the model's answer and tool requests. It never imports routing, runs or numpy.
"""

from tiny_cli.agent.calls import Approve
from tiny_cli.agent.loop import approve_writes, decline_writes, invoke

__all__ = ["Approve", "approve_writes", "decline_writes", "invoke"]
