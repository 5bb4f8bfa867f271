"""Brief and Digest: what the caller sends an agent, what it gets back, and reading a Brief file."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from os import PathLike
from pathlib import Path
from typing import Any, Literal

import yaml

from tiny_cli import userfiles
from tiny_cli.cards.card import RESERVED_FIELDS
from tiny_cli.errors import ConfigError
from tiny_cli.secrets import Scrubber
from tiny_cli.text import check_task, kind_of, said_whole, wrong_kind
from tiny_cli.tools.artifacts import Artifact
from tiny_cli.userfiles import load_json

MAX_HINT_CHARS = 800
# every input goes into the first user message of each request: about 8,000 tokens at most,
# a quarter of a small model's 32k context; longer material goes in a file the agent reads
MAX_INPUT_CHARS = 32_000
MAX_MUST_RETURN = 32  # field names a Brief asks for, each in the contract the model is shown
MAX_FIELD_NAME_CHARS = 64  # as a card's own field names
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

    def __post_init__(self) -> None:
        """Check and normalise every field, however the Brief was made; ConfigError names it."""
        hint, cut = _hint(self.context_hint)
        checked = {
            "goal": _goal(self.goal),
            "must_return": field_names(self.must_return),
            "inputs": _inputs(self.inputs),
            "context_hint": hint,
            "max_output_tokens": _cap(self.max_output_tokens),
            "notes": (*_notes(self.notes), *cut),
        }
        for name, value in checked.items():
            object.__setattr__(self, name, value)  # frozen: set once, here


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
        doc = dict(vars(self))
        if self.rerouted_from is None:
            del doc["rerouted_from"]
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
            calls=tuple(
                replace(c, name=scrub.text(c.name), arguments=scrub.tree(c.arguments))
                for c in self.calls
            ),
            cost=replace(self.cost, ghost_names=tuple(map(scrub.text, self.cost.ghost_names))),
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
    must_return: Sequence[str] | str = (),
    inputs: Mapping[str, str] | None = None,
    context_hint: str | None = None,
    max_output_tokens: int | None = None,
    *,
    file: Path | str | None = None,
) -> Brief:
    """Build a Brief from a task, a Brief `file` (YAML or JSON) or both; every face builds here."""
    # what is given here goes on top of the file: `must_return` adds, `inputs` key by key
    path = _brief_path(file)
    base = _brief_file(path) if path is not None else {}
    task = goal
    if path is not None and not goal:
        task = _in_file(path, _goal, base.get("goal"))
    cap = max_output_tokens if max_output_tokens is not None else base.get("max_output_tokens")
    hint = context_hint if context_hint is not None else base.get("context_hint", "")
    fields = (*base.get("must_return", ()), *field_names(must_return))
    given = {**base.get("inputs", {}), **(_inputs(inputs) if inputs is not None else {})}
    return Brief("" if task is None else task, fields, given, hint, cap)


def _brief_path(file: Any) -> Path | None:
    """The Brief file's path: a Path, or a str taken as one; ConfigError naming `file` else."""
    if file is None or isinstance(file, Path):
        return file
    if isinstance(file, str | PathLike):
        return Path(file)
    raise wrong_kind("file", "a path to a Brief file", file)


def _brief_file(path: Path) -> dict[str, Any]:
    """Read a Brief file's fields, each checked as the Brief checks it; a problem names the file."""
    try:
        text = userfiles.read_yaml_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        why = userfiles.unreadable(exc, "a brief", "cannot read brief")
        raise ConfigError(f"{path}: {why}", path=path) from exc
    data, written = _parsed(path, text)
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a brief must be a mapping with at least 'goal'", path=path)
    unknown = set(data) - {"goal", "must_return", "inputs", "context_hint", "max_output_tokens"}
    if unknown:
        name = sorted(unknown, key=str)[0]
        raise ConfigError(f"{path}: unknown brief field {name!r}", path=path, field=str(name))
    inputs = written.get("inputs") or {}  # text to the model: as the user wrote it
    if isinstance(inputs, list):  # a bare list of URLs or terms
        inputs = {f"input{i + 1}": v for i, v in enumerate(inputs)}
    hint = written.get("context_hint")  # a YAML scalar (`context_hint: 12`) is text in a file
    return {
        "goal": data.get("goal"),
        "must_return": _in_file(path, field_names, data.get("must_return") or ()),
        "inputs": _in_file(path, _inputs, inputs),
        "context_hint": _in_file(path, partial(_text, name="context_hint"), hint),
        "max_output_tokens": _in_file(path, _cap, data.get("max_output_tokens")),
    }


def _parsed(path: Path, text: str) -> tuple[Any, Any]:
    """A Brief file's data, and the same with every YAML scalar as written; JSON read as JSON
    (libyaml refuses the surrogate pair json.dump writes for an emoji), else YAML."""
    if text.lstrip().startswith("{"):
        try:
            data = load_json(text, str(path))
            return data, data
        except (ValueError, RecursionError):  # not JSON (a YAML flow mapping?): read as YAML
            pass
    try:
        node, data = userfiles.load_yaml(text, unique=True)
        return data, (None if node is None else userfiles.yaml_as_written(node))
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: {_invalid(exc, text)}", path=path) from exc


