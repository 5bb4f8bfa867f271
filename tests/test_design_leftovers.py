"""Leftovers of design review 32: data where there was text, types where there were asserts.

Why a delegate did not re-route is a closed set of reasons kept as data in a recording's header
(the note's words are made from it, an older recording's sentence still replays); the tracing's
export wait comes from the environment it is given, by the same rule that checks the variable.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_delegate_replay import _delegated
from tests.test_reroute import REFUSAL, TASK, Clock
from tiny_cli.digest import Digest
from tiny_cli.provider.replay import read_header
from tiny_cli.settings import load_settings
from tiny_cli.testing import reply

NOT_TRIED = "not re-routed to policy-web after the refusal: "
SHORT = "too little is left of policy-docs's budget"


def _short_recording(tmp_path: Path, server) -> tuple[Path, Digest]:
    """Record a refusal that took 40 of policy-docs's 45 s: too little left for policy-web."""
    clock = Clock()
    server.add(clock.after(40, reply(json.dumps(REFUSAL))))
    recording = tmp_path / "short.jsonl"
    return recording, _delegated(tmp_path, server.url, clock, record=recording)


def _edit_route(recording: Path, **changes: object) -> None:
    """Change the recorded decision's keys (None: drop the key), as a person editing it would."""
    lines = recording.read_text("utf-8").splitlines(keepends=True)
    header = read_header(recording)
    route = {**header["routes"][TASK], **changes}
    route = {k: v for k, v in route.items() if v is not None}
    header = {**header, "routes": {TASK: route}}
    recording.write_text(json.dumps(header) + "\n" + "".join(lines[1:]), encoding="utf-8")


def _replayed_note(tmp_path: Path, recording: Path) -> str:
    """The re-route note of a replay on a clock where no time passes (no server)."""
    replayed = _delegated(tmp_path, "http://127.0.0.1:9/v1", Clock(), replay=recording)
    return replayed.notes_for_caller[-1]


@pytest.mark.slow  # a recording and its replay
def test_the_reason_is_kept_as_a_literal_with_the_budget_left(tmp_path, scripted_server) -> None:
    recording, live = _short_recording(tmp_path, scripted_server)
    route = read_header(recording)["routes"][TASK]
    assert route["not_rerouted"] == "budget_short"
    assert route["budget_left"]["max_wall_seconds"] == 5.0
    assert sorted(route["budget_left"]) == [
        "max_output_tokens",
        "max_tool_calls",
        "max_wall_seconds",
    ]
    assert live.notes_for_caller[-1] == (
        f"{NOT_TRIED}{SHORT}: 5.0 s of wall time left, under the 15.0 s needed"
    )
    assert _replayed_note(tmp_path, recording) == live.notes_for_caller[-1]


@pytest.mark.slow  # a recording and its replay
def test_an_older_recordings_sentence_replays_as_it_was(tmp_path, scripted_server) -> None:
    recording, _ = _short_recording(tmp_path, scripted_server)
    older = "too little is left of policy-docs's budget: said by an older tiny"
    _edit_route(recording, not_rerouted=older, budget_left=None)
    assert _replayed_note(tmp_path, recording) == NOT_TRIED + older


@pytest.mark.slow  # a recording and its replay
def test_a_budget_left_edited_by_hand_leaves_the_numbers_out(tmp_path, scripted_server) -> None:
    recording, _ = _short_recording(tmp_path, scripted_server)
    _edit_route(recording, budget_left={"max_tool_calls": "x", "max_wall_seconds": float("inf")})
    assert _replayed_note(tmp_path, recording) == NOT_TRIED + SHORT


@pytest.mark.parametrize(
    ("env", "seconds"),
    [
        ({}, None),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "2.5"}, 2.5),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "abc", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "4"}, 4.0),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "3", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": ""}, 3.0),
        ({"OTEL_EXPORTER_OTLP_TIMEOUT": "0"}, None),
        ({"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "inf"}, None),
    ],
)
def test_the_exporter_timeout_rule(env: dict[str, str], seconds: float | None) -> None:
    from tiny_cli.setting_rules import otlp_timeout  # here: the revert test collects the rest

    assert otlp_timeout(env) == seconds


def test_the_export_wait_comes_from_the_environment_tracing_is_given(tmp_path, monkeypatch) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tiny_cli.secrets import scrubber
    from tiny_cli.telemetry import DEFAULT_WAIT, open_tracing

    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TIMEOUT", "7")  # the process's: not what it reads
    settings = load_settings(env={"TINY_HOME": str(tmp_path)})
    given = {"OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "2.5", "OTEL_EXPORTER_OTLP_TIMEOUT": "abc"}
    for env, wait in (({}, DEFAULT_WAIT), (given, 2.5)):
        tracing = open_tracing(settings, scrubber(), exporter=InMemorySpanExporter(), env=env)
        assert tracing.wait == wait
        assert tracing.close()
