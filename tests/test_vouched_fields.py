"""A value only the model's own call arguments hold vouches for nothing, unless a write took it.

A page name typed into a search, or an id typed into a CRM lookup, is the model's word: an `ok`
holding it is `partial`, `unsourced_fields`. A value a write call that succeeded was given is
the tool's data now (the note it stored), so it stands. The CLI runs for real against the
scripted server; each test checks the Digest and what the tools answered over the wire.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from tiny_cli.testing import ScriptedServer, reply, tool_call

from .conftest import SEED_CARDS

TOOLS = '''
from tiny_cli.tools import tool


@tool
def find_note(query: str) -> list:
    """Find saved notes by their words."""
    return []


@tool(writes=True)
def save_note(text: str) -> dict:
    """Save a note; return its id (not its text)."""
    return {"note_id": 7}
'''
NOTER = {
    "id": "noter",
    "summary": "Saves a note the user asks for.",
    "tools": ["find_note", "save_note"],
    "returns_required": ["note_id", "text"],
    "side_effects": "write",
}


def _invoke(tiny, server: ScriptedServer, card: str, task: str, **env: str) -> tuple[int, Any]:
    """Run `tiny invoke CARD TASK --json --yes`; return the exit code and the Digest."""
    env = {"TINY_BASE_URL": server.url, "TINY_CARDS": str(SEED_CARDS), **env}
    result = tiny("invoke", card, task, "--json", "--yes", env=env)
    server.assert_done()
    return result.exit_code, json.loads(result.stdout)


def _results(server: ScriptedServer) -> list[str]:
    """What the tools answered, as the model saw it in the last request."""
    return [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]


def _noter(tmp_path: Path) -> dict[str, str]:
    """Write the noter card and its tools module; return the environment that loads them."""
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "noter.yaml").write_text(yaml.safe_dump(NOTER), encoding="utf-8")
    (tmp_path / "note_tools.py").write_text(TOOLS, encoding="utf-8")
    return {"TINY_CARDS": str(cards), "TINY_TOOLS": str(tmp_path / "note_tools.py")}


def test_an_id_only_in_a_lookups_arguments_is_never_ok(tiny, scripted_server) -> None:
    answer = {
        "status": "ok",
        "summary": "Added.",
        "company_id": "C-4711",
        "name": "Mustermann GmbH",
    }
    scripted_server.add(
        tool_call("crm_find_company", {"name": "Mustermann GmbH C-4711"}),
        tool_call("crm_add_company", {"name": "Mustermann GmbH", "city": "Berlin"}),
        reply(json.dumps(answer)),
    )
    code, digest = _invoke(tiny, scripted_server, "crm-writer", "add mustermann gmbh in Berlin")
    found, added = _results(scripted_server)
    assert found == "[]" and '"company_id": 1' in added and "C-4711" not in added
    assert (digest["status"], digest["reason"], code) == ("partial", "unsourced_fields", 3)
    assert digest["field_sources"] == {"company_id": "args", "name": "tool"}
    assert "only the model's own call arguments hold company_id" in " ".join(
        digest["notes_for_caller"]
    )


def test_a_page_name_only_in_the_search_query_is_never_ok(tiny, scripted_server) -> None:
    page = "vacation-policy-2023.md"
    answer = {"status": "ok", "summary": "Ask in the HR portal.", "source": page}
    scripted_server.add(tool_call("docs_search", {"query": page}), reply(json.dumps(answer)))
    code, digest = _invoke(tiny, scripted_server, "docs-finder", "how do I request vacation")
    (searched,) = _results(scripted_server)
    assert "urlaubsantrag.md" in searched and page not in searched
    assert (digest["status"], digest["reason"], code) == ("partial", "unsourced_fields", 3)
    assert digest["field_sources"] == {"source": "args"}


def test_a_value_a_successful_write_was_given_stands(tiny, scripted_server, tmp_path) -> None:
    answer = {"status": "ok", "summary": "Saved.", "note_id": 7, "text": "Call Anna on Monday"}
    scripted_server.add(
        tool_call("save_note", {"text": "Call Anna on Monday"}), reply(json.dumps(answer))
    )
    code, digest = _invoke(tiny, scripted_server, "noter", "remind me of Anna", **_noter(tmp_path))
    assert _results(scripted_server) == ['{"note_id": 7}']  # the text came back from no tool
    assert digest["approved_writes"] == [
        {"tool": "save_note", "arguments": {"text": "Call Anna on Monday"}, "outcome": "ok"}
    ]
    assert (digest["status"], code) == ("ok", 0), digest["notes_for_caller"]
    assert digest["field_sources"] == {"note_id": "tool", "text": "args"}


def test_a_value_only_a_lookup_was_given_beside_a_write_is_not(
    tiny, scripted_server, tmp_path
) -> None:
    answer = {"status": "ok", "summary": "Saved.", "note_id": 7, "text": "Call Bob on Friday"}
    scripted_server.add(
        tool_call("find_note", {"query": "Call Bob on Friday"}),
        tool_call("save_note", {"text": "Call Anna on Monday"}),
        reply(json.dumps(answer)),
    )
    code, digest = _invoke(tiny, scripted_server, "noter", "remind me of Anna", **_noter(tmp_path))
    assert _results(scripted_server) == ["[]", '{"note_id": 7}']
    assert (digest["status"], digest["reason"], code) == ("partial", "unsourced_fields", 3)
    assert digest["field_sources"] == {"note_id": "tool", "text": "args"}
