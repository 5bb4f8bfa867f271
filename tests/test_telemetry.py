"""OpenTelemetry spans of a delegated task, caught by the SDK's in-memory exporter.

A real `delegate` against the scripted server, with the hashing embedder routing among the
re-route cards of tests/test_reroute.py: the first card makes a ghost call, searches the
handbook and refuses; the second answers. The tracing observer (tiny_cli.telemetry) turns
the events into one span tree, checked here by name, parent, attribute and event.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tiny_cli.delegation import delegate
from tiny_cli.digest import make_brief
from tiny_cli.events import Ended, Finished, Routed
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.routing.factory import build_router
from tiny_cli.secrets import scrubber
from tiny_cli.settings import load_settings
from tiny_cli.telemetry import ABORTED_UNSAID, open_tracing
from tiny_cli.testing import reply, tool_call
from tiny_cli.workspace import open_workspace

from .test_reroute import REFUSAL, TASK, WEB_OK, reroute_cards

KEY = "tiny-sentinel-key-0123456789abcdef"  # the API key: in no attribute or event


def _delegate(tmp_path: Path, server: Any, capture: bool) -> tuple[list[ReadableSpan], list]:
    """Run the re-routed task with tracing into memory; return the spans and the events."""
    cards = reroute_cards(tmp_path / "cards", "policy-docs", "policy-web")
    env = {
        "TINY_HOME": str(tmp_path),
        "TINY_CARDS": str(cards),
        "TINY_EMBEDDER": "hashing",
        "TINY_BASE_URL": server.url,
        "TINY_API_KEY": KEY,
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true" if capture else "",
    }
    settings = load_settings(env=env)
    ws = open_workspace(settings)
    memory = InMemorySpanExporter()
    tracing = open_tracing(settings, scrubber(KEY), exporter=memory)
    server.add(
        tool_call("http_get", {"url": "https://x.test"}, call_id="c-ghost"),  # not its tool
        tool_call("docs_search", {"query": "travel"}, call_id="c-search", tokens_in=300),
        reply(json.dumps({**REFUSAL, "summary": f"no page; key {KEY}"}), tokens_out=40),
        reply(json.dumps(WEB_OK), tokens_in=200, tokens_out=30),
    )
    events: list = []
    traced = tracing.observer("delegate")
    delegate(
        ws,
        build_router(ws.settings, ws.cards.values()),
        make_brief(TASK),
        provider=OpenAIProvider(server.url, api_key=KEY),
        observer=lambda e: (events.append(e), traced(e)),
    )
    tracing.close()
    return list(memory.get_finished_spans()), events


def _named(spans: list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name == name]


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[str]:
    own = parent.context.span_id
    return [s.name for s in spans if s.parent is not None and s.parent.span_id == own]


def test_a_re_routed_task_is_one_tree_of_genai_spans(tmp_path, scripted_server) -> None:
    spans, events = _delegate(tmp_path, scripted_server, capture=False)
    assert len({s.context.trace_id for s in spans}) == 1  # one trace
    [task] = _named(spans, "delegate")
    assert task.parent is None and task.attributes["tiny.digest.status"] == "ok"
    assert _children(spans, task) == [
        "tiny.route",
        "invoke_agent policy-docs",
        "invoke_agent policy-web",
    ]
    [route] = _named(spans, "tiny.route")
    routed = next(e for e in events if isinstance(e, Routed))
    assert route.attributes["tiny.route.decision"] == "route"
    assert route.attributes["tiny.route.candidates"] == ("policy-docs", "policy-web")
    assert route.attributes["tiny.route.score"] == routed.score
    assert route.attributes["tiny.route.threshold"] == routed.threshold
    [docs] = _named(spans, "invoke_agent policy-docs")
    assert _children(spans, docs) == [
        "chat qwen2.5:7b-instruct",
        "execute_tool http_get",
        "chat qwen2.5:7b-instruct",
        "execute_tool docs_search",
        "chat qwen2.5:7b-instruct",
    ]
    assert docs.attributes["tiny.digest.status"] == "refused"
    assert docs.attributes["tiny.digest.reason"] == "no_page"
    [ghost] = [e for e in docs.events if e.name == "tiny.ghost_call"]
    assert ghost.attributes["gen_ai.tool.name"] == "http_get"
    [web] = _named(spans, "invoke_agent policy-web")
    assert web.attributes["tiny.routing.rerouted_from"] == "policy-docs"
    assert (web.attributes["gen_ai.agent.name"], web.attributes["gen_ai.operation.name"]) == (
        "policy-web",
        "invoke_agent",
    )
    assert [type(e) for e in events if isinstance(e, Ended | Finished)] == [Ended, Ended, Finished]


def test_model_and_tool_spans_carry_the_required_attributes(tmp_path, scripted_server) -> None:
    spans, _ = _delegate(tmp_path, scripted_server, capture=False)
    chats = [s for s in spans if s.name.startswith("chat ")]
    assert len(chats) == 4 and len(scripted_server.requests) == 4
    for chat, request in zip(chats, scripted_server.requests, strict=True):
        a = chat.attributes
        assert a["gen_ai.operation.name"] == "chat"
        assert a["gen_ai.provider.name"] == "openai"
        assert a["gen_ai.request.model"] == request["model"]
        assert a["gen_ai.request.max_tokens"] == request["max_tokens"]  # as sent
        assert a["server.address"] == "127.0.0.1"
    search = chats[1].attributes
    assert (search["gen_ai.usage.input_tokens"], search["gen_ai.response.finish_reasons"]) == (
        300,
        ("tool_calls",),
    )
    refusal = chats[2].attributes
    assert (refusal["gen_ai.usage.output_tokens"], refusal["gen_ai.response.finish_reasons"]) == (
        40,
        ("stop",),
    )
    [ghost] = _named(spans, "execute_tool http_get")
    assert ghost.attributes["gen_ai.tool.call.id"] == "c-ghost"
    assert ghost.attributes["gen_ai.tool.type"] == "function"
    assert (
        ghost.status.status_code is StatusCode.ERROR and ghost.attributes["error.type"] == "ghost"
    )
    [search_call] = _named(spans, "execute_tool docs_search")
    assert search_call.attributes["tiny.tool.outcome"] == "ok"
    assert search_call.status.status_code is StatusCode.UNSET
    assert "gen_ai.tool.call.arguments" not in search_call.attributes  # capture is off
    assert not any("gen_ai.input.messages" in s.attributes for s in spans)


def _everything(spans: list[ReadableSpan]) -> str:
    """Every attribute, event and resource value of every span, as one text."""
    parts = []
    for span in spans:
        parts.append(json.dumps(dict(span.attributes), default=str))
        parts += [json.dumps(dict(e.attributes), default=str) for e in span.events]
        parts.append(json.dumps(dict(span.resource.attributes), default=str))
    return "\n".join(parts)


@pytest.mark.parametrize("capture", [False, True])
def test_content_is_opt_in_and_scrubbed(tmp_path, scripted_server, capture) -> None:
    spans, _ = _delegate(tmp_path, scripted_server, capture=capture)
    text = _everything(spans)
    assert KEY not in text
    [search] = _named(spans, "execute_tool docs_search")
    [docs] = _named(spans, "invoke_agent policy-docs")
    if capture:
        assert json.loads(search.attributes["gen_ai.tool.call.arguments"]) == {"query": "travel"}
        assert "gen_ai.tool.call.result" in search.attributes
        assert TASK in docs.attributes["gen_ai.input.messages"]
        answered = [s for s in spans if "gen_ai.output.messages" in s.attributes]
        assert any("[redacted]" in s.attributes["gen_ai.output.messages"] for s in answered)
    else:
        assert TASK not in text and "gen_ai.output.messages" not in text


# --- span events: a kept artifact, a budget stop, a declined write, the repair --------------


def long_text(topic: str) -> str:
    """Return a long text about a topic.

    Args:
        topic: What the text is about.
    """
    return f"{topic} " * 4000  # over the result limit: kept as an artifact


def save_note(text: str) -> str:
    """Save a note.

    Args:
        text: The note.
    """
    return "saved"


def _invoke(tmp_path: Path, server: Any, card: Any, *turns: Any) -> list[ReadableSpan]:
    """Invoke `card` (tools: long_text, save_note, which writes) with tracing into memory."""
    from tiny_cli.agent.loop import invoke
    from tiny_cli.tools import Registry, tool
    from tiny_cli.tools.artifacts import ArtifactStore

    settings = load_settings(env={"TINY_HOME": str(tmp_path), "TINY_BASE_URL": server.url})
    memory = InMemorySpanExporter()
    tracing = open_tracing(settings, scrubber(), exporter=memory)
    server.add(*turns)
    invoke(
        card,
        make_brief("tell me about onboarding"),
        registry=Registry([tool(long_text), tool(save_note, writes=True)]),
        provider=OpenAIProvider(server.url),
        model="scripted",
        approve=lambda card, tool, arguments: False,  # a person who says no
        observer=tracing.observer("invoke"),
        artifacts=ArtifactStore(tmp_path, scrubber()),
    )
    tracing.close()
    return list(memory.get_finished_spans())


def _events(span: ReadableSpan) -> dict[str, dict[str, Any]]:
    return {e.name: dict(e.attributes or {}) for e in span.events}


def test_a_kept_artifact_a_budget_stop_and_a_declined_write_are_span_events(
    tmp_path, scripted_server
) -> None:
    from tiny_cli.cards.card import Budget, Card

    card = Card(
        "notes", "Reads and notes.", ("long_text", "save_note"), ("result",),
        side_effects="write", budget=Budget(max_tool_calls=2),
    )  # fmt: skip
    spans = _invoke(
        tmp_path,
        scripted_server,
        card,
        tool_call("long_text", {"topic": "onboarding"}, call_id="c1"),
        tool_call("save_note", {"text": "onboarding"}, call_id="c2"),
        reply(json.dumps({"status": "ok", "summary": "Done.", "result": "x"})),
    )
    [agent] = _named(spans, "invoke_agent notes")
    [read] = _named(spans, "execute_tool long_text")
    [write] = _named(spans, "execute_tool save_note")
    kept = _events(read)["tiny.artifact.kept"]
    assert kept["gen_ai.tool.name"] == "long_text" and kept["tiny.artifact.chars"] > 6000
    assert _events(write)["tiny.write.declined"]["tiny.tool.outcome"] == "declined"
    assert _events(agent)["tiny.budget.stop"] == {"tiny.budget.limit": "max_tool_calls"}
    assert agent.attributes["tiny.digest.status"] == "needs_confirmation"


def test_the_repair_is_a_span_event_and_a_failed_run_an_error(tmp_path, scripted_server) -> None:
    from tiny_cli.cards.card import Card

    card = Card("notes", "Reads and notes.", ("long_text",), ("result",))
    bad = reply(json.dumps({"status": "ok", "summary": "Done."}))  # no `result`
    spans = _invoke(tmp_path, scripted_server, card, bad, bad)
    [agent] = _named(spans, "invoke_agent notes")
    assert _events(agent)["tiny.repair"] == {"tiny.repair.count": 1}
    assert agent.attributes["tiny.digest.status"] == "failed"
    assert (
        agent.status.status_code is StatusCode.ERROR and agent.attributes["error.type"] == "schema"
    )


def test_a_ghost_tool_named_as_the_key_never_reaches_a_span(
    tmp_path, scripted_server, monkeypatch
) -> None:
    from tiny_cli.cards.card import Card

    monkeypatch.setenv("TINY_API_KEY", KEY)  # the key the run's scrubber knows
    card = Card("notes", "Reads and notes.", ("long_text",), ("result",))
    spans = _invoke(
        tmp_path,
        scripted_server,
        card,
        tool_call(KEY, {"topic": "x"}, call_id=f"id-{KEY}"),  # a model that echoes the key
        reply(json.dumps({"status": "ok", "summary": "Done.", "result": "x"})),
    )
    names = [s.name for s in spans]
    assert KEY not in _everything(spans) and not any(KEY in n for n in names)
    assert "execute_tool [redacted]" in names
    [agent] = _named(spans, "invoke_agent notes")
    assert _events(agent)["tiny.ghost_call"]["gen_ai.tool.name"] == "[redacted]"


def test_a_run_an_error_ended_ends_its_spans_at_once(tmp_path, scripted_server) -> None:
    from tiny_cli.agent.loop import invoke
    from tiny_cli.cards.card import Card
    from tiny_cli.errors import ProviderError
    from tiny_cli.testing import http_error
    from tiny_cli.tools import Registry, tool

    settings = load_settings(env={"TINY_HOME": str(tmp_path), "TINY_BASE_URL": scripted_server.url})
    memory = InMemorySpanExporter()
    tracing = open_tracing(settings, scrubber(), exporter=memory)
    scripted_server.add(http_error(401))
    card = Card("notes", "Reads and notes.", ("long_text",), ("result",))
    with pytest.raises(ProviderError):
        invoke(card, make_brief("tell me about onboarding"), registry=Registry([tool(long_text)]),
               provider=OpenAIProvider(scripted_server.url), model="scripted",
               observer=tracing.observer("invoke"))  # fmt: skip
    tracing.provider.force_flush()
    spans = list(memory.get_finished_spans())  # before tracing closes: ended with the run
    [agent] = _named(spans, "invoke_agent notes")
    assert agent.attributes["error.type"] == "aborted"
    assert agent.status.description == ABORTED_UNSAID  # its message only with capture on
    tracing.close()


def test_a_run_with_no_model_call_names_its_agent(tmp_path, scripted_server) -> None:
    from tiny_cli.delegation import run_card

    from .conftest import SEED_CARDS

    env = {"TINY_HOME": str(tmp_path), "TINY_CARDS": str(SEED_CARDS)}
    settings = load_settings(env={**env, "TINY_BASE_URL": scripted_server.url})
    memory = InMemorySpanExporter()
    tracing = open_tracing(settings, scrubber(), exporter=memory)
    digest = run_card(open_workspace(settings), "crm-writer", make_brief("add Acme to the CRM"),
                      provider=OpenAIProvider(scripted_server.url),
                      observer=tracing.observer("invoke"))  # fmt: skip
    tracing.close()
    assert digest.status == "needs_confirmation" and scripted_server.requests == []
    [agent] = _named(list(memory.get_finished_spans()), "invoke_agent crm-writer")
    assert (
        agent.attributes["gen_ai.agent.name"] == agent.attributes["gen_ai.agent.id"] == "crm-writer"
    )
