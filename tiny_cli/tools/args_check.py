"""A call's arguments against its tool's schema: a compiled check first, jsonschema's words after.

jsonschema decides in the dialect the schema declares in `$schema`; one that declares none is
read as 2020-12, MCP's default dialect (SEP-1613, spec 2025-11-25). A schema whose keywords
drafts 7 to 2020-12 read alike is first checked by a validator fastjsonschema compiled (once per
schema and process), so good arguments pass without importing jsonschema, a large share of a
command's start; what it rejects, and every other schema, goes to jsonschema, whose verdict counts.

`coerce_scalar` reads a string that is exactly a number or boolean of a schema's type as
that value; a final answer's typed fields go through it before they are checked.
"""

from __future__ import annotations

import functools
import json
import math
import re
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any

from tiny_cli.errors import ToolError

__all__ = [
    "argument_problem",
    "built_schema_problem",
    "coerce_scalar",
    "dialect",
    "fast_pass",
    "ref_problem",
    "schema_problem",
]

MAX_SCHEMA_DEPTH = 32  # deeper ones go to jsonschema: no tool needs more, recursion stays bounded
PROBLEM_CHARS = 160  # of why a schema cannot be applied, as a message quotes it
COMPILED_SCHEMAS = 256  # compiled validators kept per process (a bench at scale offers hundreds)
# Keywords drafts 7 to 2020-12 read alike (fastjsonschema compiles 2019-09, jsonschema decides by
# 2020-12). `format` checks nothing: fastjsonschema is told not to, jsonschema does not by default.
ALIKE = frozenset(
    {
        *("type", "enum", "const", "required", "multipleOf", "pattern", "format"),
        *("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength"),
        *("minItems", "maxItems", "uniqueItems", "minProperties", "maxProperties"),
        *("title", "description", "default", "examples", "deprecated", "readOnly", "writeOnly"),
        *("$comment", "$schema", "$defs", "definitions", "$ref", "properties"),
        *("patternProperties", "additionalProperties", "propertyNames", "items", "contains"),
        *("anyOf", "oneOf", "allOf", "not", "if", "then", "else"),
    }
)
SCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions")  # name -> schema
ONE_SCHEMA = ("additionalProperties", "propertyNames", "items", "contains", "not")
CONDITIONS = ("if", "then", "else")  # each one schema too
SCHEMA_LISTS = ("anyOf", "oneOf", "allOf")
# Drafts whose keywords mean something else in 2019-09 (draft-04's boolean exclusiveMinimum):
# the compiled check never sees them
OLD_DRAFTS = re.compile(r"draft-0[3-6]/")
NOT_CHECKS = frozenset({"title", "description", "default", "examples", "$comment", "deprecated"})


def argument_problem(schema: Mapping[str, Any], args: dict[str, Any]) -> str | None:
    """Say what is wrong with a call's `args` under its tool's `schema`; None if nothing is.

    A schema jsonschema cannot apply is the tool's fault, not the call's: ToolError, saying why.
    """
    if fast_pass(schema, args):
        return None
    try:
        errors = sorted(dialect(schema)(schema).iter_errors(args), key=str)
    except Exception as exc:  # jsonschema's own failure, whatever its type
        said = str(exc).splitlines()[:1]  # a referencing error names itself: `Unresolvable: …`
        why = schema_problem(schema) or (said[0][:PROBLEM_CHARS] if said else type(exc).__name__)
        raise ToolError(f"its argument schema cannot be applied: {why}") from None
    if not errors:
        return None
    where = "/".join(map(str, errors[0].absolute_path)) or "arguments"
    return f"invalid arguments: {where}: {errors[0].message}"


