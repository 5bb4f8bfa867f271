"""The arguments check: fastjsonschema's compiled pass never disagrees with jsonschema's verdict."""

from __future__ import annotations

import subprocess
import sys

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tiny_cli.errors import ToolError
from tiny_cli.tools.args_check import argument_problem, dialect, fast_pass


def _jsonschema_ok(schema: dict, args: dict) -> bool:
    return not list(jsonschema.Draft202012Validator(schema).iter_errors(args))


def test_a_good_call_passes_without_importing_jsonschema() -> None:
    code = (
        "import sys\n"
        "from tiny_cli.tools.args_check import argument_problem\n"
        "schema = {'type': 'object', 'properties': {'html': {'type': 'string'}},"
        " 'required': ['html'], 'additionalProperties': False}\n"
        "assert argument_problem(schema, {'html': '<p>hi</p>'}) is None\n"
        "print('jsonschema' in sys.modules)\n"
        "print(argument_problem(schema, {'html': 3}))\n"
        "print('jsonschema' in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.splitlines() == [
        "False",
        "invalid arguments: html: 3 is not of type 'string'",
        "True",
    ]


def test_a_ref_with_siblings_is_judged_by_2020_12() -> None:
    # draft 7 ignores a $ref's siblings; 2020-12 applies them: minimum 5 must hold
    schema = {
        "type": "object",
        "$defs": {"n": {"type": "integer"}},
        "properties": {"a": {"$ref": "#/$defs/n", "minimum": 5}},
    }
    assert (
        argument_problem(schema, {"a": 3})
        == "invalid arguments: a: 3 is less than the minimum of 5"
    )
    assert argument_problem(schema, {"a": 7}) is None


def test_keywords_only_2020_12_knows_are_judged_by_jsonschema() -> None:
    schema = {
        "type": "object",
        "properties": {"pair": {"type": "array", "prefixItems": [{"type": "string"}]}},
        "dependentRequired": {"a": ["b"]},
    }
    assert "is not of type 'string'" in argument_problem(schema, {"pair": [1]})
    assert (
        argument_problem(schema, {"a": 1})
        == "invalid arguments: arguments: 'b' is a dependency of 'a'"
    )
    assert argument_problem(schema, {"pair": ["x"], "a": 1, "b": 2}) is None


def test_a_passing_check_fills_in_no_default_and_ignores_formats() -> None:
    schema = {
        "type": "object",
        "properties": {
            "n": {"type": "integer", "default": 3},
            "u": {"type": "string", "format": "uri"},
        },
    }
    args = {"u": "not a uri"}
    assert argument_problem(schema, args) is None
    assert args == {"u": "not a uri"}  # unchanged: fastjsonschema would add n=3 if asked to


def test_a_remote_ref_is_never_fetched() -> None:
    # fastjsonschema would fetch it; jsonschema resolves nothing remote and says so
    schema = {"type": "object", "properties": {"a": {"$ref": "http://127.0.0.1:9/none.json"}}}
    with pytest.raises(
        ToolError,
        match=r"applied: properties/a/\$ref: 'http://127\.0\.0\.1:9/none\.json': tiny fetches",
    ):
        argument_problem(schema, {"a": 1})


def test_a_schema_too_deep_to_spell_goes_to_jsonschema() -> None:
    schema: dict = {"type": "object"}
    for _ in range(40):
        schema = {"type": "object", "properties": {"x": schema}}
    assert argument_problem(schema, {"x": {"x": 1}}).startswith("invalid arguments: x/x: 1 is not")


LEAF = st.sampled_from(
    [
        {"type": "string"},
        {"type": "integer"},
        {"type": "number", "minimum": 0},
        {"type": "boolean"},
        {"type": "string", "maxLength": 3},
        {"type": "string", "pattern": "^a"},
        {"enum": ["x", 1, None]},
        {"const": 2},
        {"type": ["string", "null"]},
        {"type": "integer", "exclusiveMaximum": 10, "multipleOf": 2},
        {"type": "array", "items": {"type": "integer"}, "maxItems": 2, "uniqueItems": True},
        {"$ref": "#/$defs/n"},
        {"$ref": "#/$defs/n", "description": "an int"},
        {"$ref": "#/$defs/n", "maximum": 4},
        {"type": "array", "prefixItems": [{"type": "string"}]},
        {"type": "object", "additionalProperties": False},
        {"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 1}]},
        {"not": {"type": "null"}},
        {"if": {"type": "integer"}, "then": {"minimum": 0}, "else": {"type": "string"}},
        True,
        False,
    ]
)
VALUE = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-20, 20)
    | st.floats(-5, 5)
    | st.text("ab1", max_size=4),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from("xyz"), inner, max_size=2)
    ),
    max_leaves=6,
)


