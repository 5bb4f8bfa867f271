"""The BFCL bench: the shipped files regenerate exactly, the catalogue is sound, the scorer fits."""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from jsonschema import Draft202012Validator

from tiny_cli.bench.selection import STATUSES, CallVerdict, expected_call, judge_call
from tiny_cli.errors import ConfigError

REPO = Path(__file__).resolve().parent.parent
BFCL = REPO / "examples" / "bfcl"
RAW = BFCL / "raw"
CARDS = BFCL / "cards"
OPENAI_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
# git blob ids of the raw files at gorilla@6ea57973c7a6097fd7c5915698c54c17c5b1b6c8
RAW_BLOBS = {
    "LICENSE": "261eeb9e9f8b2b4b0d119366dda99c6fd7d35c64",
    "BFCL_v4_multiple.json": "83643fa853e7a29a50e7303b0279284c37dd63c8",
    "possible_answer/BFCL_v4_multiple.json": "1f2f1fbfd9b7c8859ef5a92d6c18b0a6b2bc2663",
    "BFCL_v4_irrelevance.json": "0077629949f2d52734cef2f110b0d040d8c47554",
}


def _generator() -> Any:
    spec = importlib.util.spec_from_file_location("bfcl_generator", REPO / "benchmarks" / "bfcl.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


TASKS = [json.loads(line) for line in (BFCL / "tasks.jsonl").read_text("utf-8").splitlines()]
BY_ID = {t["id"]: t for t in TASKS}
CARD_FILES = sorted(CARDS.glob("*.yaml"))
CATALOGUE = {p.stem: yaml.safe_load(p.read_text("utf-8")) for p in CARD_FILES}


def _expected(task_id: str) -> Any:
    return expected_call(BY_ID[task_id])


# -- (a) the shipped files are what the generator makes of the raw files -----------------


def test_raw_files_are_bfcls_bytes() -> None:
    for name, blob in RAW_BLOBS.items():
        data = (RAW / name).read_bytes()
        assert hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest() == blob, name


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_regeneration_reproduces_the_shipped_files(tmp_path: Path, capsys) -> None:
    assert _generator().main(["--raw", str(RAW), "--out", str(tmp_path)]) == 0
    made = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file())
    shipped = [Path("cards") / p.name for p in CARD_FILES] + [Path("tasks.jsonl")]
    assert made == sorted(shipped)
    for rel in made:
        assert (tmp_path / rel).read_bytes() == (BFCL / rel).read_bytes(), rel
    line = capsys.readouterr().out
    assert (
        "200 cards, 557 functions (193 with qualified names), 440 tasks (240 irrelevance)" in line
    )


# -- (b) the catalogue ---------------------------------------------------------------------


def test_counts_and_order() -> None:
    assert len(CATALOGUE) == 200
    ids = [t["id"] for t in TASKS]
    assert ids == [f"multiple_{i}" for i in range(200)] + [f"irrelevance_{i}" for i in range(240)]


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_cards_fit_the_card_schema_apart_from_functions() -> None:
    schema = json.loads((REPO / "tiny_cli" / "cards" / "card.schema.json").read_text("utf-8"))
    for stem, card in CATALOGUE.items():
        assert card["id"] == stem
        assert set(card) == {
            "id",
            "summary",
            "tools",
            "returns_required",
            "side_effects",
            "functions",
        }
        assert card["side_effects"] == "none"
        assert card["tools"] == [f["name"] for f in card["functions"]]
        jsonschema.validate({k: v for k, v in card.items() if k != "functions"}, schema)


def test_card_files_name_their_bfcl_entry_first() -> None:
    entries = set()
    for path in CARD_FILES:
        first = path.read_text("utf-8").splitlines()[0]
        found = re.match(r"# BFCL BFCL_v4_multiple\.json entry (multiple_\d+) ", first)
        assert found, path
        entries.add(found.group(1))
    assert entries == {f"multiple_{i}" for i in range(200)}


def test_function_schemas_are_json_schema_and_names_unique() -> None:
    names = [f["name"] for card in CATALOGUE.values() for f in card["functions"]]
    assert len(names) == 557
    assert len(set(names)) == len(names)
    assert all(OPENAI_NAME.match(n) for n in names)
    for card in CATALOGUE.values():
        for function in card["functions"]:
            params = function["parameters"]
            Draft202012Validator.check_schema(params)
            assert params["type"] == "object"
            assert set(params["required"]) <= set(params["properties"])
            assert not set(_keys(params)) - KEYWORDS, function["name"]


KEYWORDS = {"type", "description", "enum", "default", "format", "maximum", "items", "required"}


def _keys(schema: dict[str, Any]) -> list[str]:
    """Every keyword used in a schema, nested ones too (property names are not keywords)."""
    found = [k for k in schema if k != "properties"]
    for sub in schema.get("properties", {}).values():
        found += _keys(sub)
    if "items" in schema:
        found += _keys(schema["items"])
    return found


