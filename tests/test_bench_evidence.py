"""`tiny bench` counts no fabricated answer as right: evidence rules, through the real CLI.

Every test scripts the model exactly (one rule per run, all turns played, nothing more) and
asserts what the bench made of what happened: tool calls, field sources, the scratch CRM.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from tiny_cli.testing import ScriptedServer, Turn, reply, respond, tool_call

from .test_bench import ACME

MUSTERMANN = "please add Mustermann GmbH from Köln as a new customer"
ACME_TASK = "read {site}/acme.html and tell me in two sentences what it is about"
TICKET = "T-98765"  # a number no port and no page holds: only the task does
CRM_TASK = {
    "id": "crm",
    "task": MUSTERMANN,
    "expected_agent": "crm-writer",
    "writes": True,
    "expect": {
        "name": {"value": "Mustermann GmbH", "from_task": True},
        "company_id": {"regex": r"^\d+$"},
    },
}
WEB_TASK = {
    "id": "web",
    "task": ACME_TASK,
    "expected_agent": "web-reader",
    "expect": {"url": {"value": "{site}/acme.html", "from_task": True}, "title": "Acme Corp"},
}


def _answer(**fields: Any) -> Turn:
    return reply(json.dumps({"status": "ok", "summary": "Done.", **fields}))


def _agent(card: str, key: str) -> Callable[[dict], bool]:
    """Match the requests of one run: the card's system prompt and a word of its task."""

    def match(request: dict) -> bool:
        system, task = (m["content"] for m in request["messages"][:2])
        return system.startswith(f"You are {card},") and key in task

    return match


def _link(request: dict) -> str:
    """Return the link in the task (the page server's port is only known when it runs)."""
    task = request["messages"][1]["content"]
    return next(w for w in task.split() if w.startswith("http://"))


def _fetch(request: dict) -> Turn:
    return tool_call("http_get", {"url": _link(request)})


def _acme_answer(**more: str) -> Turn:
    """Answer with the task's link and the page's title, computed when the turn plays."""
    return respond(lambda r: _answer(url=_link(r), title="Acme Corp", **more))


def _write(folder: Path, tasks: list[dict]) -> Path:
    (folder / "pages").mkdir(parents=True, exist_ok=True)
    (folder / "pages" / "acme.html").write_text(ACME)
    path = folder / "tasks.yaml"
    path.write_text(yaml.safe_dump(tasks, allow_unicode=True))
    return path


def _bench(tiny, server: ScriptedServer, tasks: Path, *args: str) -> dict:
    result = tiny(
        "bench", "--tasks", str(tasks), "--json", *args, env={"TINY_BASE_URL": server.url}
    )
    assert result.exit_code == 0, result.output
    server.assert_done()  # every scripted turn played, no request without one
    return json.loads(result.stdout)


def _run(report: dict, task_id: str, arm: str) -> dict:
    (task,) = [t for t in report["tasks"] if t["id"] == task_id]
    (run,) = task["runs"][arm]
    return run


# --- fabricated answers -------------------------------------------------------------------


def test_an_invented_crm_id_is_fabricated_not_right(tiny, scripted_server, tmp_path) -> None:
    """The 1.5B case: "added", company_id 12345, no write call and no record, in both arms.

    Both agents (`first: tool`, the all-tools one like the expected card) are told once to
    call a tool first and invent again. The runner fails crm-writer's run (`unverified_write`,
    invented fields withheld); the all-tools agent may write or not, so its `ok` becomes
    `partial`, `no_evidence`. Either way the bench finds no record: fabricated.
    """
    invented = _answer(company_id="12345", name="Mustermann GmbH")
    scripted_server.on(_agent("crm-writer", "Mustermann"), invented, invented)
    scripted_server.on(_agent("all-tools", "Mustermann"), invented, invented)
    report = _bench(tiny, scripted_server, _write(tmp_path, [CRM_TASK]))
    ends = {"tiny": ("failed", "unverified_write"), "all-tools": ("partial", "no_evidence")}
    for arm in ("tiny", "all-tools"):
        run, summary = _run(report, "crm", arm), report["arms"][arm]
        assert run["tool_calls"] == 0 and run["writes"] == []
        assert (run["status"], run["reason"]) == ends[arm]
        assert run["right"] is False and run["fabricated"] is True
        assert summary["right"] == 0 and summary["fabricated"] == 1
    withheld, kept = _run(report, "crm", "tiny"), _run(report, "crm", "all-tools")
    assert withheld["missing_evidence"] == ["tool_call", "crm_record"]  # no fields to doubt
    assert kept["missing_evidence"] == ["tool_call", "field_source", "crm_record"]
    assert kept["field_sources"]["company_id"] == "model"
    assert _run(report, "crm", "tiny")["routed_ok"] is True


