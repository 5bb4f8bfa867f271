"""A writer's claim of a write that did not happen is never printed, whichever rule judges it.

The real `tiny invoke crm-writer` runs against the scripted model server, at a terminal whose
answer to the write prompt is no; the CRM under TINY_HOME and the requests on the wire are
checked as well as the Digest the user sees.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tiny_cli.cli.common import Terminal
from tiny_cli.testing import reply, tool_call

MUSTERMANN = {"name": "Mustermann GmbH", "city": "Berlin"}
# what the model answers after its write was declined: a write and an id that never were
CLAIM_OK = json.dumps(
    {
        "status": "ok",
        "summary": "Added it.",
        "company_id": 1,
        "name": "Mustermann GmbH",
        "notes": ["Customer record created in the CRM."],
    }
)
TASK = "add Mustermann GmbH in Berlin as a new customer"
NOTHING = "Nothing was written: the agent claimed a write that no tool made."


def _rows(home: Path) -> list[tuple[str, ...]]:
    path = home / "crm.sqlite3"
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        return db.execute("select name from companies").fetchall()


def _tool_results(request: dict) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == "tool"]


@pytest.fixture
def at_terminal(tiny, scripted_server):
    """Run `tiny ARGS` as if stdin were a terminal: the write prompt's answers come from input."""

    def go(*args: str, input: str):
        env = {"TINY_BASE_URL": scripted_server.url}
        result = tiny(*args, input=input, env=env, obj=Terminal(True))
        assert "Traceback" not in result.output
        return result

    return go


def test_a_declined_write_claimed_as_done_is_not_printed(at_terminal, scripted_server, home):
    scripted_server.add(
        tool_call("crm_find_company", {"name": "Mustermann GmbH"}),
        tool_call("crm_add_company", MUSTERMANN),
        reply(CLAIM_OK),
    )
    result = at_terminal("invoke", "crm-writer", TASK, input="n\n")
    scripted_server.assert_done()
    assert result.exit_code == 7, result.output  # needs_confirmation, as before
    assert "needs_confirmation" in result.stdout and "write_declined" in result.stdout
    assert NOTHING in result.stdout
    assert "Added it." not in result.stdout and "company_id" not in result.stdout
    assert "record created" not in result.stdout  # the model's notes go with its answer
    assert "1 write call(s) not approved, so not run: crm_add_company" in result.stdout
    assert 'declined write: crm_add_company {"name": "Mustermann GmbH", "city": "Berlin"}' in (
        result.stdout
    )
    assert _rows(home) == []
    # the wire is unchanged: the lookup ran, the model was told its write did not run
    _, second, third = scripted_server.requests
    assert _tool_results(second) == ["[]"]  # the lookup found nothing
    assert _tool_results(third)[-1].startswith("declined: the user did not approve this call")


def test_a_declined_write_answered_partial_keeps_its_own_words(at_terminal, scripted_server, home):
    # a model that says what happened is not the one rewritten: only an `ok` claims the write
    said = "Not added: the user declined."
    honest = {"status": "partial", "summary": said, "name": "Mustermann GmbH"}
    scripted_server.add(tool_call("crm_add_company", MUSTERMANN), reply(json.dumps(honest)))
    result = at_terminal("invoke", "crm-writer", TASK, input="n\n")
    assert result.exit_code == 7, result.output
    assert "write_declined" in result.stdout and said in result.stdout
    assert NOTHING not in result.stdout and _rows(home) == []


def test_an_ok_after_a_failed_write_is_still_an_unverified_write(tiny, scripted_server, home):
    # the write was approved and ran, but failed: the documented `unverified_write` stands
    scripted_server.add(
        tool_call("crm_add_company", {"name": "...", "city": "Berlin"}), reply(CLAIM_OK)
    )
    env = {"TINY_BASE_URL": scripted_server.url}
    result = tiny("invoke", "crm-writer", TASK, "--yes", "--json", env=env)
    digest = json.loads(result.stdout)
    assert result.exit_code == 5, result.output
    assert (digest["status"], digest["reason"]) == ("failed", "unverified_write")
    assert digest["summary"] == NOTHING and digest["fields"] == {}
    assert digest["field_sources"] == {} and _rows(home) == []
    assert digest["notes_for_caller"] == [  # the model's "record created" goes with its answer
        "the agent said ok, but no write tool ran successfully: nothing was written"
    ]
    assert _tool_results(scripted_server.requests[1])[0].startswith("error: crm_add_company")
