"""Brief and Digest: what the caller sends an agent, what it gets back, and parsing the reply."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import jsonschema
import referencing.exceptions
import yaml

from tiny_cli import yamlsafe
from tiny_cli.artifacts import Artifact
from tiny_cli.errors import ConfigError

MAX_HINT_CHARS = 800
# A goal is one request, not a document: long material belongs in a file the agent reads.
MAX_GOAL_CHARS = 8_000
# A final answer is bounded by max_tokens; far more is a broken server, not an answer.
MAX_REPLY_CHARS = 200_000
MAX_OBJECT_STARTS = 1_000  # '{' positions tried when the JSON sits inside prose
CHARS_PER_TOKEN = 4  # the estimate used wherever tokens are counted without a tokenizer
MODEL_STATUSES = ("ok", "partial", "refused")

Status = Literal["ok", "partial", "refused", "failed", "abstain", "needs_confirmation"]
FieldSource = Literal["tool", "task", "model"]  # where a returned field's value was found
CallOutcome = Literal[
    "ok", "ghost", "bad_arguments", "tool_error", "timeout", "declined", "not_allowed"
]
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


@dataclass(frozen=True)
class CallRecord:
    """One attempted tool call; write calls appear in the Digest JSON with their arguments."""

    name: str
    outcome: CallOutcome
    writes: bool = False
    arguments: Mapping[str, Any] | None = None  # kept for write calls: what was approved
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


@dataclass(frozen=True)
class Digest:
    """The caller's answer: a few hundred tokens, however much the agent read."""

    agent_id: str | None
    status: Status
    summary: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)
    artifacts: tuple[Artifact, ...] = ()  # tool results stored whole (tiny_cli.artifacts)
    notes_for_caller: tuple[str, ...] = ()
    cost: Cost = field(default_factory=Cost)
    reason: str | None = None
    routing: Routing | None = None
    calls: tuple[CallRecord, ...] = ()
    # per returned field: seen in a tool's arguments or result, in the task, or only the model's
    field_sources: Mapping[str, FieldSource] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return the Digest as the JSON document `--json` prints (DESIGN §5 keys)."""
        doc: dict[str, Any] = {
            "agent_id": self.agent_id,
            "status": self.status,
            "summary": self.summary,
            "fields": dict(self.fields),
            "artifacts": [a.to_json() for a in self.artifacts],
            "notes_for_caller": list(self.notes_for_caller),
            # vars, not asdict: no deep copy of flat numbers (the run log encodes every Digest)
            "cost": {**vars(self.cost), "ghost_names": list(self.cost.ghost_names)},
            "reason": self.reason,
            "field_sources": dict(self.field_sources),
        }
        approved, declined = self.approved_writes(), self.declined_writes()
        if approved or declined:
            doc["approved_writes"] = [c.to_json() for c in approved]
            doc["declined_writes"] = [c.to_json() for c in declined]
        if self.routing is not None:
            doc["routing"] = asdict(self.routing)
        return doc

    def approved_writes(self) -> tuple[CallRecord, ...]:
        """Write calls that were approved and ran (their outcome says whether they worked)."""
        return tuple(c for c in self.calls if c.writes and c.outcome in APPROVED_OUTCOMES)

    def declined_writes(self) -> tuple[CallRecord, ...]:
        """Write calls that never ran: declined by the approver, or not allowed on this card."""
        return tuple(c for c in self.calls if c.writes and c.outcome in DECLINED_OUTCOMES)


def make_brief(
    goal: str,
    must_return: Sequence[str] = (),
    inputs: Mapping[str, str] | None = None,
    context_hint: str = "",
    max_output_tokens: int | None = None,
) -> Brief:
    """Build a Brief, cutting the hint to MAX_HINT_CHARS and noting the cut."""
    check_task(goal)
    if max_output_tokens is not None and max_output_tokens < 16:
        raise ConfigError(f"max_output_tokens {max_output_tokens} is impossible: must be >= 16")
    notes: tuple[str, ...] = ()
    if len(context_hint) > MAX_HINT_CHARS:
        notes = (f"context_hint cut from {len(context_hint)} to {MAX_HINT_CHARS} characters",)
        context_hint = context_hint[:MAX_HINT_CHARS]
    fields = tuple(dict.fromkeys(f.strip() for f in must_return if f.strip()))
    return Brief(goal.strip(), fields, dict(inputs or {}), context_hint, max_output_tokens, notes)


def check_task(text: str) -> None:
    """Raise ConfigError for a task that is empty or longer than MAX_GOAL_CHARS."""
    if not text.strip():
        raise ConfigError("the task is empty: say what the agent should do")
    if len(text) > MAX_GOAL_CHARS:
        raise ConfigError(
            f"the task is {len(text):,} characters; at most {MAX_GOAL_CHARS:,} "
            "(put long material in a file the agent reads, not in the task)"
        )


def load_brief(path: Path, goal: str | None = None) -> Brief:
    """Read a Brief from a YAML or JSON file; a TASK given on the command line wins over `goal`."""
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
    goal = goal or data.get("goal")
    if not isinstance(goal, str):
        raise ConfigError(f"{path}: goal: must be a string (one sentence)")
    cap = data.get("max_output_tokens")
    if cap is not None and (not isinstance(cap, int) or isinstance(cap, bool)):
        raise ConfigError(f"{path}: max_output_tokens: must be an integer, got {cap!r}")
    hint = str(data.get("context_hint") or "")
    return make_brief(goal, _strings(path, data, "must_return"), _inputs(path, data), hint, cap)


@dataclass(frozen=True)
class Reply:
    """The model's final answer, parsed: its data, or what is wrong with it."""

    data: Mapping[str, Any]
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()  # what tiny did to use the answer (closed a cut-off object)


