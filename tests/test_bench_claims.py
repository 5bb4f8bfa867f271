"""What a run claims, and where its values came from: the bench and the Digest tell from data.

A model's own `partial` claims no answer, whatever card gave it; a field is the task's only
where the task holds the value, not merely its longer words.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tiny_cli.testing import ScriptedServer, reply

ONBOARDING = "how did the onboarding process work again"
MUSTERMANN = "please add Mustermann GmbH from Köln as a new customer"
OWN_PARTIAL = {"status": "partial", "summary": "Done.", "company_id": 1, "name": "Mustermann GmbH"}


def _bench(tiny, server: ScriptedServer, tmp_path: Path, task: dict[str, Any]) -> dict:
    path = tmp_path / "tasks.yaml"
    path.write_text(yaml.safe_dump([task], allow_unicode=True), "utf-8")
    result = tiny(
        "bench", "--tasks", str(path), "--arm", "all-tools", "--json",
        env={"TINY_BASE_URL": server.url},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    server.assert_done()
    return json.loads(result.stdout)


def _invoke(tiny, server: ScriptedServer, task: str, answer: dict[str, Any]) -> dict:
    server.add(reply(json.dumps(answer)))
    result = tiny(
        "invoke", "docs-finder", task, "--json", "--tool-mode", "native",
        env={"TINY_BASE_URL": server.url},
    )  # fmt: skip
    assert "Traceback" not in result.output, result.output
    server.assert_done()
    return json.loads(result.stdout)


def test_a_writers_own_partial_is_no_claim_and_never_fabricated(
    tiny, scripted_server, tmp_path
) -> None:
    """The model said `partial` with no tool call: nothing claimed, so nothing fabricated."""
    task = {
        "id": "crm",
        "task": MUSTERMANN,
        "expected_agent": "crm-writer",
        "writes": True,
        "expect": {"name": {"value": "Mustermann GmbH", "from_task": True}},
    }
    # all-tools is `first: tool`: told once to call a tool, it answers the same again
    scripted_server.add(reply(json.dumps(OWN_PARTIAL)), reply(json.dumps(OWN_PARTIAL)))
    report = _bench(tiny, scripted_server, tmp_path, task)
    (run,) = report["tasks"][0]["runs"]["all-tools"]
    assert run["fabricated"] is False and run["missing_evidence"] == []
    assert (run["status"], run["reason"]) == ("partial", "partial_by_agent")
    assert run["right"] is False
    arm = report["arms"]["all-tools"]
    assert arm["fabricated"] == 0
    assert set(arm["missing_evidence"].values()) <= {0}


def test_a_value_the_task_holds_only_in_part_is_not_the_tasks(tiny, scripted_server) -> None:
    """`onboarding.md` is not in "how did the onboarding process work again": the model's."""
    answer = {"status": "ok", "summary": "It takes a week.", "source": "onboarding.md"}
    digest = _invoke(tiny, scripted_server, ONBOARDING, answer)
    assert digest["field_sources"] == {"source": "model"}


@pytest.mark.parametrize(
    ("task", "value"),
    [
        ("what does onboarding.md say about laptops", "onboarding.md"),
        ("what does ONBOARDING.md  say about laptops", "Onboarding.md"),  # case, spacing
        ("add Mustermann GmbH, from Köln", "Mustermann GmbH."),  # punctuation around words
        ("what does §3 of the policy say", "§3"),
    ],
)
def test_a_value_the_task_holds_whole_is_the_tasks(tiny, scripted_server, task, value) -> None:
    answer = {"status": "ok", "summary": "It says so.", "source": value}
    digest = _invoke(tiny, scripted_server, task, answer)
    assert digest["field_sources"] == {"source": "task"}
