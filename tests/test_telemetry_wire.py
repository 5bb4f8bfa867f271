"""OpenTelemetry on the wire: what a `tiny` subprocess sends to a loopback OTLP/HTTP receiver.

The receiver is a small http.server on 127.0.0.1 that decodes each ExportTraceServiceRequest
(protobuf, from opentelemetry-proto) as a collector would. The model is the scripted server.
Checked: a re-routed `tiny delegate` arrives as one trace of GenAI spans with the key nowhere
in the bytes; an MCP `delegate` with a `traceparent` continues the host's trace; with tracing
off nothing of OpenTelemetry is imported; on without the SDK, one warning and the run goes on.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("opentelemetry.proto")

from mcp import Client, StdioServerParameters
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue

from tiny_cli.testing import reply, respond, tool_call

from .test_reroute import REFUSAL, TASK, WEB_OK, reroute_cards

KEY = "tiny-sentinel-key-0123456789abcdef"
HOST_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
HOST_SPAN = "00f067aa0ba902b7"
WAIT_SECONDS = 30  # for spans a finished process exported (a generous cap, never a sleep)


class Receiver:
    """An OTLP/HTTP trace receiver on loopback: keeps every request's bytes, decodes spans."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []
        received = self.bodies

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.append(body)
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def spans(self) -> list[dict[str, Any]]:
        """Every span received, as plain dicts: name, ids (hex), attributes, events, status."""
        found = []
        for body in self.bodies:
            request = ExportTraceServiceRequest.FromString(body)
            for resource in request.resource_spans:
                for scope in resource.scope_spans:
                    found += [_span(s, resource.resource) for s in scope.spans]
        return found

    def wait_for(self, name: str) -> list[dict[str, Any]]:
        """The spans, once one named `name` has arrived."""
        deadline = time.monotonic() + WAIT_SECONDS
        while not any(s["name"] == name for s in self.spans()):
            assert time.monotonic() < deadline, f"no {name} span arrived"
            time.sleep(0.05)
        return self.spans()


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return tuple(_value(v) for v in value.array_value.values)
    return getattr(value, kind) if kind else None


def _attributes(pairs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in pairs}


def _span(span: Any, resource: Any) -> dict[str, Any]:
    return {
        "name": span.name,
        "trace": span.trace_id.hex(),
        "id": span.span_id.hex(),
        "parent": span.parent_span_id.hex(),
        "attributes": _attributes(span.attributes),
        "events": [(e.name, _attributes(e.attributes)) for e in span.events],
        "error": span.status.code == 2,
        "resource": _attributes(resource.attributes),
    }


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    """A loopback OTLP/HTTP receiver for this test."""
    server = Receiver()
    yield server
    server.server.shutdown()
    server.server.server_close()


def _env(tmp_path: Path, model: Any, receiver: Receiver, capture: bool) -> dict[str, str]:
    """The environment of a traced `tiny`: the re-route cards, the model, the collector."""
    cards = tmp_path / "cards"
    if not cards.exists():
        reroute_cards(cards, "policy-docs", "policy-web")
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TINY_"))}
    return {
        **keep,
        "TINY_HOME": str(tmp_path / "home"),
        "TINY_CARDS": str(cards),
        "TINY_EMBEDDER": "hashing",
        "TINY_BASE_URL": model.url,
        "TINY_API_KEY": KEY,
        "TINY_PROJECT": "none",
        "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url,
        "OTEL_SERVICE_NAME": "tiny-test",
        "OTEL_BSP_SCHEDULE_DELAY": "50",  # export as it goes
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true" if capture else "false",
    }


def _script(model: Any) -> None:
    """The first card: a ghost call, a search, a refusal naming the key; the second answers."""
    model.add(
        tool_call("http_get", {"url": "https://x.test"}, call_id="c-ghost"),
        tool_call("docs_search", {"query": "travel"}, call_id="c-search"),
        reply(json.dumps({**REFUSAL, "summary": f"no page; key {KEY}"})),
        reply(json.dumps(WEB_OK)),
    )


