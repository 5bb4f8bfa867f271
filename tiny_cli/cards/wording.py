"""How a card's problems are worded: a schema error or a YAML error, as a person reads it.

jsonschema's own messages quote whole values and name validators; these say what is wrong in
the card's terms ("missing required field 'tools'", "0 is impossible: must be >= 1").
"""

from __future__ import annotations

from typing import Any

import yaml

from tiny_cli.cards.returns import yaml_type

FIELD_KEYS = ("returns_required", "returns")  # where a card names its answer's fields


def missing(err: Any) -> list[str]:
    """Name the fields a `required` (or an anyOf of `required`s) error finds missing."""
    if err.validator == "required":
        return [err.message.split("'")[1]] if "'" in err.message else []
    if err.validator == "anyOf" and all(set(s) == {"required"} for s in err.validator_value):
        return [name for s in err.validator_value for name in s["required"]]
    return []


def message(err: Any) -> str:
    """Say what a jsonschema error finds wrong, in the card's terms."""
    names = missing(err)
    if names:
        return "missing required field " + " or ".join(repr(m) for m in names)
    if err.validator == "required":
        return f"missing required field {err.message!r}"
    if err.validator == "pattern" and err.absolute_path and err.absolute_path[0] == "id":
        return f"{err.instance!r} is not a slug (lowercase letters, digits, '-' and '_')"
    if err.validator == "pattern" and err.absolute_path and err.absolute_path[0] in FIELD_KEYS:
        return f"{err.instance!r} is not a field name (letters, digits and '_', no digit first)"
    if err.validator == "maxLength":  # not the whole text: it may be pages long
        return f"is too long: {len(err.instance)} characters, at most {err.validator_value}"
    if err.validator == "type":
        return f"must be {article(err.validator_value)}, got {yaml_type(err.instance)}"
    if err.validator in ("minimum", "exclusiveMinimum", "maximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<="}[err.validator]
        return f"{err.instance!r} is impossible: must be {op} {err.validator_value}"
    if err.validator == "enum":
        options = " or ".join(repr(v) for v in err.validator_value)
        return f"{err.instance!r} is not allowed; use {options}"
    return err.message


def article(kind: Any) -> str:
    """Name a JSON Schema type as a card's reader says it: 'a list', 'an integer'."""
    if isinstance(kind, list):
        return " or ".join(article(k) for k in kind)
    names = {
        "array": "a list",
        "object": "a mapping",
        "integer": "an integer",
        "number": "a number",
        "string": "a string",
        "boolean": "true or false",
    }
    return names.get(kind, str(kind))


def yaml_message(exc: yaml.YAMLError) -> str:
    """Say what PyYAML (or a yamlsafe bound) found wrong, with its context if any."""
    problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
    context = getattr(exc, "context", None)
    moved = _opened_before(exc)
    if context and moved:
        context += f" opened on this line; noticed on line {moved[1]}"
    return f"invalid YAML: {problem}" + (f" ({context})" if context else "")


def yaml_line(exc: yaml.YAMLError) -> int | None:
    """The line to fix: for a `[` or `{` left open, the line that opened it.

    PyYAML notices an unclosed flow collection at the next line's token (one line late, or
    more); its context mark is where the collection began.
    """
    moved = _opened_before(exc)
    if moved:
        return moved[0]
    mark = getattr(exc, "problem_mark", None)
    return mark.line + 1 if mark else None


def _opened_before(exc: Any) -> tuple[int, int] | None:
    """(line opened, line noticed) of an error in a [ ] or { } opened on an earlier line."""
    mark, opened = getattr(exc, "problem_mark", None), getattr(exc, "context_mark", None)
    if mark is None or opened is None or opened.line >= mark.line:
        return None
    flow = (getattr(exc, "context", None) or "").startswith("while parsing a flow")
    return (opened.line + 1, mark.line + 1) if flow else None


def short(exc: BaseException) -> str:
    """The reason of an OSError without its errno and file name."""
    return getattr(exc, "strerror", None) or str(exc)
