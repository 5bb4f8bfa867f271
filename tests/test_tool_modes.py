"""Tool modes through the real CLI: native, json (response_format), auto, recovered calls."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_cli.agent.reply import read_actions, recover_calls, response_format
from tiny_cli.testing import reply, tool_call

TASK = "how did the onboarding process work again"
SEARCH = {"query": "onboarding"}
ANSWER = {"status": "ok", "summary": "Day one: laptop and buddy.", "source": "onboarding.md"}
FENCED_CALL = '```json\n{"name": "docs_search", "arguments": {"query": "onboarding"}}\n```'


@pytest.fixture
def run(tiny, scripted_server):
    """Run `tiny ARGS --json` against the scripted server; return (exit code, Digest)."""

    def go(*args: str, env: dict[str, str] | None = None):
        result = tiny(*args, "--json", env={"TINY_BASE_URL": scripted_server.url, **(env or {})})
        assert "Traceback" not in result.output, result.output
        scripted_server.assert_done()
        return result.exit_code, json.loads(result.stdout)

    return go


def _branches(request: dict) -> list[dict]:
    schema = request["response_format"]["json_schema"]["schema"]
    return schema.get("anyOf", [schema])


def _tools_in(branches: list[dict]) -> list[str]:
    return [b["properties"]["tool"]["const"] for b in branches if "tool" in b["properties"]]


def _answers_in(branches: list[dict]) -> list[dict]:
    """Return the final-answer branches (ok/partial); the refusal branch is always there."""
    return [b for b in branches if "enum" in b["properties"].get("status", {})]


def _refusals_in(branches: list[dict]) -> list[dict]:
    return [b for b in branches if b["properties"].get("status") == {"const": "refused"}]


# --- auto and native: calls written as text --------------------------------------------------


def test_auto_runs_a_fenced_call_and_switches_the_run_to_json(run, scripted_server) -> None:
    scripted_server.add(reply(FENCED_CALL), reply(json.dumps(ANSWER)))
    code, digest = run("invoke", "docs-finder", TASK)
    assert code == 0 and digest["status"] == "ok"
    assert digest["cost"]["recovered_calls"] == 1 and digest["cost"]["tool_calls"] == 1
    assert any("switched to json tool mode" in n for n in digest["notes_for_caller"])
    first, second = scripted_server.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["docs_search"]
    assert first["tool_choice"] == "required"  # docs-finder says `first: tool`
    assert "response_format" not in first
    assert "tools" not in second and "tool_choice" not in second
    assert _tools_in(_branches(second)) == ["docs_search"]
    assert second["messages"][-1]["role"] == "user"
    assert second["messages"][-1]["content"].startswith("Result of docs_search:")
    assert "onboarding" in second["messages"][-1]["content"].lower()  # the real handbook page
    assert digest["field_sources"]["source"] == "tool"


def test_native_runs_a_recovered_call_but_stays_native(run, scripted_server) -> None:
    hermes = (
        '<tool_call>\n{"name": "docs_search", "arguments": {"query": "onboarding"}}\n</tool_call>'
    )
    scripted_server.add(reply(hermes), reply(json.dumps(ANSWER)))
    code, digest = run("invoke", "docs-finder", TASK, "--tool-mode", "native")
    assert code == 0 and digest["cost"]["recovered_calls"] == 1
    second = scripted_server.requests[1]
    assert [t["function"]["name"] for t in second["tools"]] == ["docs_search"]
    assert "response_format" not in second and "tool_choice" not in second  # a tool ran
    assert not any("switched" in n for n in digest["notes_for_caller"])


def test_a_recovered_call_to_a_tool_the_card_lacks_is_a_ghost(run, scripted_server) -> None:
    ghost = '{"name": "http_get", "arguments": {"url": "https://example.org"}}'
    scripted_server.add(reply(ghost), tool_call("docs_search", SEARCH), reply(json.dumps(ANSWER)))
    code, digest = run("invoke", "docs-finder", TASK, "--tool-mode", "native")
    assert code == 0
    assert digest["cost"]["ghost_names"] == ["http_get"]
    assert digest["cost"]["recovered_calls"] == 1  # the ghost was written as text
    assert "unknown tool 'http_get'" in scripted_server.requests[1]["messages"][-1]["content"]


# --- json mode ---------------------------------------------------------------------------------


def test_json_mode_sends_a_schema_of_exactly_the_cards_tools_and_the_answer(
    run, scripted_server, plain_cards: Path
) -> None:
    call = {"tool": "docs_search", "arguments": SEARCH}
    scripted_server.add(reply(json.dumps(call)), reply(json.dumps(ANSWER)))
    env = {"TINY_CARDS": str(plain_cards)}  # no `first: tool`: the answer may come at once
    code, digest = run("invoke", "docs-finder", TASK, "--tool-mode", "json", env=env)
    assert code == 0 and digest["status"] == "ok"
    assert digest["cost"]["tool_calls"] == 1 and digest["cost"]["recovered_calls"] == 0
    for request in scripted_server.requests:
        assert "tools" not in request and "tool_choice" not in request
        branches = _branches(request)
        assert _tools_in(branches) == ["docs_search"]
        (answer,) = _answers_in(branches)
        assert answer["required"] == ["status", "summary", "source"]
        assert len(_refusals_in(branches)) == 1
    tool_branch = _branches(scripted_server.requests[0])[0]
    assert tool_branch["properties"]["arguments"]["required"] == ["query"]
    system = scripted_server.requests[0]["messages"][0]["content"]
    assert '{"tool": "<name>", "arguments": {...}}' in system and "- docs_search(" in system


def test_first_tool_removes_the_answer_branch_until_a_tool_ran(run, scripted_server) -> None:
    call = {"tool": "docs_search", "arguments": SEARCH}
    scripted_server.add(reply(json.dumps(call)), reply(json.dumps(ANSWER)))
    code, digest = run("invoke", "docs-finder", TASK, "--tool-mode", "json")
    assert code == 0 and digest["status"] == "ok"
    first, second = scripted_server.requests
    assert _answers_in(_branches(first)) == [] and _tools_in(_branches(first)) == ["docs_search"]
    assert _refusals_in(_branches(first)) == []  # a tool first, whatever the model prefers
    assert len(_answers_in(_branches(second))) == 1


def test_card_tool_mode_and_env_precedence(run, scripted_server, tmp_path: Path) -> None:
    cards = tmp_path / "cards"
    cards.mkdir()
    card = (Path(__file__).parent.parent / "cards" / "docs-finder.yaml").read_text()
    (cards / "docs-finder.yaml").write_text(card + "tool_mode: json\n")
    call = {"tool": "docs_search", "arguments": SEARCH}
    scripted_server.add(reply(json.dumps(call)), reply(json.dumps(ANSWER)))
    run("invoke", "docs-finder", TASK, env={"TINY_CARDS": str(cards)})  # the card: json
    assert all("response_format" in r for r in scripted_server.requests)
    scripted_server.add(tool_call("docs_search", SEARCH), reply(json.dumps(ANSWER)))
    env = {"TINY_CARDS": str(cards), "TINY_TOOL_MODE": "native"}  # env beats the card
    code, _ = run("invoke", "docs-finder", TASK, env=env)
    assert code == 0 and all("tools" in r for r in scripted_server.requests[2:])


def test_auto_insists_on_a_tool_when_the_card_says_first_tool(run, scripted_server) -> None:
    invented = {"status": "ok", "summary": "Onboarding takes a week.", "source": "onboarding.md"}
    call = {"tool": "docs_search", "arguments": SEARCH}
    scripted_server.add(
        reply(json.dumps(invented)), reply(json.dumps(call)), reply(json.dumps(ANSWER))
    )
    code, digest = run("invoke", "docs-finder", TASK)
    assert code == 0 and digest["status"] == "ok" and digest["cost"]["tool_calls"] == 1
    second = scripted_server.requests[1]
    assert "without calling a tool" in second["messages"][-1]["content"]
    assert _answers_in(_branches(second)) == []  # json now, and only the tool branch


def test_native_first_tool_answer_without_a_call_is_never_ok(run, scripted_server) -> None:
    invented = {"status": "ok", "summary": "Onboarding takes a week.", "source": "onboarding.md"}
    scripted_server.add(reply(json.dumps(invented)))
    code, digest = run("invoke", "docs-finder", TASK, "--tool-mode", "native")
    assert (digest["status"], digest["reason"]) == ("partial", "no_evidence") and code == 3
    assert scripted_server.requests[0]["tool_choice"] == "required"
    assert any("model's own, unchecked" in n for n in digest["notes_for_caller"])


def test_bad_tool_mode_and_wall_scale_are_one_line_errors(tiny) -> None:
    result = tiny("invoke", "docs-finder", TASK, "--tool-mode", "grammar")
    assert result.exit_code == 2 and "--tool-mode='grammar'" in result.output
    result = tiny("invoke", "docs-finder", TASK, env={"TINY_WALL_SCALE": "0"})
    assert result.exit_code == 2 and "TINY_WALL_SCALE=0.0" in result.output
    assert "Traceback" not in result.output


# --- the readers, directly -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        '{"name": "docs_search", "arguments": {"query": "x"}}',
        '```json\n{"name": "docs_search", "parameters": {"query": "x"}}\n```',
        'Searching.\n<tool_call>\n{"name": "docs_search", "arguments": {"query": "x"}}</tool_call>',
        '{{"name": "docs_search", "arguments": {{"query": "x"}}}}',
        '{"function": {"name": "docs_search", "arguments": "{\\"query\\": \\"x\\"}"}}',
    ],
)
def test_call_shaped_text_is_recovered(text: str) -> None:
    (call,) = recover_calls(text, 0)
    assert call.name == "docs_search" and json.loads(call.arguments) == {"query": "x"}
    (read,) = read_actions(text, 0)  # the json-mode reader, when a server ignores the schema
    assert (read.name, read.arguments) == (call.name, call.arguments)


def test_a_fenced_call_after_the_switch_to_json_runs(run, scripted_server) -> None:
    ghost = '<tool_call>{"name": "ghost_x", "arguments": {}}</tool_call>'
    scripted_server.add(reply(ghost), reply(FENCED_CALL), reply(json.dumps(ANSWER)))
    code, digest = run("invoke", "docs-finder", TASK)
    assert code == 0 and digest["status"] == "ok", digest
    assert digest["cost"]["tool_calls"] == 2 and digest["cost"]["ghost_names"] == ["ghost_x"]
    last = scripted_server.requests[-1]
    assert "response_format" in last  # json mode since the ghost call
    assert last["messages"][-1]["content"].startswith("Result of docs_search:")


@pytest.mark.parametrize(
    "text",
    [
        '{"status": "ok", "summary": "s", "name": "Mustermann GmbH"}',
        "The onboarding takes a week.",
        '{"name": "Mustermann GmbH", "city": "Köln"}',
        "",
    ],
)
def test_answers_and_prose_are_not_calls(text: str) -> None:
    assert recover_calls(text, 0) == ()
    assert read_actions(text, 0) == ()


def test_without_an_answer_branch_only_the_tools_remain() -> None:
    tools = [{"function": {"name": "t", "parameters": {"type": "object", "properties": {}}}}]
    schema = response_format(tools, None)["json_schema"]["schema"]
    assert schema["properties"]["tool"] == {"const": "t"} and "anyOf" not in schema
    answer = {"type": "object", "properties": {"status": {"enum": ["ok"]}}}
    branches = response_format(tools, answer)["json_schema"]["schema"]["anyOf"]
    assert [b["properties"].get("status") for b in branches] == [
        None,
        {"enum": ["ok"]},
        {"const": "refused"},
    ]


def test_auto_lets_a_first_tool_card_refuse_without_a_call(run, scripted_server) -> None:
    refusal = {"status": "refused", "summary": "Sandwiches are not in the handbook."}
    scripted_server.add(reply(json.dumps(refusal)))
    code, digest = run("invoke", "docs-finder", "make me a sandwich")
    assert (code, digest["status"]) == (4, "refused") and len(scripted_server.requests) == 1


def test_a_replay_uses_the_recorded_tool_mode(run, scripted_server, tmp_path: Path) -> None:
    recording = tmp_path / "json-mode.jsonl"
    call = {"tool": "docs_search", "arguments": SEARCH}
    scripted_server.add(reply(json.dumps(call)), reply(json.dumps(ANSWER)))
    _, recorded = run(
        "invoke", "docs-finder", TASK, "--tool-mode", "json", "--record", str(recording)
    )
    header = json.loads(recording.read_text().splitlines()[0])
    assert header["tool_mode"] == "json"
    code, replayed = run("invoke", "docs-finder", TASK, "--replay", str(recording))  # no flag
    assert code == 0 and replayed["fields"] == recorded["fields"]
    assert len(scripted_server.requests) == 2  # the replay asked nobody


def test_a_refusal_cut_before_its_brace_is_completed_and_noted(run, scripted_server) -> None:
    cut = '{"status": "refused", "summary": "I cannot assist with making sandwiches."'
    scripted_server.add(reply(cut))
    code, digest = run("invoke", "docs-finder", "make me a sandwich", "--tool-mode", "native")
    assert (code, digest["status"]) == (4, "refused") and len(scripted_server.requests) == 1
    assert any("without its closing '}'" in n for n in digest["notes_for_caller"])


def test_a_boolean_property_schema_is_listed_as_any_not_a_crash() -> None:
    from tiny_cli.agent.loop import tools_section

    schema = {"type": "object", "properties": {"q": True, "n": {"type": "integer"}}}
    text = tools_section([{"function": {"name": "find", "parameters": schema}}])
    assert "- find(q: any, n: integer)" in text
    assert "- bare()" in tools_section([{"function": {"name": "bare", "parameters": True}}])