def _invalid(exc: yaml.YAMLError, text: str) -> str:
    """What is wrong with a Brief file's YAML: too many values is no alias's fault without one."""
    too_many = f"expands to more than {userfiles.MAX_YAML_VALUES} values"
    if too_many in str(exc) and "*" not in text:
        return f"more than {userfiles.MAX_YAML_VALUES} values (the bound for a brief)"
    mark = getattr(exc, "problem_mark", None)
    line = f"line {mark.line + 1}" if mark is not None else ""
    problem, context = userfiles.yaml_problem(exc)
    where = ", ".join(filter(None, (context, line)))
    return f"invalid YAML/JSON: {problem}" + (f" ({where})" if where else "")


def _in_file(path: Path, check: Callable[[Any], Any], value: Any) -> Any:
    """`check(value)`, its problem named by the file and, where the message lacks it, the field."""
    try:
        return check(value)
    except ConfigError as exc:
        said, name = str(exc), exc.field
        named = said if name is None or said.startswith(name) else f"{name}: {said}"
        raise ConfigError(f"{path}: {named}", path=path, field=name) from None


def caller_tokens(digest: Digest) -> int:
    """Estimate the tokens the caller reads: the size of the Digest's JSON, caller_tokens 0."""
    blank = replace(digest, cost=replace(digest.cost, caller_tokens=0))
    return estimate_tokens(json.dumps(blank.to_json(), ensure_ascii=False))


def estimate_tokens(text: str) -> int:
    """Estimate tokens as characters / 4, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


# --- each field of a Brief, checked (Brief.__post_init__) ---------------------------------


def _goal(goal: Any) -> str:
    """The goal, stripped; ConfigError unless it is text that is a task (check_task)."""
    if not isinstance(goal, str):
        raise wrong_kind("goal", "a string (one sentence)", goal)
    try:
        check_task(goal)
    except ConfigError as exc:  # its message is the task's, as `tiny route` says it
        raise ConfigError(str(exc), field="goal") from None
    return goal.strip()


def field_names(value: Any, name: str = "must_return") -> tuple[str, ...]:
    """The field names a task asks for (a str: comma-separated), stripped, without repeats."""
    if isinstance(value, str):  # as a Brief file's `must_return: a, b`, not its characters
        value = value.split(",")
    if not isinstance(value, list | tuple):
        raise _not_names(kind_of(value))
    odd = [v for v in value if not isinstance(v, str)]
    if odd:
        raise _not_names(f"a list holding {kind_of(odd[0])}")
    names = tuple(dict.fromkeys(v.strip() for v in value if v.strip()))
    longest = max(names, key=len, default="")
    reserved = [n for n in names if n in RESERVED_FIELDS]
    if len(names) > MAX_MUST_RETURN:
        said = f"{len(names):,} field names; at most {MAX_MUST_RETURN}"
    elif len(longest) > MAX_FIELD_NAME_CHARS:
        said = f"a field name of {len(longest):,} characters; at most {MAX_FIELD_NAME_CHARS}"
    elif reserved:  # asked for as a field, the run's own status would be judged unsourced
        said = f"{reserved[0]!r} is part of every answer; name the fields besides it"
    else:
        return names
    raise ConfigError(f"{name}: {said}", field=name)


def _not_names(got: str) -> ConfigError:
    return ConfigError(
        f"must_return: must be a list of field names or one comma-separated string, got {got}",
        field="must_return",
    )


def _inputs(value: Any) -> dict[str, str]:
    """The inputs as text by name: a number becomes its digits; bytes, a list are refused."""
    if not isinstance(value, Mapping):
        raise wrong_kind("inputs", "a mapping of name: value", value)
    if any(not str(k).strip() for k in value):  # the model would read "- : v"
        raise ConfigError("inputs: a name must not be blank", field="inputs")
    inputs = {str(k): _text(v, f"inputs.{k}", "inputs") for k, v in value.items()}
    size = sum(len(k) + len(v) for k, v in inputs.items())
    if size > MAX_INPUT_CHARS:
        raise ConfigError(
            f"inputs: {size:,} characters in all; at most {MAX_INPUT_CHARS:,} "
            "(put long material in a file the agent reads, not in the inputs)",
            field="inputs",
        )
    return inputs


def _text(value: Any, name: str, field: str | None = None) -> str:
    """A value the model reads as text (None: ""); one not `said_whole` (bytes, a list) fails."""
    if value is None:
        return ""
    if not said_whole(value):  # bytes or an object would reach the model as Python's repr
        raise ConfigError(f"{name}: must be text, got {kind_of(value)}", field=field or name)
    return str(value)


def _hint(value: Any) -> tuple[str, tuple[str, ...]]:
    """The hint, cut to MAX_HINT_CHARS, and the note of the cut (if any)."""
    if not isinstance(value, str):
        raise wrong_kind("context_hint", "text", value)
    cut = f"context_hint cut from {len(value)} to {MAX_HINT_CHARS} characters"
    return value[:MAX_HINT_CHARS], (cut,) if len(value) > MAX_HINT_CHARS else ()


def _cap(value: Any) -> int | None:
    """The token cap: None (the card's) or an integer of at least 16."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool):
        raise wrong_kind("max_output_tokens", "an integer", value)
    if value < 16:
        raise ConfigError(
            f"max_output_tokens {value} is impossible: must be >= 16", field="max_output_tokens"
        )
    return value


def _notes(value: Any) -> tuple[str, ...]:
    """The notes on the Brief: a list of texts."""
    if not isinstance(value, list | tuple) or not all(isinstance(n, str) for n in value):
        raise wrong_kind("notes", "a list of texts", value)
    return tuple(value)