def test_a_returned_id_that_is_no_records_id_is_fabricated(tiny, scripted_server, tmp_path) -> None:
    """A real write, but the answer's company_id is made up: neither a tool's nor the CRM's."""
    scripted_server.on(
        _agent("crm-writer", "Mustermann"),
        tool_call("crm_add_company", {"name": "Mustermann GmbH", "city": "Köln"}),
        _answer(company_id="12345", name="Mustermann GmbH"),
    )
    report = _bench(tiny, scripted_server, _write(tmp_path, [CRM_TASK]), "--arm", "tiny")
    run = _run(report, "crm", "tiny")
    assert (run["status"], run["reason"]) == ("partial", "unsourced_fields")  # never ok
    assert run["writes"] == ["crm_add_company"]
    assert run["fields_matching"] == 2 and run["fields_correct"] == 1  # name: from_task
    assert run["field_sources"]["company_id"] == "model"
    assert run["unsupported_fields"] == ["company_id"]
    assert run["missing_evidence"] == ["field_source", "crm_record"]
    assert run["right"] is False and run["fabricated"] is True


def test_a_web_answer_without_fetching_is_fabricated(tiny, scripted_server, tmp_path) -> None:
    """The URL copied from the task and a plausible title: right on their face, never fetched.

    Both agents (`first: tool`) are told once to call a tool first and answer again.
    """
    scripted_server.on(_agent("web-reader", "acme.html"), _acme_answer(), _acme_answer())
    scripted_server.on(_agent("all-tools", "acme.html"), _acme_answer(), _acme_answer())
    report = _bench(tiny, scripted_server, _write(tmp_path, [WEB_TASK]))
    tiny_run = _run(report, "web", "tiny")
    assert tiny_run["routed_ok"] is True and tiny_run["reason"] == "no_evidence"
    assert tiny_run["fields"] == {"url": "{site}/acme.html", "title": "Acme Corp"}
    assert tiny_run["field_sources"] == {"url": "task", "title": "model"}
    assert tiny_run["fields_matching"] == 2  # right on their face ...
    assert tiny_run["missing_evidence"] == ["tool_call", "field_source"]  # ... never fetched
    for arm in ("tiny", "all-tools"):
        run = _run(report, "web", arm)
        assert run["tool_calls"] == 0
        assert run["right"] is False and run["fabricated"] is True, arm
        assert report["arms"][arm]["fabricated"] == 1 and report["arms"][arm]["right"] == 0


# --- the honest path ----------------------------------------------------------------------


@pytest.mark.slow
def test_the_honest_path_is_right(tiny, scripted_server, tmp_path, home) -> None:
    """Tools called, values from their results, the record in the scratch CRM: right."""
    scripted_server.on(
        _agent("crm-writer", "Mustermann"),
        tool_call("crm_find_company", {"name": "Mustermann"}),
        tool_call("crm_add_company", {"name": "Mustermann GmbH", "city": "Köln"}),
        _answer(company_id=1, name="Mustermann GmbH"),
    )
    scripted_server.on(
        _agent("web-reader", "acme.html"),
        respond(_fetch),
        _acme_answer(),
    )
    report = _bench(tiny, scripted_server, _write(tmp_path, [CRM_TASK, WEB_TASK]), "--arm", "tiny")
    crm, web = _run(report, "crm", "tiny"), _run(report, "web", "tiny")
    assert crm["writes"] == ["crm_add_company"] and crm["unwanted_writes"] == 0
    assert crm["field_sources"] == {"company_id": "tool", "name": "tool"}
    assert web["field_sources"] == {"url": "tool", "title": "tool"}
    for run in (crm, web):
        assert run["status"] == "ok" and run["routed_ok"] is True
        assert run["fields_correct"] == run["fields_expected"] == 2
        assert run["missing_evidence"] == [] and run["unsupported_fields"] == []
        assert run["right"] is True and run["fabricated"] is False
        assert run["wrong_tool_calls"] == 0 and run["recovered_calls"] == 0
    summary = report["arms"]["tiny"]
    assert summary["right"] == 2 and summary["fabricated"] == 0
    assert summary["tool_calls"] == 3 and summary["wrong_tool_calls"] == 0
    assert not (home / "crm.sqlite3").exists()  # the record was in the run's scratch home


