"""Review of the web and handbook tools: compression bombs, empty knowledge folders, passwords
in URLs, binary bodies without a Content-Type, and html_to_text on tags left open."""

from __future__ import annotations

import functools
import gzip
import json
import threading
import tracemalloc
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from tiny_cli.bench.pages import LoopbackServer
from tiny_cli.errors import ConfigError
from tiny_cli.secrets import Scrubber
from tiny_cli.testing import reply, tool_call
from tiny_cli.tools import ToolCallError
from tiny_cli.tools.handbook import Handbook
from tiny_cli.tools.web import DEFAULT_MAX_BYTES, AddressPolicy, html_to_text, http_get

from .conftest import one_error_line

PASSWORD = "hunter2secret"
PAGE = b"<p>a page its server deflates</p>"
ZEROS = 200 * 2**20  # what the bombs below decode to: 200 MiB


@functools.cache
def _bomb(layers: int) -> bytes:
    """ZEROS zero bytes, gzipped `layers` times, without holding them all at once."""
    inner = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = bytes(2**20)
    data = b"".join(inner.compress(chunk) for _ in range(ZEROS // len(chunk))) + inner.flush()
    for _ in range(layers - 1):
        data = gzip.compress(data, 9)
    return data


# path -> (status, headers, body) each request gets
ROUTES: dict[str, tuple[int, dict[str, str], bytes]] = {
    "/bomb": (200, {"Content-Type": "text/plain", "Content-Encoding": "gzip"}, b""),
    "/bomb2": (200, {"Content-Type": "text/plain", "Content-Encoding": "gzip, gzip"}, b""),
    "/brotli": (200, {"Content-Type": "text/plain", "Content-Encoding": "br"}, b"\x1b\x03"),
    "/png": (200, {}, b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(64)),
    "/pdf": (200, {}, b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n1 0 obj\n"),
    "/plain": (200, {}, b"<p>no content type, but text</p>"),
    "/gone": (404, {"Content-Type": "text/plain"}, b"not here"),
    "/gone?next=//x@y": (404, {"Content-Type": "text/plain"}, b"not here"),
    "/zlib": (200, {"Content-Type": "text/html", "Content-Encoding": "deflate"}, b""),
    "/raw": (200, {"Content-Type": "text/html", "Content-Encoding": "deflate"}, b""),
    "/leak": (302, {"Location": f"ftp://bob:{PASSWORD}@example.org/x"}, b""),
}


class _Handler(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        status, headers, body = ROUTES[self.path]
        if self.path.startswith("/bomb"):
            body = _bomb(2 if self.path == "/bomb2" else 1)
        if self.path in ("/zlib", "/raw"):  # deflate with a zlib header, or bare (no header)
            deflater = zlib.compressobj(wbits=15 if self.path == "/zlib" else -15)
            body = deflater.compress(PAGE) + deflater.flush()
        self.send_response(status)
        for name, value in {**headers, "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture(scope="module")
def site() -> Iterator[str]:
    """The loopback server of ROUTES: its host:port."""
    server = LoopbackServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def _get(site: str, path: str, userinfo: str = "") -> str:
    return http_get(f"http://{userinfo}{site}{path}", policy=AddressPolicy.of([site]))


# --- 1: a compression bomb stays within the size cap, in memory too ---------------------------


@pytest.mark.parametrize("path", ["/bomb", "/bomb2"])
def test_a_gzip_bomb_is_cut_at_the_size_cap_without_growing_in_memory(site, path) -> None:
    _get(site, "/plain")  # the pool's connection made before measuring
    tracemalloc.start()
    try:
        text = _get(site, path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert text.startswith("\0" * 1000)
    assert text.endswith(
        f"[cut: the response is longer than {DEFAULT_MAX_BYTES} bytes; this is its start]"
    )
    assert len(text) < DEFAULT_MAX_BYTES + 100
    assert peak < 16 * 2**20, f"{peak / 2**20:.0f} MiB held to read a page capped at 1 MB"


@pytest.mark.parametrize("path", ["/zlib", "/raw"])
def test_a_deflated_page_is_read_with_or_without_its_zlib_header(site, path) -> None:
    assert _get(site, path) == PAGE.decode()


def test_a_content_encoding_http_get_cannot_decode_is_a_tool_error(site) -> None:
    with pytest.raises(ToolCallError) as refused:
        _get(site, "/brotli")
    assert str(refused.value) == (
        f"http://{site}/brotli is sent with Content-Encoding 'br', which http_get cannot "
        "decode; only gzip and deflate"
    )


# --- 2: a knowledge folder with no pages, or too many, is the user's to fix -------------------


def test_an_empty_knowledge_folder_stops_the_run_with_one_line(tiny, scripted_server, tmp_path):
    empty = tmp_path / "empty-docs"
    empty.mkdir()
    scripted_server.add(tool_call("docs_search", {"query": "vacation days"}), reply("{}"))
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_DOCS": str(empty)}
    result = tiny("invoke", "docs-finder", "how many vacation days do I get?", env=env)
    assert one_error_line(result) == (
        f"knowledge folder {empty} has no .md or .txt pages; set TINY_DOCS (or docs in "
        "tiny.toml) to the handbook's own folder"
    )
    assert len(scripted_server.requests) == 1  # the model was never told of it


def test_a_folder_too_big_to_be_a_handbook_is_a_config_error(tmp_path: Path) -> None:
    for i in range(3):
        (tmp_path / "many" / f"d{i}").mkdir(parents=True)
        (tmp_path / "many" / f"d{i}" / "page.md").write_text(f"# Vacation {i}\n\nvacation\n")
    with pytest.raises(ConfigError, match=r"has over 2 pages; set TINY_DOCS") as pages:
        Handbook(tmp_path / "many", max_pages=2).search("vacation")
    with pytest.raises(ConfigError, match=r"holds over 4 files and folders") as entries:
        Handbook(tmp_path / "many", max_entries=4).search("vacation")
    assert pages.value.field == entries.value.field == "TINY_DOCS"


# --- 3: a password in a URL is neither echoed to the model nor stored -------------------------


@pytest.mark.parametrize(
    ("path", "said"),
    [
        ("/gone", "HTTP 404 for http://{site}/gone"),
        ("/leak", "http://{site}/leak redirected to an address http_get cannot fetch"),
    ],
)
def test_http_get_never_echoes_a_urls_password(site, path, said) -> None:
    with pytest.raises(ToolCallError) as failed:
        _get(site, path, userinfo=f"bob:{PASSWORD}@")
    assert str(failed.value).startswith(said.format(site=site))
    assert PASSWORD not in str(failed.value)


@pytest.mark.parametrize("userinfo", ["", f"bob:{PASSWORD}@"])
def test_a_user_and_password_go_from_the_host_only_never_from_the_query(site, userinfo) -> None:
    with pytest.raises(ToolCallError) as failed:
        _get(site, "/gone?next=//x@y", userinfo=userinfo)
    assert str(failed.value) == f"HTTP 404 for http://{site}/gone?next=//x@y"
    # the scrubber, likewise, takes a password only from between `scheme://` and the host
    kept = "https://h:8080/a:b@c?next=//x:y@z&u=v:w@t"
    assert Scrubber([]).text(kept) == kept


def test_a_refused_connection_names_the_host_not_the_password() -> None:
    with pytest.raises(ToolCallError) as failed:
        http_get(f"http://bob:{PASSWORD}@127.0.0.1:9/", policy=AddressPolicy.of(["127.0.0.1:9"]))
    assert str(failed.value).startswith("cannot connect to 127.0.0.1:9: ")
    assert PASSWORD not in str(failed.value)


def test_the_scrubber_redacts_a_urls_password() -> None:
    scrub = Scrubber([])
    text = f"see https://bob:{PASSWORD}@intranet.example/x and http://host:8080/ or me@example.org"
    assert scrub.text(text) == (
        "see https://bob:[redacted]@intranet.example/x and http://host:8080/ or me@example.org"
    )
    assert scrub.document({"url": f"ftp://:{PASSWORD}@h"}) == {"url": "ftp://:[redacted]@h"}


def test_a_urls_password_reaches_no_run_row_or_export(tiny, scripted_server) -> None:
    url = f"http://bob:{PASSWORD}@127.0.0.1:9/"
    gave_up = json.dumps({"status": "partial", "summary": f"Could not fetch {url}."})
    scripted_server.add(tool_call("http_get", {"url": url}), reply(gave_up))
    env = {"TINY_BASE_URL": scripted_server.url}
    tiny("invoke", "web-reader", f"read {url}", "--allow-host", "127.0.0.1:9", env=env)
    assert PASSWORD not in scripted_server.requests[1]["messages"][-1]["content"]
    exported = tiny("runs", "export").stdout
    assert "bob:[redacted]@127.0.0.1:9" in exported and PASSWORD not in exported
    assert PASSWORD not in tiny("runs", "search", "bob").stdout


# --- 4: a binary body with no Content-Type is refused ----------------------------------------


@pytest.mark.parametrize("path", ["/png", "/pdf"])
def test_a_binary_body_without_a_content_type_is_refused(site, path) -> None:
    with pytest.raises(ToolCallError) as refused:
        _get(site, path)
    assert str(refused.value) == (
        f"http://{site}{path} has no Content-Type and its body is binary, not text; "
        "http_get only reads text pages"
    )
    assert _get(site, "/plain") == "<p>no content type, but text</p>"


# --- 5: html_to_text reads tags left open and stray end tags as before ----------------------


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("<b>" * 3000 + "bold" + "</i>" * 3000, "bold"),
        ("<title>T</title><div><p>one<li>two</i></div>three", "T\n\none\n- two\n\nthree"),
        (
            "<svg><title>icon</title></svg><title>Page</title><pre>  a\n   b</pre>",
            "Page\n\na\n   b",
        ),
        ("<title>x<script>code</script>y</title><p>body", "xy\n\nbody"),
        ("a" + "<span> </span>" * 3000 + "b" + "<br>" * 5 + "c", "a b\nc"),
    ],
)
def test_html_to_text_on_open_and_stray_tags(html: str, text: str) -> None:
    assert html_to_text(html) == text