def schema_problem(schema: Any) -> str | None:
    """Say why no call could be checked against `schema` (None: one can): no JSON Schema in the
    dialect it declares, or a `$ref` to fetch or to nothing."""
    import jsonschema  # a schema checked: a card's functions, a tool's, an MCP server's

    try:
        dialect(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return exc.message.splitlines()[0][:PROBLEM_CHARS]
    return _ref_text(schema)


def ref_problem(schema: Any) -> tuple[tuple, str] | None:
    """The place and problem of the first `$ref` tiny would have to fetch, or that points to
    nothing in `schema` (either fails every call); None when there is none."""
    refs = list(_refs(schema))
    if not refs:
        return None
    import referencing.exceptions  # jsonschema's resolver, only for a schema with a $ref
    from referencing.jsonschema import DRAFT202012

    resolver = referencing.Registry().resolver_with_root(DRAFT202012.create_resource(schema))
    for path, ref in refs:
        if not ref.startswith("#"):
            return path, f"{ref!r}: tiny fetches no schemas; refer inside this one ('#/$defs/…')"
        try:
            resolver.lookup(ref)
        except referencing.exceptions.Unresolvable:
            return path, f"{ref!r} points to nothing in this schema"
    return None


def built_schema_problem(schema: Any) -> str | None:
    """`schema_problem` for a schema pydantic made (for @tool), without importing jsonschema:
    a `pattern` Python's `re` cannot read (pydantic's reads `\\p{Lu}`), or a bad `$ref`."""
    for path, value in _keyed(schema, ("pattern", "patternProperties")):
        for pattern in value if isinstance(value, dict) else [value]:
            try:
                re.compile(pattern)
            except (re.error, TypeError) as exc:
                where = "/".join(map(str, path))
                return f"{where}: {pattern!r} is no regular expression Python reads ({exc})"
    return _ref_text(schema)


def _ref_text(schema: Any) -> str | None:
    found = ref_problem(schema)
    return None if found is None else f"{'/'.join(map(str, found[0]))}: {found[1]}"


def _refs(node: Any) -> Iterator[tuple[tuple, str]]:
    return ((p, v) for p, v in _keyed(node, ("$ref", "$dynamicRef")) if isinstance(v, str))


def _keyed(node: Any, keys: tuple[str, ...], path: tuple = ()) -> Iterator[tuple[tuple, Any]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key in keys:
                yield (*path, key), value
            else:
                yield from _keyed(value, keys, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from _keyed(value, keys, (*path, i))


def dialect(schema: Any) -> Any:
    """The jsonschema validator class of the dialect `schema` declares; 2020-12 without one."""
    import jsonschema  # words a failure (and decides schemas fastjsonschema cannot)

    declared = schema.get("$schema") if isinstance(schema, Mapping) else None
    if not isinstance(declared, str):
        return jsonschema.Draft202012Validator
    # servers write the old drafts' ids with https too; jsonschema knows them by http
    uri = re.sub(r"^https://(json-schema\.org/draft-0)", r"http://\1", declared.strip())
    with warnings.catch_warnings():  # an unknown $schema is read as the default, not warned on
        warnings.simplefilter("ignore", DeprecationWarning)
        return jsonschema.validators.validator_for(
            {"$schema": uri}, default=jsonschema.Draft202012Validator
        )


def coerce_scalar(schema: Any, value: Any) -> Any:
    """Read a string that is exactly a number or boolean `schema`'s type allows as that value
    ("3" for an integer is 3); anything else, or where the type allows a string, as it is."""
    kinds = schema.get("type") if isinstance(schema, Mapping) else None
    kinds = {kinds} if isinstance(kinds, str) else set(kinds if isinstance(kinds, list) else ())
    if not isinstance(value, str) or "string" in kinds or value != value.strip():
        return value
    parsed = _loads(value)
    if isinstance(parsed, bool):
        return parsed if "boolean" in kinds else value
    if isinstance(parsed, int):
        return parsed if kinds & {"integer", "number"} else value
    if isinstance(parsed, float) and math.isfinite(parsed):
        return parsed if "number" in kinds else value
    return value


def _loads(text: str) -> Any:
    """Parse a JSON scalar; None for anything else (NaN and Infinity are no JSON)."""
    try:
        return json.loads(text, parse_constant=lambda _: None)
    except (ValueError, RecursionError):
        return None


def fast_pass(schema: Mapping[str, Any], value: Any, *, formats: bool = False) -> bool:
    """True when a compiled check finds `value` valid; False means: ask jsonschema (always, for
    a schema with `format` when `formats`: the caller's check judges formats)."""
    try:
        check = _compiled(json.dumps(schema, sort_keys=True), formats)
        if check is not None:
            check(value)
            return True
    except Exception:
        pass
    return False


@functools.lru_cache(maxsize=COMPILED_SCHEMAS)
def _compiled(key: str, formats: bool) -> Callable[[Any], Any] | None:
    """A compiled check of the schema spelt `key`, or None where it might judge differently."""
    schema = json.loads(key)
    if isinstance(schema, dict):
        if OLD_DRAFTS.search(str(schema.get("$schema", ""))):
            return None
        schema.pop("$id", None)  # a root $id only names the document: local $refs stay local
    if not _alike(schema, 0, ALIKE - {"format"} if formats else ALIKE):
        return None
    import fastjsonschema

    if isinstance(schema, dict):  # its own default draft (2019-09), not one the schema names
        schema.pop("$schema", None)
    try:  # never fill in defaults (it would change the arguments), never judge formats
        return fastjsonschema.compile(schema, use_default=False, use_formats=False)
    except Exception:
        return None


def _alike(schema: Any, depth: int, keywords: frozenset[str]) -> bool:
    """Whether draft 7 and 2020-12 read `schema` alike: known keywords, local `$ref`s only."""
    if isinstance(schema, bool):
        return True
    if not isinstance(schema, dict) or depth > MAX_SCHEMA_DEPTH or not set(schema) <= keywords:
        return False
    if any(isinstance(schema.get(k), bool) for k in ("exclusiveMinimum", "exclusiveMaximum")):
        return False  # draft 4's spelling: a later draft reads it differently
    ref = schema.get("$ref", "#")  # draft 7 ignores a $ref's siblings; only a local one is offline
    if not (isinstance(ref, str) and ref.startswith("#")):
        return False
    if "$ref" in schema and set(schema) - NOT_CHECKS - {"$ref"}:
        return False
    return all(_alike(s, depth + 1, keywords) for s in _subschemas(schema))


def _subschemas(schema: dict[str, Any]) -> list[Any]:
    """The schemas directly inside `schema`; a malformed place yields a non-schema (not alike)."""
    found: list[Any] = []
    for key in SCHEMA_MAPS:
        value = schema.get(key, {})
        found.extend(value.values() if isinstance(value, dict) else [None])
    found.extend(schema[key] for key in (*ONE_SCHEMA, *CONDITIONS) if key in schema)
    for key in SCHEMA_LISTS:
        value = schema.get(key, [])
        found.extend(value if isinstance(value, list) else [None])
    return found