@pytest.mark.slow
def test_from_task_accepts_a_field_copied_from_the_task(tiny, scripted_server, tmp_path) -> None:
    """The same copied ticket number counts only where the task file says it may be copied."""
    task = f"read {{site}}/acme.html and tell me in two sentences what it is about, ticket {TICKET}"
    tasks = [
        {
            "id": f"ticket-{mark}",
            "task": f"{task} ({mark})",
            "expected_agent": "web-reader",
            "expect": {"title": "Acme Corp", "ticket": {"value": TICKET, "from_task": allowed}},
        }
        for mark, allowed in (("copyable", True), ("evidence", False))
    ]
    for mark in ("copyable", "evidence"):
        scripted_server.on(
            _agent("web-reader", f"({mark})"),
            respond(_fetch),
            _acme_answer(ticket=TICKET),
        )
    report = _bench(tiny, scripted_server, _write(tmp_path, tasks), "--arm", "tiny")
    copyable, evidence = (_run(report, f"ticket-{m}", "tiny") for m in ("copyable", "evidence"))
    for run in (copyable, evidence):
        assert run["field_sources"]["ticket"] == "task" and run["tool_calls"] == 1
        assert run["fields_matching"] == 2
    assert copyable["right"] is True and copyable["missing_evidence"] == []
    assert evidence["right"] is False and evidence["fabricated"] is True
    assert evidence["unsupported_fields"] == ["ticket"]
    assert evidence["missing_evidence"] == ["field_source"]
    expects = {t["id"]: t["expect"]["ticket"] for t in report["tasks"]}
    assert expects == {
        "ticket-copyable": {"value": TICKET, "from_task": True},
        "ticket-evidence": TICKET,
    }


# --- wrong tools and replays --------------------------------------------------------------


def test_calls_to_tools_the_expected_card_lacks_are_wrong(tiny, scripted_server, tmp_path) -> None:
    """all-tools reads the page, then searches the handbook and the CRM: two wrong-tool calls."""
    scripted_server.on(
        _agent("all-tools", "acme.html"),
        respond(_fetch),
        tool_call("docs_search", {"query": "Acme"}),
        tool_call("crm_find_company", {"name": "Acme"}),
        tool_call("web_search", {"query": "Acme"}),  # a ghost: not counted as a wrong tool
        _acme_answer(),
    )
    report = _bench(tiny, scripted_server, _write(tmp_path, [WEB_TASK]), "--arm", "all-tools")
    run = _run(report, "web", "all-tools")
    assert run["tool_calls"] == 4 and run["ghost_calls"] == 1
    assert run["wrong_tool_calls"] == 2
    assert report["arms"]["all-tools"]["wrong_tool_calls"] == 2


def test_a_replayed_report_says_so_and_shows_no_wall_figures(tiny, tmp_path) -> None:
    onboarding = {
        "id": "onboarding",
        "task": "how did the onboarding process work again",
        "expected_agent": "docs-finder",
        "expect": {"source": {"regex": "onboarding"}},
    }
    tasks, recording = _write(tmp_path / "bench", [onboarding]), tmp_path / "run.jsonl"
    with ScriptedServer() as server:
        for card in ("docs-finder", "all-tools"):
            server.on(
                _agent(card, "onboarding"),
                tool_call("docs_search", {"query": "onboarding"}),
                _answer(source="onboarding.md"),
            )
        recorded = _bench(tiny, server, tasks, "--record", str(recording))
    assert recorded["replayed"] is False
    replayed = tiny("bench", "--tasks", str(tasks), "--json", "--replay", str(recording))
    assert replayed.exit_code == 0, replayed.output
    assert json.loads(replayed.stdout)["replayed"] is True
    shown = tiny("bench", "--tasks", str(tasks), "--replay", str(recording), env={"COLUMNS": "250"})
    assert shown.exit_code == 0, shown.output
    title = shown.stdout.splitlines()[0]
    assert "replayed from" in title and recording.name in shown.stdout.replace("\n", "")
    assert "better ┃" in shown.stdout  # the better-arm column is there, for tokens ...
    assert "wall seconds" not in shown.stdout  # ... but no wall row, and so no wall ratio
    assert "they are the replay's, not the model's" in shown.stdout
