"""Brief and Digest: what the caller sends an agent, what it gets back, and reading a Brief file."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import yaml

from tiny_cli import yamlsafe
from tiny_cli.errors import ConfigError
from tiny_cli.secrets import Scrubber
from tiny_cli.text import check_task, kind_of
from tiny_cli.tools.artifacts import Artifact

MAX_HINT_CHARS = 800
CHARS_PER_TOKEN = 4  # the estimate used wherever tokens are counted without a tokenizer
MODEL_STATUSES = ("ok", "partial", "refused")

Status = Literal["ok", "partial", "refused", "failed", "abstain", "needs_confirmation"]
# where a returned field's value was found: a tool's result (or a URL a call reached), the task,
# only the arguments the model wrote into a call (its own value), or nowhere but its answer
FieldSource = Literal["tool", "task", "args", "model"]
CallOutcome = Literal[
    "ok", "ghost", "bad_arguments", "tool_error", "timeout", "declined", "not_allowed", "not_run"
]  # not_run: the run stopped at this call (a function-calling bench scores it, runs nothing)
APPROVED_OUTCOMES = ("ok", "tool_error", "timeout")  # a write call that was approved and ran
DECLINED_OUTCOMES = ("declined", "not_allowed")  # a write call that never ran


@dataclass(frozen=True)
class Brief:
    """The caller's request: one goal, fields to return, inputs, a short hint, a token cap."""

    goal: str
    must_return: tuple[str, ...] = ()
    inputs: Mapping[str, str] = field(default_factory=dict)
    context_hint: str = ""
    max_output_tokens: int | None = None
    notes: tuple[str, ...] = ()  # what was done to the brief on the way in (cuts)


@dataclass(frozen=True)
class Cost:
    """What one invocation spent; tokens as the server reported them."""

    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: int = 0
    ghost_calls: int = 0
    ghost_names: tuple[str, ...] = ()
    wall_seconds: float = 0.0
    caller_tokens: int = 0  # estimated size of the Digest the caller receives
    recovered_calls: int = 0  # tool calls the model wrote as text, run by tiny (see runner)

    def plus(self, other: Cost) -> Cost:
        """Return what this run and `other` spent together (caller_tokens 0: counted last)."""
        return Cost(
            self.tokens_in + other.tokens_in,
            self.tokens_out + other.tokens_out,
            self.tool_calls + other.tool_calls,
            self.ghost_calls + other.ghost_calls,
            self.ghost_names + other.ghost_names,
            round(self.wall_seconds + other.wall_seconds, 3),
            recovered_calls=self.recovered_calls + other.recovered_calls,
        )

    def to_json(self) -> dict[str, Any]:
        """Return the cost as the Digest JSON's `cost` object."""
        # vars, not asdict: no deep copy of flat numbers (the run log encodes every Digest)
        return {**vars(self), "ghost_names": list(self.ghost_names)}


@dataclass(frozen=True)
class CallRecord:
    """One attempted tool call; write calls appear in the Digest JSON with their arguments."""

    name: str
    outcome: CallOutcome
    writes: bool = False
    arguments: Mapping[str, Any] | None = None  # write calls: what was approved; a stop: as sent
    recovered: bool = False  # written as text by the model, not sent as a tool call

    def to_json(self) -> dict[str, Any]:
        """Return the call as an entry of `approved_writes` / `declined_writes`."""
        return {"tool": self.name, "arguments": dict(self.arguments or {}), "outcome": self.outcome}


@dataclass(frozen=True)
class Routing:
    """The concierge's decision that led to this Digest (delegate only)."""

    decision: Literal["route", "abstain"]
    agent_id: str | None
    score: float
    rerouted_from: str | None = None  # the card that refused first (delegate's re-route)

    def to_json(self) -> dict[str, Any]:
        """Return the `routing` object; `rerouted_from` only after a re-route."""
        doc: dict[str, Any] = {"decision": self.decision, "agent_id": self.agent_id}
        doc["score"] = self.score
        if self.rerouted_from is not None:
            doc["rerouted_from"] = self.rerouted_from
        return doc