@settings(max_examples=200, deadline=None)
@given(
    props=st.dictionaries(st.sampled_from(["a", "b", "c"]), LEAF, max_size=3),
    required=st.lists(st.sampled_from(["a", "b", "c"]), max_size=2, unique=True),
    extra=st.booleans(),
    args=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), VALUE, max_size=4),
)
def test_the_verdict_is_always_jsonschemas(
    props: dict, required: list, extra: bool, args: dict
) -> None:
    schema = {
        "type": "object",
        "$defs": {"n": {"type": "integer"}},
        "properties": props,
        "required": required,
        "additionalProperties": extra,
    }
    before = repr(args)
    assert (argument_problem(schema, args) is None) == _jsonschema_ok(schema, args)
    assert repr(args) == before


FIELD = st.one_of(LEAF, st.sampled_from([{"type": "string", "format": "uri"}, {"format": "date"}]))


@settings(max_examples=150, deadline=None)
@given(schema=FIELD, value=VALUE)
def test_a_fast_pass_that_judges_formats_is_never_wrong(schema: dict | bool, value: object) -> None:
    # what a typed field of a card's `returns` is checked with: jsonschema with its format checker
    full = {"$defs": {"n": {"type": "integer"}}, "anyOf": [schema]}
    checker = jsonschema.Draft202012Validator.FORMAT_CHECKER
    ok = not list(jsonschema.Draft202012Validator(full, format_checker=checker).iter_errors(value))
    if fast_pass(full, value, formats=True):
        assert ok
    assert not fast_pass({"type": "string", "format": "uri"}, "not a uri", formats=True)


D4 = "http://json-schema.org/draft-04/schema#"
D6 = "http://json-schema.org/draft-06/schema#"
D7 = "http://json-schema.org/draft-07/schema#"
D2019 = "https://json-schema.org/draft/2019-09/schema"
D2020 = "https://json-schema.org/draft/2020-12/schema"


@pytest.mark.parametrize(
    ("declared", "validator"),
    [
        (None, jsonschema.Draft202012Validator),  # MCP's default dialect (SEP-1613)
        (D4, jsonschema.Draft4Validator),
        ("https://json-schema.org/draft-04/schema", jsonschema.Draft4Validator),
        (D6, jsonschema.Draft6Validator),
        (D7, jsonschema.Draft7Validator),
        ("https://json-schema.org/draft-07/schema#", jsonschema.Draft7Validator),
        (D2019, jsonschema.Draft201909Validator),
        (D2020, jsonschema.Draft202012Validator),
        ("https://example.com/my-own-meta", jsonschema.Draft202012Validator),
    ],
)
def test_a_schema_is_read_in_the_dialect_it_declares(declared, validator) -> None:
    schema = {"type": "object"} if declared is None else {"$schema": declared, "type": "object"}
    assert dialect(schema) is validator


def _exclusive(declared: str | None, bound: object) -> dict:
    schema = {"type": "object", "properties": {"x": {"type": "number", "minimum": 0}}}
    schema["properties"]["x"]["exclusiveMinimum"] = bound
    return schema if declared is None else {"$schema": declared, **schema}


@pytest.mark.parametrize("declared", [D4])
def test_draft_04_boolean_exclusive_minimum_excludes_the_bound(declared) -> None:
    schema = _exclusive(declared, True)
    dialect(schema).check_schema(schema)  # a valid draft-04 schema
    assert argument_problem(schema, {"x": 0}) is not None
    assert argument_problem(schema, {"x": 0.5}) is None


@pytest.mark.parametrize("declared", [D6, D7, D2019, D2020, None])
def test_later_drafts_take_a_number_and_refuse_the_boolean(declared) -> None:
    numeric = _exclusive(declared, 0)
    assert argument_problem(numeric, {"x": 0}) is not None
    assert argument_problem(numeric, {"x": 1}) is None
    with pytest.raises(jsonschema.SchemaError):
        dialect(_exclusive(declared, True)).check_schema(_exclusive(declared, True))
