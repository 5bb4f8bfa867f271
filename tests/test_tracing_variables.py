"""Tracing review fixes: bad OTEL_* values are one error line, and only where tiny traces; the
traces-specific protocol wins; a replay miss puts no task on a span; tool calls are output.

The real `tiny` (in-process) against the scripted model server, with the re-route cards of
tests/test_reroute.py, exporting to the loopback OTLP receiver of tests/test_telemetry_wire.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.proto")

from tiny_cli.testing import reply, tool_call

from .conftest import one_error_line
from .test_reroute import REFUSAL, TASK, WEB_OK, reroute_cards
from .test_telemetry_wire import Receiver

KEY = "tiny-sentinel-key-0123456789abcdef"
HEADER_KEY = "hc-secret-abcdef123456"
SECRET_TASK = "customer ACME internal salary figures for the travel policy"


@pytest.fixture
def collector() -> Iterator[Receiver]:
    """A loopback OTLP/HTTP receiver for this test."""
    server = Receiver()
    yield server
    server.server.shutdown()
    server.server.server_close()


@pytest.fixture
def traced(tiny, scripted_server, tmp_path: Path) -> Callable[..., Any]:
    """Run `tiny ARGS` over the re-route cards with the scripted model, plus `env`."""
    cards = reroute_cards(tmp_path / "cards", "policy-docs", "policy-web")
    base = {
        "TINY_BASE_URL": scripted_server.url,
        "TINY_CARDS": str(cards),
        "TINY_EMBEDDER": "hashing",
        "TINY_PROJECT": "none",
        "TINY_API_KEY": KEY,
    }

    def run(*args: str, **env: str) -> Any:
        result = tiny(*args, env={**base, **env})
        assert "Traceback" not in result.output
        return result

    return run


@pytest.mark.parametrize(
    ("env", "named"),
    [
        ({"OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "0"}, "OTEL_BSP_MAX_EXPORT_BATCH_SIZE='0'"),
        (
            {"OTEL_BSP_MAX_QUEUE_SIZE": "100", "OTEL_BSP_MAX_EXPORT_BATCH_SIZE": "1000"},
            "OTEL_BSP_MAX_EXPORT_BATCH_SIZE=1000: more than the queue holds",
        ),
        ({"OTEL_BSP_SCHEDULE_DELAY": "abc"}, "OTEL_BSP_SCHEDULE_DELAY='abc'"),
        ({"OTEL_BSP_EXPORT_TIMEOUT": ""}, "OTEL_BSP_EXPORT_TIMEOUT=''"),
    ],
)
@pytest.mark.parametrize("exporter", ["console", "otlp"])
def test_a_bad_batching_value_is_one_error_line_before_any_run(
    traced, exporter: str, env: dict[str, str], named: str
) -> None:
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"} if exporter == "otlp" else {}
    result = traced("invoke", "policy-docs", TASK, OTEL_TRACES_EXPORTER=exporter, **endpoint, **env)
    assert one_error_line(result).startswith(named)  # no model call: the server has no turn


@pytest.mark.parametrize("var", ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"])
def test_malformed_headers_are_refused_without_showing_the_key(traced, var: str) -> None:
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
        var: f"Authorization: Bearer {HEADER_KEY}",
    }
    result = traced("invoke", "policy-docs", TASK, **env)
    line = one_error_line(result)
    assert line.startswith(f"{var}: not name=value entries") and HEADER_KEY not in result.output


@pytest.mark.parametrize("var", ["OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"])
@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf"])
def test_an_exporter_timeout_that_is_no_positive_number_is_one_error_line(
    traced, var: str, value: str
) -> None:
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", var: value}
    result = traced("invoke", "policy-docs", TASK, **env)
    assert one_error_line(result) == (
        f"{var}={value!r}: give a number of seconds greater than 0, e.g. 10"
    )  # no model call: the server has no turn


def test_the_traces_specific_timeout_wins_and_a_good_one_is_taken(
    traced, scripted_server, collector
) -> None:
    scripted_server.add(reply(json.dumps(WEB_OK)))
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_EXPORTER_OTLP_TIMEOUT": "abc",
        "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2.5",
    }
    result = traced("invoke", "policy-web", TASK, "--json", **env)
    assert result.exit_code == 0
    assert collector.wait_for("invoke_agent policy-web")


def test_well_formed_headers_are_taken(traced, scripted_server, collector) -> None:
    scripted_server.add(reply(json.dumps(WEB_OK)))
    headers = f"Authorization=Bearer%20{HEADER_KEY}, x-team = ops"
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url, "OTEL_EXPORTER_OTLP_HEADERS": headers}
    result = traced("invoke", "policy-web", TASK, "--json", **env)
    assert result.exit_code == 0 and HEADER_KEY not in result.output
    assert collector.wait_for("invoke_agent policy-web")


def _attributes(collector: Receiver, name: str) -> list[dict[str, Any]]:
    return [s["attributes"] for s in collector.wait_for(name) if s["name"] == name]


def test_a_replay_miss_puts_no_task_on_the_spans(traced, scripted_server, collector, tmp_path):
    recording = tmp_path / "rec.jsonl"
    scripted_server.add(reply(json.dumps(REFUSAL)))
    recorded = traced("invoke", "policy-docs", TASK, "--record", str(recording), "--json")
    assert recorded.exit_code != 2 and recording.exists(), recorded.output
    env = {"OTEL_EXPORTER_OTLP_ENDPOINT": collector.url}
    missed = traced("invoke", "policy-docs", SECRET_TASK, "--replay", str(recording), **env)
    assert missed.exit_code != 0 and "no recorded answer" in missed.stderr
    [agent] = _attributes(collector, "invoke_agent policy-docs")
    assert agent["error.type"] == "aborted"
    wire = b"".join(collector.bodies)
    assert b"ACME" not in wire and b"salary" not in wire  # not in the status either


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_TRACES_EXPORTER": "zipkin"},
        {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"},
        {"OTEL_SDK_DISABLED": "maybe", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_BSP_SCHEDULE_DELAY": "x"},
    ],
)
def test_a_command_that_never_traces_ignores_the_tracing_variables(traced, env) -> None:
    result = traced("runs", "export", **env)
    assert result.exit_code == 0, result.output


def test_a_capture_mode_alone_turns_no_tracing_on(traced, scripted_server) -> None:
    scripted_server.add(reply(json.dumps(WEB_OK)))
    capture = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_AND_EVENT"}
    result = traced("invoke", "policy-web", TASK, "--json", **capture)
    assert result.exit_code == 0 and json.loads(result.stdout)["agent_id"] == "policy-web"


def test_an_exporter_tiny_does_not_ship_is_still_an_error_where_it_traces(traced) -> None:
    result = traced("invoke", "policy-docs", TASK, OTEL_TRACES_EXPORTER="zipkin")
    assert one_error_line(result).startswith("OTEL_TRACES_EXPORTER='zipkin'")


def test_the_traces_specific_protocol_wins(traced, scripted_server, collector) -> None:
    scripted_server.add(reply(json.dumps(WEB_OK)))
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
    }
    assert traced("invoke", "policy-web", TASK, "--json", **env).exit_code == 0
    assert collector.wait_for("invoke_agent policy-web")
    flipped = {**env, "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    flipped["OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"] = "grpc"
    refused = one_error_line(traced("invoke", "policy-web", TASK, **flipped))
    assert refused.startswith("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL='grpc'")


@pytest.mark.parametrize(("mode", "captured"), [("SPAN_ONLY", True), ("NO_CONTENT", False)])
def test_a_reply_asking_for_a_tool_is_a_tool_call_part(
    traced, scripted_server, collector, mode: str, captured: bool
) -> None:
    scripted_server.add(
        tool_call("docs_search", {"query": f"travel {KEY}"}, call_id="c-search"),
        reply(json.dumps(REFUSAL)),
    )
    env = {
        "OTEL_EXPORTER_OTLP_ENDPOINT": collector.url,
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": mode,
    }
    traced("invoke", "policy-docs", TASK, "--json", **env)
    asked, answered = _attributes(collector, "chat qwen2.5:7b-instruct")
    if not captured:
        assert "gen_ai.output.messages" not in asked and KEY.encode() not in b"".join(
            collector.bodies
        )
        return
    [message] = json.loads(asked["gen_ai.output.messages"])
    assert message["parts"] == [
        {
            "type": "tool_call",
            "id": "c-search",
            "name": "docs_search",
            "arguments": {"query": "travel [redacted]"},
        }
    ]
    assert message["finish_reason"] == "tool_calls"
    [said] = json.loads(answered["gen_ai.output.messages"])
    assert said["parts"][0]["type"] == "text" and "no_page" in said["parts"][0]["content"]
