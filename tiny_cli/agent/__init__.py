"""Wing: the agent — one card, one Brief, a fresh context, a hard budget, a Digest back.

`loop` is the run loop and its prompts; `calls` runs one tool call under the budget (its
meter and limits) and finds where each answered value came from (evidence); `verdict` holds
the honesty rules that decide a Digest's status, as plain functions of data; `reply` parses
the model's answer and its tool requests in each tool mode. Rule: the agent imports
only the ground, the edges and the contracts — never routing, the run log or numpy.
"""

from tiny_cli.agent.calls import Approve
from tiny_cli.agent.loop import approve_writes, decline_writes, invoke

__all__ = ["Approve", "approve_writes", "decline_writes", "invoke"]