def _tiny(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "tiny_cli", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
@pytest.mark.parametrize("capture", [False, True])
def test_a_re_routed_delegate_reaches_the_collector_as_one_trace(
    tmp_path, scripted_server, receiver, capture
) -> None:
    _script(scripted_server)
    done = _tiny(_env(tmp_path, scripted_server, receiver, capture), "delegate", TASK, "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["routing"]["rerouted_from"] == "policy-docs"
    spans = receiver.wait_for("delegate")
    assert len({s["trace"] for s in spans}) == 1
    names = sorted(s["name"] for s in spans)
    assert names.count("delegate") == 1 and names.count("tiny.route") == 1
    [task] = [s for s in spans if s["name"] == "delegate"]
    under_task = [s["name"] for s in spans if s["parent"] == task["id"]]
    assert sorted(under_task) == [
        "invoke_agent policy-docs",
        "invoke_agent policy-web",
        "tiny.route",
    ]
    agents = {s["name"].split()[1]: s for s in spans if s["name"].startswith("invoke_agent")}
    docs, web = agents["policy-docs"], agents["policy-web"]
    assert [s["name"] for s in spans if s["parent"] == docs["id"]].count(
        "execute_tool docs_search"
    ) == 1
    assert ("tiny.ghost_call", {"gen_ai.tool.name": "http_get", "tiny.ghost_calls": 1}) in docs[
        "events"
    ]
    assert (
        len([s for s in spans if s["parent"] == web["id"] and s["name"].startswith("chat ")]) == 1
    )
    for span in spans:
        a = span["attributes"]
        if span["name"].startswith(("chat ", "invoke_agent ")):
            assert {"gen_ai.operation.name", "gen_ai.provider.name", "gen_ai.request.model"} <= set(
                a
            )
        if span["name"].startswith("chat "):
            assert {"gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"} <= set(a)
            assert {"gen_ai.response.finish_reasons", "gen_ai.request.max_tokens"} <= set(a)
        if span["name"].startswith("execute_tool "):
            assert {"gen_ai.tool.name", "gen_ai.tool.call.id", "gen_ai.tool.type"} <= set(a)
    assert task["resource"]["service.name"] == "tiny-test"
    wire = b"".join(receiver.bodies)
    assert KEY.encode() not in wire
    assert (b"gen_ai.output.messages" in wire) is capture and (b"[redacted]" in wire) is capture


@pytest.mark.slow
def test_an_mcp_delegate_with_a_traceparent_continues_the_hosts_trace(
    tmp_path, scripted_server, receiver
) -> None:
    _script(scripted_server)
    env = _env(tmp_path, scripted_server, receiver, capture=False)
    server = StdioServerParameters(
        command=sys.executable, args=["-m", "tiny_cli", "serve"], env=env
    )
    meta = {"traceparent": f"00-{HOST_TRACE}-{HOST_SPAN}-01", "tracestate": "host=1"}

    async def host() -> Any:
        with anyio.fail_after(120):
            async with Client(server) as client:
                return await client.call_tool("delegate", {"task": TASK}, meta=meta)

    result = anyio.run(host)
    assert not result.is_error and result.structured_content["status"] == "ok"
    spans = receiver.wait_for("delegate")
    assert {s["trace"] for s in spans} == {HOST_TRACE}
    [task] = [s for s in spans if s["name"] == "delegate"]
    assert task["parent"] == HOST_SPAN
    assert sum(s["name"].startswith("invoke_agent ") for s in spans) == 2


PROBE = (
    "import atexit, runpy, sys\n"
    "atexit.register(lambda: print('loaded:', sorted({m.split('.')[1] for m in sys.modules "
    "if m.startswith('opentelemetry.')}), 'tiny_cli.telemetry' in sys.modules, file=sys.stderr))\n"
    "sys.argv = ['tiny', *sys.argv[1:]]\n"
    "runpy.run_module('tiny_cli', run_name='__main__')\n"
)


def _invoke(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-c", PROBE, "invoke", "policy-web", TASK, "--json"]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_tracing_off_imports_nothing_of_opentelemetry(tmp_path, scripted_server, receiver) -> None:
    env = _env(tmp_path, scripted_server, receiver, capture=False)
    scripted_server.add(reply(json.dumps(WEB_OK)), reply(json.dumps(WEB_OK)))
    on = _invoke(env)
    assert on.returncode == 0, on.stderr
    assert "loaded: [" in on.stderr and "'sdk'" in on.stderr and "True" in on.stderr
    del env["OTEL_EXPORTER_OTLP_ENDPOINT"]
    off = _invoke(env)
    assert off.returncode == 0, off.stderr
    assert "loaded: [] False" in off.stderr


def test_tracing_on_without_the_sdk_is_one_warning(tmp_path, scripted_server, receiver) -> None:
    shadow = tmp_path / "no-otel" / "opentelemetry"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('not installed (a test)')\n")
    env = _env(tmp_path, scripted_server, receiver, capture=False)
    env["PYTHONPATH"] = os.pathsep.join([str(shadow.parent), env.get("PYTHONPATH", "")])
    scripted_server.add(reply(json.dumps(WEB_OK)))
    done = _tiny(env, "invoke", "policy-web", TASK, "--json")
    assert done.returncode == 0 and json.loads(done.stdout)["agent_id"] == "policy-web"
    assert done.stderr.splitlines() == [
        "tiny: warning: tracing is on but OpenTelemetry is not installed: "
        "pip install 'tiny-cli[otel]'"
    ]
    assert receiver.bodies == []


def test_a_bench_is_one_span_with_one_span_per_run_under_it(
    tiny, scripted_server, receiver, tmp_path
):
    from .test_bench import TASKS, TURNS, model, write_tasks

    scripted_server.add(*[respond(model)] * TURNS)
    tasks = write_tasks(tmp_path / "bench")
    env = {"TINY_BASE_URL": scripted_server.url, "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}
    result = tiny("bench", "--tasks", str(tasks), "--arm", "all-tools", "--json", env=env)
    assert result.exit_code == 0, result.output
    spans = receiver.wait_for("bench")
    [bench] = [s for s in spans if s["name"] == "bench"]
    assert bench["parent"] == "" and bench["attributes"]["tiny.bench.tasks"] == len(TASKS)
    runs = [s for s in spans if s["parent"] == bench["id"]]
    assert sorted(s["attributes"]["tiny.run"] for s in runs) == sorted(
        f"{t['id']}/all-tools/0" for t in TASKS
    )
    assert all(s["name"].startswith("invoke_agent ") for s in runs)
    assert len({s["trace"] for s in spans}) == 1