@dataclass(frozen=True)
class Attempt:
    """An earlier run of the same task by another card (delegate re-routed after it)."""

    agent_id: str
    status: Status
    reason: str | None = None
    summary: str = ""
    score: float | None = None  # the card's routing score
    cost: Cost = field(default_factory=Cost)  # this attempt's share of the Digest's cost

    def to_json(self) -> dict[str, Any]:
        """Return the attempt as an entry of the Digest JSON's `attempts`."""
        return {**vars(self), "cost": self.cost.to_json()}


@dataclass(frozen=True)
class Digest:
    """The caller's answer: a few hundred tokens, however much the agent read."""

    agent_id: str | None
    status: Status
    summary: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)
    artifacts: tuple[Artifact, ...] = ()  # tool results stored whole (tiny_cli.tools.artifacts)
    notes_for_caller: tuple[str, ...] = ()
    cost: Cost = field(default_factory=Cost)
    reason: str | None = None
    routing: Routing | None = None
    calls: tuple[CallRecord, ...] = ()
    # per returned field: seen in a tool's result, in the task, only in a call's arguments, or
    # only in the model's answer
    field_sources: Mapping[str, FieldSource] = field(default_factory=dict)
    # earlier runs of this task by other cards, oldest first; `cost` above includes theirs
    attempts: tuple[Attempt, ...] = ()
    # required fields the answer left out: a `partial` is taken with the fields it has
    missing: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """Return the Digest as the JSON document `--json` prints (DESIGN §5 keys)."""
        doc: dict[str, Any] = {
            "agent_id": self.agent_id,
            "status": self.status,
            "summary": self.summary,
            "fields": dict(self.fields),
            "artifacts": [a.to_json() for a in self.artifacts],
            "notes_for_caller": list(self.notes_for_caller),
            "cost": self.cost.to_json(),
            "reason": self.reason,
            "field_sources": dict(self.field_sources),
        }
        if self.missing:  # only when some are: a complete answer's JSON is as it always was
            doc["missing"] = list(self.missing)
        approved, declined = self.approved_writes(), self.declined_writes()
        if approved or declined:
            doc["approved_writes"] = [c.to_json() for c in approved]
            doc["declined_writes"] = [c.to_json() for c in declined]
        if self.routing is not None:
            doc["routing"] = self.routing.to_json()
        if self.attempts:
            doc["attempts"] = [a.to_json() for a in self.attempts]
        return doc

    def scrubbed(self, scrub: Scrubber) -> Digest:
        """Return the Digest with `scrub` applied to every text a model or a tool wrote."""
        if not scrub.secrets and not scrub.shapes:
            return self
        return replace(
            self,
            summary=scrub.text(self.summary),
            fields=scrub.tree(dict(self.fields)),
            notes_for_caller=tuple(scrub.text(n) for n in self.notes_for_caller),
            reason=None if self.reason is None else scrub.text(self.reason),
            calls=tuple(replace(c, arguments=scrub.tree(c.arguments)) for c in self.calls),
            attempts=tuple(
                replace(a, summary=scrub.text(a.summary), reason=scrub.tree(a.reason))
                for a in self.attempts
            ),
            artifacts=tuple(replace(a, preview=scrub.text(a.preview)) for a in self.artifacts),
        )

    def approved_writes(self) -> tuple[CallRecord, ...]:
        """Write calls that were approved and ran (their outcome says whether they worked)."""
        return tuple(c for c in self.calls if c.writes and c.outcome in APPROVED_OUTCOMES)

    def declined_writes(self) -> tuple[CallRecord, ...]:
        """Write calls that never ran: declined by the approver, or not allowed on this card."""
        return tuple(c for c in self.calls if c.writes and c.outcome in DECLINED_OUTCOMES)


