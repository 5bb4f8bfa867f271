"""A card as the rest of tiny holds it: `Card`, its `Budget`, a `Problem` with a card file,
and the JSON Schemas of its typed answer.

Light on purpose: whoever runs, routes or shows cards imports this, never the checker
(tiny_cli.cards.load) that makes them from files. A `returns` entry is a shorthand type
(`number`), a list of one type (`[string]`) or a JSON Schema mapping.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tiny_cli.setting_rules import ToolMode
from tiny_cli.settings import did_you_mean
from tiny_cli.tools.args_check import ref_problem

__all__ = [
    "ANY_VALUE",
    "RESERVED_FIELDS",
    "Budget",
    "Card",
    "First",
    "Problem",
    "SideEffects",
    "answer_schema",
    "card_text",
    "field_hint",
    "field_schema",
    "field_template",
    "grammar_schema",
    "shown_path",
    "yaml_type",
]

SideEffects = Literal["none", "write"]
First = Literal["any", "tool"]  # `tool`: a tool call must come before the first answer


@dataclass(frozen=True)
class Budget:
    """The hard limits of one invocation, enforced by the runner, not the model."""

    max_tool_calls: int = 8
    max_output_tokens: int = 512
    max_wall_seconds: float = 60.0


@dataclass(frozen=True)
class Card:
    """One tiny agent: who it is, what it may call, what it must return, and its budget."""

    id: str
    summary: str
    tools: tuple[str, ...]
    returns_required: tuple[str, ...]
    examples: tuple[str, ...] = ()
    does_not: tuple[str, ...] = ()
    side_effects: SideEffects = "none"
    budget: Budget = field(default_factory=Budget)
    model: str | None = None
    path: Path | None = None
    tool_mode: ToolMode | None = None  # None: the setting's (flag > env), else DEFAULT_TOOL_MODE
    first: First = "any"
    # not a YAML field: set for the bench's all-tools agent, whose job may or may not write,
    # so its `ok` without a write is no unverified write (the bench checks the CRM itself)
    write_optional: bool = False
    # field -> JSON Schema of its value; every typed field is in returns_required too
    returns: Mapping[str, dict[str, Any]] = field(default_factory=dict, hash=False)
    # tools the card declares itself, {name, description, parameters}, with no implementation
    functions: tuple[Mapping[str, Any], ...] = field(default=(), hash=False)
    instructions: str = ""  # the prompt text after who it is: a Markdown card's body
    # not a YAML field: requests a model wrote for this card (`tiny learn --generate`), which
    # the router reads as one group (tiny_cli.routing.space), apart from the taught examples
    generated: tuple[str, ...] = ()

    @property
    def writes(self) -> bool:
        """True for a card that may call write tools (`side_effects: write`)."""
        return self.side_effects == "write"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one card file, printed as `file:line: field: message`."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        shown = shown_path(self.file)
        where = f"{shown}:{self.line}" if self.line else shown
        return f"{where}: {self.field}: {self.message}"


def shown_path(file: str) -> str:
    """A file as the docs write it: relative to the working folder when it lies under it."""
    path = Path(file)
    if not path.is_absolute():
        return file
    try:
        return str(path.relative_to(Path.cwd()))
    except (ValueError, OSError):  # elsewhere, or the working folder is gone
        return file


def card_text(card: Card) -> str:
    """Return the routing text of a card: its id as words, then its summary."""
    return f"{card.id.replace('-', ' ').replace('_', ' ')}: {card.summary}"


# --- typed answers ------------------------------------------------------------------------

RESERVED_FIELDS = ("summary", "status")
SHORTHANDS = ("string", "number", "integer", "boolean", "object", "array")
# an untyped field: any JSON value but null (null reads as "missing" to the reply checks)
ANY_VALUE: dict[str, Any] = {"type": ["string", "number", "integer", "boolean", "array", "object"]}
# what llama.cpp's json_schema grammars and OpenAI's response_format both understand
GRAMMAR_KEYWORDS = frozenset(
    ("type", "enum", "const", "properties", "required", "items", "additionalProperties", "anyOf")
)


def answer_schema(card: Card, required: Sequence[str]) -> dict[str, Any]:
    """Return the JSON Schema of a final `ok`/`partial` answer with `required` fields."""
    names = [n for n in dict.fromkeys(required) if n not in RESERVED_FIELDS]
    # a copy: the caller may edit it without touching the card or ANY_VALUE
    fields = {n: copy.deepcopy(grammar_schema(card.returns.get(n, ANY_VALUE))) for n in names}
    return {
        "type": "object",
        "properties": {
            "status": {"enum": ["ok", "partial"]},
            "summary": {"type": "string"},
            **fields,
        },
        "required": ["status", "summary", *names],
        "additionalProperties": False,
    }


def grammar_schema(schema: Any) -> Any:
    """Keep only the keywords constrained decoding supports; dropping one only loosens it."""
    if isinstance(schema, list):
        return [grammar_schema(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    kept = {k: v for k, v in schema.items() if k in GRAMMAR_KEYWORDS}
    for key in ("items", "additionalProperties", "anyOf"):
        if isinstance(kept.get(key), dict | list):
            kept[key] = grammar_schema(kept[key])
    if isinstance(kept.get("properties"), dict):
        kept["properties"] = {k: grammar_schema(v) for k, v in kept["properties"].items()}
    return kept


def field_hint(schema: Mapping[str, Any] | None) -> str:
    """Describe a field's value for a prompt: '<number>', '<list of string>', '<...>' if untyped."""
    return f"<{_hint(schema or {})}>"


