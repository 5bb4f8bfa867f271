"""What the Digest says is what happened: a failed write, a ghost's name, the tokens spent.

The real `tiny invoke` runs against the scripted model server; the CRM and the handbook are
the real tools, so a duplicate company fails in the CRM itself.
"""

from __future__ import annotations

import json

import pytest

from tiny_cli.testing import raw_response, reply, tool_call, tool_calls

ADD = "crm_add_company"
ACME = {"name": "Acme", "city": "Berlin"}
TASK = "add Acme in Berlin and ACME in Munich"


@pytest.fixture
def invoke(tiny, scripted_server):
    """Run `tiny invoke ARGS --json` against the scripted server; return (exit code, Digest)."""

    def go(*args: str) -> tuple[int, dict]:
        env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
        result = tiny("invoke", *args, "--json", env=env)
        assert "Traceback" not in result.output
        scripted_server.assert_done()
        return result.exit_code, json.loads(result.stdout)

    return go


def _answer(summary: str, company_id: int, name: str) -> str:
    return json.dumps({"status": "ok", "summary": summary, "company_id": company_id, "name": name})


def test_an_ok_after_a_write_that_failed_is_partial(invoke, scripted_server) -> None:
    scripted_server.add(
        tool_calls((ADD, ACME), (ADD, {"name": "ACME", "city": "Munich"})),
        reply(_answer("Added both: Acme (Berlin) and ACME (Munich).", 1, "Acme")),
    )
    code, digest = invoke("crm-writer", TASK, "--yes")
    told = [m["content"] for m in scripted_server.requests[1]["messages"] if m["role"] == "tool"]
    assert "CrmDuplicate" in told[1]  # the CRM refused the second company
    assert [w["outcome"] for w in digest["approved_writes"]] == ["ok", "tool_error"]
    assert (code, digest["status"], digest["reason"]) == (3, "partial", "write_failed")
    assert any(
        n.endswith(f"a write failed and no retry succeeded: {ADD} (tool_error)")
        for n in digest["notes_for_caller"]
    )


def test_a_failed_write_retried_with_success_may_be_ok(invoke, scripted_server) -> None:
    munich = {"name": "Acme Munich", "city": "Munich"}
    scripted_server.add(
        tool_calls((ADD, ACME), (ADD, {"name": "Acme Munich"})),  # no city: bad arguments
        tool_call(ADD, munich),  # the corrected call
        reply(_answer("Added Acme (Berlin) and Acme Munich.", 2, "Acme Munich")),
    )
    code, digest = invoke("crm-writer", TASK, "--yes")
    told = [m["content"] for m in scripted_server.requests[1]["messages"] if m["role"] == "tool"]
    assert told[1].startswith("error: ") and "Call crm_add_company again" in told[1]
    assert [w["outcome"] for w in digest["approved_writes"]] == ["ok", "ok"]
    assert (code, digest["status"], digest["reason"]) == (0, "ok", None)


def test_another_company_written_does_not_make_up_for_a_failed_one(invoke, scripted_server) -> None:
    beta = {"name": "Beta", "city": "Hamburg"}
    scripted_server.add(
        tool_calls((ADD, ACME), (ADD, {"name": "ACME", "city": "Munich"}), (ADD, beta)),
        reply(_answer("Added Acme, ACME and Beta.", 2, "Beta")),
    )
    code, digest = invoke(
        "crm-writer", "add Acme in Berlin, ACME in Munich, Beta in Hamburg", "--yes"
    )
    assert [w["outcome"] for w in digest["approved_writes"]] == ["ok", "tool_error", "ok"]
    assert (code, digest["status"], digest["reason"]) == (3, "partial", "write_failed")


def test_a_ghost_calls_names_are_quoted_in_its_note(invoke, scripted_server) -> None:
    scripted_server.add(
        tool_calls(("docs_search ", {"query": "vacation"}), ("", {})),
        tool_call("docs_search", {"query": "vacation"}),
        reply(json.dumps({"status": "ok", "summary": "Ask your lead.", "source": "vacation.md"})),
    )
    code, digest = invoke("docs-finder", "how do I request vacation")
    assert code == 0, digest
    assert digest["cost"]["ghost_names"] == ["docs_search ", ""]
    note = '2 ghost call(s) to tools this agent does not have: "docs_search ", ""'
    assert note in digest["notes_for_caller"]


def test_the_tokens_of_a_malformed_reply_are_counted_and_replay(
    invoke, scripted_server, tmp_path
) -> None:
    message = {"role": "assistant", "content": None, "tool_calls": "x"}
    usage = {"prompt_tokens": 77, "completion_tokens": 9}
    scripted_server.add(
        raw_response({"choices": [{"index": 0, "message": message}], "usage": usage})
    )
    recording = str(tmp_path / "malformed.jsonl")
    code, digest = invoke("docs-finder", "look up widgets", "--record", recording)
    assert (code, digest["status"]) == (5, "failed")
    assert "malformed response" in digest["reason"]
    assert (digest["cost"]["tokens_in"], digest["cost"]["tokens_out"]) == (77, 9)
    code, replayed = invoke("docs-finder", "look up widgets", "--replay", recording)
    assert (code, replayed["status"]) == (5, "failed")
    spent = {k: v for k, v in replayed["cost"].items() if k != "wall_seconds"}
    assert spent == {k: v for k, v in digest["cost"].items() if k != "wall_seconds"}


def test_a_recorded_errors_tokens_that_are_not_two_counts_are_one_line(
    tiny, scripted_server, tmp_path
) -> None:
    message = {"role": "assistant", "content": None, "tool_calls": "x"}
    usage = {"prompt_tokens": 77, "completion_tokens": 9}
    scripted_server.add(
        raw_response({"choices": [{"index": 0, "message": message}], "usage": usage})
    )
    recording = tmp_path / "malformed.jsonl"
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing"}
    tiny("invoke", "docs-finder", "look up widgets", "--record", str(recording), env=env)
    lines = recording.read_text().splitlines()
    assert '"tokens": [77, 9]' in lines[-1]
    recording.write_text("\n".join([*lines[:-1], lines[-1].replace("[77, 9]", '[77, "9"]')]))
    result = tiny("invoke", "docs-finder", "look up widgets", "--replay", str(recording), env=env)
    assert result.exit_code == 2
    assert result.stderr.strip().endswith("'error.tokens' must be two token counts, [in, out]")
