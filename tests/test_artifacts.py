"""Artifacts: a long tool result kept whole under a handle, read back by the agent and the user."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from tiny_cli.agent.calls import DEFAULT_MAX_RESULT_CHARS
from tiny_cli.bench.pages import PageServer
from tiny_cli.errors import ConfigError
from tiny_cli.secrets import Scrubber
from tiny_cli.testing import reply, respond, tool_call
from tiny_cli.tools import ToolCallError
from tiny_cli.tools.artifacts import ArtifactStore, stored_result, window

PAGE_CHARS = 100_000
MARKER = "The vault codeword is zebraquartz."
MARKER_AT = 81_234  # deep in the page: far past the head the model sees
MARGIN = 600  # the artifact note and a json-mode result's framing, beyond the result limit
HANDLE = re.compile(r"art_[0-9a-f]{10}")
GOOD = {"status": "ok", "summary": "A long page about tools.", "title": "Tools"}


def _long_page() -> str:
    """Return an HTML page of exactly PAGE_CHARS characters with MARKER deep inside."""
    words = ("hammer", "chisel", "saw", "plane", "lathe", "drill", "file", "rasp", "clamp", "vice")
    filler = " ".join(words[i % len(words)] + str(i % 97) for i in range(PAGE_CHARS // 6))
    head, tail = "<html><head><title>Tools</title></head><body><p>", "</p></body></html>"
    body = filler[: PAGE_CHARS - len(head) - len(tail)]
    at = MARKER_AT - len(head)
    body = body[:at] + MARKER + body[at + len(MARKER) :]
    page = head + body + tail
    assert len(page) == PAGE_CHARS and page.index(MARKER) == MARKER_AT
    return page


@pytest.fixture
def long_site(tmp_path: Path):
    """Serve the long page on loopback; return (base url, page text)."""
    pages = tmp_path / "long-site"
    pages.mkdir()
    page = _long_page()
    (pages / "long.html").write_text(page, encoding="utf-8")
    with PageServer(pages) as server:
        yield server.url, page


@pytest.fixture
def tiny_run(tiny, scripted_server, plain_cards, long_site):
    """Run `tiny ARGS` against the scripted server with the page server allowed."""

    def go(*args: str):
        env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards)}
        allow = long_site[0].split("://", 1)[1]
        result = tiny(*args, "--allow-host", allow, env=env)
        assert "Traceback" not in result.output
        return result

    return go


def _handle_in(request: dict) -> str:
    found = HANDLE.findall(json.dumps(request["messages"]))
    assert found, "no artifact handle in the request"
    return found[-1]


def _read(**arguments):
    """A scripted read_artifact call for the handle the model was last told about."""
    return respond(lambda r: tool_call("read_artifact", {"handle": _handle_in(r), **arguments}))


def _tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def _last(request: dict) -> str:
    return request["messages"][-1]["content"]


def _fetch_and_read(tiny_run, scripted_server, url: str) -> tuple[int, dict]:
    """Fetch the long page, read a window, a wrong handle and a query; answer. Return the Digest."""
    scripted_server.add(
        tool_call("http_get", {"url": url}),
        _read(offset=50_000, length=2_000),
        tool_call("read_artifact", {"handle": "art_0000000000"}),
        _read(query="vault codeword"),
        reply(json.dumps({**GOOD, "url": url})),
    )
    result = tiny_run("invoke", "web-reader", f"what is the codeword on {url}?", "--json")
    scripted_server.assert_done()
    return result.exit_code, json.loads(result.stdout)


def test_a_long_page_becomes_an_artifact_the_agent_reads(
    tiny_run, scripted_server, long_site
) -> None:
    base, page = long_site
    code, digest = _fetch_and_read(tiny_run, scripted_server, f"{base}/long.html")
    assert code == 0 and digest["status"] == "ok"
    first, window_turn, wrong, query, last = scripted_server.requests
    for request in scripted_server.requests:  # the page never floods the context
        sizes = [len(m["content"] or "") for m in request["messages"]]
        assert max(sizes) <= DEFAULT_MAX_RESULT_CHARS + MARGIN
    handle = _handle_in(window_turn)
    assert "read_artifact" not in _tool_names(first)
    assert _tool_names(window_turn) == ["http_get", "html_to_text", "read_artifact"]
    stored = _last(window_turn)
    assert stored.startswith(page[:DEFAULT_MAX_RESULT_CHARS]) and handle in stored
    assert f"{PAGE_CHARS} characters" in stored and "read_artifact" in stored
    assert page[50_000:52_000] in _last(wrong)
    assert "characters 50000 to 52000 of 100000" in _last(wrong)
    assert "no artifact 'art_0000000000'" in _last(query) and handle in _last(query)
    assert MARKER in _last(last)
    assert [a["handle"] for a in digest["artifacts"]] == [handle]
    artifact = digest["artifacts"][0]
    assert artifact["tool"] == "http_get" and artifact["chars"] == PAGE_CHARS
    assert artifact["preview"].startswith("<html><head><title>Tools")
    cost = digest["cost"]
    assert cost["tool_calls"] == 4 and cost["ghost_calls"] == 0 and cost["ghost_names"] == []


def test_query_passages_come_with_their_offsets(tiny_run, scripted_server, long_site) -> None:
    base, page = long_site
    _fetch_and_read(tiny_run, scripted_server, f"{base}/long.html")
    answer = _last(scripted_server.requests[-1])
    found = [(int(o), int(n)) for o, n in re.findall(r"\[offset (\d+), (\d+) characters\]", answer)]
    assert found == sorted(found) and 1 <= len(found) <= 3
    assert any(o <= MARKER_AT < o + n for o, n in found)
    for offset, chars in found:  # each passage is exactly the page's text at its offset
        assert f"characters]\n{page[offset : offset + chars]}" in answer


def test_artifacts_show_prints_the_whole_page(tiny, tiny_run, scripted_server, long_site) -> None:
    base, page = long_site
    _code, digest = _fetch_and_read(tiny_run, scripted_server, f"{base}/long.html")
    handle = digest["artifacts"][0]["handle"]
    shown = tiny("artifacts", "show", handle)
    assert shown.exit_code == 0 and shown.stdout == page and len(shown.stdout) == PAGE_CHARS
    document = json.loads(tiny("artifacts", "show", handle, "--json").stdout)
    assert document["text"] == page and document["handle"] == handle
    assert document["tool"] == "http_get" and document["chars"] == PAGE_CHARS
    assert document["card"] == "web-reader" and document["created"]


def test_an_artifact_is_readable_in_a_second_invocation(
    tiny_run, scripted_server, long_site
) -> None:
    base, page = long_site
    _code, digest = _fetch_and_read(tiny_run, scripted_server, f"{base}/long.html")
    handle = digest["artifacts"][0]["handle"]
    before = len(scripted_server.requests)
    scripted_server.add(
        tool_call("read_artifact", {"handle": handle, "offset": 90_000, "length": 500}),
        reply(json.dumps({**GOOD, "url": f"{base}/long.html"})),
    )
    result = tiny_run(
        "invoke", "web-reader", "what is near the end?", "--artifact", handle, "--json"
    )
    second = json.loads(result.stdout)
    first, answered = scripted_server.requests[before:]
    assert _tool_names(first) == ["http_get", "html_to_text", "read_artifact"]
    assert handle in first["messages"][1]["content"]
    assert "read_artifact" in first["messages"][0]["content"]
    assert page[90_000:90_500] in _last(answered)
    assert second["status"] == "ok" and second["artifacts"] == []
    assert second["cost"]["tool_calls"] == 1 and second["cost"]["ghost_calls"] == 0


def test_json_mode_offers_read_artifact_once_an_artifact_exists(
    tiny_run, scripted_server, long_site
) -> None:
    url = f"{long_site[0]}/long.html"
    scripted_server.add(
        reply(json.dumps({"tool": "http_get", "arguments": {"url": url}})),
        respond(
            lambda r: reply(
                json.dumps({"tool": "read_artifact", "arguments": {"handle": _handle_in(r)}})
            )
        ),
        reply(json.dumps({**GOOD, "url": url})),
    )
    result = tiny_run("invoke", "web-reader", f"read {url}", "--tool-mode", "json", "--json")
    digest = json.loads(result.stdout)
    first, second, last = scripted_server.requests
    assert "read_artifact" not in json.dumps(first["response_format"])
    branches = second["response_format"]["json_schema"]["schema"]["anyOf"]
    tools = [b["properties"]["tool"]["const"] for b in branches if "tool" in b["properties"]]
    assert tools == ["http_get", "html_to_text", "read_artifact"]
    assert "characters 0 to 4000 of 100000" in _last(last)
    assert digest["status"] == "ok" and digest["cost"]["tool_calls"] == 2
    assert digest["cost"]["ghost_calls"] == 0 and len(digest["artifacts"]) == 1


def test_human_digest_lists_each_artifact(tiny_run, scripted_server, long_site) -> None:
    url = f"{long_site[0]}/long.html"
    scripted_server.add(
        tool_call("http_get", {"url": url}), reply(json.dumps({**GOOD, "url": url}))
    )
    result = tiny_run("invoke", "web-reader", f"read {url}")
    line = next(x for x in result.stdout.splitlines() if x.startswith("artifact: "))
    assert HANDLE.search(line) and "http_get" in line and "100,000 characters" in line


def test_unknown_artifact_handle_is_a_usage_error(tiny, scripted_server) -> None:
    env = {"TINY_BASE_URL": scripted_server.url}
    for handle in ("art_0123456789", "../../etc/passwd"):
        result = tiny("invoke", "web-reader", "read it", "--artifact", handle, env=env)
        assert result.exit_code == 2 and scripted_server.requests == []
        assert result.stderr.strip().splitlines() == [result.stderr.strip()]
        assert "no artifact" in result.stderr
        shown = tiny("artifacts", "show", handle)
        assert shown.exit_code == 2 and "no artifact" in shown.stderr


def test_read_artifact_is_a_ghost_before_any_artifact(run_short, scripted_server) -> None:
    scripted_server.add(
        tool_call("read_artifact", {"handle": "art_0123456789"}),
        reply(json.dumps({**GOOD, "url": "https://example.org"})),
    )
    digest = run_short()
    assert digest["cost"]["ghost_names"] == ["read_artifact"]
    assert "read_artifact" not in _tool_names(scripted_server.requests[0])


@pytest.fixture
def run_short(tiny, scripted_server, plain_cards):
    def go() -> dict:
        env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards)}
        result = tiny("invoke", "web-reader", "summarise https://example.org", "--json", env=env)
        return json.loads(result.stdout)

    return go


# --- the store ----------------------------------------------------------------------------


def test_store_writes_text_and_metadata_whole(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    text = "line one\r\nline two\n" + "x" * 10_000
    artifact = store.save(text, tool="http_get", card="web-reader")
    assert HANDLE.fullmatch(artifact.handle)
    files = sorted(p.name for p in (tmp_path / "artifacts").iterdir())
    assert files == [f"{artifact.handle}.json", f"{artifact.handle}.txt"]  # no temp files left
    meta = json.loads((tmp_path / "artifacts" / f"{artifact.handle}.json").read_text())
    assert (
        meta["tool"] == "http_get" and meta["chars"] == len(text) and meta["card"] == "web-reader"
    )
    assert meta["preview"] == artifact.preview and len(meta["preview"]) <= 120 and meta["created"]
    assert store.get(artifact.handle) == artifact
    assert store.text(artifact) == text  # "\r\n" kept: offsets count what the model was told


def test_store_refuses_handles_that_are_not_handles(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    artifact = store.save("abc", tool="t", card="c")
    for bad in ("../x", artifact.handle + ".txt", "", artifact.handle.upper(), "art_zz"):
        with pytest.raises(ConfigError, match="no artifact"):
            store.get(bad)
    (tmp_path / "artifacts" / f"{artifact.handle}.json").write_text("{broken")
    with pytest.raises(ConfigError, match="is damaged"):  # a broken record: no crash
        store.get(artifact.handle)


def test_window_past_the_end_says_how_long_it_is(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    artifact = store.save("0123456789", tool="t", card="c")
    assert window("0123456789", artifact, 8, 100).endswith("89\n[end]")
    with pytest.raises(ToolCallError, match="has 10 characters"):
        window("0123456789", artifact, 10, 5)


def test_a_query_without_words_is_an_error_the_model_can_fix(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path)
    artifact = store.save("some text " * 500, tool="t", card="c")
    with pytest.raises(ToolCallError, match="no searchable words"):
        store.passages(artifact, "the of")
    assert store.passages(artifact, "nothingmatches") == []


@pytest.mark.parametrize("damage", ["missing", "not utf-8"])
def test_an_artifact_whose_text_is_gone_or_damaged_is_one_line(tiny, cli_env, damage) -> None:
    store = ArtifactStore(Path(cli_env["TINY_HOME"]))
    artifact = store.save("x" * 100, tool="http_get", card="web-reader")
    text = store.folder / f"{artifact.handle}.txt"
    if damage == "missing":
        text.unlink()
    else:
        text.write_bytes(b"\xff\xfe broken")
    result = tiny("artifacts", "show", artifact.handle)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert line.startswith("tiny: error: ") and "text cannot be read" in line


def test_a_record_naming_another_handle_reads_no_file_outside(tiny, home) -> None:
    (home / "private.txt").write_text("not an artifact")
    folder = home / "artifacts"
    folder.mkdir()
    record = {"handle": "../private", "tool": "http_get", "chars": 15}  # edited to point out
    (folder / "art_0123456789.json").write_text(json.dumps(record))
    result = tiny("artifacts", "show", "art_0123456789")
    assert result.exit_code == 2 and "not an artifact" not in result.stdout
    [line] = result.stderr.splitlines()
    assert "record is damaged: 'handle' is '../private', not 'art_0123456789'" in line


def test_an_artifact_text_that_is_no_regular_file_is_one_line(tiny, home) -> None:
    store = ArtifactStore(home)
    artifact = store.save("x" * 100, tool="http_get", card="web-reader")
    text = store.folder / f"{artifact.handle}.txt"
    text.unlink()
    os.mkfifo(text)  # reading it would wait for a writer forever
    result = tiny("artifacts", "show", artifact.handle)
    assert result.exit_code == 2
    [line] = result.stderr.splitlines()
    assert "text cannot be read: not a regular file" in line


def test_a_stored_result_is_scrubbed_and_sized_as_stored(tmp_path: Path) -> None:
    store = ArtifactStore(tmp_path, Scrubber(["k-1234567890abcdef"]))
    text = "head k-1234567890abcdef " + "x " * 4000 + "Authorization: Bearer abc.def.ghi"
    artifact = store.save(text, tool="http_get", card="web-reader")
    stored = store.text(artifact)
    assert "k-1234567890abcdef" not in stored and "abc.def.ghi" not in stored
    assert artifact.chars == len(stored) and artifact.preview.startswith("head [redacted]")
    shown = stored_result(text, artifact, 100)
    assert f"({len(stored)} characters)" in shown and f"{len(stored) - 100} more" in shown
