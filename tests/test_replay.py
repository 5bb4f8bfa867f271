"""Record and replay: a recorded run answers again with no server, or names what is missing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_cli.errors import ConfigError, ProviderError, ProviderTimeout, ReplayError
from tiny_cli.provider.client import ChatRequest, Completion, OpenAIProvider, ToolCall
from tiny_cli.provider.replay import (
    Recorder,
    Replayer,
    Upgrader,
    Volatile,
    canonical_request,
    read_header,
    request_key,
)
from tiny_cli.testing import ScriptedServer, reply, respond, tool_call

from .test_bench import TURNS, model, write_tasks

SITE = "http://127.0.0.1:40123"
ONBOARDING = "how did the onboarding process work again"


@pytest.fixture
def cli_env(cli_env: dict[str, str], plain_cards: Path) -> dict[str, str]:
    """Replay tests script answers without tool calls: use cards that allow that."""
    return {**cli_env, "TINY_CARDS": str(plain_cards)}


def _without_wall(report: dict) -> dict:
    """Drop what may differ between a run and its replay: wall times, started_at, replayed."""
    report = json.loads(json.dumps(report))
    del report["started_at"], report["replayed"]
    for arm in report["arms"].values():
        del arm["wall_seconds"], arm["wall_median"]
    for task in report["tasks"]:
        for runs in task["runs"].values():
            for run in runs:
                del run["wall_seconds"]
    return report


def _recorded(tiny, tmp_path: Path, *args: str) -> tuple[Path, Path, dict, ScriptedServer]:
    """Record `tiny bench ARGS` against a scripted server that is stopped afterwards."""
    tasks, recording = write_tasks(tmp_path / "bench"), tmp_path / "run.jsonl"
    with ScriptedServer() as server:
        server.add(*[respond(model)] * TURNS)
        result = tiny(
            "bench",
            "--tasks",
            str(tasks),
            "--json",
            "--record",
            str(recording),
            *args,
            env={"TINY_BASE_URL": server.url},
        )
    assert result.exit_code == 0 and not server.errors, result.output
    return tasks, recording, json.loads(result.stdout), server


# --- bench --------------------------------------------------------------------------------


@pytest.mark.slow
def test_recorded_bench_replays_to_the_same_report_without_a_server(tiny, tmp_path) -> None:
    args = ("--repeat", "2", "--concurrency", "3")
    tasks, recording, recorded, server = _recorded(tiny, tmp_path, *args)
    asked = len(server.requests)
    lines = recording.read_text().splitlines()
    assert len(lines) == 1 + asked  # the header, then every exchange
    assert "127.0.0.1:" not in "".join(lines[1:])  # the page server's port is a placeholder
    result = tiny(
        "bench",
        "--tasks",
        str(tasks),
        "--json",
        "--replay",
        str(recording),
        *args,
        env={"TINY_BASE_URL": server.url},
    )  # stopped: any request would fail
    assert result.exit_code == 0, result.output
    replayed = json.loads(result.stdout)
    assert _without_wall(replayed) == _without_wall(recorded)
    assert len(server.requests) == asked  # nothing reached the (stopped) server
    assert replayed["arms"]["all-tools"]["ghost_calls"] == 8  # a real bench, not an empty one


def test_replay_with_a_missing_exchange_names_it(tiny, tmp_path) -> None:
    tasks, recording, _, server = _recorded(tiny, tmp_path, "--arm", "all-tools")
    lines = recording.read_text().splitlines()
    last = json.loads(lines[-1])
    recording.write_text("\n".join(lines[:-1]) + "\n")
    result = tiny(
        "bench",
        "--tasks",
        str(tasks),
        "--replay",
        str(recording),
        "--arm",
        "all-tools",
        env={"TINY_BASE_URL": server.url},
    )
    assert result.exit_code == 2
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith(f"tiny: error: replay {recording}: no recorded answer for run ")
    assert f"run {last['run']} (agent all-tools)" in line


def test_record_and_replay_exclude_each_other(tiny, tmp_path) -> None:
    result = tiny(
        "invoke",
        "docs-finder",
        ONBOARDING,
        "--record",
        str(tmp_path / "a.jsonl"),
        "--replay",
        str(tmp_path / "b.jsonl"),
    )
    assert result.exit_code == 2 and "--record and --replay exclude each other" in result.stderr


# --- invoke and delegate ------------------------------------------------------------------


def test_invoke_replays_its_digest(tiny, tmp_path) -> None:
    recording = tmp_path / "invoke.jsonl"
    args = ("invoke", "docs-finder", ONBOARDING, "--json")
    with ScriptedServer() as server:
        server.add(
            tool_call("docs_search", {"query": "onboarding"}),
            reply('{"status": "ok", "summary": "A buddy and a plan.", "source": "onboarding.md"}'),
        )
        first = tiny(*args, "--record", str(recording), env={"TINY_BASE_URL": server.url})
    again = tiny(*args, "--replay", str(recording), env={"TINY_BASE_URL": server.url})
    assert first.exit_code == again.exit_code == 0
    a, b = json.loads(first.stdout), json.loads(again.stdout)
    for digest in (a, b):
        del digest["cost"]["wall_seconds"], digest["cost"]["caller_tokens"]
    assert a == b and a["fields"] == {"source": "onboarding.md"} and a["cost"]["tool_calls"] == 1
    assert len(server.requests) == 2


def test_invoke_replay_miss_is_a_usage_error_not_a_failed_digest(tiny, tmp_path) -> None:
    recording = tmp_path / "invoke.jsonl"
    with ScriptedServer() as server:
        server.add(reply('{"status": "ok", "summary": "s", "source": "onboarding.md"}'))
        tiny(
            "invoke",
            "docs-finder",
            ONBOARDING,
            "--record",
            str(recording),
            env={"TINY_BASE_URL": server.url},
        )
    result = tiny(
        "invoke",
        "docs-finder",
        "what is our policy on expenses",
        "--json",
        "--replay",
        str(recording),
    )
    assert result.exit_code == 2 and result.stdout == ""
    (line,) = result.stderr.strip().splitlines()
    assert "no recorded answer for run invoke (agent docs-finder)" in line
    assert "'Task: what is our policy on expenses'" in line


def test_delegate_records_and_replays(tiny, tmp_path) -> None:
    recording = tmp_path / "delegate.jsonl"
    args = ("delegate", ONBOARDING, "--json")
    with ScriptedServer() as server:
        server.add(reply('{"status": "ok", "summary": "s", "source": "onboarding.md"}'))
        first = tiny(*args, "--record", str(recording), env={"TINY_BASE_URL": server.url})
    again = tiny(*args, "--replay", str(recording))
    assert first.exit_code == again.exit_code == 0
    a, b = json.loads(first.stdout), json.loads(again.stdout)
    assert a["routing"] == b["routing"] and a["fields"] == b["fields"] == {
        "source": "onboarding.md"
    }


def test_a_delegate_replay_routed_elsewhere_names_both_cards(tiny, seed_copy, tmp_path) -> None:
    recording = tmp_path / "delegate.jsonl"
    with ScriptedServer() as server:
        server.add(reply('{"status": "ok", "summary": "s", "source": "onboarding.md"}'))
        tiny("delegate", ONBOARDING, "--record", str(recording), env={"TINY_BASE_URL": server.url})
    # each exchange is labelled with the card that asked, not with a stand-in for "routed"
    exchanges = [json.loads(x) for x in recording.read_text("utf-8").splitlines()[1:]]
    assert [e["agent"] for e in exchanges] == ["docs-finder"]
    for card in ("docs-finder", "crm-writer"):  # the cards changed: the task routes elsewhere
        (seed_copy / f"{card}.yaml").unlink()
    again = tiny("delegate", ONBOARDING, "--json", "--replay", str(recording),
                 env={"TINY_CARDS": str(seed_copy)})  # fmt: skip
    assert again.exit_code == 2 and again.stdout == ""
    (line,) = again.stderr.strip().splitlines()
    assert "no recorded answer for run delegate (agent web-reader)" in line
    assert line.endswith("; it was recorded for card docs-finder, this run asked web-reader")
    # a recording an older tiny made labelled a delegate's exchanges "routed card": no card
    older = recording.read_text("utf-8").replace('"agent": "docs-finder"', '"agent": "routed card"')
    recording.write_text(older, "utf-8")
    again = tiny("delegate", ONBOARDING, "--json", "--replay", str(recording),
                 env={"TINY_CARDS": str(seed_copy)})  # fmt: skip
    (line,) = again.stderr.strip().splitlines()
    assert again.exit_code == 2 and "recorded for card" not in line


def test_replay_uses_the_recorded_model_unless_told(tiny, tmp_path) -> None:
    recording = tmp_path / "m.jsonl"
    with ScriptedServer() as server:
        server.add(reply('{"status": "ok", "summary": "s", "source": "onboarding.md"}'))
        tiny(
            "invoke",
            "docs-finder",
            ONBOARDING,
            "--model",
            "llama3.1:8b",
            "--record",
            str(recording),
            env={"TINY_BASE_URL": server.url},
        )
    assert read_header(recording)["model"] == "llama3.1:8b"
    assert (
        tiny(
            "invoke",
            "docs-finder",
            ONBOARDING,
            "--replay",
            str(recording),
            env={"TINY_MODEL": "other"},
        ).exit_code
        == 0
    )
    other = tiny("invoke", "docs-finder", ONBOARDING, "--replay", str(recording), "--model", "x")
    assert other.exit_code == 2 and "no recorded answer" in other.stderr


# --- the recording itself -----------------------------------------------------------------


class _Scripted:
    """A Provider that answers from a list (or raises), remembering what it was asked."""

    def __init__(self, *answers: Completion | Exception) -> None:
        self.answers, self.asked = list(answers), 0

    def complete(self, request: ChatRequest, *, timeout: float | None = None) -> Completion:
        self.asked += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def _completion(text: str, calls: tuple[ToolCall, ...] = ()) -> Completion:
    return Completion(text, calls, 10, 5, "stop", {"id": text})


def _ask(provider, text: str = "hi", model: str = "m") -> Completion:
    messages = [{"role": "user", "content": text}]
    return provider.complete(ChatRequest(model, messages, [], 64, agent="web-reader"))


def test_canonical_form_masks_run_specific_values() -> None:
    volatile = Volatile.of({"{site}": SITE, "{home}": "/tmp/tiny-bench-abc"})
    messages = [
        {
            "role": "tool",
            "content": f"{SITE}/a.html saved to /tmp/tiny-bench-abc at 2025-03-01T10:00:00+00:00",
        }
    ]
    text = canonical_request(ChatRequest("m", messages, [], 64), volatile)
    assert "{site}/a.html saved to {home} at {time}" in text
    other = Volatile.of({"{site}": "http://127.0.0.1:51111", "{home}": "/tmp/tiny-bench-xyz"})
    moved = [
        {
            "role": "tool",
            "content": "http://127.0.0.1:51111/a.html saved to "
            "/tmp/tiny-bench-xyz at 2026-01-02T03:04:05+00:00",
        }
    ]
    key = request_key(ChatRequest("m", messages, [], 64), volatile)
    assert request_key(ChatRequest("m", moved, [], 64), other) == key
    assert request_key(ChatRequest("m2", moved, [], 64), other) != key


TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
ACTION = {"type": "json_schema", "json_schema": {"name": "action", "schema": {"type": "object"}}}
STAMPED = [{"role": "user", "content": "ünï at 2025-03-01T10:00:00Z in http://127.0.0.1:5000/x"}]


@pytest.mark.parametrize(
    ("tools", "constraint", "choice", "key"),
    [  # the keys tiny filed these requests under before ChatRequest: shipped recordings hold them
        ([], None, None, "dc0a88fff6144c30d7aefa5f"),
        ([TOOL], None, "required", "411ed4f721d8f24542f18074"),
        ([], ACTION, None, "bc14733cc880b4ce06c3e4fa"),
    ],
)
def test_a_requests_key_is_the_one_recordings_were_filed_under(
    tools: list, constraint: dict | None, choice: str | None, key: str
) -> None:
    volatile = Volatile.of({"{site}": "http://127.0.0.1:5000"})
    request = ChatRequest("m", STAMPED, tools, 64, constraint, choice)
    assert request_key(request, volatile) == key
    same = json.loads(json.dumps(request.parts()))  # the same request, built again
    assert request_key(ChatRequest(**same), volatile) == key


def test_a_recorded_body_is_the_body_sent_and_filed_under_its_key(tmp_path: Path) -> None:
    path, request = tmp_path / "r.jsonl", ChatRequest("m", STAMPED, [TOOL], 64, ACTION, "required")
    volatile = Volatile.of({"{site}": "http://127.0.0.1:5000"})
    with ScriptedServer([reply("ok")]) as server:
        with Recorder(OpenAIProvider(server.url), path, "m", "127.0.0.1") as recorder:
            recorder.for_run("invoke", volatile).complete(request)
        sent = server.requests[0]
    exchange = json.loads(path.read_text(encoding="utf-8").splitlines()[1])
    assert sent == request.body()
    assert list(exchange["body"]) == list(sent)  # in the order sent
    assert exchange["body"]["messages"][0]["content"] == "ünï at {time} in {site}/x"
    assert exchange["key"] == request_key(request, volatile)


def test_answers_replay_per_run_in_order_with_this_runs_values(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    call = ToolCall("c1", "http_get", json.dumps({"url": f"{SITE}/a.html"}))
    inner = _Scripted(
        _completion("first", (call,)),
        _completion("second"),
        _completion("other run"),
        ProviderTimeout("no answer from x within the time budget"),
    )
    with Recorder(inner, path, "m", "127.0.0.1") as recorder:
        run = recorder.for_run("t/tiny/0", Volatile.of({"{site}": SITE}))
        assert _ask(run).content == "first" and _ask(run).content == "second"  # same request twice
        assert _ask(recorder.for_run("t/tiny/1")).content == "other run"
        with pytest.raises(ProviderTimeout):
            _ask(recorder.for_run("t/tiny/2"))
    replayer = Replayer.load(path)
    here = Volatile.of({"{site}": "http://127.0.0.1:50000"})
    run = replayer.for_run("t/tiny/0", here)
    first = _ask(run)
    assert first.tool_calls[0].arguments == json.dumps({"url": "http://127.0.0.1:50000/a.html"})
    assert (first.tokens_in, first.tokens_out, first.raw) == (10, 5, {"id": "first"})
    assert _ask(run).content == "second"
    assert _ask(replayer.for_run("t/tiny/1")).content == "other run"
    with pytest.raises(ProviderTimeout, match="within the time budget"):
        _ask(replayer.for_run("t/tiny/2"))
    with pytest.raises(
        ReplayError,
        match=r"run t/tiny/0 \(agent web-reader\).*'hi'; the recording "
        r"holds 2 exchange\(s\) for this run",
    ):
        _ask(run)  # the FIFO for this request is used up
    assert inner.asked == 4


def test_provider_errors_are_recorded_and_replayed(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    with (
        Recorder(_Scripted(ProviderError("cannot reach x")), path, None, "h") as recorder,
        pytest.raises(ProviderError),
    ):
        _ask(recorder.for_run("r"))
    with pytest.raises(ProviderError, match="cannot reach x") as err:
        _ask(Replayer.load(path).for_run("r"))
    assert not isinstance(err.value, ProviderTimeout)


def test_a_line_separator_in_an_answer_stays_in_its_recording_line(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    pasted = "first\u2028second\u0085third"  # str.splitlines splits on both
    with Recorder(_Scripted(_completion(pasted)), path, None, "h") as recorder:
        _ask(recorder.for_run("r"))
    assert _ask(Replayer.load(path).for_run("r")).content == pasted


def test_a_replayed_refusal_keeps_its_http_status(tmp_path) -> None:
    path = tmp_path / "r.jsonl"
    refused = ProviderError("401 Unauthorized", status=401)
    with Recorder(_Scripted(refused), path, None, "h") as recorder, pytest.raises(ProviderError):
        _ask(recorder.for_run("r"))
    with pytest.raises(ProviderError) as err:
        _ask(Replayer.load(path).for_run("r"))
    assert err.value.status == 401


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty file, not a tiny recording"),
        ('{"tiny_recording": 9}\n', ":1: not a tiny recording (format 9, expected 1)"),
        ('{"tiny_recording": 1}\n{"run": "r"}\n', ":2: exchange without a 'key'"),
        (
            '{"tiny_recording": 1}\n{"run": "r", "key": "k"}\n',
            ":2: exchange without a 'completion'",
        ),
        ('{"tiny_recording": 1}\n[1]\n', ":2: a recording line must be a JSON object"),
        ('{"tiny_recording": 1}\n{"run": \n', ":2: not JSON"),
        (
            '{"tiny_recording": 1, "tool_mode": ["json"]}\n',
            ":1: header 'tool_mode' must be a string",
        ),
        ('{"tiny_recording": 1, "model": {"a": 1}}\n', ":1: header 'model' must be a string"),
    ],
)
def test_broken_recordings_name_file_and_line(tmp_path, text, message) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(text)
    for read in (Replayer.load, Upgrader.open):  # a replay, and a replay that upgrades
        with pytest.raises(ConfigError) as err:
            read(path)
        assert str(err.value).startswith(str(path)) and message in str(err.value)


def test_missing_recording_is_a_config_error(tmp_path) -> None:
    with pytest.raises(ConfigError, match="cannot read the recording"):
        Replayer.load(tmp_path / "nope.jsonl")


# --- nothing the user wrote is overwritten --------------------------------------------------


def test_a_run_that_fails_before_any_model_call_keeps_the_old_recording(tiny, tmp_path) -> None:
    (tmp_path / "rec").mkdir()
    recording = tmp_path / "rec" / "keep.jsonl"
    recording.write_text('{"tiny_recording": 1}\n{"precious": true}\n', "utf-8")
    before = recording.read_bytes()
    with ScriptedServer() as server:  # no turns: a request would fail the test
        result = tiny(
            "invoke", "docs-findr", ONBOARDING, "--record", str(recording),
            env={"TINY_BASE_URL": server.url},
        )  # fmt: skip
    assert result.exit_code == 2 and "no card 'docs-findr'" in result.stderr
    assert recording.read_bytes() == before
    assert server.requests == []
    assert sorted(p.name for p in recording.parent.iterdir()) == ["keep.jsonl"]  # no partial


def test_a_recording_appears_whole_when_the_run_ends(tiny, tmp_path) -> None:
    (tmp_path / "rec").mkdir()
    recording = tmp_path / "rec" / "new.jsonl"
    with ScriptedServer() as server:
        server.add(
            reply('{"status": "ok", "summary": "A buddy and a plan.", "source": "onboarding.md"}')
        )
        result = tiny(
            "invoke", "docs-finder", ONBOARDING, "--record", str(recording),
            env={"TINY_BASE_URL": server.url},
        )  # fmt: skip
    assert result.exit_code == 0, result.output
    lines = recording.read_text("utf-8").splitlines()
    assert json.loads(lines[0])["tiny_recording"] and len(lines) == 2
    assert sorted(p.name for p in recording.parent.iterdir()) == ["new.jsonl"]


@pytest.mark.parametrize("output", ["--record", "--out"])
def test_bench_refuses_to_write_over_its_task_file(tiny, tmp_path, output: str) -> None:
    tasks = write_tasks(tmp_path / "bench")
    before = tasks.read_bytes()
    result = tiny("bench", "--tasks", str(tasks), output, str(tasks))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"tiny: error: {tasks}: used as input and output; name another file to write"
    )
    assert tasks.read_bytes() == before


def test_bench_refuses_the_same_file_for_recording_and_report(tiny, tmp_path) -> None:
    tasks = write_tasks(tmp_path / "bench")
    same = tmp_path / "out.json"
    result = tiny("bench", "--tasks", str(tasks), "--record", str(same), "--out", str(same))
    assert result.exit_code == 2 and "--record and --out name the same file" in result.stderr
    assert not same.exists()


def test_a_deeply_nested_recording_line_is_a_one_line_error(tmp_path) -> None:
    path = tmp_path / "deep.jsonl"
    header = json.dumps({"tiny_recording": 1, "model": "m", "base_url": "h"})
    path.write_text(header + "\n" + "[" * 100_000 + "]" * 100_000 + "\n", "utf-8")
    with pytest.raises(ConfigError, match=r"deep\.jsonl:2: JSON nested too deeply"):
        Replayer.load(path)


# --- resuming and replaying several recordings ------------------------------------------------


def test_a_resumed_recording_reuses_answers_and_asks_again_what_failed(tmp_path) -> None:
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    first = _Scripted(_completion("kept"), ProviderTimeout("no answer from x within 1 s"))
    with Recorder(first, old, "m", "h") as recorder:
        assert _ask(recorder.for_run("r/0"), "one").content == "kept"
        with pytest.raises(ProviderTimeout):
            _ask(recorder.for_run("r/1"), "two")
    second = _Scripted(_completion("asked again"), _completion("new run"))
    with Recorder(second, new, "m", "h", resume=Replayer.load(old)) as recorder:
        assert _ask(recorder.for_run("r/0"), "one").content == "kept"  # not asked
        assert _ask(recorder.for_run("r/1"), "two").content == "asked again"  # it timed out
        assert _ask(recorder.for_run("r/2"), "one").content == "new run"  # another run
        assert recorder.resumed == 1 and recorder.answered_from() is not None
    assert second.asked == 2
    lines = [json.loads(line) for line in new.read_text().splitlines()]
    assert lines[0]["resumed_from"] == ["old.jsonl"]
    assert [e.get("resumed", False) for e in lines[1:]] == [True, False, False]
    assert all(e["wall_s"] >= 0 for e in lines[2:])  # what each live answer cost
    replayer = Replayer.load(new)  # the new recording holds every answer, old and new
    assert [
        _ask(replayer.for_run(f"r/{i}"), t).content for i, t in enumerate(["one", "two", "one"])
    ] == [
        "kept",
        "asked again",
        "new run",
    ]


def test_several_recordings_replay_together_and_must_share_a_model(tmp_path) -> None:
    paths = [tmp_path / "a.jsonl", tmp_path / "b.jsonl", tmp_path / "c.jsonl"]
    for path, name, text in zip(paths, ["m", "m", "other"], ["from a", "from b", "c"], strict=True):
        with Recorder(_Scripted(_completion(text)), path, name, "h") as recorder:
            _ask(recorder.for_run(f"run-{path.stem}"))
    both = Replayer.load(paths[:2])
    assert _ask(both.for_run("run-a")).content == "from a"
    assert _ask(both.for_run("run-b")).content == "from b"
    assert both.answered_from() == f"{paths[0]}, {paths[1]}"
    with pytest.raises(
        ConfigError, match=r"recordings of different models: .*a.jsonl: 'm'.*c.jsonl: 'other'"
    ):
        Replayer.load([paths[0], paths[2]])


def test_resume_needs_record_and_the_same_model(tiny, tmp_path) -> None:
    recording = tmp_path / "old.jsonl"
    with Recorder(_Scripted(_completion("x")), recording, "some-model", "h") as recorder:
        _ask(recorder.for_run("r"))
    result = tiny("bench", "--resume", str(recording), "--no-log")
    assert result.exit_code == 2 and "--resume needs --record" in result.output
    assert "Traceback" not in result.output
    args = ("bench", "--resume", str(recording), "--record", str(tmp_path / "new.jsonl"))
    result = tiny(*args, "--model", "another-model", "--no-log")
    assert (
        result.exit_code == 2
        and "recorded model 'some-model', not 'another-model'" in result.output
    )
    assert not (tmp_path / "new.jsonl").exists()


# --- broken input: one line, never a traceback (issue 21) ------------------------------------


@pytest.mark.parametrize(
    ("completion", "message"),
    [
        ('{"tool_calls": [["a", "b"]]}', "'tool_calls' must be a list of [id, name, arguments]"),
        ('{"tool_calls": "abc"}', "'tool_calls' must be a list"),
        ('{"tokens_in": "abc"}', "'tokens_in' must be a whole number, got 'abc'"),
        ('{"content": 5}', "'content' must be a string or null"),
    ],
)
def test_a_recording_with_wrong_types_is_a_one_line_error(tiny, tmp_path, completion, message):
    path = tmp_path / "rec.jsonl"
    path.write_text(
        '{"tiny_recording": 1, "model": "m"}\n'
        f'{{"run": "invoke", "key": "k", "completion": {completion}}}\n'
    )
    result = tiny("invoke", "docs-finder", "x", "--replay", str(path))
    assert result.exit_code == 2
    assert result.stderr.startswith(f"tiny: error: {path}:2: ") and message in result.stderr


def test_a_recording_that_is_not_a_regular_file_is_refused_before_reading(tiny) -> None:
    result = tiny("invoke", "docs-finder", "x", "--replay", "/dev/zero")  # would read forever
    assert result.exit_code == 2 and "/dev/zero: not a regular file" in result.stderr


def test_recording_into_a_folder_is_refused_at_the_start(tiny, tmp_path) -> None:
    result = tiny("invoke", "docs-finder", "x", "--record", str(tmp_path))
    assert result.exit_code == 2 and "is a folder; --record needs a file name" in result.stderr


def test_recording_never_replaces_a_file_that_is_no_recording(tiny, tmp_path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_bytes(b"my notes\n")  # the run would fail (nothing listens), then replace it
    result = tiny("invoke", "docs-finder", "x", "--record", str(notes))
    assert result.exit_code == 2
    assert result.stderr == (
        f"tiny: error: {notes}: is there and is no tiny recording; --record does not replace it\n"
    )
    assert notes.read_bytes() == b"my notes\n"
    assert not list(tmp_path.glob("*partial"))  # refused before anything was opened


def _interrupted(path: Path, *answers: str) -> Recorder:
    """Record one exchange per answer to `path`, then stop as Ctrl-C does."""
    recorder = Recorder(_Scripted(*map(_completion, answers)), path, "m", "h")
    with pytest.raises(KeyboardInterrupt), recorder:
        for n in range(len(answers)):
            _ask(recorder.for_run(f"r/{n}"))
        raise KeyboardInterrupt
    return recorder


def test_ctrl_c_keeps_an_earlier_interrupted_recording_and_writes_beside_it(tmp_path) -> None:
    path = tmp_path / "rec.jsonl"
    first = _interrupted(path, "one", "two", "three")
    earlier = tmp_path / "rec.interrupted.jsonl"
    assert first.kept_on_interrupt() == earlier
    held = earlier.read_bytes()
    second = _interrupted(path, "four")  # no --resume: it holds less than the first
    assert earlier.read_bytes() == held
    assert second.kept_on_interrupt() == tmp_path / "rec.interrupted.2.jsonl"
    assert (
        _ask(Replayer.load(tmp_path / "rec.interrupted.2.jsonl").for_run("r/0")).content == "four"
    )
    assert _ask(Replayer.load(earlier).for_run("r/2")).content == "three"
    assert not path.exists()


def test_a_file_of_yours_where_an_interrupted_recording_goes_is_refused_at_the_start(
    tmp_path,
) -> None:
    path, mine = tmp_path / "rec.jsonl", tmp_path / "rec.interrupted.jsonl"
    mine.write_text("my notes, not a recording\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"rec\.interrupted\.jsonl: is there and is no tiny"):
        Recorder(_Scripted(), path, "m", "h")
    mine.unlink()
    mine.symlink_to(tmp_path / "elsewhere.jsonl")
    with pytest.raises(ConfigError, match=r"rec\.interrupted\.jsonl: is a link"):
        Recorder(_Scripted(), path, "m", "h")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.interrupted.jsonl"]


def test_a_recording_with_notes_but_no_exchange_is_kept_with_its_header(tmp_path) -> None:
    """A bench whose every task abstained asked nothing: its recording vanished, and its replay
    said the file did not exist. A command that asked nothing and noted nothing writes none."""
    noted, bare = tmp_path / "noted.jsonl", tmp_path / "bare.jsonl"
    with Recorder(_Scripted(), noted, None, "h") as recorder:
        recorder.note("routes", {"t1": None})
    assert Replayer.load(noted).recorded("routes") == {"t1": None}
    with Recorder(_Scripted(), bare, None, "h"):
        pass
    assert not bare.exists() and not list(tmp_path.glob(".*partial"))
    interrupted = tmp_path / "cut.jsonl"
    with pytest.raises(KeyboardInterrupt), Recorder(_Scripted(), interrupted, None, "h") as rec:
        rec.note("routes", {})
        raise KeyboardInterrupt
    assert list(tmp_path.glob("cut*")) == []  # nothing asked: nothing to resume from
    older = tmp_path / "older.jsonl"  # a command that fails after its notes keeps the old file
    with Recorder(_Scripted(_completion("earlier")), older, None, "h") as recorder:
        _ask(recorder.for_run("r"))
    before = older.read_text("utf-8")
    with (
        pytest.raises(ConfigError, match="not JSON"),
        Recorder(_Scripted(), older, None, "h") as rec,
    ):
        rec.note("routes", {})
        raise ConfigError("learned.jsonl:2: not JSON")
    assert older.read_text("utf-8") == before and "earlier" in before