def parse_reply(
    text: str | None, required: Sequence[str], types: Mapping[str, dict] | None = None
) -> Reply:
    """Find the JSON object in a final answer (prose and code fences tolerated) and check it.

    `types` maps fields to the JSON Schema their values must match (a card's `returns`).
    """
    text = text or ""
    if len(text) > MAX_REPLY_CHARS:
        return Reply(
            {}, (f"your answer is {len(text):,} characters; answer with one short JSON object",)
        )
    data, notes, problem = _locate_object(text)
    if data is None:
        return Reply({}, (problem,))
    problems = _contract_problems(data, required)
    if data.get("status") != "refused":  # a refusal carries no fields to check
        problems += _type_problems(data, types or {}, required)
    return Reply(data, tuple(problems), notes)


def field_values(data: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """Collect the required fields from a reply, flat or under a 'fields' object."""
    return {name: _value(data, name) for name in names if _value(data, name) is not None}


def with_caller_tokens(digest: Digest) -> Digest:
    """Return the Digest with cost.caller_tokens set to the estimated size of its JSON."""
    # measured with caller_tokens 0: the previous estimate's digits must not change the count
    blank = replace(digest, cost=replace(digest.cost, caller_tokens=0))
    size = estimate_tokens(json.dumps(blank.to_json(), ensure_ascii=False))
    return replace(digest, cost=replace(digest.cost, caller_tokens=size))


def estimate_tokens(text: str) -> int:
    """Estimate tokens as characters / 4, rounded up."""
    return -(-len(text) // CHARS_PER_TOKEN)


# --- helpers ------------------------------------------------------------------------------

_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
NO_OBJECT = "no JSON object found in your answer"
MAX_SHOWN_CHARS = 40  # a wrong value quoted back in a problem
_TYPE_NAMES = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
_PLURALS = {
    "string": "strings",
    "number": "numbers",
    "integer": "integers",
    "boolean": "booleans",
    "array": "lists",
    "object": "objects",
}
# bool before int: True is an int to isinstance
_VALUE_KINDS = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "an object"),
)


