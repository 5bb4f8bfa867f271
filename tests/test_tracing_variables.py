"""Tracing under the OTEL_* variables: bad values are one error line, and only where tiny traces
(none stops a run without the SDK); the traces-specific protocol wins; a replay miss, or a model
server's error quoting the task with capture off, puts no task on a span; tool calls are
output; a collector that never answers holds the exit one exporter timeout at most.

The real `tiny` (in-process) against the scripted model server, with the re-route cards of
tests/test_reroute.py, exporting to the loopback OTLP receiver of tests/test_telemetry_wire.py.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.proto")

from tiny_cli.testing import http_error, reply, respond, tool_call

from .conftest import one_error_line
from .test_reroute import REFUSAL, TASK, WEB_OK, reroute_cards
from .test_telemetry_wire import Receiver, _env, _tiny

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


# --- the machine's variables, a silent collector, a server error quoting the task ---------


EXPORT_TIMEOUT = 2  # seconds: the exporter's, for the collector that never answers


def test_a_propagator_tiny_does_not_have_leaves_the_run_traced(
    tmp_path, scripted_server, collector
) -> None:
    scripted_server.add(reply(json.dumps(WEB_OK)))
    env = _env(tmp_path, scripted_server, collector, capture=False)
    env["OTEL_PROPAGATORS"] = "tracecontext,baggage,b3"  # b3: a package not installed
    done = _tiny(env, "invoke", "policy-web", TASK, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["agent_id"] == "policy-web"
    assert collector.wait_for("invoke_agent policy-web")


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT", "abc"),
        ("OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT", "-1"),  # the SDK reads this one as it loads
        ("OTEL_SPAN_EVENT_COUNT_LIMIT", "x"),
        ("OTEL_ATTRIBUTE_COUNT_LIMIT", "1.5"),
    ],
)
def test_a_span_limit_that_is_no_whole_number_is_one_error_line(
    tmp_path, scripted_server, collector, var: str, value: str
) -> None:
    env = {**_env(tmp_path, scripted_server, collector, capture=False), var: value}
    done = _tiny(env, "invoke", "policy-web", TASK)  # no model call: the server has no turn
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        f"tiny: error: {var}={value!r}: give a whole number, 0 or more"
    ]


def test_span_limits_the_sdk_takes_are_taken(tiny, scripted_server, tmp_path) -> None:
    scripted_server.add(reply(json.dumps(WEB_OK)))
    limits = {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "64", "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": ""}
    env = _cli_env(tmp_path, scripted_server, OTEL_TRACES_EXPORTER="console", **limits)
    result = tiny("invoke", "policy-web", TASK, "--json", env=env)
    assert result.exit_code == 0 and '"name": "invoke_agent policy-web"' in result.stderr


@pytest.mark.parametrize(
    "env",
    [
        {"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
        {"OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "-1"},
        {"OTEL_BSP_SCHEDULE_DELAY": "soon"},
    ],
)
def test_without_the_sdk_no_tracing_variable_stops_a_run(
    tmp_path, scripted_server, collector, env: dict[str, str]
) -> None:
    shadow = tmp_path / "no-otel" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed (a test)')\n")
    environ = {**_env(tmp_path, scripted_server, collector, capture=False), **env}
    environ["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), environ.get("PYTHONPATH", "")])
    scripted_server.add(reply(json.dumps(WEB_OK)))
    done = _tiny(environ, "invoke", "policy-web", TASK, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["agent_id"] == "policy-web"
    assert done.stderr.splitlines() == [
        "tiny: warning: tracing is on but OpenTelemetry is not installed: "
        "pip install 'tiny-cli[otel]'"
    ]


@pytest.mark.slow
def test_a_collector_that_never_answers_holds_the_exit_one_timeout_at_most(
    tmp_path, scripted_server, collector
) -> None:
    silent = socket.create_server(("127.0.0.1", 0))  # listens, never accepts: no answer comes
    searches = [tool_call("docs_search", {"query": f"travel {n}"}) for n in range(4)]
    scripted_server.add(*searches, reply(json.dumps(REFUSAL)))  # ten spans, one batch each
    env = _env(tmp_path, scripted_server, collector, capture=False)
    env["OTEL_EXPORTER_OTLP_ENDPOINT"] = f"http://127.0.0.1:{silent.getsockname()[1]}"
    env["OTEL_EXPORTER_OTLP_TIMEOUT"] = str(EXPORT_TIMEOUT)
    env["OTEL_BSP_MAX_EXPORT_BATCH_SIZE"] = "1"
    with silent:
        started = time.monotonic()
        done = _tiny(env, "invoke", "policy-docs", TASK, "--json")
        took = time.monotonic() - started
    assert json.loads(done.stdout)["status"] == "refused", done.stderr  # the Digest, whole
    # ten batches, each waiting its timeout, took 20 s and more: the start, the run and one
    # timeout take far less
    assert took < 6 * EXPORT_TIMEOUT, took
    stopped = f"tiny: warning: tracing: stopped waiting for the span export after {EXPORT_TIMEOUT}s"
    assert stopped in done.stderr


def _quoting(status: int) -> Any:
    """A model server's error whose body quotes the request's last message (the task)."""

    def answer(request: dict) -> Any:
        return http_error(status, f"cannot take: {request['messages'][-1]['content']}")

    return respond(answer)


@pytest.mark.parametrize("status", [400, 422])
def test_a_server_error_quoting_the_task_reaches_no_span(
    tiny, scripted_server, collector, tmp_path, status: int
) -> None:
    scripted_server.add(*[_quoting(status)] * 3)  # a re-route may ask the next card
    env = _cli_env(tmp_path, scripted_server, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url)
    result = tiny("delegate", TASK, "--json", env=env)
    assert "Traceback" not in result.output and "cannot take" in result.output  # as the Digest
    spans = collector.wait_for("delegate")
    failed = [s for s in spans if s["error"]]
    assert {s["name"].split()[0] for s in failed} >= {"delegate", "invoke_agent", "chat"}
    assert b"travel expense" not in b"".join(collector.bodies)
    [task] = [s for s in spans if s["name"] == "delegate"]
    said = task["attributes"]["tiny.digest.reason"]
    assert said == "the run failed (its message is on spans only with content capture on)"
    assert task["attributes"]["error.type"] == "failed"


def test_with_capture_on_a_failed_runs_message_is_on_its_spans(
    tiny, scripted_server, collector, tmp_path
) -> None:
    scripted_server.add(*[_quoting(400)] * 3)
    capture = {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    env = _cli_env(tmp_path, scripted_server, OTEL_EXPORTER_OTLP_ENDPOINT=collector.url, **capture)
    tiny("delegate", TASK, "--json", env=env)
    [task] = [s for s in collector.wait_for("delegate") if s["name"] == "delegate"]
    assert "cannot take: " in task["attributes"]["tiny.digest.reason"]


def _cli_env(tmp_path: Path, model: Any, **env: str) -> dict[str, str]:
    """The in-process `tiny`'s environment: the re-route cards, the model, and `env`."""
    cards = tmp_path / "cards"
    if not cards.exists():
        reroute_cards(cards, "policy-docs", "policy-web")
    base = {
        "TINY_BASE_URL": model.url,
        "TINY_CARDS": str(cards),
        "TINY_EMBEDDER": "hashing",
        "TINY_PROJECT": "none",
    }
    return {**base, **env}
