"""A value the model wrote into a call's arguments is not a tool's result (issue 21)."""

from __future__ import annotations

import json

from tiny_cli.agent.calls import evidence_of, field_sources
from tiny_cli.bench.tasks import Expect
from tiny_cli.testing import reply, tool_call

TASK = "what was the quarterly revenue according to the handbook"
SEARCH = {"query": "quarterly revenue 48213 EUR"}  # the model's own number, in its call
ANSWER = {"status": "ok", "summary": "Revenue was 48213 EUR.", "source": "revenue 48213 EUR"}


def _invoke(tiny, scripted_server, *flags: str):
    scripted_server.add(tool_call("docs_search", SEARCH), reply(json.dumps(ANSWER)))
    env = {"TINY_BASE_URL": scripted_server.url, "COLUMNS": "160"}
    result = tiny("invoke", "docs-finder", TASK, *flags, env=env)
    assert "Traceback" not in result.output, result.output
    scripted_server.assert_done()
    return result


def test_a_value_only_in_the_calls_arguments_is_args_not_tool(tiny, scripted_server) -> None:
    result = _invoke(tiny, scripted_server, "--json")
    digest = json.loads(result.stdout)
    assert digest["cost"]["tool_calls"] == 1  # docs_search ran: the handbook has no 48213
    assert "48213" not in scripted_server.requests[1]["messages"][-1]["content"]
    assert digest["field_sources"] == {"source": "args"}


def test_the_table_shows_tool_args_never_tool_result(tiny, scripted_server) -> None:
    result = _invoke(tiny, scripted_server)
    assert result.exit_code == 3, result.output  # partial: only the model's own search holds it
    rows = [line for line in result.stdout.splitlines() if "│" in line]
    (row,) = [line for line in rows if line.split("│")[1].strip() == "source"]
    assert "tool args" in row
    assert "tool result" not in result.stdout


def test_a_result_still_wins_over_the_arguments() -> None:
    evidence = [evidence_of({"query": "revenue 48213"}, "Q3 revenue: 48213 EUR")]
    sources = field_sources({"a": "48213 EUR", "b": "revenue 48213"}, evidence, "the task")
    assert sources == {"a": "tool", "b": "tool"}


def test_the_task_wins_over_the_arguments_it_was_copied_into() -> None:
    evidence = [evidence_of({"query": "ticket 4711"}, "no page matches")]
    assert field_sources({"ticket": "4711"}, evidence, "see ticket 4711") == {"ticket": "task"}
    assert field_sources({"ticket": "4711"}, evidence, "see the ticket") == {"ticket": "args"}


def test_a_url_a_successful_call_reached_is_the_tools() -> None:
    fetched = [evidence_of({"url": "https://example.org/a"}, "a page about nothing")]
    task = "read https://example.org/a"
    assert field_sources({"url": "https://example.org/a"}, fetched, task) == {"url": "tool"}
    assert field_sources({"url": "https://example.org/a"}, [], task) == {"url": "task"}
    fetched_id = [evidence_of({"url": "https://example.org/a", "id": "48213"}, "a page")]
    assert field_sources({"id": "48213"}, fetched_id, task) == {"id": "args"}  # not a URL


def test_a_value_half_in_arguments_half_in_a_result_is_args() -> None:
    evidence = [evidence_of({"id": "48213"}, {"currency": "EUR"})]
    assert field_sources({"x": "48213 EUR"}, evidence, "") == {"x": "args"}
    assert field_sources({"x": "77 EUR"}, evidence, "") == {"x": "model"}


def test_the_bench_never_counts_an_args_only_value_as_evidence() -> None:
    assert not Expect(value="48213").sourced("args")
    assert not Expect(value="48213", from_task=True).sourced("args")
    assert Expect(value="48213").sourced("tool")


def test_a_url_written_into_a_search_query_was_not_reached() -> None:
    made_up = "https://made.up/handbook/page"
    searched = [evidence_of({"query": made_up}, "no page matches")]
    assert field_sources({"source": made_up}, searched, "the task") == {"source": "args"}
    fetched = [evidence_of({"pageUrl": made_up}, "a page"), evidence_of({"links": [made_up]}, "")]
    assert field_sources({"source": made_up}, fetched[:1], "t") == {"source": "tool"}
    assert field_sources({"source": made_up}, fetched[1:], "t") == {"source": "tool"}


def test_a_number_is_found_whole_never_inside_a_longer_one() -> None:
    added = [evidence_of({"name": "Acme"}, {"company_id": 1, "created_at": "2026-12-06"})]
    assert field_sources({"company_id": "20"}, added, "add Acme") == {"company_id": "model"}
    assert field_sources({"company_id": 1}, added, "add Acme") == {"company_id": "tool"}


def test_a_word_may_sit_inside_a_longer_one_a_number_may_not() -> None:
    found = [evidence_of({"query": "x"}, "東京都港区 · die Kündigungsfrist beträgt 3 Monate")]
    sources = field_sources({"city": "東京", "topic": "Kündigung", "n": 3, "m": 30}, found, "t")
    assert sources == {"city": "tool", "topic": "tool", "n": "tool", "m": "model"}