def test_bfcl_types_are_mapped() -> None:
    text = "\n".join(p.read_text("utf-8") for p in CARD_FILES)
    for bfcl_only in ("type: dict", "type: float", "type: tuple", "type: any", "optional:"):
        assert bfcl_only not in text
    card = CATALOGUE["weather-city-date-forecast-coordinates"]  # tuple of floats
    coords = card["functions"][1]["parameters"]["properties"]["coordinates"]
    assert coords["type"] == "array" and coords["items"] == {"type": "number"}
    forest = CATALOGUE["building-dimensions-plot-random-soccer"]
    train = next(f for f in forest["functions"] if f["name"] == "random_forest_train")
    data = train["parameters"]["properties"]["data"]
    assert "type" not in data  # BFCL `any`: no type constraint


def test_shared_names_are_qualified_everywhere() -> None:
    names = {f["name"] for card in CATALOGUE.values() for f in card["functions"]}
    assert "weather_forecast" not in names  # five entries define one: each has its own
    assert {n for n in names if n.startswith("weather_forecast")} == {
        f"weather_forecast_m{i}" for i in (50, 55, 63, 66, 75)
    }
    # two BFCL names collide only once their dots are replaced: both are qualified
    assert "car_rental" not in names and {"car_rental_m59", "car_rental_m93"} <= names
    assert "triangle_properties_get" in names  # used once: only the dot replaced


def test_tasks_point_at_a_card_that_holds_the_call() -> None:
    for task in TASKS:
        call = expected_call(task)
        if task["id"].startswith("irrelevance_"):
            assert task["expected_agent"] is None and call is None
            continue
        card = CATALOGUE[task["expected_agent"]]
        assert call is not None and call["name"] in card["tools"]
        function = next(f for f in card["functions"] if f["name"] == call["name"])
        assert set(call["arguments"]) <= set(function["parameters"]["properties"])
        assert task["task"].strip()


def test_the_hand_labels_cover_every_irrelevance_task_and_name_real_functions() -> None:
    # irrelevance-answered.jsonl: which irrelevance tasks a catalogue function answers
    labels = [
        json.loads(line)
        for line in (BFCL / "irrelevance-answered.jsonl").read_text("utf-8").splitlines()
    ]
    irrelevance = [t for t in TASKS if t["expected_agent"] is None]
    assert [(r["id"], r["task"]) for r in labels] == [(t["id"], t["task"]) for t in irrelevance]
    functions = {f["name"] for card in CATALOGUE.values() for f in card["functions"]}
    for row in labels:
        assert set(row["answered_by"]) <= functions, row["id"]
        assert len(row["answered_by"]) == len(set(row["answered_by"])) and row["note"].strip()
    assert (
        sum(bool(r["answered_by"]) for r in labels) == 65
    )  # the count examples/bfcl/README.md gives


def test_no_task_text_leaks_into_a_card() -> None:
    texts = [p.read_text("utf-8") for p in CARD_FILES]
    flat = [" ".join(t.split()) for t in texts]
    for task in TASKS:
        needle = " ".join(task["task"].split())
        assert not any(needle in t for t in texts + flat), task["id"]
    assert all("examples" not in card for card in CATALOGUE.values())


# -- (c) the scorer ------------------------------------------------------------------------


def test_statuses_are_a_closed_set() -> None:
    assert set(STATUSES) == {
        "right",
        "right_tool",
        "wrong_tool",
        "no_call",
        "bad_arguments",
        "unwanted_call",
        "failed",  # the run failed before the model chose (the bench at scale sets it)
    }
    assert CallVerdict("right", "x").right and not CallVerdict("right_tool", "x").right


TRIANGLE = {"side1": 5, "side2": 4, "side3": 3}  # multiple_0


def test_right_call_with_accepted_arguments() -> None:
    verdict = judge_call(
        _expected("multiple_0"), "triangle_properties_get", {**TRIANGLE, "get_area": True}
    )
    assert verdict.status == "right" and verdict.right


def test_optional_arguments_may_be_left_out() -> None:
    assert (
        judge_call(_expected("multiple_0"), "triangle_properties_get", TRIANGLE).status == "right"
    )


def test_optional_argument_given_must_still_be_accepted() -> None:
    verdict = judge_call(
        _expected("multiple_0"), "triangle_properties_get", {**TRIANGLE, "get_area": False}
    )
    assert verdict.status == "right_tool" and "get_area" in verdict.reason
    empty = judge_call(
        _expected("multiple_0"), "triangle_properties_get", {**TRIANGLE, "get_area": ""}
    )
    assert empty.status == "right_tool"  # "" marks "may be omitted", not a boolean value


