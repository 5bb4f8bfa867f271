"""No store holds the API key: run log, artifacts, recordings, bench reports and run exports.

Each test runs tiny as a user would, with a long random key in TINY_API_KEY and a tool result
that holds it (a loopback page far over the result limit, so it becomes an artifact), then
reads every file the command wrote, byte for byte. The key is random and not shaped like one
(no `sk-`), so only the scrubber's knowledge of the configured key can keep it out.
"""

from __future__ import annotations

import json
import re
import secrets
import sqlite3
from pathlib import Path

import pytest
import yaml

from tiny_cli.bench.pages import PageServer
from tiny_cli.runs import DB_NAME, RunLog
from tiny_cli.secrets import REDACTED, Scrubber, env_secrets, scrubber
from tiny_cli.testing import reply, respond, tool_call

KEY = "tk-" + secrets.token_hex(24)  # a fresh key each session: no file could hold it by chance
PAGE_CHARS = 20_000  # over the 6,000-character result limit: the page becomes an artifact
DEEP_AT = 15_000  # the key's second place: far past the head the model sees
HANDLE = re.compile(r"art_[0-9a-f]{10}")


def _page(key: str) -> str:
    """An HTML page of PAGE_CHARS characters holding `key` in its head and deep inside."""
    filler = " ".join(f"lorem{i % 89}" for i in range(PAGE_CHARS // 6))
    head = f"<html><head><title>Vault</title></head><body><p>token {key} "
    deep = f" the vault token is {key} "
    body = (head + filler)[:DEEP_AT] + deep + filler
    return body[: PAGE_CHARS - len("</p></body></html>")] + "</p></body></html>"


@pytest.fixture
def key_site(tmp_path: Path):
    """Serve /key.html (long, holding KEY) and /short.html (short, holding KEY) on loopback."""
    pages = tmp_path / "key-site"
    pages.mkdir()
    (pages / "key.html").write_text(_page(KEY), encoding="utf-8")
    (pages / "short.html").write_text(f"<p>the token is {KEY}</p>", encoding="utf-8")
    with PageServer(pages) as server:
        yield server.url


@pytest.fixture
def go(tiny, scripted_server, plain_cards, key_site):
    """Run `tiny ARGS` against the scripted server, the page server allowed, the key set."""

    def run(*args: str, key: str | None = KEY):
        env = {
            "TINY_BASE_URL": scripted_server.url,
            "TINY_CARDS": str(plain_cards),
            "TINY_API_KEY": key or "",
        }
        result = tiny(*args, "--allow-host", key_site.split("://", 1)[1], env=env)
        assert "Traceback" not in result.output
        return result

    return run


def _handle_in(request: dict) -> str:
    return HANDLE.findall(json.dumps(request["messages"]))[-1]


def _answer(url: str) -> str:
    return json.dumps({"status": "ok", "summary": f"The token is {KEY}.", "url": url, "title": KEY})


def _files_holding(folder: Path, secret: str) -> list[str]:
    """Every file under `folder` whose bytes hold `secret` (UTF-8, or as JSON escapes it)."""
    needles = {secret.encode(), json.dumps(secret).strip('"').encode()}
    files = [p for p in folder.rglob("*") if p.is_file()]
    assert files, f"nothing under {folder}"
    return [str(p) for p in files if any(n in p.read_bytes() for n in needles)]


def test_invoke_leaves_the_key_in_no_file_under_the_data_dir(
    go, tiny, scripted_server, key_site, home
) -> None:
    url = f"{key_site}/key.html"
    RunLog.open(home).close()
    held = sqlite3.connect(home / DB_NAME)  # another reader: the WAL outlives the command
    held.execute("SELECT count(*) FROM runs").fetchall()
    scripted_server.add(
        tool_call("http_get", {"url": url}),
        respond(lambda r: tool_call("read_artifact", {"handle": _handle_in(r), "query": "vault"})),
        respond(lambda r: tool_call("read_artifact", {"handle": _handle_in(r), "offset": DEEP_AT})),
        reply(_answer(url)),
    )
    recording = home / "recordings" / "run.jsonl"
    task = f"what is the vault token on {url}? (key {KEY})"
    result = go("invoke", "web-reader", task, "--record", str(recording), "--json")
    digest = json.loads(result.stdout)
    try:
        assert result.exit_code == 0 and digest["status"] == "ok", result.output
        assert KEY not in result.output  # the caller's Digest: the model echoed it, redacted
        assert digest["summary"] == f"The token is {REDACTED}."
        assert scripted_server.headers[0]["authorization"] == f"Bearer {KEY}"  # the key in play
        later = json.dumps([r["messages"] for r in scripted_server.requests[1:]])
        assert later.count(KEY) >= 3  # the page head, a passage, a window: all held it
        [artifact] = digest["artifacts"]
        assert recording.is_file() and (home / f"{DB_NAME}-wal").stat().st_size > 0
        assert _files_holding(home, KEY) == []
    finally:
        held.close()
    shown = tiny("artifacts", "show", artifact["handle"]).stdout
    assert shown.count(REDACTED) == 2 and artifact["chars"] == len(shown)
    assert artifact["chars"] == PAGE_CHARS - 2 * (len(KEY) - len(REDACTED))


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_a_bench_report_written_with_out_holds_no_key(
    tiny, scripted_server, tmp_path, home
) -> None:
    folder = tmp_path / "bench"
    (folder / "pages").mkdir(parents=True)
    (folder / "pages" / "key.html").write_text(_page(KEY), encoding="utf-8")
    task = {
        "id": "vault",
        "task": "read {site}/key.html and tell me the vault token",
        "expected_agent": "web-reader",
        "expect": {"url": "{site}/key.html"},
    }
    (folder / "tasks.yaml").write_text(yaml.safe_dump([task]), encoding="utf-8")

    def model(request: dict):
        asked = request["messages"][1]["content"]
        url = re.search(r"https?://\S+?key\.html", asked).group(0)
        called = any(m.get("tool_calls") for m in request["messages"])
        return reply(_answer(url)) if called else tool_call("http_get", {"url": url})

    scripted_server.add(*[respond(model)] * 20)
    report = tmp_path / "report.json"
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_API_KEY": KEY}
    args = ("--out", str(report), "--record", str(home / "bench.jsonl"), "--json")
    result = tiny("bench", "--tasks", str(folder / "tasks.yaml"), *args, env=env)
    assert result.exit_code == 0, result.output
    assert KEY in json.dumps(scripted_server.requests)  # the page reached the model
    assert KEY not in result.stdout and REDACTED in result.stdout  # the answers held it
    assert REDACTED in report.read_text("utf-8") and KEY not in report.read_text("utf-8")
    assert (home / "bench.jsonl").is_file() and (home / DB_NAME).is_file()
    assert _files_holding(home, KEY) == []


def test_the_digest_panel_shows_no_key(go, scripted_server, key_site) -> None:
    url = f"{key_site}/short.html"
    scripted_server.add(tool_call("http_get", {"url": url}), reply(_answer(url)))
    result = go("invoke", "web-reader", f"what is the token on {url}?")
    assert result.exit_code == 0, result.output
    assert KEY in json.dumps(scripted_server.requests[1]["messages"])  # the page reached it
    assert KEY not in result.output and REDACTED in result.output


def test_a_scrubbed_recording_still_replays(go, scripted_server, key_site, home) -> None:
    url = f"{key_site}/short.html"
    scripted_server.add(tool_call("http_get", {"url": url}), reply(_answer(url)))
    recording = home / "short.jsonl"
    task = f"what is the token on {url}?"
    go("invoke", "web-reader", task, "--record", str(recording), "--json")
    assert KEY in json.dumps(scripted_server.requests[1]["messages"])
    assert KEY not in recording.read_text("utf-8")
    # a replay needs no key: the requests are matched by what they held before scrubbing
    replayed = go("invoke", "web-reader", task, "--replay", str(recording), "--json", key=None)
    digest = json.loads(replayed.stdout)
    assert replayed.exit_code == 0 and digest["status"] == "ok", replayed.output
    assert digest["summary"] == f"The token is {REDACTED}."  # as stored: the key never was
    assert len(scripted_server.requests) == 2  # the replay asked no model


def test_runs_export_keeps_out_a_key_set_after_the_run(
    go, tiny, scripted_server, key_site, tmp_path
):
    url = f"{key_site}/short.html"
    scripted_server.add(tool_call("http_get", {"url": url}), reply(_answer(url)))
    go("invoke", "web-reader", f"what is the token on {url}?", key=None)  # no key: logged whole
    plain, scrubbed = tmp_path / "plain.jsonl", tmp_path / "scrubbed.jsonl"
    tiny("runs", "export", "--out", str(plain))
    assert KEY in plain.read_text("utf-8")
    result = tiny("runs", "export", "--out", str(scrubbed), env={"TINY_API_KEY": KEY})
    assert result.exit_code == 0 and KEY not in scrubbed.read_text("utf-8")
    exported = json.loads(scrubbed.read_text("utf-8"))
    assert exported["digest"]["summary"] == f"The token is {REDACTED}."


# --- the scrubber -------------------------------------------------------------------------


def test_the_scrubber_knows_the_environment_and_the_settings_key() -> None:
    assert env_secrets({"TINY_API_KEY": "k-123456789", "OPENAI_API_KEY": ""}) == ["k-123456789"]
    scrub = scrubber("s-987654321", None)
    assert scrub.text("a s-987654321 b") == f"a {REDACTED} b"


def test_the_callers_scrubber_takes_the_known_keys_and_leaves_the_rest() -> None:
    caller = Scrubber([KEY]).for_caller()
    example = "curl -H 'Authorization: Bearer abcdefghijkl' sk-" + "a" * 20
    assert caller.text(f"{example} {KEY}") == f"{example} {REDACTED}"
    assert caller.tree({"password": "hunter22", "k": [KEY]}) == {
        "password": "hunter22",
        "k": [REDACTED],
    }
    assert Scrubber([KEY]).text(example) != example  # a store's scrubber takes the shapes too


def test_a_key_in_a_mappings_key_is_scrubbed_too() -> None:
    assert Scrubber([KEY]).tree({KEY: {"a": 1}, 3: KEY}) == {REDACTED: {"a": 1}, 3: REDACTED}
    assert KEY not in json.dumps(Scrubber([KEY]).document({"fields": {"note": {KEY: 1}}}))


def test_a_digest_is_scrubbed_in_every_text_a_model_or_tool_wrote() -> None:
    from tiny_cli.digest import Attempt, CallRecord, Cost, Digest

    digest = Digest(
        "crm-writer",
        "partial",
        summary=f"s {KEY}",
        fields={"a": {"b": [KEY]}},
        notes_for_caller=(f"n {KEY}",),
        reason=f"r {KEY}",
        calls=(CallRecord("add", "declined", True, {"name": KEY}), CallRecord(KEY, "ghost")),
        cost=Cost(ghost_calls=1, ghost_names=(KEY,)),
        attempts=(Attempt("docs-finder", "refused", f"r {KEY}", f"s {KEY}"),),
    )
    scrubbed = digest.scrubbed(Scrubber([KEY]).for_caller())
    assert KEY in json.dumps(digest.to_json())
    assert KEY not in json.dumps(scrubbed.to_json())
    assert json.dumps(scrubbed.to_json()).count(REDACTED) == 8  # ghost_names too
    assert scrubbed.calls[1].name == REDACTED
    assert scrubbed.status == "partial" and scrubbed.calls[0].outcome == "declined"


def test_a_document_is_scrubbed_whole_and_a_clean_one_kept_as_it_is() -> None:
    scrub = Scrubber([KEY])
    clean = {"a": [1, "two", {"three": None}]}
    assert scrub.document(clean) is clean  # one look, no walk, no copy
    dirty = {"request": {"messages": [{"content": f"page: {KEY}"}]}, "password": "hunter22"}
    assert scrub.document(dirty) == {
        "request": {"messages": [{"content": f"page: {REDACTED}"}]},
        "password": REDACTED,
    }
