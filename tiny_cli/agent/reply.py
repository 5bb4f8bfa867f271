"""What a model wrote, read: its final answer checked against the contract, its tool requests.

The answer: prose around its JSON object, code fences and a cut-off object are tolerated; what
is still wrong is said in the words the repair turn sends back to the model.

Actions (the last section), by tool mode: `native` is OpenAI `tools` / `tool_calls`; `json`
sends no `tools`, and a `response_format` json_schema whose branches are the card's tools
(`{"tool": NAME, "arguments": {...}}`) and the answer constrains every reply, so small models
that never emit `tool_calls` still make real calls; `auto` is native, switching to json when
the model writes a call as text. Such a call (bare JSON, a fence, Hermes `<tool_call>` tags,
doubled braces) is a *recovered* call: run like any other, counted apart, never silent.

Both read a reply's text `without_reasoning`: a `<think>` block is neither call nor answer.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tiny_cli.agent.calls import shown_name
from tiny_cli.cards.card import Card
from tiny_cli.digest import MODEL_STATUSES
from tiny_cli.provider.client import ToolCall
from tiny_cli.setting_rules import ToolMode
from tiny_cli.settings import DEFAULT_TOOL_MODE
from tiny_cli.text import printable, unsurrogated
from tiny_cli.tools.args_check import coerce_scalar, fast_pass
from tiny_cli.tools.specs import TOOL_NAME_PATTERN

# A final answer is bounded by max_tokens; far more is a broken server, not an answer. Of a
# longer reply the context and the run log keep only this much: it is sent on every later
# request (a tool call's arguments are bounded the same way)
MAX_REPLY_CHARS = 200_000
REPLY_CUT = "\n[… cut by tiny: {more:,} more characters of this reply not kept]"
MAX_OBJECT_STARTS = 1_000  # '{' positions tried when the JSON sits inside prose
MAX_SHOWN_CHARS = 40  # a wrong value quoted back in a problem
NO_OBJECT = "no JSON object found in your answer"
SUMMARY_TYPE = {"summary": {"type": "string"}}  # what the contract says of every summary
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
REASONING_ONLY = "your reply held only reasoning (a <think> block) and no answer"
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_TYPE_NAMES = {
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "true or false",
    "array": "a list",
    "object": "an object",
    "null": "null",
}
_PLURALS = {t: f"{t}s" for t in ("string", "number", "integer", "boolean", "object")}
_PLURALS["array"] = "lists"  # "a list of lists"
# bool before int: True is an int to isinstance
_VALUE_KINDS = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "a list"),
    (dict, "an object"),
)
_CLOSER = {"{": "}", "[": "]"}
_OPENER = {"}": "{", "]": "["}
# what to append, by where the text ends, to test that it is a valid JSON prefix
_FILLERS = {"key_string": '": null', "string": '"', "key": ": null", "colon": " null"}
_ENDINGS = {
    "key_string": "it ends inside a key",
    "string": "it ends inside a string",
    "key": "it ends after a key with no value",
    "colon": "it ends after a ':' with no value",
    "comma": "it ends after a ','",
    # "open": it ends right after a '{' or '[', said with the bracket
}

SCHEMA_NAME = "tiny_action"
MAX_RECOVERED_CALLS = 8  # call-shaped objects taken from one reply; more is not a plan
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S)
_FENCED = re.compile(r"```(?:json|JSON|tool_call)?\s*(.*?)```", re.S)
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARGUMENT_KEYS = ("arguments", "parameters", "args", "input")


@dataclass(frozen=True)
class Reply:
    """The model's final answer, parsed: its data, or what is wrong with it."""

    data: Mapping[str, Any]
    problems: tuple[str, ...]
    notes: tuple[str, ...] = ()  # what tiny did to use the answer (closed a cut-off object)
    completed: bool = False  # the object was cut off and tiny closed it: its last value may be cut
    # the text went on past the answer into another object it ends inside (an `ok`, then a
    # corrected answer cut off): if the reply was cut, the answer may not be the model's last
    cut_after: bool = False


