"""Tracing under the machine's OTEL_* variables: one a run cannot follow is one error line, none
stops a run without the SDK, a collector that never answers holds the exit one exporter timeout
at most, and a model server's error that quotes the task reaches no span with capture off.

The real `tiny` (in-process, or a subprocess where the SDK's import-time reads matter) against
the scripted model server and the re-route cards of tests/test_reroute.py, exporting to the
loopback OTLP receiver of tests/test_telemetry_wire.py.
"""

from __future__ import annotations

import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.proto")

from tiny_cli.testing import http_error, reply, respond, tool_call

from .test_reroute import REFUSAL, TASK, WEB_OK, reroute_cards
from .test_telemetry_wire import Receiver, _env, _tiny

EXPORT_TIMEOUT = 2  # seconds: the exporter's, for the collector that never answers


@pytest.fixture
def collector() -> Iterator[Receiver]:
    """A loopback OTLP/HTTP receiver for this test."""
    server = Receiver()
    yield server
    server.server.shutdown()
    server.server.server_close()


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