def _contract_problems(data: Mapping[str, Any], required: Sequence[str]) -> list[str]:
    """Check the status and that every required field has a value."""
    problems = []
    status = data.get("status")
    if status not in MODEL_STATUSES:
        problems.append(f"'status' must be one of {', '.join(MODEL_STATUSES)}, got {status!r}")
    if status != "refused":
        for name in ("summary", *required):
            if _value(data, name) in (None, ""):
                problems.append(f"missing required field {name!r}")
    return problems


def _locate_object(text: str) -> tuple[dict[str, Any] | None, tuple[str, ...], str]:
    """Return the answer object, notes on how it was found, or the problem if none was."""
    data = _whole_object(text)
    if data is not None:
        return data, (), ""
    # before the embedded scan: a cut-off outer object must not yield one of its inner ones
    completed, note, cut = _complete_object(text)
    if completed is not None:
        return completed, (note,), ""
    data = _scan_objects(text)
    if data is not None:
        return data, (), ""
    return None, (), cut or NO_OBJECT


def _whole_object(text: str) -> dict[str, Any] | None:
    """Return the object that is the whole text or a whole code fence."""
    for chunk in [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]:
        value = _loads(chunk)
        if isinstance(value, dict):
            return value
    return None


def _loads(chunk: str) -> Any:
    try:
        return json.loads(chunk)
    except (ValueError, RecursionError):
        return None


def _scan_objects(text: str) -> dict[str, Any] | None:
    """Return the last top-level JSON object embedded in prose (models put it at the end)."""
    decoder = json.JSONDecoder()
    found, i = None, text.find("{")
    for _ in range(MAX_OBJECT_STARTS):  # a wall of '{' must not take minutes
        if i == -1:
            break
        try:
            value, end = decoder.raw_decode(text, i)
        except (ValueError, RecursionError):
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            found = value
        i = text.find("{", end)
    return found


# --- a final answer cut off before its closing brackets -----------------------------------

_CLOSER = {"{": "}", "[": "]"}
# what to append, by where the text ends, to test that it is a valid JSON prefix
_FILLERS = {"key_string": '": null', "string": '"', "key": ": null", "colon": " null"}
_ENDINGS = {
    "key_string": "it ends inside a key",
    "string": "it ends inside a string",
    "key": "it ends after a key with no value",
    "colon": "it ends after a ':' with no value",
    "comma": "it ends after a ','",
}


def _complete_object(text: str) -> tuple[dict[str, Any] | None, str, str]:
    """Close a JSON object cut off only by its missing closing brackets.

    Tried on each code fence, then on the text from its first '{'. Returns the object and
    a note; or None and, if the cut was inside a string or after ':'/',', the problem.
    """
    start = text.find("{")
    chunks = [m.group(1).strip() for m in _FENCE.finditer(text)]
    chunks += [text[start:].strip()] if start != -1 else []
    problem = ""
    for chunk in chunks:
        cut = _cut(chunk)
        if cut is None:
            continue
        closers, ending = cut
        completed = _loads(chunk + closers) if ending == "value" else None
        if isinstance(completed, dict):
            note = f"the answer's JSON ended without its closing '{closers}'; tiny completed it"
            return completed, note, ""
        problem = problem or _cut_problem(chunk, closers, ending)
    return None, "", problem


def _cut_problem(chunk: str, closers: str, ending: str) -> str:
    """Say where an object was cut, if the text really is the start of one."""
    filler = _FILLERS.get(ending, "")
    if ending == "comma":
        filler = '"_": null' if closers[0] == "}" else "null"
    if ending == "value" or not isinstance(_loads(chunk + filler + closers), dict):
        return ""  # not a cut-off object but broken JSON: the generic problem fits
    where = _ENDINGS.get(ending) or f"it ends right after a '{_opener(closers[0])}'"
    return f"your JSON object is cut off ({where}); answer again with the whole object"


def _opener(closer: str) -> str:
    return "{" if closer == "}" else "["