def test_wrong_tool() -> None:
    verdict = judge_call(_expected("multiple_0"), "circle_properties_get", {"radius": 5.0})
    assert verdict.status == "wrong_tool" and "circle_properties_get" in verdict.reason


def test_missing_required_argument() -> None:
    args = {"side1": 5, "side2": 4}
    verdict = judge_call(_expected("multiple_0"), "triangle_properties_get", args)
    assert verdict.status == "right_tool" and "side3" in verdict.reason


def test_value_outside_the_accepted_ones() -> None:
    verdict = judge_call(
        _expected("multiple_0"), "triangle_properties_get", {**TRIANGLE, "side1": 6}
    )
    assert verdict.status == "right_tool" and "side1" in verdict.reason


def test_unexpected_extra_argument() -> None:
    args = {**TRIANGLE, "units": "cm"}
    verdict = judge_call(_expected("multiple_0"), "triangle_properties_get", args)
    assert verdict.status == "right_tool" and "units" in verdict.reason


def test_int_accepted_where_a_float_is_expected_not_the_reverse() -> None:
    expected = _expected("multiple_129")  # annual_rate [5.0], principal [10000] (an integer)
    args = {"principal": 10000, "annual_rate": 5, "compounding_freq": "monthly", "time_in_years": 5}
    assert judge_call(expected, "compound_interest", args).status == "right"
    floated = judge_call(expected, "compound_interest", {**args, "principal": 10000.0})
    assert floated.status == "right_tool"  # BFCL's type check: an integer argument
    as_bool = judge_call(
        _expected("multiple_0"), "triangle_properties_get", {**TRIANGLE, "side3": True}
    )
    assert as_bool.status == "right_tool"


def test_strings_compare_as_bfcl_normalises_them() -> None:
    expected = _expected("multiple_2")  # country ["Brazil"]
    for said in ("Brazil", "brazil", " BRAZIL.", "Bra-zil"):
        assert judge_call(expected, "country_info_capital", {"country": said}).right, said
    assert not judge_call(expected, "country_info_capital", {"country": "Brasil"}).right
    assert not judge_call(expected, "country_info_capital", {"country": ["Brazil"]}).right


def test_lists_compare_element_by_element_in_order() -> None:
    expected = _expected("multiple_3")  # pointA [[3, 4]], pointB [[1, 2]], rounding ["", 0]
    name = "EuclideanDistance_calculate"
    assert judge_call(expected, name, {"pointA": [3, 4], "pointB": [1, 2]}).right
    assert not judge_call(expected, name, {"pointA": [4, 3], "pointB": [1, 2]}).right
    assert not judge_call(expected, name, {"pointA": [3, 4, 0], "pointB": [1, 2]}).right


def test_objects_compare_key_by_key() -> None:
    expected = _expected("multiple_8")  # budget [{"min": [300000], "max": [400000]}]
    name = "realestate_find_properties"
    args = {"location": "San Diego, CA", "propertyType": "villa", "bedrooms": 3}
    budget = {"min": 300000.0, "max": 400000}  # BFCL compares numbers in objects by value
    assert judge_call(expected, name, {**args, "budget": budget}).right
    assert not judge_call(expected, name, {**args, "budget": {**budget, "currency": "USD"}}).right
    assert not judge_call(expected, name, {**args, "budget": {"min": 300000}}).right


def test_a_list_of_objects() -> None:
    expected = _expected("multiple_119")
    conditions = [
        {"field": "age", "operation": ">", "value": "25"},
        {"field": "job", "operation": "=", "value": "engineer"},
    ]
    args = {"table": "user", "conditions": conditions}
    assert judge_call(expected, "database_query", args).right
    swapped = {"table": "user", "conditions": conditions[::-1]}
    assert not judge_call(expected, "database_query", swapped).right


def test_no_call_and_unreadable_arguments() -> None:
    assert judge_call(_expected("multiple_0"), None, None).status == "no_call"
    assert (
        judge_call(_expected("multiple_0"), "triangle_properties_get", None).status
        == "bad_arguments"
    )


def test_irrelevance_no_call_is_right_any_call_is_wrong() -> None:
    expected = _expected("irrelevance_0")
    assert expected is None
    assert judge_call(expected, None, None).status == "right"
    verdict = judge_call(expected, "math_triangle_area_base_height", {"base": 10, "height": 5})
    assert verdict.status == "unwanted_call" and not verdict.right


def test_expected_call_checks_its_shape() -> None:
    task = copy.deepcopy(BY_ID["multiple_0"])
    assert expected_call(task) == task["expect_call"]
    for broken in (
        {},
        {"expect_call": {"name": "x"}},
        {"expect_call": {"name": "x", "arguments": {"a": 1}}},
    ):
        with pytest.raises(ConfigError):
            expected_call(broken)
