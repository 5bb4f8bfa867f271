"""The run loop's answers: what a partial keeps, what counts as empty, what the model's JSON
decodes to, and the system prompt naming every tool offered.

The real `tiny invoke` runs against the scripted model server; the requests on the wire are
checked as well as the Digest the user gets.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tiny_cli.testing import reply, tool_call

SEARCH = tool_call("docs_search", {"query": "vacation"})
TASK = "how many vacation days"
CARD = {
    "id": "plain",
    "summary": "Finds answers in the team handbook and explains processes and policies.",
    "examples": ["how does onboarding work"],
    "tools": ["docs_search"],
    "returns_required": ["source"],
    "returns": {"days": "integer"},
    "side_effects": "none",
    "budget": {"max_tool_calls": 3, "max_output_tokens": 200, "max_wall_seconds": 30},
}
ECHO_TOOL = '''
from tiny_cli.tools import tool


@tool
def echo(text: str) -> str:
    """Say what the tool was given, every character ASCII."""
    return ascii(text)
'''


@pytest.fixture
def run(tiny, scripted_server, tmp_path: Path):
    """Run `tiny invoke CARD TASK --json [ARGS]` on the scripted server; return the Digest."""
    cards = tmp_path / "own-cards"
    cards.mkdir()
    card = {**CARD, "tools": ["docs_search", "echo"]}
    (cards / "plain.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    (tmp_path / "echo_tool.py").write_text(ECHO_TOOL, encoding="utf-8")
    own = {"TINY_CARDS": str(cards), "TINY_TOOLS": str(tmp_path / "echo_tool.py")}

    def go(card_id: str, *args: str, returns: dict | None = None) -> tuple[int, dict[str, Any]]:
        if returns is not None:
            changed = {**card, "returns": returns}
            (cards / "plain.yaml").write_text(yaml.safe_dump(changed), encoding="utf-8")
        env = {"TINY_BASE_URL": scripted_server.url, **(own if card_id == "plain" else {})}
        result = tiny("invoke", card_id, TASK, "--json", *args, env=env)
        assert "Traceback" not in result.output, result.output
        scripted_server.assert_done()
        return result.exit_code, json.loads(result.stdout)

    return go


def _last(request: dict) -> str:
    return request["messages"][-1]["content"]


# --- 1: an answer after the tool budget ran out keeps no mistyped field --------------------


def test_a_wrap_up_answer_leaves_out_a_field_its_schema_refuses(run, scripted_server) -> None:
    said = {"status": "ok", "summary": "28 days", "days": "twenty-eight", "source": [1, 2]}
    scripted_server.add(SEARCH, SEARCH, SEARCH, reply(json.dumps(said)))
    code, digest = run("plain", returns={"days": "integer", "source": "string"})
    assert code == 3 and digest["status"] == "partial" and digest["reason"] == "max_tool_calls"
    assert digest["summary"] == "28 days"
    assert digest["fields"] == {} and digest["field_sources"] == {}
    assert sorted(digest["missing"]) == ["days", "source"]
    assert digest["notes_for_caller"] == [
        "field 'days' must be an integer, got a string (\"twenty-eight\"): left out of the "
        "partial answer",
        "field 'source' must be a string, got a list ([1, 2]): left out of the partial answer",
    ]
    # the wire: three searches, the wrap-up turn with no tools, and no repair turn after it
    assert len(scripted_server.requests) == 4
    wrap_up = scripted_server.requests[3]
    assert not wrap_up.get("tools")
    assert _last(wrap_up).startswith("Your budget of 3 tool calls is spent")


def test_a_wrap_up_answer_keeps_its_well_typed_fields(run, scripted_server) -> None:
    said = {"status": "ok", "summary": "28 days", "days": 28, "source": "urlaubsantrag.md"}
    scripted_server.add(SEARCH, SEARCH, SEARCH, reply(json.dumps(said)))
    code, digest = run("plain")
    assert code == 3 and digest["reason"] == "max_tool_calls"
    assert digest["fields"] == {"source": "urlaubsantrag.md", "days": 28}
    assert digest["notes_for_caller"] == []


# --- 2: an `ok` with a blank required field is repaired -------------------------------------


@pytest.mark.parametrize("blank", [[], " ", {}, "\n\t"])
def test_an_ok_with_a_blank_required_field_gets_the_repair_turn(
    run, scripted_server, blank: Any
) -> None:
    scripted_server.add(
        SEARCH,
        reply(json.dumps({"status": "ok", "summary": "28 days", "source": blank})),
        reply(json.dumps({"status": "ok", "summary": "28 days", "source": "urlaubsantrag.md"})),
    )
    code, digest = run("docs-finder")
    assert code == 0 and digest["status"] == "ok"
    assert digest["fields"] == {"source": "urlaubsantrag.md"}
    repair = _last(scripted_server.requests[2])
    assert repair.startswith("Your answer cannot be used: missing required field 'source'")


def test_a_partial_names_a_blank_required_field_as_missing(run, scripted_server) -> None:
    scripted_server.add(
        SEARCH, reply(json.dumps({"status": "partial", "summary": "28 days", "source": "  "}))
    )
    code, digest = run("docs-finder")
    assert code == 3 and digest["status"] == "partial"
    assert digest["missing"] == ["source"]
    assert len(scripted_server.requests) == 2  # a partial is never repaired


def test_a_typed_field_takes_the_empty_list_its_schema_takes(run, scripted_server) -> None:
    said = {"status": "ok", "summary": "No tags.", "days": 28, "source": "x.md", "tags": []}
    scripted_server.add(SEARCH, reply(json.dumps(said)))
    code, digest = run("plain", returns={"days": "integer", "tags": ["string"]})
    assert code == 0 and digest["fields"]["tags"] == []  # no tags at all is an answer
    assert len(scripted_server.requests) == 2


# --- 3: a lone surrogate the model's JSON escapes is replaced --------------------------------


def test_a_lone_surrogate_escaped_in_the_models_json_becomes_u_fffd(run, scripted_server) -> None:
    answer = '{"status":"ok","summary":"a \\ud800 b","days":28,"source":"urlaub\\udc00.md"}'
    pair = '{"text": "rocket \\ud83d\\ude80 and \\ud800 alone"}'  # a pair is one character
    scripted_server.add(
        SEARCH,
        tool_call("echo", pair),
        reply(answer),
    )
    code, digest = run("plain")
    assert code == 0, digest
    assert digest["summary"] == "a \ufffd b"
    assert digest["fields"]["source"] == "urlaub\ufffd.md"
    # the tool got its argument with the half pair replaced, the whole pair kept
    result = scripted_server.requests[2]["messages"][-1]
    assert result["role"] == "tool"
    assert result["content"] == ascii("rocket \U0001f680 and \ufffd alone")


def test_a_lone_surrogate_in_a_json_mode_call_becomes_u_fffd(run, scripted_server) -> None:
    call = '{"tool": "echo", "arguments": {"text": "x \\udfff y"}}'
    done = '{"status": "ok", "summary": "\\ud801", "days": 1, "source": "x"}'
    scripted_server.add(reply(call), reply(done))
    code, digest = run("plain", "--tool-mode", "json")
    assert code == 0 and digest["summary"] == "\ufffd"
    said = _last(scripted_server.requests[1])
    assert said.startswith("Result of echo:\n" + ascii("x \ufffd y"))


# --- 4: the system prompt names read_artifact once it is offered -----------------------------


def _long_html() -> str:
    words = " ".join(f"word{i}" for i in range(3000))
    return f"<html><head><title>Long</title></head><body><p>{words}</p></body></html>"


def _tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools") or []]


PARTIAL = reply(json.dumps({"status": "partial", "summary": "A long page.", "title": "Long"}))


def test_the_system_prompt_names_read_artifact_once_it_is_offered(run, scripted_server) -> None:
    scripted_server.add(tool_call("html_to_text", {"html": _long_html()}), PARTIAL)
    code, digest = run("web-reader")
    assert code == 3 and digest["status"] == "partial", digest
    first, second = scripted_server.requests
    assert _tool_names(first) == ["http_get", "html_to_text"]
    assert "Tools you can call: http_get, html_to_text. No other" in first["messages"][0]["content"]
    assert _tool_names(second) == ["http_get", "html_to_text", "read_artifact"]
    prompt = second["messages"][0]["content"]
    assert "Tools you can call: http_get, html_to_text, read_artifact. No other" in prompt
    assert "read_artifact" in _last(second)  # the result that told the model to read on


def test_json_mode_describes_read_artifact_once_it_is_offered(run, scripted_server) -> None:
    call = json.dumps({"tool": "html_to_text", "arguments": {"html": _long_html()}})
    scripted_server.add(reply(call), PARTIAL)
    code, _ = run("web-reader", "--tool-mode", "json")
    assert code == 3
    first, second = scripted_server.requests
    assert "read_artifact" not in first["messages"][0]["content"]
    prompt = second["messages"][0]["content"]
    assert "Tools you can call: http_get, html_to_text, read_artifact." in prompt
    assert "\n- read_artifact(handle: string" in prompt
    assert "read_artifact" in json.dumps(second["response_format"])