def parse_reply(
    text: str | None,  # the answer `without_reasoning`
    required: Sequence[str],  # a `partial` may leave them out (`missing_fields`); `ok` may not
    types: Mapping[str, dict] | None = None,  # each field's JSON Schema (a card's `returns`)
    *,
    partial: bool = False,  # taken as a partial, never repaired (the tool budget ran out)
    sent: str | None = None,  # the reply as sent, where it differs: its size is the answer's
) -> Reply:
    """Find the JSON object in a final answer (prose and code fences tolerated) and check it."""
    text, types = text or "", types or {}
    sent = text if sent is None else sent
    if len(sent) > MAX_REPLY_CHARS:
        problem = f"your answer is {len(sent):,} characters; answer with one short JSON object"
        return Reply({}, (problem,))
    if sent.strip() and not text.strip():
        return Reply({}, (REASONING_ONLY,))
    data, notes, problem = _locate_object(text)
    if data is None:
        return Reply({}, (problem,))
    completed = bool(notes)  # the only note of _locate_object: it closed a cut-off object
    cut_after = not completed and _open_after(text)
    data, notes = _status_read(data, notes)
    data, coerced = _coerced(data, types)
    notes += coerced
    typed = {**SUMMARY_TYPE, **types}  # the contract's summary is a string
    status = data.get("status")
    if partial or status in ("partial", "refused"):  # taken with what it has: a wrong field
        # is left out. A refusal carries no fields to check, but its summary is shown; the
        # fields a partial lacks (even its summary) are named, not repaired, so a second try
        # cannot turn an honest partial into a failure
        refused = status == "refused"
        kept = "refused" if refused else "partial"
        data, dropped = _without_mistyped(data, SUMMARY_TYPE if refused else typed, kept)
        problems = _two_minds(text) if refused or partial else []
        return Reply(data, tuple(problems), notes + dropped, completed, cut_after)
    problems = _contract_problems(data, required, types) + _two_minds(text)
    problems += _type_problems(data, typed, required)
    return Reply(data, tuple(problems), notes, completed, cut_after)


def kept_reply(text: str | None) -> str | None:
    """Return a reply's text as the context and the run log keep it: cut past MAX_REPLY_CHARS."""
    if text is None or len(text) <= MAX_REPLY_CHARS:
        return text
    return text[:MAX_REPLY_CHARS] + REPLY_CUT.format(more=len(text) - MAX_REPLY_CHARS)


def without_reasoning(text: str | None) -> str:
    """Return a reply's text less its leading `<think>…</think>` blocks ("" for one unclosed)."""
    text = text or ""
    head, closed, rest = text.partition(THINK_CLOSE)
    # a reply that is JSON from its first character is an answer or a call, whatever it quotes
    if closed and THINK_OPEN not in head and not head.lstrip().startswith(("{", "[")):
        text = rest  # DeepSeek-R1's and Qwen3's thinking templates open the block themselves
    while (rest := text.lstrip()).startswith(THINK_OPEN):
        _, closed, text = rest.partition(THINK_CLOSE)
        if not closed:
            return ""
    return text


def _two_minds(text: str) -> list[str]:
    """Name answers of different statuses in one reply ("ok", then a corrected "partial"):
    which one holds is the model's to say, so it is asked once, never guessed."""
    statuses: list[str] = []
    for value, _ in _decoded(text):  # answers only: a quoted payload's "status" is no answer
        status = value.get("status")
        said = status.strip().lower() if isinstance(status, str) else None
        if said in MODEL_STATUSES and said not in statuses:
            statuses.append(said)
    if len(statuses) < 2:
        return []
    return [f"your answer holds {len(statuses)} answers ({', '.join(statuses)}); give one"]


def _status_read(data: dict[str, Any], notes: tuple[str, ...]) -> tuple[dict, tuple[str, ...]]:
    """Read a status written as " Partial" or "OK" as the status it names, with a note."""
    status = data.get("status")
    if not isinstance(status, str) or status in MODEL_STATUSES:
        return data, notes
    plain = status.strip().lower()
    if plain not in MODEL_STATUSES:
        return data, notes
    said = f"'status' came as {_dumps(status)}; tiny read it as {plain!r}"
    return {**data, "status": plain}, (*notes, said)


