"""Cards that declare their own functions (the BFCL bench): validated, offered, never run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_cli.testing import reply, tool_call

BFCL_CARDS = Path(__file__).resolve().parent.parent / "examples" / "bfcl" / "cards"
AREA = {
    "name": "triangle_area",
    "description": "Area of a triangle from base and height.",
    "parameters": {
        "type": "object",
        "properties": {"base": {"type": "number"}, "height": {"type": "number"}},
        "required": ["base", "height"],
    },
}


def _card(folder: Path, name: str, functions: list, tools: list[str]) -> Path:
    folder.mkdir(exist_ok=True)
    card = {
        "id": name,
        "summary": "Computes the area of triangles from their base and height.",
        "functions": functions,
        "tools": tools,
        "returns_required": [],
    }
    path = folder / f"{name}.yaml"
    path.write_text(json.dumps(card))  # JSON is YAML
    return path


def test_the_shipped_bfcl_cards_validate_clean(tiny) -> None:
    result = tiny("validate", str(BFCL_CARDS), env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 0, result.output
    assert "error" not in result.output.lower()


@pytest.mark.parametrize(
    ("functions", "tools", "message"),
    [
        ([AREA], [], "is declared but not in tools"),
        ([{**AREA, "parameters": {"type": "blob"}}], ["triangle_area"], "not a valid JSON"),
        ([{**AREA, "name": "bad.name"}], ["bad.name"], "functions[0].name"),
    ],
)
def test_a_broken_declaration_is_one_line_naming_the_field(
    tiny, tmp_path: Path, functions: list, tools: list[str], message: str
) -> None:
    path = _card(tmp_path / "cards", "geometry", functions, tools)
    result = tiny("validate", str(path.parent), env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 1
    assert message in result.output
    assert str(path) in result.output.replace("\n", "")


def test_two_cards_may_not_declare_one_name_differently(tiny, tmp_path: Path) -> None:
    cards = tmp_path / "cards"
    _card(cards, "geometry", [AREA], ["triangle_area"])
    other = {**AREA, "parameters": {"type": "object", "properties": {}}}
    _card(cards, "geometry-two", [other], ["triangle_area"])
    result = tiny("validate", str(cards), env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 1
    assert "is declared differently" in result.output


def test_a_declared_function_is_offered_as_declared_and_never_runs(
    tiny, tmp_path: Path, scripted_server
) -> None:
    cards = tmp_path / "cards"
    _card(cards, "geometry", [AREA], ["triangle_area"])
    scripted_server.add(
        tool_call("triangle_area", {"base": 3, "height": 4}),
        reply({"status": "partial", "summary": "The tool could not run."}),
    )
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(cards)}
    result = tiny("invoke", "geometry", "area of base 3 height 4", "--json", env=env)
    digest = json.loads(result.stdout)
    first, second = scripted_server.requests
    assert [t["function"] for t in first["tools"]] == [AREA]  # exactly the declaration
    answer = [m["content"] for m in second["messages"] if m["role"] == "tool"]
    assert answer == [
        "error: triangle_area failed: triangle_area is declared only: it has no "
        "implementation to run"
    ]
    assert digest["status"] != "ok"
    assert digest["cost"]["tool_calls"] == 1 and digest["cost"]["ghost_calls"] == 0


HTML = {
    "name": "html_to_text",  # a built-in tool's name, as a real MCP server declares it
    "description": "Render a page's HTML as Markdown.",
    "parameters": {
        "type": "object",
        "properties": {"html": {"type": "string"}, "keep_links": {"type": "boolean"}},
        "required": ["html"],
    },
}


def test_a_declared_function_may_have_a_built_in_name_and_the_card_gets_its_own(
    tiny, tmp_path: Path, scripted_server
) -> None:
    cards = tmp_path / "cards"
    _card(cards, "pages", [HTML], ["html_to_text"])
    assert tiny("validate", str(cards), env={"TINY_EMBEDDER": "hashing"}).exit_code == 0
    scripted_server.add(reply({"status": "partial", "summary": "Nothing to render."}))
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(cards)}
    tiny("invoke", "pages", "render <p>hi</p>", "--json", env=env)
    [request] = scripted_server.requests
    # the model is offered the card's declaration, not the built-in html_to_text's schema
    assert [t["function"] for t in request["tools"]] == [HTML]


DRAFT04 = {
    "$schema": "http://json-schema.org/draft-04/schema#",
    "type": "object",
    "properties": {"radius": {"type": "number", "minimum": 0, "exclusiveMinimum": True}},
    "required": ["radius"],
}


def test_a_draft_04_declaration_validates_and_its_own_rules_check_the_call(
    tiny, tmp_path: Path, scripted_server
) -> None:
    cards = tmp_path / "cards"
    circle = {"name": "circle_area", "description": "Area of a circle.", "parameters": DRAFT04}
    _card(cards, "circles", [circle], ["circle_area"])
    result = tiny("validate", str(cards), env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 0, result.output  # was: "True is not of type 'number'"
    scripted_server.add(
        tool_call("circle_area", {"radius": 0}),
        reply({"status": "partial", "summary": "The radius was refused."}),
    )
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(cards)}
    tiny("invoke", "circles", "area of a circle of radius 0", "--json", env=env)
    answer = [m["content"] for m in scripted_server.requests[1]["messages"] if m["role"] == "tool"]
    assert len(answer) == 1 and "less than or equal to the minimum of 0" in answer[0]
