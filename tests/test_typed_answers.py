"""Typed answers (a card's `returns`) and final answers whose JSON was cut off."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest
import yaml
from hypothesis import given, settings

from tiny_cli.agent.reply import parse_reply
from tiny_cli.cards.card import ANY_VALUE, Card, answer_schema, field_hint
from tiny_cli.cards.load import check_cards
from tiny_cli.testing import reply

from .test_properties import json_values

KNOWN = {"http_get": False, "html_to_text": False}
HEAD = "id: shop\nsummary: Finds the price of one product on a shop page.\ntools: [http_get]\n"
PRICE = {"price": {"type": "number"}}


def _card(folder: Path, body: str, name: str = "shop.yaml") -> Path:
    folder.mkdir(exist_ok=True)
    path = folder / name
    path.write_text(HEAD + body, "utf-8")
    return path


def _problems(tmp_path: Path, body: str) -> list[str]:
    cards, problems = check_cards([_card(tmp_path / "cards", body)], KNOWN)
    assert cards == [] or not problems
    return [str(p) for p in problems]


# --- cards --------------------------------------------------------------------------------


def test_shorthands_and_schemas_become_json_schemas(tmp_path: Path) -> None:
    body = (
        "returns:\n"
        "  price: number\n"
        "  tags: [string]\n"
        "  url: {type: string, format: uri}\n"
        "  count: integer\n"
        "  grid: [[boolean]]\n"
        "returns_required: [source, price]\n"
    )
    cards, problems = check_cards([_card(tmp_path, body)], KNOWN)
    assert problems == []
    card = cards[0]
    assert dict(card.returns) == {
        "price": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "url": {"type": "string", "format": "uri"},
        "count": {"type": "integer"},
        "grid": {"type": "array", "items": {"type": "array", "items": {"type": "boolean"}}},
    }
    # the listed ones first, then every typed field, none twice
    assert card.returns_required == ("source", "price", "tags", "url", "count", "grid")


def test_returns_alone_is_enough_and_a_card_needs_one_of_the_two(tmp_path: Path) -> None:
    cards, problems = check_cards([_card(tmp_path, "returns: {price: number}\n")], KNOWN)
    assert problems == [] and cards[0].returns_required == ("price",)
    neither = _problems(tmp_path, "")
    assert neither == [
        f"{tmp_path / 'cards' / 'shop.yaml'}:1: card: "
        "missing required field 'returns_required' or 'returns'"
    ]


def test_a_card_without_returns_is_as_before(tmp_path: Path) -> None:
    cards, problems = check_cards([_card(tmp_path, "returns_required: [url]\n")], KNOWN)
    assert problems == [] and cards[0].returns == {} and cards[0].returns_required == ("url",)
    hash(cards[0])  # cards stay usable as keys


@pytest.mark.parametrize(
    ("entry", "field", "message"),
    [
        ("price: nmber", "returns.price", "unknown type 'nmber' (did you mean 'number'?)"),
        ("tags: [strng]", "returns.tags[0]", "unknown type 'strng' (did you mean 'string'?)"),
        ("url: {type: strin}", "returns.url.type", "unknown type 'strin'"),
        ("n: {minimum: x}", "returns.n.minimum", "not a valid JSON Schema: 'x' is not of type"),
        ("tags: [string, number]", "returns.tags", "write one, like [string]"),
        ("summary: string", "returns.summary", "'summary' is always returned"),
        ("status: string", "returns.status", "'status' is always returned"),
        ("bad-name: string", "returns.bad-name", "is not a field name"),
        ("n: 5", "returns.n", "must be a string or a list or a mapping, got an integer 5"),
        ("when: {const: !!binary aGk=}", "returns.when", "must be plain JSON"),
        ("u: {$ref: 'https://x.invalid/s.json'}", "returns.u.$ref", "tiny fetches no schemas"),
        ("u: {$ref: '#/$defs/nope'}", "returns.u.$ref", "points to nothing in this schema"),
    ],
)
def test_a_bad_returns_entry_is_one_problem_with_its_line(
    tmp_path: Path, entry: str, field: str, message: str
) -> None:
    problems = _problems(tmp_path, f"returns_required: [source]\nreturns:\n  {entry}\n")
    assert len(problems) == 1, problems
    where = f"{tmp_path / 'cards' / 'shop.yaml'}:6: {field}: "  # the entry's own line
    assert problems[0].startswith(where) and message in problems[0], problems[0]


def test_a_local_ref_is_a_valid_schema(tmp_path: Path) -> None:
    body = "returns:\n  p: {$ref: '#/$defs/price', $defs: {price: {type: number}}}\n"
    cards, problems = check_cards([_card(tmp_path, body)], KNOWN)
    assert problems == []
    text = _answer(p="8 €")
    assert parse_reply(text, ("p",), cards[0].returns).problems == (
        "field 'p' must be a number, got a string (\"8 €\")",
    )


@settings(max_examples=60, deadline=2000)
@given(json_values)
def test_any_returns_entry_is_a_card_or_a_problem(tmp_path_factory, value: object) -> None:
    folder = tmp_path_factory.mktemp("cards")
    path = _card(folder, yaml.safe_dump({"returns": {"f": value}}))
    cards, problems = check_cards([path], KNOWN)
    assert len(cards) + len(problems) >= 1
    for card in cards:  # a loaded schema checks any answer without raising
        parse_reply(_answer(f=value), ("f",), card.returns)
        jsonschema.Draft202012Validator.check_schema(answer_schema(card, card.returns_required))


def test_tiny_validate_reports_bad_returns_with_file_and_line(tiny, tmp_path: Path) -> None:
    path = _card(tmp_path, "returns:\n  price: nmber\n  tags: [string]\n  url: {type: strin}\n")
    result = tiny("validate", str(path))
    assert result.exit_code == 1
    lines = [ln for ln in result.stdout.splitlines() if ln.startswith(str(path))]
    assert lines == [
        f"{path}:5: returns.price: unknown type 'nmber' (did you mean 'number'?)",
        f"{path}:7: returns.url.type: unknown type 'strin' (did you mean 'string'?)",
    ]
    good = _card(tmp_path / "good", "returns: {price: number, tags: [string]}\n")
    assert tiny("validate", str(good)).exit_code == 0


def test_a_misspelt_returns_key_is_explained_once(tmp_path: Path) -> None:
    problems = _problems(tmp_path, "return:\n  price: number\n")
    assert len(problems) == 1 and "return: unknown key (did you mean 'returns'?)" in problems[0]


# --- answer_schema and field_hint ---------------------------------------------------------


def _typed_card(**returns: dict) -> Card:
    return Card("shop", "Finds prices.", (), tuple(returns), returns=returns)


def test_answer_schema_types_known_fields_and_allows_any_value_for_the_rest() -> None:
    card = _typed_card(price={"type": "number"}, url={"type": "string", "format": "uri"})
    schema = answer_schema(card, ("price", "url", "source", "price", "summary"))
    assert schema == {
        "type": "object",
        "properties": {
            "status": {"enum": ["ok", "partial"]},
            "summary": {"type": "string"},
            "price": {"type": "number"},
            "url": {"type": "string"},  # format dropped: not every grammar backend has it
            "source": ANY_VALUE,
        },
        "required": ["status", "summary", "price", "url", "source"],
        "additionalProperties": False,
    }
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    good = {"status": "ok", "summary": "s", "price": 8, "url": "u", "source": ["a"]}
    assert validator.is_valid(good)
    assert not validator.is_valid({**good, "price": "8 €"})
    assert not validator.is_valid({**good, "source": None})
    assert not validator.is_valid({**good, "extra": 1})


def test_field_hint() -> None:
    assert field_hint({"type": "number"}) == "<number>"
    assert field_hint({"type": "array", "items": {"type": "string"}}) == "<list of string>"
    assert field_hint({}) == "<...>" and field_hint(None) == "<...>"
    assert field_hint(ANY_VALUE) == "<...>"
    assert field_hint({"enum": ["low", "high"]}) == '<one of "low", "high">'


# --- typed problems in parse_reply --------------------------------------------------------


def _answer(**fields: object) -> str:
    return json.dumps({"status": "ok", "summary": "s", **fields}, ensure_ascii=False)


def test_a_mistyped_field_names_the_field_the_type_and_the_value() -> None:
    parsed = parse_reply(_answer(price="8 €"), ("price",), PRICE)
    assert parsed.problems == ("field 'price' must be a number, got a string (\"8 €\")",)
    assert parse_reply(_answer(price=8), ("price",), PRICE).problems == ()


def test_typed_fields_are_checked_flat_or_under_fields() -> None:
    types = {"tags": {"type": "array", "items": {"type": "string"}}}
    nested = json.dumps({"status": "ok", "summary": "s", "fields": {"tags": ["a", 3]}})
    assert parse_reply(nested, ("tags",), types).problems == (
        "field 'tags[1]' must be a string, got an integer (3)",
    )
    flat = parse_reply(_answer(tags="a, b"), ("tags",), types)
    assert flat.problems == ("field 'tags' must be a list of strings, got a string (\"a, b\")",)


def test_a_list_of_a_union_type_is_named_not_a_crash() -> None:
    # a `type` list inside `items` is a list, which no table of type names can look up
    types = {"tags": {"type": "array", "items": {"type": ["string", "null"]}}}
    flat = parse_reply(_answer(tags="a, b"), ("tags",), types)
    assert flat.problems == ("field 'tags' must be a list, got a string (\"a, b\")",)
    lists = {"rows": {"type": "array", "items": {"type": "array"}}}
    assert parse_reply(_answer(rows=1), ("rows",), lists).problems == (
        "field 'rows' must be a list of lists, got an integer (1)",
    )


def test_a_long_or_hostile_value_is_shown_short_and_on_one_line() -> None:
    parsed = parse_reply(_answer(price="\x1b]0;x\x07\n" * 50), ("price",), PRICE)
    (problem,) = parsed.problems
    assert "\n" not in problem and "\x1b" not in problem and "\x07" not in problem
    assert problem.startswith("field 'price' must be a number, got a string (")
    assert len(problem) < 120


def test_a_missing_typed_field_is_missing_not_mistyped() -> None:
    parsed = parse_reply(_answer(price=""), ("price",), PRICE)
    assert parsed.problems == ("missing required field 'price'",)


def test_a_refused_answer_is_not_type_checked() -> None:
    text = json.dumps({"status": "refused", "summary": "not my job", "price": "n/a"})
    assert parse_reply(text, ("price",), PRICE).problems == ()


def test_other_schema_keywords_are_reported_in_jsonschemas_words() -> None:
    types = {"n": {"type": "integer", "minimum": 1}, "level": {"enum": ["low", "high"]}}
    parsed = parse_reply(_answer(n=0, level="mid"), ("n", "level"), types)
    assert parsed.problems == (
        "field 'n' does not match its schema: 0 is less than the minimum of 1",
        'field \'level\' must be one of "low", "high", got a string ("mid")',
    )


# --- cut-off JSON -------------------------------------------------------------------------

SANDWICH = '{"status": "refused", "summary": "I cannot assist with making sandwiches."'
COMPLETED = "the answer's JSON ended without its closing '}'; tiny completed it"


def test_the_sandwich_refusal_without_its_brace_is_completed() -> None:
    parsed = parse_reply(SANDWICH, ())
    assert parsed.data == {
        "status": "refused",
        "summary": "I cannot assist with making sandwiches.",
    }
    assert parsed.problems == () and parsed.notes == (COMPLETED,)


def test_nested_brackets_are_closed_in_order() -> None:
    parsed = parse_reply('{"a": [1, {"b": 2', ())
    assert parsed.data == {"a": [1, {"b": 2}]}
    assert parsed.notes == ("the answer's JSON ended without its closing '}]}'; tiny completed it",)


@pytest.mark.parametrize(
    "text",
    [
        'Sure!\n```json\n{"status": "ok", "summary": "x", "price": 8\n```\nHope that helps.',
        'Sure!\n```json\n{"status": "ok", "summary": "x", "price": 8',
        'Here: {"status": "ok", "summary": "x", "price": 8',
    ],
    ids=["closed-fence", "open-fence", "after-prose"],
)
def test_a_cut_object_in_a_fence_or_after_prose_is_completed(text: str) -> None:
    parsed = parse_reply(text, ("price",), PRICE)
    assert parsed.data == {"status": "ok", "summary": "x", "price": 8}
    assert parsed.problems == () and parsed.notes == (COMPLETED,)


def test_a_cut_outer_object_wins_over_its_complete_inner_objects() -> None:
    text = '{"status": "ok", "summary": "x", "items": [{"n": 1}, {"n": 2}]'
    parsed = parse_reply(text, ("items",))
    assert parsed.data["items"] == [{"n": 1}, {"n": 2}] and parsed.problems == ()


def test_brackets_and_quotes_inside_strings_do_not_count() -> None:
    text = r'{"status": "ok", "summary": "a \" quote } ] {[ and \\", "n": 1'
    parsed = parse_reply(text, ("n",))
    assert parsed.data["summary"] == 'a " quote } ] {[ and \\' and parsed.problems == ()


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"status": "refused", "summary": "I cannot assist', "it ends inside a string"),
        ('{"status": "refused", "summ', "it ends inside a key"),
        ('{"status": "refused", "summary"', "it ends after a key with no value"),
        ('{"status": "refused", "summary":', "it ends after a ':' with no value"),
        ('{"status": "refused",', "it ends after a ','"),
        ('{"status": "ok", "summary": "x", "tags": [', "it ends right after a '['"),
    ],
)
def test_an_ambiguous_cut_is_not_completed_and_says_where(text: str, where: str) -> None:
    parsed = parse_reply(text, ())
    assert parsed.data == {} and parsed.notes == ()
    assert parsed.problems == (
        f"your JSON object is cut off ({where}); answer again with the whole object",
    )


@pytest.mark.parametrize(
    "text",
    ['{"status": "ok", "summary": "x", "n": tru', '{"status" "ok"', "{" * 20_000, "no json"],
)
def test_broken_json_that_is_no_cut_object_keeps_the_generic_problem(text: str) -> None:
    parsed = parse_reply(text, ())
    assert parsed.data == {} and parsed.problems == ("no JSON object found in your answer",)


# --- end to end: the real CLI against the scripted server ---------------------------------


@pytest.fixture
def shop(tiny, scripted_server, tmp_path: Path):
    """Run the typed `shop` card through `tiny invoke --json`; return the Digest."""
    folder = tmp_path / "cards"
    _card(folder, "returns: {price: number}\n")

    def go() -> dict:
        env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(folder)}
        result = tiny("invoke", "shop", "what does the blue kettle cost?", "--json", env=env)
        assert "Traceback" not in result.output
        return json.loads(result.stdout)

    return go


def test_a_mistyped_price_is_repaired_once(shop, scripted_server) -> None:
    scripted_server.add(reply(_answer(price="8 €")), reply(_answer(price=8)))
    digest = shop()
    scripted_server.assert_done()
    assert digest["status"] == "ok" and digest["fields"] == {"price": 8}
    assert len(scripted_server.requests) == 2
    repair = scripted_server.requests[1]["messages"][-1]
    assert repair["role"] == "user"
    assert "'price'" in repair["content"] and "number" in repair["content"]
    assert '"8 €"' in repair["content"]


def test_a_price_wrong_twice_fails_with_schema(shop, scripted_server) -> None:
    scripted_server.add(reply(_answer(price="8 €")), reply(_answer(price="eight")))
    digest = shop()
    assert digest["status"] == "failed" and digest["reason"] == "schema"
    assert len(scripted_server.requests) == 2
    assert any("field 'price' must be a number" in n for n in digest["notes_for_caller"])