def _cut(chunk: str) -> tuple[str, str] | None:
    """Scan once: the closers a '{...' text lacks (innermost first) and what it ends with.

    None when it is no unclosed object: it does not start with '{', a bracket is closed
    that was not open, or the object closes before the text ends.
    """
    if not chunk.startswith("{"):
        return None
    stack: list[str] = []
    ending, in_string, escaped = "value", False, False
    for i, ch in enumerate(chunk):
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
            if not in_string:
                ending = "key" if ending == "key_string" else "value"
        elif ch == '"':
            in_string = True
            ending = (
                "key_string" if stack[-1:] == ["}"] and ending in ("open", "comma") else "string"
            )
        elif ch in _CLOSER:
            stack.append(_CLOSER[ch])
            ending = "open"
        elif ch in "]}":
            if not stack or stack.pop() != ch or (not stack and i < len(chunk) - 1):
                return None
            ending = "value"
        elif not ch.isspace():
            ending = {":": "colon", ",": "comma"}.get(ch, "value")
    return ("".join(reversed(stack)), ending) if stack else None


# --- typed fields -------------------------------------------------------------------------


def _type_problems(
    data: Mapping[str, Any], types: Mapping[str, dict], required: Sequence[str]
) -> list[str]:
    """Check each typed field's value against its JSON Schema; one problem per field."""
    problems = []
    for name, schema in types.items():
        value = _value(data, name)
        if value is None or (value == "" and name in required):
            continue  # absent: reported as missing, not as mistyped
        problem = _type_problem(name, value, schema)
        if problem:
            problems.append(problem)
    return problems


def _type_problem(name: str, value: Any, schema: dict) -> str | None:
    """Return one line naming the field, what its schema wants and what it got; None if valid."""
    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except RecursionError:
        return f"field {name!r} is nested too deeply to check"
    except (referencing.exceptions.Unresolvable, re.error) as exc:  # the card loader refuses these
        why = _safe(_clip(str(exc), 100))
        return f"field {name!r} cannot be checked: the card's schema for it is broken ({why})"
    if error is None:
        return None
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    where = _clip(name + path, 80)
    expected = _expected(error)
    if expected is None:  # jsonschema's own words, with the value it quotes shortened
        said = error.message.replace(repr(error.instance), _clip(_dumps(error.instance), 40))
        return f"field {where!r} does not match its schema: {_safe(_clip(said, 160))}"
    return f"field {where!r} {expected}, got {_shown(error.instance)}"


def _expected(error: Any) -> str | None:
    """Say what the schema wanted, in the words a model understands."""
    if error.validator == "type":
        return f"must be {_describe(error.schema)}"
    if error.validator == "enum":
        return "must be one of " + _clip(", ".join(map(_dumps, error.validator_value)), 120)
    if error.validator == "const":
        return f"must be {_clip(_dumps(error.validator_value), 120)}"
    if error.validator == "format":
        return f"must be a valid {error.validator_value!r}"
    return None


def _describe(schema: Mapping[str, Any]) -> str:
    kind = schema.get("type")
    if isinstance(kind, list):
        return " or ".join(_TYPE_NAMES.get(k, str(k)) for k in kind)
    items = schema.get("items")
    if kind == "array" and isinstance(items, dict) and items.get("type") in _PLURALS:
        return f"a list of {_PLURALS[items['type']]}"
    return _TYPE_NAMES.get(str(kind), str(kind))


def _shown(value: Any) -> str:
    """Name a value's JSON type and show it shortened, with no control characters."""
    kind = next((name for t, name in _VALUE_KINDS if isinstance(value, t)), "null")
    return f"{kind} ({_clip(_dumps(value), MAX_SHOWN_CHARS)})"


def _dumps(value: Any) -> str:
    return _safe(json.dumps(value, ensure_ascii=False, default=str))


def _safe(text: str) -> str:
    """Escape what could steer a terminal or break the one-line problem."""
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in text)


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(data: Mapping[str, Any], name: str) -> Any:
    if name in data:
        return data[name]
    nested = data.get("fields")
    return nested.get(name) if isinstance(nested, dict) else None


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
    return {str(k): str(v) for k, v in value.items()}