def _without_mistyped(
    data: dict[str, Any], types: Mapping[str, dict], status: str
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Leave out of a `partial` (or a refusal) each typed field its schema refuses, with a note
    naming it (an empty value too, when its schema refuses it)."""
    notes: tuple[str, ...] = ()
    for name, schema in types.items():
        value = _value(data, name)
        problem = None if value is None else _type_problem(name, value, schema)
        if problem is None:
            continue
        if name in data:
            data = {k: v for k, v in data.items() if k != name}
        else:  # found under `fields`
            data = {**data, "fields": {k: v for k, v in data["fields"].items() if k != name}}
        notes += (f"{problem}: left out of the {status} answer",)
    return data, notes


def missing_fields(
    data: Mapping[str, Any], names: Sequence[str], types: Mapping[str, Any] | None = None
) -> tuple[str, ...]:
    """Return the fields of `names` that a reply leaves out or leaves empty (`_empty`)."""
    return tuple(n for n in names if _empty(_value(data, n), typed=n in (types or {})))


def _empty(value: Any, typed: bool = False) -> bool:
    """True for a value that says nothing: none, blank text, or, untyped, an empty list or object
    (a typed field's schema may take one: no tags at all)."""
    if isinstance(value, str):
        return not value.strip()
    return value is None or (not typed and isinstance(value, list | dict) and not value)


def field_values(data: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    """Collect the required fields from a reply, flat or under a 'fields' object."""
    return {name: _value(data, name) for name in names if _value(data, name) is not None}


def _contract_problems(
    data: Mapping[str, Any], required: Sequence[str], types: Mapping[str, Any]
) -> list[str]:
    """Check an `ok` answer's status, its summary and every required field."""
    problems = []
    status = data.get("status")
    if status not in MODEL_STATUSES:
        problems.append(f"'status' must be one of {', '.join(MODEL_STATUSES)}, got {status!r}")
    missing = missing_fields(data, ("summary", *required), types)
    return problems + [f"missing required field {n!r}" for n in missing]


def _coerced(
    data: dict[str, Any], types: Mapping[str, dict]
) -> tuple[dict[str, Any], tuple[str, ...]]:
    """Read typed fields given as strings ("3" for an integer) as their values, with a note each."""
    notes: tuple[str, ...] = ()
    for name, schema in types.items():
        value = _value(data, name)
        typed = coerce_scalar(schema, value)
        if typed is value:
            continue
        if name in data:
            data = {**data, name: typed}
        else:  # found under `fields`
            data = {**data, "fields": {**data["fields"], name: typed}}
        said = f"field {name!r} came as the string {_dumps(value)}"
        notes += (f"{said}; tiny read it as {_dumps(typed)}",)
    return data, notes


def _locate_object(text: str) -> tuple[dict[str, Any] | None, tuple[str, ...], str]:
    """Return the answer object, notes on how it was found, or the problem if none was."""
    data = _whole_object(text)
    if data is not None:
        return data, (), ""
    # before the embedded scan: a cut-off outer object must not yield one of its inner ones
    completed, note, cut = _complete_object(text)
    if completed is not None:
        return completed, (note,), ""
    objects = [value for value, _ in _decoded(text)]  # the last: models answer at the end
    if objects:
        return objects[-1], (), ""
    return None, (), cut or NO_OBJECT


def _whole_object(text: str) -> dict[str, Any] | None:
    for chunk in [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]:
        value = read_json(chunk)
        if isinstance(value, dict):
            return value
    return None


def read_json(chunk: str) -> Any:
    """Parse JSON, each lone surrogate replaced; None for what is not (too deep, huge numbers)."""
    try:
        return unsurrogated(json.loads(chunk))
    except (ValueError, RecursionError):
        return None


def _open_after(text: str) -> bool:
    """True when the text ends inside an object begun after its last whole one."""
    ends = [end for _, end in _decoded(text)]
    start = text.find("{", ends[-1] if ends else 0)
    return start != -1 and _cut(text[start:].rstrip()) is not None


def _decoded(text: str) -> Iterator[tuple[dict[str, Any], int]]:
    """Yield each top-level JSON object embedded in the text, in order, and where it ends."""
    decoder, i = json.JSONDecoder(), text.find("{")
    for _ in range(MAX_OBJECT_STARTS):  # a wall of '{' must not take minutes
        if i == -1:
            return
        try:
            value, end = decoder.raw_decode(text, i)
            value = unsurrogated(value)
        except (ValueError, RecursionError):
            i = text.find("{", i + 1)
            continue
        if isinstance(value, dict):
            yield value, end
        i = text.find("{", end)


def _complete_object(text: str) -> tuple[dict[str, Any] | None, str, str]:
    """Close a JSON object (in a code fence, else from the first '{') cut off only by its missing
    brackets; return it and a note, or None and the problem if it was cut mid-value."""
    start = text.find("{")
    chunks = [m.group(1).strip() for m in _FENCE.finditer(text)]
    chunks += [text[start:].strip()] if start != -1 else []
    problem = ""
    for chunk in chunks:
        cut = _cut(chunk)
        if cut is None:
            continue
        closers, ending = cut
        completed = read_json(chunk + closers) if ending == "value" else None
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
    if ending == "value" or not isinstance(read_json(chunk + filler + closers), dict):
        return ""  # not a cut-off object but broken JSON: the generic problem fits
    where = _ENDINGS.get(ending) or f"it ends right after a '{_OPENER[closers[0]]}'"
    return f"your JSON object is cut off ({where}); answer again with the whole object"


def _cut(chunk: str) -> tuple[str, str] | None:
    """Scan once: the closers a '{...' text lacks (innermost first) and what it ends with;
    None when it is no unclosed object (a stray closer, or it closes before the text ends)."""
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
            key = stack[-1:] == ["}"] and ending in ("open", "comma")
            ending = "key_string" if key else "string"
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


def _type_problems(
    data: Mapping[str, Any], types: Mapping[str, dict], required: Sequence[str]
) -> list[str]:
    """Check each typed field's value against its JSON Schema; one problem per field."""
    problems = []
    for name, schema in types.items():
        value = _value(data, name)
        if value is None or (_empty(value, typed=True) and name in required):
            continue  # absent: reported as missing, not as mistyped
        problem = _type_problem(name, value, schema)
        if problem:
            problems.append(problem)
    return problems


def _type_problem(name: str, value: Any, schema: dict) -> str | None:
    """Return one line naming the field, what its schema wants and what it got; None if valid."""
    if fast_pass(schema, value, formats=True):
        return None
    import jsonschema  # words the problem (and judges formats and newer keywords)
    import referencing.exceptions

    validator = jsonschema.Draft202012Validator(
        schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER
    )
    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except RecursionError:
        return f"field {name!r} is nested too deeply to check"
    except (referencing.exceptions.Unresolvable, re.error) as exc:  # the card loader refuses these
        why = printable(_clip(str(exc), 100))
        return f"field {name!r} cannot be checked: the card's schema for it is broken ({why})"
    if error is None:
        return None
    path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
    where = _clip(name + path, 80)
    expected = _expected(error)
    if expected is None:  # jsonschema's own words, with the value it quotes shortened
        said = error.message.replace(repr(error.instance), _clip(_dumps(error.instance), 40))
        return f"field {where!r} does not match its schema: {printable(_clip(said, 160))}"
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
    each = items.get("type") if isinstance(items, dict) else None
    if kind == "array" and isinstance(each, str) and each in _PLURALS:  # a type list: a list
        return f"a list of {_PLURALS[each]}"
    return _TYPE_NAMES.get(str(kind), str(kind))


def _shown(value: Any) -> str:
    """Name a value's JSON type and show it shortened, with no control characters."""
    kind = next((name for t, name in _VALUE_KINDS if isinstance(value, t)), "null")
    return f"{kind} ({_clip(_dumps(value), MAX_SHOWN_CHARS)})"


def _dumps(value: Any) -> str:
    return printable(json.dumps(value, ensure_ascii=False, default=str))


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _value(data: Mapping[str, Any], name: str) -> Any:
    if name in data:
        return data[name]
    nested = data.get("fields")
    return nested.get(name) if isinstance(nested, dict) else None


# --- actions: a tool requested, in each tool mode -----------------------------------------


def tool_mode_for(card: Card, setting: ToolMode | None) -> ToolMode:
    """Pick the tool mode: --tool-mode > TINY_TOOL_MODE (both in `setting`) > card > default."""
    return setting or card.tool_mode or DEFAULT_TOOL_MODE


def response_format(
    tools: Sequence[Mapping[str, Any]], answer: Mapping[str, Any] | None
) -> dict[str, Any]:
    """Return the json_schema response_format: one branch per tool, plus the answers if allowed."""
    # `answer` None: the card must call a tool first, so no refusal either (offered one, a
    # small model refuses its own job; the concierge turns away tasks nobody should do)
    branches = [_tool_branch(t["function"]) for t in tools]
    if answer is not None:
        branches.append(dict(answer))
    if answer is not None or not tools:
        branches.append(_refusal_branch())
    schema = branches[0] if len(branches) == 1 else {"anyOf": branches}
    return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": schema}}


def read_actions(text: str, number: int) -> tuple[ToolCall, ...]:
    """Return the tool calls a json-mode reply's text asks for; none for a final answer."""
    whole = _load(text)
    if isinstance(whole, dict):
        call = _as_call(whole, f"json_{number}", bare=True)
        return () if call is None else (call,)
    return recover_calls(text, number, "json", bare=True)  # a server ignored `response_format`


def recover_calls(
    text: str, first_number: int, kind: str = "recovered", *, bare: bool = False
) -> tuple[ToolCall, ...]:
    """Return the tool calls a reply wrote as text instead of `tool_calls` (`_as_call`)."""
    calls: list[ToolCall] = []
    for chunk in _chunks(text)[:MAX_RECOVERED_CALLS]:
        data = _load(chunk)
        for item in data if isinstance(data, list) else [data]:
            call = _as_call(item, f"{kind}_{first_number + len(calls)}", bare)
            if call is not None and len(calls) < MAX_RECOVERED_CALLS:
                calls.append(call)
    return tuple(calls)


def result_message(name: str, content: str) -> dict[str, Any]:
    """Return a tool result for a call made without `tool_calls` (json mode, recovered)."""
    said = f"Result of {shown_name(name)}:\n{content}"  # a ghost's name may be any size
    return {"role": "user", "content": f"{said}\n\nCall another tool or give your final answer."}


# --- helpers ------------------------------------------------------------------------------


def _tool_branch(function: Mapping[str, Any]) -> dict[str, Any]:
    parameters = function.get("parameters") or {"type": "object", "properties": {}}
    return {
        "type": "object",
        "properties": {"tool": {"const": function["name"]}, "arguments": parameters},
        "required": ["tool", "arguments"],
        "additionalProperties": False,
    }


def _refusal_branch() -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"status": {"const": "refused"}, "summary": {"type": "string"}},
        "required": ["status", "summary"],
        "additionalProperties": False,
    }


def _chunks(text: str) -> list[str]:
    """Return the places a call may be written: tagged blocks, else fences, else the text."""
    tagged = [m.group(1) for m in _TAGGED.finditer(text)]
    if tagged:
        return tagged
    fenced = [m.group(1) for m in _FENCED.finditer(text)]
    return fenced or [text]


def _load(chunk: str) -> Any:
    """Parse a JSON value; also the doubled-brace form some chat templates teach (`{{...}}`)."""
    chunk = chunk.strip()
    value = read_json(chunk)
    return value if value is not None else read_json(chunk.replace("{{", "{").replace("}}", "}"))


def _as_call(data: Any, call_id: str, bare: bool = False) -> ToolCall | None:
    """Turn {"name"|"tool": N, "arguments": {...}} (or {"function": {...}}) into a ToolCall; no
    answer (`status`) is one. `bare` (json mode): a lone {"tool": N} is a call, no arguments."""
    if not isinstance(data, dict) or "status" in data:
        return None
    named = data.get("tool") if bare and list(data) == ["tool"] else None
    if isinstance(named, str) and TOOL_NAME_PATTERN.match(named):
        return ToolCall(call_id, named, "{}")
    if isinstance(data.get("function"), dict):
        data = data["function"]
    name = next((data[k] for k in _NAME_KEYS if isinstance(data.get(k), str)), None)
    key = next((k for k in _ARGUMENT_KEYS if k in data), None)
    if not name or key is None:
        return None
    arguments = data[key]
    if isinstance(arguments, str):
        return ToolCall(call_id, name, arguments)  # checked like any call's raw arguments
    return ToolCall(call_id, name, json.dumps(arguments, ensure_ascii=False))