def make_brief(
    goal: str | None = None,
    must_return: Sequence[str] = (),
    inputs: Mapping[str, str] | None = None,
    context_hint: str | None = None,
    max_output_tokens: int | None = None,
    *,
    file: Path | None = None,
) -> Brief:
    """Build a Brief from a task, a Brief `file` (YAML or JSON), or both: the one way to make one.

    Every face builds its Brief here: the command line (a task, --brief and options), serve
    (a tool call's arguments) and the benches. With a file, what is given here goes on top:
    `goal` wins over the file's, `must_return` adds to its fields, `inputs` win key by key,
    a hint or token cap given here wins. The hint is cut to MAX_HINT_CHARS, and the cut noted.
    """
    base = _brief_file(file) if file is not None else {}
    task = goal or ""
    if file is not None and not goal:
        task = _file_goal(file, base.get("goal"))
    else:
        check_task(task)
    cap = max_output_tokens if max_output_tokens is not None else base.get("max_output_tokens")
    if cap is not None and cap < 16:
        raise ConfigError(f"max_output_tokens {cap} is impossible: must be >= 16")
    hint = context_hint if context_hint is not None else base.get("context_hint", "")
    notes: tuple[str, ...] = ()
    if len(hint) > MAX_HINT_CHARS:
        notes = (f"context_hint cut from {len(hint)} to {MAX_HINT_CHARS} characters",)
        hint = hint[:MAX_HINT_CHARS]
    asked = [*base.get("must_return", ()), *must_return]
    fields = tuple(dict.fromkeys(f.strip() for f in asked if f.strip()))
    given = {**base.get("inputs", {}), **(inputs or {})}
    return Brief(task.strip(), fields, given, hint, cap, notes)


def _file_goal(path: Path, goal: Any) -> str:
    """The goal a Brief file gives, checked as a task; a problem names the file."""
    if not isinstance(goal, str):
        raise ConfigError(f"{path}: goal: must be a string (one sentence)")
    try:
        check_task(goal)
    except ConfigError as exc:
        raise ConfigError(f"{path}: goal: {exc}") from None
    return goal


def _brief_file(path: Path) -> dict[str, Any]:
    """Read a Brief file's fields, each checked for its type; a problem names the file."""
    try:
        _, data = yamlsafe.load(yamlsafe.read_bounded(path))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read brief: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML/JSON: {exc}".splitlines()[0]) from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a brief must be a mapping with at least 'goal'")
    unknown = set(data) - {"goal", "must_return", "inputs", "context_hint", "max_output_tokens"}
    if unknown:
        raise ConfigError(f"{path}: unknown brief field {sorted(unknown, key=str)[0]!r}")
    cap = data.get("max_output_tokens")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool)):
        raise ConfigError(f"{path}: max_output_tokens: must be an integer, got {kind_of(cap)}")
    return {
        "goal": data.get("goal"),
        "must_return": _strings(path, data, "must_return"),
        "inputs": _inputs(path, data),
        "context_hint": _text(path, data, "context_hint"),
        "max_output_tokens": cap,
    }


def caller_tokens(digest: Digest) -> int:
    """Estimate the tokens the caller reads: the size of the Digest's JSON.

    Measured with caller_tokens 0: the previous estimate's digits must not change the count.
    A run's Digest gets it once, from `tiny_cli.events.finish`.
    """
    blank = replace(digest, cost=replace(digest.cost, caller_tokens=0))
    return estimate_tokens(json.dumps(blank.to_json(), ensure_ascii=False))


def estimate_tokens(text: str) -> int:
    """Estimate tokens as characters / 4, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


# --- a Brief file's lists and mappings ----------------------------------------------------


def _strings(path: Path, data: dict, key: str) -> list[str]:
    value = data.get(key) or []
    if isinstance(value, str):
        value = [v for v in value.split(",")]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{path}: {key}: must be a list of field names")
    return value


def _inputs(path: Path, data: dict) -> dict[str, str]:
    value = data.get("inputs") or {}
    if isinstance(value, list):  # a bare list of URLs or terms
        value = {f"input{i + 1}": v for i, v in enumerate(value)}
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: inputs: must be a mapping of name: value")
    return {str(k): _text(path, value, k, f"inputs.{k}") for k in value}


def _text(path: Path, data: dict, key: Any, name: str | None = None) -> str:
    """A field the model reads as text: a string or a number; a list or mapping is refused
    (it would reach the model as Python's spelling of it)."""
    value = data.get(key)
    if value is None:
        return ""
    if isinstance(value, list | dict):
        raise ConfigError(f"{path}: {name or key}: must be text, got {kind_of(value)}")
    return str(value)
