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


@pytest.mark.slow
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


SERVER_HTML = {  # a server's html_to_text: a built-in tool has that name, with other arguments
    "name": "html_to_text",
    "description": "Fetch a page and return its text.",
    "parameters": {
        "type": "object",
        "properties": {"url": {"type": "string"}},
        "required": ["url"],
    },
}


def _clash_cards(cards: Path) -> None:
    """`fetcher` declares html_to_text itself; `reader` lists the built-in one."""
    _card(cards, "fetcher", [SERVER_HTML], ["html_to_text"])
    _card(cards, "reader", [], ["html_to_text"])


def test_a_card_declaring_a_builtin_name_means_its_own_function(tiny, tmp_path: Path) -> None:
    cards = tmp_path / "cards"
    _clash_cards(cards)
    result = tiny("validate", str(cards), env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("card", ["fetcher", "reader"])
def test_each_card_gets_the_html_to_text_its_allowlist_names(
    tiny, tmp_path: Path, scripted_server, card: str
) -> None:
    cards = tmp_path / "cards"
    _clash_cards(cards)
    scripted_server.add(reply({"status": "partial", "summary": "Nothing read."}))
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(cards)}
    assert tiny("validate", env=env).exit_code == 0  # the invoke reads the cards' index
    tiny("invoke", card, "read https://example.org", "--json", env=env)
    (sent,) = [t["function"] for t in scripted_server.requests[0]["tools"]]
    assert sent["name"] == "html_to_text"
    if card == "fetcher":  # the card's own declaration, as written
        assert sent == SERVER_HTML
    else:  # the built-in: it takes the page's HTML
        assert "html" in sent["parameters"]["properties"]


def test_a_declared_call_never_runs_the_builtin_of_that_name(
    tiny, tmp_path: Path, scripted_server
) -> None:
    cards = tmp_path / "cards"
    _clash_cards(cards)
    scripted_server.add(
        tool_call("html_to_text", {"url": "https://example.org"}),
        reply({"status": "partial", "summary": "The tool could not run."}),
    )
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(cards)}
    tiny("invoke", "fetcher", "read https://example.org", "--json", env=env)
    answer = [m["content"] for m in scripted_server.requests[1]["messages"] if m["role"] == "tool"]
    assert answer == [
        "error: html_to_text failed: html_to_text is declared only: it has no implementation to run"
    ]


def test_an_mcp_tool_with_a_builtin_name_is_allowed_by_its_qualified_name(
    tiny, tmp_path: Path
) -> None:
    cards = tmp_path / "cards"
    _card(cards, "web", [], ["web.html_to_text", "html_to_text"])
    server = {"command": "python", "args": ["-c", "pass"]}
    (cards / "mcp.yaml").write_text(json.dumps({"servers": {"web": server}}))
    result = tiny("validate", str(cards), env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 0, result.output


def test_two_tools_one_card_offers_under_one_name_is_one_line_with_the_way_out(
    tiny, tmp_path: Path
) -> None:
    cards = tmp_path / "cards"
    wire = {**SERVER_HTML, "name": "web__html_to_text"}  # what web.html_to_text is on the wire
    path = _card(cards, "web", [wire], ["web.html_to_text", "web__html_to_text"])
    server = {"command": "python", "args": ["-c", "pass"]}
    (cards / "mcp.yaml").write_text(json.dumps({"servers": {"web": server}}))
    result = tiny("validate", str(cards), env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 1
    (line,) = [x for x in result.output.splitlines() if "web__html_to_text" in x]
    assert line.startswith(str(path)) and "both reach the model as 'web__html_to_text'" in line
    assert "rename" in line


def test_cards_show_gives_the_declaration_the_model_is_sent(tiny, tmp_path: Path) -> None:
    cards = tmp_path / "cards"
    _clash_cards(cards)
    shown = tiny("cards", "show", "fetcher", "--cards", str(cards), "--json")
    assert shown.exit_code == 0, shown.output
    assert [s["function"] for s in json.loads(shown.stdout)["tool_schemas"]] == [SERVER_HTML]
