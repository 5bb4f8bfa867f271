"""Budget: the limits enforced outside the model, and the meter that tracks one invocation."""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from tiny_cli.cards.card import Budget, Card
from tiny_cli.digest import CHARS_PER_TOKEN, Brief, CallRecord, Cost

DEFAULT_MAX_GHOST_CALLS = 3  # tolerated per run; one more ends it `failed`, reason ghost_calls
DEFAULT_WALL_SCALE = 1.0  # multiplies every card's max_wall_seconds
DEFAULT_MAX_RESULT_CHARS = 6000  # per tool result, so one page cannot flood the context
CUT_MARKER = " [… cut by tiny: over the {tokens}-token budget]"

Clock = Callable[[], float]


def effective_budget(card: Card, brief: Brief, wall_scale: float = DEFAULT_WALL_SCALE) -> Budget:
    """Return the card's budget: output lowered (never raised) by the Brief, wall time scaled.

    `wall_scale` (--wall-scale, TINY_WALL_SCALE) stretches every wall budget for slow servers:
    a CPU server reads a long prompt slower than a card's wall budget allows for.
    """
    budget = replace(card.budget, max_wall_seconds=card.budget.max_wall_seconds * wall_scale)
    cap = brief.max_output_tokens
    if cap is None or cap >= budget.max_output_tokens:
        return budget
    return replace(budget, max_output_tokens=cap)


def capped(budget: Budget, cap: Budget | None) -> Budget:
    """Return `budget` with each limit lowered (never raised) to `cap`'s; None caps nothing."""
    if cap is None:
        return budget
    return Budget(
        min(budget.max_tool_calls, cap.max_tool_calls),
        min(budget.max_output_tokens, cap.max_output_tokens),
        min(budget.max_wall_seconds, cap.max_wall_seconds),
    )


def left_after(budget: Budget, cost: Cost, seconds: float) -> Budget:
    """Return what is left of `budget` after a run that spent `cost` in `seconds` of wall time.

    Output tokens left are the budget less the replies' tokens; nothing goes below zero.
    """
    return Budget(
        max(0, budget.max_tool_calls - cost.tool_calls),
        max(0, budget.max_output_tokens - cost.tokens_out),
        max(0.0, budget.max_wall_seconds - seconds),
    )


def short_of(left: Budget, own: Budget, share: float) -> str | None:
    """Say which limit `left` holds less than `share` of `own` of (None: every one is enough).

    Tool calls and tokens are rounded up: a quarter of 6 calls is 2.
    """
    wall = share * own.max_wall_seconds
    if left.max_wall_seconds < wall:
        return f"{left.max_wall_seconds:.1f} s of wall time left, under the {wall:.1f} s needed"
    tokens = math.ceil(share * own.max_output_tokens)
    if left.max_output_tokens < tokens:
        return f"{left.max_output_tokens} output tokens left, under the {tokens} needed"
    calls = math.ceil(share * own.max_tool_calls)
    if left.max_tool_calls < calls:
        return f"{left.max_tool_calls} tool call(s) left, under the {calls} needed"
    return None


def cut_summary(summary: str, max_output_tokens: int) -> tuple[str, bool]:
    """Cut a summary longer than max_output_tokens * 4 characters, marked; say if it was cut."""
    limit = max_output_tokens * CHARS_PER_TOKEN
    if len(summary) <= limit:
        return summary, False
    marker = CUT_MARKER.format(tokens=max_output_tokens)
    return summary[: max(0, limit - len(marker))].rstrip() + marker, True


def cap_result(text: str, limit: int = DEFAULT_MAX_RESULT_CHARS) -> str:
    """Keep the head of a long tool result and say how much was cut."""
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… cut by tiny: {len(text) - limit} more characters not shown]"


@dataclass
class Meter:
    """Counts what one invocation spends and how much wall time is left."""

    budget: Budget
    clock: Clock = time.monotonic
    started: float = field(init=False)
    tokens_in: int = 0
    tokens_out: int = 0
    calls: list[CallRecord] = field(default_factory=list)
    model_seconds: float = 0.0  # waiting for the model server
    tool_seconds: float = 0.0  # running tools
    turns: int = 0  # model requests answered
    evidence: list[str] = field(default_factory=list)  # arguments and results of calls that ran

    def __post_init__(self) -> None:
        self.started = self.clock()

    def remaining(self) -> float:
        """Seconds left of max_wall_seconds (never negative)."""
        return max(0.0, self.budget.max_wall_seconds - (self.clock() - self.started))

    def ghosts(self) -> list[str]:
        """Names of the ghost calls so far, in order."""
        return [c.name for c in self.calls if c.outcome == "ghost"]

    def tools_spent(self) -> bool:
        """True when every allowed tool call has been attempted."""
        return len(self.calls) >= self.budget.max_tool_calls

    def slowest(self) -> str:
        """Say where the wall time went, for a note when it ran out."""
        spent = f"{self.model_seconds:.1f}s waiting for the model ({self.turns} answer(s))"
        spent += f" and {self.tool_seconds:.1f}s in tools"
        slow = "the model server" if self.model_seconds >= self.tool_seconds else "a tool"
        return f"time ran out after {spent}: {slow} was slow"

    def cost(self) -> Cost:
        """Freeze the tally into a Cost (caller_tokens is filled in by the Digest builder)."""
        ghosts = self.ghosts()
        return Cost(
            self.tokens_in,
            self.tokens_out,
            len(self.calls),
            len(ghosts),
            tuple(ghosts),
            round(self.clock() - self.started, 3),
            recovered_calls=sum(c.recovered for c in self.calls),
        )
