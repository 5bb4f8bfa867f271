"""Settings and recordings that were accepted and then misbehaved: each is now refused at the
start in one line, or handled as it should be (a key never written, a rate limit said as one)."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest

from tiny_cli.errors import ConfigError
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.runs import RunLog
from tiny_cli.secrets import env_secrets
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, http_error, reply, respond, tool_calls
from tiny_cli.threads import call_within

from .conftest import one_error_line
from .test_bench import TURNS, model, write_tasks

KEY = "tk-" + secrets.token_hex(24)  # a fresh key each session: no file could hold it by chance
ONBOARDING = "how did the onboarding process work again"
ANSWER = '{"status": "ok", "summary": "A buddy and a plan.", "source": "onboarding.md"}'
INVOKE = ("invoke", "docs-finder", ONBOARDING, "--json")


@pytest.fixture
def cli_env(cli_env: dict[str, str], plain_cards: Path) -> dict[str, str]:
    """Cards whose answers need no tool result; no project file but the one a test names."""
    return {**cli_env, "TINY_CARDS": str(plain_cards), "TINY_PROJECT": "none"}


# --- 1. an upgraded recording is written through the scrubber -----------------------------


def test_an_upgraded_recording_holds_no_key(tiny, tmp_path: Path) -> None:
    task = {"id": "keyed", "task": f"{ONBOARDING} (key {KEY})", "expected_agent": "docs-finder"}
    tasks, recording = write_tasks(tmp_path / "bench", [task]), tmp_path / "run.jsonl"
    keyed = {"TINY_API_KEY": KEY}
    with ScriptedServer() as server:
        server.add(*[respond(model)] * TURNS)
        args = ("bench", "--tasks", str(tasks), "--arm", "tiny", "--record", str(recording))
        made = tiny(*args, env={**keyed, "TINY_BASE_URL": server.url})
    assert made.exit_code == 0 and KEY in json.dumps(server.requests), made.output
    assert KEY not in recording.read_text("utf-8")
    upgraded = tiny("bench", "--replay", str(recording), "--upgrade", env=keyed)
    assert upgraded.exit_code == 0, upgraded.output
    text = recording.read_text("utf-8")
    assert KEY not in text and "[redacted]" in text


# --- 2 and 6. --record never replaces a special file, and names a path it cannot use --------


@pytest.mark.parametrize("kind", ["fifo", "link"])
def test_record_never_replaces_a_fifo_or_a_link(tiny, tmp_path: Path, kind: str) -> None:
    target = tmp_path / "run.jsonl"
    if kind == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(tmp_path / "elsewhere.jsonl")  # where the link points: nothing yet
    with ScriptedServer([reply(ANSWER)]) as server:
        result = tiny(*INVOKE, "--record", str(target), env={"TINY_BASE_URL": server.url})
    line = one_error_line(result)
    assert str(target) in line and ("not a regular file" in line or "is a link" in line)
    assert server.requests == []  # refused before the model was asked
    assert target.is_fifo() if kind == "fifo" else target.is_symlink()


def test_record_under_a_plain_file_names_the_path(tiny, tmp_path: Path) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine\n")
    line = one_error_line(tiny(*INVOKE, "--record", str(notes / "x.jsonl")))
    assert line.startswith(f"{notes / 'x.jsonl'}") and "Not a directory" in line
    assert notes.read_text() == "mine\n"


# --- 3 and 4. an API key no header can carry is refused, never shown ------------------------


@pytest.mark.parametrize(
    "key",
    [f"{KEY}\r\nX-Injected: 1", f"{KEY[:20]}\n{KEY[20:]}", f"{KEY}é", f"{KEY}\x1b[0m"],
    ids=["header-injection", "line-break", "non-ascii", "escape"],
)
def test_a_key_no_header_can_carry_is_refused_without_showing_it(tiny, key: str) -> None:
    with ScriptedServer([reply(ANSWER)]) as server:
        result = tiny(*INVOKE, env={"TINY_BASE_URL": server.url, "TINY_API_KEY": key})
    line = one_error_line(result)
    assert line.startswith("TINY_API_KEY: the API key holds") and "not shown" in line
    assert KEY[3:15] not in result.output and server.requests == []


def test_a_key_from_openai_api_key_names_that_variable() -> None:
    with pytest.raises(ConfigError, match=r"^OPENAI_API_KEY: the API key holds") as caught:
        load_settings(env={"OPENAI_API_KEY": f"{KEY}\x1b[31m", "TINY_PROJECT": "none"})
    assert KEY not in str(caught.value) and caught.value.field == "OPENAI_API_KEY"


def test_a_key_pasted_with_a_line_break_is_sent_and_scrubbed_without_it(tiny) -> None:
    pasted = {"TINY_API_KEY": f" {KEY}\n"}
    with ScriptedServer([reply(ANSWER)]) as server:
        result = tiny(*INVOKE, env={**pasted, "TINY_BASE_URL": server.url})
    assert result.exit_code == 0, result.output
    assert server.headers[0]["authorization"] == f"Bearer {KEY}"
    assert env_secrets(pasted) == [KEY]  # the scrubber looks for the key that was sent


# --- 5. a wall scale has an upper bound, and a deadline never overflows ---------------------


@pytest.mark.parametrize("source", ["--wall-scale", "TINY_WALL_SCALE", "tiny.toml"])
def test_a_huge_wall_scale_is_refused_naming_where_it_was_set(
    tiny, tmp_path: Path, source: str
) -> None:
    flags, env = [], {}
    if source == "--wall-scale":
        flags = ["--wall-scale", "1e9"]
    elif source == "TINY_WALL_SCALE":
        env = {"TINY_WALL_SCALE": "1e9"}
    else:
        project = tmp_path / "tiny.toml"
        project.write_text("wall_scale = 1e10\n")
        env = {"TINY_PROJECT": str(project)}
    with ScriptedServer([reply(ANSWER)]) as server:
        result = tiny(*INVOKE, *flags, env={**env, "TINY_BASE_URL": server.url})
    line = one_error_line(result)
    assert source in line and "at most 1000" in line and server.requests == []


@pytest.mark.parametrize("seconds", [1e12, float("inf")])
def test_a_deadline_past_the_longest_wait_still_returns(seconds: float) -> None:
    assert call_within(seconds, lambda: "done") == "done"


# --- 7. a rate limit that outlasts the budget is said as one --------------------------------


def test_a_retry_after_longer_than_the_budget_is_a_rate_limit(tiny) -> None:
    with ScriptedServer([http_error(429, headers={"Retry-After": "120"})]) as server:
        result = tiny(*INVOKE, "--wall-scale", "0.5", env={"TINY_BASE_URL": server.url})
    digest = json.loads(result.stdout)
    assert result.exit_code == 5 and digest["status"] == "failed", result.output
    assert digest["reason"] == "rate_limited"
    notes = " ".join(digest["notes_for_caller"])
    assert "HTTP 429 (rate limited)" in notes and "was slow" not in notes
    assert len(server.requests) == 1  # no retry: the wait would outlast the 22.5 s budget


# --- 8. a switch variable says on or off, or is refused -------------------------------------


SWITCHES = ["TINY_NO_LOG", "TINY_ASK_ROUTE"]  # OpenTelemetry's own are read leniently


@pytest.mark.parametrize("var", SWITCHES)
def test_a_switch_it_cannot_read_is_refused_naming_the_values(var: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env={var: "y", "TINY_PROJECT": "none"})
    assert str(caught.value) == (
        f"{var}='y': use 1, true, yes or on to turn it on, 0, false, no or off to turn it off"
    )


@pytest.mark.parametrize(
    ("value", "logged"),
    [(v, False) for v in ("1", "TRUE", " yes ", "On")]
    + [(v, True) for v in ("0", "False", "NO", "off", "")],
)
def test_no_log_reads_every_on_and_off_word(value: str, logged: bool) -> None:
    assert load_settings(env={"TINY_NO_LOG": value, "TINY_PROJECT": "none"}).log_runs is logged


def test_no_log_it_cannot_read_logs_no_run(tiny, home: Path) -> None:
    with ScriptedServer([reply(ANSWER)]) as server:
        result = tiny(*INVOKE, env={"TINY_BASE_URL": server.url, "TINY_NO_LOG": "y"})
    assert one_error_line(result).startswith("TINY_NO_LOG='y': use 1, true")
    assert server.requests == []
    with RunLog.open(home) as log:
        assert log.runs() == []


# --- 9. an answer that held the key replays ------------------------------------------------


def test_an_answer_that_echoed_the_key_replays(tiny, tmp_path: Path) -> None:
    recording = tmp_path / "invoke.jsonl"
    echoed = tool_calls(("docs_search", {"query": "onboarding"}, "c1"), content=f"key {KEY}")
    with ScriptedServer([echoed, reply(ANSWER)]) as server:
        first = tiny(
            *INVOKE,
            "--record",
            str(recording),
            env={"TINY_BASE_URL": server.url, "TINY_API_KEY": KEY},
        )
    assert first.exit_code == 0 and KEY in json.dumps(server.requests[1]), first.output
    assert KEY not in recording.read_text("utf-8")
    again = tiny(*INVOKE, "--replay", str(recording))  # no key set: a replay needs none
    assert again.exit_code == 0, again.output
    a, b = json.loads(first.stdout), json.loads(again.stdout)
    assert (a["status"], a["fields"], a["cost"]["tool_calls"]) == (
        b["status"],
        b["fields"],
        b["cost"]["tool_calls"],
    )


# --- 10. blank and wrong-typed settings -------------------------------------------------------


def test_a_blank_model_variable_is_refused_as_a_blank_flag_is(tiny) -> None:
    with ScriptedServer([reply(ANSWER)]) as server:
        result = tiny(*INVOKE, env={"TINY_BASE_URL": server.url, "TINY_MODEL": "  "})
    assert one_error_line(result) == "TINY_MODEL: blank; give a value or unset it"
    assert server.requests == []
    assert load_settings(env={"TINY_MODEL": "", "TINY_PROJECT": "none"}).model is None  # unset


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ({"wall_scale": "abc"}, "wall_scale must be a number, got str"),
        ({"wall_scale": True}, "wall_scale must be a number, got bool"),
        ({"model": 5}, "model must be a str, got int"),
        ({"allow_hosts": 5}, "allow_hosts must be a str or a list of str, got int"),
        ({"allow_hosts": ["ok", 5]}, "allow_hosts must be a str or a list of str, got a list "),
        ({"log_runs": "no"}, "log_runs must be True or False, got str"),
        ({"threshold": "1.5"}, "threshold must be a number, got str"),
        ({"api_key": 12345678}, "api_key must be a str, got int"),
        ({"project_file": 3}, "project_file must be a path, got int"),
    ],
)
def test_with_flags_names_the_argument_and_the_kind_it_got(flags: dict, said: str) -> None:
    settings = load_settings(env={"TINY_PROJECT": "none"})
    with pytest.raises(ConfigError) as caught:
        settings.with_flags(**flags)
    assert str(caught.value).startswith(f"with_flags: {said}")
    assert caught.value.field == next(iter(flags))


def test_an_upgrade_never_writes_through_a_link(tiny, tmp_path: Path) -> None:
    real = tmp_path / "real.jsonl"
    real.write_text('{"tiny_recording": 1, "model": "m"}\n', "utf-8")
    link = tmp_path / "link.jsonl"
    link.symlink_to(real)
    line = one_error_line(tiny("bench", "--replay", str(link), "--upgrade"))
    assert line.startswith(f"{link}: is a link") and link.is_symlink()


@pytest.mark.parametrize("key", ["sk-a\rbc", "sk-abc\u200b", "sk-a\nbc"])
def test_the_provider_refuses_a_key_no_header_can_carry_without_showing_it(key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        OpenAIProvider("http://127.0.0.1:9/v1", key)
    assert "api_key" in str(raised.value) and "abc" not in str(raised.value)


def test_the_provider_refuses_a_timeout_no_socket_can_wait() -> None:
    with pytest.raises(ConfigError, match="timeout"):
        OpenAIProvider("http://127.0.0.1:9/v1", timeout=1e12)


SECRET_URL = "https://user:hunter2@example.com/v1?api_key=sk-abcdef123456"


@pytest.mark.parametrize(
    ("env", "args"),
    [
        ({"TINY_EMBEDDER": SECRET_URL}, ["route", "x"]),
        ({"TINY_THRESHOLD": "sk-proj-abcdefghijklmnop"}, ["route", "x"]),
        ({"TINY_THRESHOLD": "hf_TESTKEYabcdef123456"}, ["route", "x"]),
        ({"TINY_TOOL_MODE": SECRET_URL}, ["route", "x"]),
        ({"TINY_ALLOW_HOSTS": "admin:hunter2@127.0.0.1"}, ["invoke", "web-reader", "x"]),
    ],
)
def test_a_setting_error_never_echoes_what_may_be_a_secret(tiny, env, args) -> None:
    result = tiny(*args, env=env)
    assert result.exit_code == 2, result.output
    assert "value not shown" in result.stderr
    for secret in ("hunter2", "abcdef", "TESTKEY"):
        assert secret not in result.output


def test_a_setting_error_still_shows_a_plain_value(tiny, tmp_path: Path) -> None:
    (tmp_path / "tiny.toml").write_text('tool_mode = "fast"\n', "utf-8")
    result = tiny("route", "x", env={"TINY_PROJECT": str(tmp_path / "tiny.toml")})
    assert result.exit_code == 2 and "tool_mode='fast': use one of" in result.stderr
