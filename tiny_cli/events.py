"""Run events: what the runner reports while it works, to observers passed in as a parameter.

The runner never prints; a live view, the run log and tests are observers of the same small
typed set. An observer is called synchronously on the runner's thread, so it must be quick
and must not raise: `notify` swallows nothing, a failing observer is a bug to surface.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tiny_cli.digest import CallOutcome, Digest, caller_tokens


@dataclass(frozen=True)
class RunStarted:
    """A fresh context is about to be sent: which card, model, mode and budget."""

    card_id: str
    model: str
    tool_mode: str
    goal: str
    max_tool_calls: int
    max_wall_seconds: float
    max_output_tokens: int
    messages: Sequence[Mapping[str, Any]]  # the fresh context: [system, user]


@dataclass(frozen=True)
class TurnStarted:
    """Request number `turn` (1-based) goes to the model; `remaining` seconds of budget left."""

    turn: int
    remaining: float
    calls_used: int
    json_mode: bool


@dataclass(frozen=True)
class ModelReplied:
    """The model answered request `turn`."""

    turn: int
    tokens_in: int
    tokens_out: int
    seconds: float
    content: str | None
    tool_calls: int  # native tool calls in the reply
    finish_reason: str | None = None  # as the server said it ("stop", "tool_calls", "length")
    calls: tuple[tuple[str, str, str], ...] = ()  # those calls: (id, name, arguments as sent)


@dataclass(frozen=True)
class ToolCalled:
    """A call is about to be handled (checked, approved, run)."""

    call_id: str
    name: str
    arguments: str  # raw JSON text as the model sent it
    recovered: bool = False


@dataclass(frozen=True)
class ToolFinished:
    """A call was handled: its outcome and what the model got back."""

    call_id: str
    name: str
    outcome: CallOutcome | None  # None: not run because the budget was spent
    seconds: float
    result: str  # the text the model sees


@dataclass(frozen=True)
class GhostCall:
    """The model called a tool its card does not have."""

    name: str
    count: int  # ghost calls so far in this run


@dataclass(frozen=True)
class BudgetHit:
    """A hard limit was reached: max_tool_calls, max_wall_seconds or ghost_calls."""

    limit: str


@dataclass(frozen=True)
class Repairing:
    """The answer broke the output contract: the model is asked, once, to repair it."""

    problems: tuple[str, ...]


@dataclass(frozen=True)
class ArtifactKept:
    """A tool result over the limit was stored whole; the model got its handle."""

    handle: str
    tool: str
    chars: int


@dataclass(frozen=True)
class Routed:
    """The concierge chose a card for a delegated task, or abstained (`agent_id` None)."""

    decision: str
    agent_id: str | None
    score: float
    threshold: float
    candidates: tuple[tuple[str, float], ...]  # the cards it ranked, best first: (id, score)
    seconds: float  # how long routing took


@dataclass(frozen=True)
class Ended:
    """One invocation of a delegated task ended; the task may go on (a re-route): `Finished`
    comes once per task, after the last invocation's `Ended`."""

    digest: Digest


@dataclass(frozen=True)
class ModeSwitched:
    """The run changed tool mode (auto → json) and why."""

    to: str
    why: str


@dataclass(frozen=True)
class Finished:
    """The run ended: the Digest and the whole transcript as sent to the model (once per task:
    after a re-route, the final Digest and both transcripts in turn)."""

    digest: Digest
    messages: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


@dataclass(frozen=True)
class Aborted:
    """The run ended with no Digest, and no `Finished` follows: an error raised to its caller
    (a refused key, a replay miss; `reason` is its message), or Ctrl-C (`interrupted`).
    `messages` is the transcript as sent so far (what it spent, observers count from the
    events before it)."""

    reason: str
    messages: Sequence[Mapping[str, Any]]
    interrupted: bool = False


Event = (
    RunStarted
    | TurnStarted
    | ModelReplied
    | ToolCalled
    | ToolFinished
    | GhostCall
    | BudgetHit
    | Repairing
    | ArtifactKept
    | ModeSwitched
    | Routed
    | Ended
    | Finished
    | Aborted
)
Observer = Callable[[Event], None]


def ignore(event: Event) -> None:
    """Observe nothing: the default observer."""


def fan_out(*observers: Observer | None) -> Observer:
    """Return one observer that passes each event to every given observer, in order."""
    present = [o for o in observers if o is not None]
    if not present:
        return ignore
    if len(present) == 1:
        return present[0]

    def notify(event: Event) -> None:
        for observer in present:
            observer(event)

    return notify


def finish(
    observer: Observer, digest: Digest, messages: Sequence[Mapping[str, Any]] = ()
) -> Digest:
    """End a run: size the Digest for its caller (`cost.caller_tokens`) and report `Finished`.

    The one place a Digest is finished. Every run ends here (`invoke`, `delegate`, `tiny
    serve`'s tools, both benches), after the last change to its Digest.
    """
    sized = replace(digest, cost=replace(digest.cost, caller_tokens=caller_tokens(digest)))
    observer(Finished(sized, tuple(messages)))
    return sized
