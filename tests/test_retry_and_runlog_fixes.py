"""A Retry-After past the budget ends the request at once; the run log names the card a run
ended on when a re-route's model is not there.

The provider talks to the scripted server over loopback with a fake clock and sleep; the
run log is a real SQLite file fed by the real `delegate` or by the events a re-route sends.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.test_provider import FakeTime
from tiny_cli.delegation import delegate
from tiny_cli.digest import Digest, make_brief
from tiny_cli.errors import ProviderTimeout
from tiny_cli.events import Finished, RunStarted
from tiny_cli.provider.client import DEFAULT_MAX_RETRY_AFTER, ChatRequest, OpenAIProvider
from tiny_cli.runs import RunLog
from tiny_cli.runs.query import RunQuery
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, http_error, reply, tool_call
from tiny_cli.workspace import open_workspace

REQUEST = ChatRequest("m", [{"role": "user", "content": "hi"}], [], 50)


def _provider(server: ScriptedServer, fake: FakeTime) -> OpenAIProvider:
    return OpenAIProvider(server.url, sleep=fake.sleep, clock=fake.clock)


# --- 4: the server's own wait is compared with the budget, uncapped -------------------------


@pytest.mark.parametrize("status", [429, 503])
def test_a_retry_after_past_the_budget_ends_the_request_at_once(status: int) -> None:
    fake = FakeTime()
    refusal = http_error(status, headers={"Retry-After": "100"})
    with ScriptedServer([refusal, reply("too early")]) as server, _provider(server, fake) as p:
        with pytest.raises(ProviderTimeout) as info:
            p.complete(REQUEST, timeout=45)
        assert len(server.requests) == 1  # no retry before the server allows one
    assert fake.sleeps == []  # nor a capped wait first
    assert info.value.status == status and "its Retry-After: 100s" in str(info.value)


def test_a_retry_after_past_the_cap_yet_within_the_budget_is_waited_whole() -> None:
    fake = FakeTime()
    wait = DEFAULT_MAX_RETRY_AFTER + 10
    refusal = http_error(429, headers={"Retry-After": f"{wait:g}"})
    with ScriptedServer([refusal, reply("after the wait")]) as server, _provider(server, fake) as p:
        assert p.complete(REQUEST, timeout=wait + 5).content == "after the wait"
    assert fake.sleeps == [wait]  # the server's wait, not the cap: retried when it allows


def test_without_a_deadline_the_cap_still_holds() -> None:
    fake = FakeTime()
    refusal = http_error(429, headers={"Retry-After": "3600"})
    with ScriptedServer([refusal, reply("capped")]) as server, _provider(server, fake) as p:
        assert p.complete(REQUEST).content == "capped"
    assert fake.sleeps == [DEFAULT_MAX_RETRY_AFTER]  # no server parks a caller with no budget


# --- 5: the run row names the card the Digest names -----------------------------------------

TASK = "what does the travel expense policy say about reimbursement"
REFUSAL = json.dumps({"status": "refused", "summary": "Not in the handbook."})
DOCS = """id: policy-docs
summary: Answers travel expense policy questions from the internal handbook.
tools: [docs_search]
returns_required: [source]
budget: {max_tool_calls: 4, max_output_tokens: 400, max_wall_seconds: 45}
"""
WEB = """id: policy-web
summary: Answers travel expense policy questions from the public policy page.
tools: [http_get, html_to_text]
returns_required: [url]
budget: {max_tool_calls: 6, max_output_tokens: 300, max_wall_seconds: 60}
"""


RANKED = (("policy-docs", 9.0), ("policy-web", 8.0))


class Ranked:
    """A router that ranks policy-docs, then policy-web, both over the threshold."""

    def route(self, task: str, top: int = 5) -> SimpleNamespace:
        docs, web = (SimpleNamespace(agent_id=c, score=s) for c, s in RANKED)
        return SimpleNamespace(
            decision="route", agent_id="policy-docs", score=9.0, threshold=1.5,
            candidates=(docs, web),
        )  # fmt: skip


def test_a_refusal_that_stands_when_the_next_model_is_missing_is_logged_on_its_card(
    tmp_path: Path, scripted_server: ScriptedServer
) -> None:
    scripted_server.add(
        tool_call("docs_search", {"query": "travel policy"}),
        reply(REFUSAL),
        http_error(404, "model not found"),  # policy-web's first request
    )
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "policy-docs.yaml").write_text(DOCS, encoding="utf-8")
    (cards / "policy-web.yaml").write_text(WEB, encoding="utf-8")
    ws = open_workspace(load_settings(env={"TINY_HOME": str(tmp_path), "TINY_CARDS": str(cards)}))
    with RunLog.open(tmp_path / "log") as log:
        observer = log.observer("delegate", "delegate", "127.0.0.1", TASK)
        digest = delegate(
            ws, Ranked(), make_brief(TASK), provider=OpenAIProvider(scripted_server.url),  # type: ignore[arg-type]
            observer=observer,
        )  # fmt: skip
        log.flush()
        assert (digest.agent_id, digest.status) == ("policy-docs", "refused")
        [row] = log.runs()
        assert (row.card, row.status) == ("policy-docs", "refused")
        assert [r.id for r in log.runs(RunQuery(card="policy-docs"))] == [row.id]
        assert log.runs(RunQuery(card="policy-web")) == []


def _start(card: str, model: str, mode: str) -> RunStarted:
    return RunStarted(card, model, mode, TASK, 4, 45.0, 400, ({"role": "system", "content": card},))


def test_the_row_takes_model_and_mode_from_the_named_cards_start(tmp_path: Path) -> None:
    with RunLog.open(tmp_path / "log") as log:
        observe = log.observer("delegate", "delegate", "127.0.0.1")
        observe(_start("policy-docs", "small-model", "native"))
        log.flush()  # written as running on the first card
        observe(_start("policy-web", "big-model", "json"))  # the re-route, whose model is absent
        observe(Finished(Digest("policy-docs", "refused", "Not in the handbook."), ()))
        log.flush()
        [row] = log.runs()
        assert (row.card, row.model, row.tool_mode) == ("policy-docs", "small-model", "native")
