"""What a run prints is what was there: the approval prompt keeps the API key out, the Digest's
cost table keeps its numbers whole on a narrow terminal, and a model's trailing backslash
prints once.

Each test runs the real `tiny` (invoke, runs show) against the scripted model server.
"""

from __future__ import annotations

import json
import re

import pytest

from tiny_cli.cli.common import Terminal
from tiny_cli.testing import reply, tool_call

KEY = "sk-SECRETKEY1234567890abcdef"
HANDBOOK_ANSWER = {"status": "ok", "summary": "", "source": "onboarding.md"}


def _answer(summary: str) -> str:
    return json.dumps({**HANDBOOK_ANSWER, "summary": summary})


def test_write_prompt_shows_no_api_key(tiny, scripted_server) -> None:
    company = {"name": f"Acme {KEY}", "city": "Berlin"}
    claim = {"status": "ok", "summary": "Added.", "company_id": 1, "name": "Acme"}
    scripted_server.add(tool_call("crm_add_company", company), reply(json.dumps(claim)))
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_API_KEY": KEY}
    result = tiny("invoke", "crm-writer", "add Acme in Berlin", input="n\n", env=env,
                  obj=Terminal(True))  # fmt: skip
    prompt = [line for line in result.stderr.splitlines() if "wants to write" in line]
    assert prompt == [
        'crm-writer wants to write: crm_add_company {"name": "Acme [redacted]", "city": "Berlin"}'
    ]
    assert KEY not in result.output


@pytest.mark.parametrize("columns", [28, 40, 60])
def test_cost_numbers_stay_whole_at_any_width(tiny, scripted_server, columns: int) -> None:
    spent = {"tokens_in": 4115, "tokens_out": 226}
    scripted_server.add(
        tool_call("web_fetch", {"url": "http://example.com"}, **spent),
        tool_call("docs_search", {"query": "onboarding"}, **spent),
        reply(_answer("Two weeks of onboarding."), **spent),
    )
    env = {"TINY_BASE_URL": scripted_server.url, "COLUMNS": str(columns)}
    result = tiny("invoke", "docs-finder", "how long is onboarding?", env=env)
    cost = result.stdout[result.stdout.index("cost") :]
    assert "12345" in cost and "678" in cost and '("web_fetch")' in cost
    assert "…" not in cost
    assert max(map(len, cost.splitlines())) <= columns


def test_trailing_backslash_prints_once(tiny, scripted_server) -> None:
    ghost = "web_fetch\\"
    scripted_server.add(
        tool_call(ghost, {"url": "http://example.com"}),
        tool_call("docs_search", {"query": "onboarding"}),
        reply(_answer("path is C:\\temp\\")),
    )
    env = {"TINY_BASE_URL": scripted_server.url, "COLUMNS": "200"}
    digest = tiny("invoke", "docs-finder", "where is the temp folder?", env=env).stdout
    assert re.search(r"│ path is C:\\temp\\ +│", digest)
    assert '("web_fetch\\\\")' in digest  # the cost table's ghost, quoted as JSON quotes it
    shown = tiny("runs", "show", "1", env={"COLUMNS": "200"}).stdout
    assert 'result of "web_fetch\\\\" · ' in shown and "\\\\ " not in shown
