"""Review fixes of the run log and its traces: `tiny runs` options before a subcommand, a
failed run's `error.type`, refused arguments scrubbed whole before their cut, `server.port`
from the scheme, and what `--since` says of a date it cannot read."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")  # the traces' tests: the otel extra (a dev dependency)

from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tiny_cli.digest import Digest
from tiny_cli.events import Finished, RunStarted
from tiny_cli.runs import RunLog
from tiny_cli.secrets import scrubber
from tiny_cli.settings import load_settings
from tiny_cli.telemetry import open_tracing
from tiny_cli.testing import http_error, reply, tool_call

KEY = "tinykey-SENTINEL-0123456789abcdef"  # the API key: in no span and no row
TOKEN = "sk-ABCDEFGHIJKLMNOPQRSTUV"  # key-shaped text a server's error message quotes
ANSWER = json.dumps({"status": "ok", "summary": "Two weeks", "source": "onboarding.md"})
TASK = "how long is onboarding"


def _record(home: Path, card: str) -> None:
    """Record one finished run of `card`, as the runner would."""
    with RunLog.open(home) as log:
        observe = log.observer("invoke", "invoke", "127.0.0.1")
        observe(RunStarted(card, "m", "native", f"task for {card}", 4, 30.0, 400, ()))
        observe(Finished(Digest(card, "ok"), [{"role": "user", "content": "task"}]))


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--card", "crm-writer", "delete", "--older-than", "0s", "--yes"],
            "--card before `delete`: `tiny runs delete` has no --card",
        ),
        (["--since", "banana", "export"], "--since before `export`: put it after the subcommand"),
        (["--json", "show", "1"], "--json before `show`: put it after the subcommand"),
        (["--limit", "20", "search", "task"], "--limit before `search`: put it after"),
    ],
)
def test_a_listing_option_before_a_subcommand_is_refused(tiny, home, args, said) -> None:
    _record(home, "docs-finder")
    result = tiny("runs", *args)
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert line.startswith(f"tiny: error: {said}")
    assert len(json.loads(tiny("runs", "--json").stdout)) == 1  # nothing deleted


def test_the_listing_options_still_list(tiny, home) -> None:
    _record(home, "docs-finder")
    _record(home, "crm-writer")
    result = tiny("runs", "--card", "crm-writer", "--json")
    assert result.exit_code == 0
    assert [r["card"] for r in json.loads(result.stdout)] == ["crm-writer"]


def _span_error_types(stderr: str) -> list[str]:
    """Every `error.type` the console exporter wrote (its spans are indented JSON)."""
    return [json.loads(v) for v in re.findall(r'"error\.type": ("(?:[^"\\]|\\.)*")', stderr)]


def test_a_failed_runs_error_type_is_a_class_not_the_servers_message(tiny, scripted_server) -> None:
    body = json.dumps({"error": {"message": f"bad request near {KEY} and {TOKEN}"}})
    scripted_server.add(
        tool_call("docs_search", {"query": "onboarding"}, call_id="c1"), http_error(400, body)
    )
    env = {
        "TINY_BASE_URL": scripted_server.url,
        "TINY_API_KEY": KEY,
        "OTEL_TRACES_EXPORTER": "console",
        # with capture on a failed run's message is on its spans (off: only that it failed)
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true",
    }
    result = tiny("invoke", "docs-finder", TASK, "--json", env=env)
    assert json.loads(result.stdout)["status"] == "failed"
    kinds = _span_error_types(result.stderr)
    assert "failed" in kinds and set(kinds) <= {"failed"}
    assert TOKEN not in result.stderr and KEY not in result.stderr
    assert "[redacted]" in result.stderr  # the message stays, scrubbed, as the status


def test_a_failed_runs_label_reason_is_its_error_type(tiny, scripted_server) -> None:
    ghosts = [tool_call("nope", {}, call_id=f"g{i}") for i in range(4)]
    scripted_server.add(*ghosts)
    env = {"TINY_BASE_URL": scripted_server.url, "OTEL_TRACES_EXPORTER": "console"}
    result = tiny("invoke", "docs-finder", TASK, "--json", "--tool-mode", "native", env=env)
    assert json.loads(result.stdout)["reason"] == "ghost_calls"
    assert "ghost_calls" in _span_error_types(result.stderr)


def test_refused_arguments_are_scrubbed_before_they_are_cut(tiny, scripted_server) -> None:
    # the key straddles the 1,000th character of arguments too long to keep whole
    arguments = json.dumps({"query": "x" * 964 + KEY + "y" * 100_500})
    assert arguments.index(KEY) < 1_000 < arguments.index(KEY) + len(KEY)
    scripted_server.add(
        tool_call("docs_search", arguments, call_id="c1"), reply(ANSWER), reply(ANSWER)
    )
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_API_KEY": KEY}
    assert (
        json.loads(tiny("invoke", "docs-finder", TASK, "--json", env=env).stdout)["cost"][
            "tool_calls"
        ]
        == 1
    )
    exported = tiny("runs", "export").stdout
    [call] = json.loads(exported)["calls"]
    assert call["arguments_chars"] == len(arguments)
    assert "[redacted]" in call["arguments"]
    assert "SENTINEL" not in exported and "tinykey" not in exported


@pytest.mark.parametrize(
    ("base_url", "port"),
    [("https://models.example/v1", 443), ("http://models.example/v1", 80)],
)
def test_server_port_comes_from_the_scheme_when_the_url_names_none(cli_env, base_url, port) -> None:
    memory = InMemorySpanExporter()
    tracing = open_tracing(
        load_settings(env={**cli_env, "TINY_BASE_URL": base_url}), scrubber(), exporter=memory
    )
    observe = tracing.observer("invoke")
    observe(RunStarted("docs-finder", "m", "native", TASK, 4, 30.0, 400, ()))
    observe(Finished(Digest("docs-finder", "ok")))
    tracing.close()
    [agent] = memory.get_finished_spans()
    assert (agent.attributes["server.address"], agent.attributes["server.port"]) == (
        "models.example",
        port,
    )


def test_since_out_of_range_says_what_it_reads(tiny) -> None:
    result = tiny("runs", "--since", "0001-01-01")
    assert result.exit_code == 2
    [line] = result.output.strip().splitlines()
    assert "from 0001-01-02 to 9999-12-30" in line and "calendar" not in line
    assert tiny("runs", "--since", "0001-01-02").exit_code == 0  # the range said is read
    assert tiny("runs", "--since", "9999-12-30").exit_code == 0
    age = tiny("runs", "--since", "99999999999d").output
    assert "reaches before the year 1" in age