def field_template(schema: Mapping[str, Any] | None) -> str:
    """Show a field's value in the answer template: a string in quotes, others bare."""
    # `"rows": <integer>`, not `"<integer>"`: a model that copies it writes a number as a number
    hint = field_hint(schema)
    return json.dumps(hint, ensure_ascii=False) if _stringish(schema or {}) else hint


def _stringish(schema: Mapping[str, Any]) -> bool:
    """Whether a value of the schema may be a string (or its type is not known)."""
    if "enum" in schema or "const" in schema:  # the hint spells each value as JSON
        return False
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return "string" in kinds or kind is None


def _hint(schema: Mapping[str, Any]) -> str:
    if "enum" in schema and isinstance(schema["enum"], list):
        return "one of " + ", ".join(json.dumps(v, ensure_ascii=False) for v in schema["enum"])
    if "const" in schema:
        return json.dumps(schema["const"], ensure_ascii=False)
    kind = schema.get("type")
    if isinstance(kind, list):
        return "..." if set(ANY_VALUE["type"]) <= set(kind) else " or ".join(map(str, kind))
    if kind == "array":
        items = schema.get("items")
        return f"list of {_hint(items)}" if isinstance(items, dict) and items else "list"
    if isinstance(kind, str):
        fmt = schema.get("format")
        return f"{kind} ({fmt})" if isinstance(fmt, str) else kind
    return "..."


def field_schema(spec: Any) -> tuple[dict[str, Any], tuple[tuple, str] | None]:
    """Turn one `returns` entry into a JSON Schema, or say what is wrong (and where inside it)."""
    if isinstance(spec, str):
        return ({"type": spec}, None) if spec in SHORTHANDS else ({}, ((), _unknown_type(spec)))
    if isinstance(spec, list):
        return _list_of(spec)
    if isinstance(spec, dict):
        return _checked_schema(spec)
    names = ", ".join(SHORTHANDS)
    msg = f"must be a type ({names}), [type] or a JSON Schema mapping, got {yaml_type(spec)}"
    return {}, ((), msg)


def _unknown_type(name: str) -> str:
    tip = did_you_mean(name, SHORTHANDS, f"; use one of {', '.join(SHORTHANDS)}")
    return f"unknown type {name!r}{tip}"


def _list_of(spec: list) -> tuple[dict[str, Any], tuple[tuple, str] | None]:
    if len(spec) != 1:
        return {}, ((), "a list names the type of its items: write one, like [string]")
    items, trouble = field_schema(spec[0])
    if trouble:
        return {}, ((0, *trouble[0]), trouble[1])
    return {"type": "array", "items": items}, None


def _checked_schema(spec: dict) -> tuple[dict[str, Any], tuple[tuple, str] | None]:
    if not _plain_json(spec):  # the runner sends it to the server as JSON
        return {}, ((), "a JSON Schema must be plain JSON (strings, numbers, lists, mappings)")
    import jsonschema  # only for a card with a JSON Schema mapping in `returns`

    try:
        jsonschema.Draft202012Validator.check_schema(spec)
    except jsonschema.SchemaError as err:
        path = tuple(err.absolute_path)
        if path[-1:] == ("type",) and isinstance(err.instance, str):
            return {}, (path, _unknown_type(err.instance))
        said = err.message if len(err.message) <= 160 else err.message[:159] + "…"
        return {}, (path, f"not a valid JSON Schema: {said}")
    if spec.get("enum") == []:  # valid JSON Schema, yet no answer could ever satisfy it
        return {}, (("enum",), "is empty: no value could match it; list the values allowed")
    trouble = ref_problem(spec)
    return ({}, trouble) if trouble else (spec, None)


def _plain_json(spec: dict) -> bool:
    """YAML dates, integer keys or .nan would change (or fail) on their way to the server."""
    try:
        return json.loads(json.dumps(spec, allow_nan=False)) == spec
    except (TypeError, ValueError):
        return False


def yaml_type(value: Any) -> str:
    """Name a YAML value's type for a problem message: 'an integer 3', 'a list'."""
    names = {
        bool: "a boolean",
        int: "an integer",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "a mapping",
        type(None): "nothing (null)",
    }
    shown = repr(value) if not isinstance(value, list | dict | None) else ""
    return f"{names.get(type(value), type(value).__name__)} {shown}".strip()
