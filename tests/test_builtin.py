"""Built-in tools against real parts: a loopback HTTP server, the shipped handbook, SQLite files."""

from __future__ import annotations

import shutil
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import httpx
import pytest

from tiny_cli.bench.pages import LoopbackServer
from tiny_cli.errors import ConfigError, CrmDuplicate, ToolError
from tiny_cli.settings import Settings
from tiny_cli.text import tokenize
from tiny_cli.tools import Registry, ToolCallError
from tiny_cli.tools.builtin import (
    CrmStore,
    builtin_writes,
    default_registry,
    name_key,
)
from tiny_cli.tools.handbook import Handbook
from tiny_cli.tools.web import AddressPolicy, html_to_text, http_get
from tiny_cli.workspace import known_tools

REPO = Path(__file__).resolve().parent.parent
HANDBOOK = REPO / "examples" / "handbook"
MY_TOOLS = REPO / "examples" / "my_tools.py"
BUILTIN_NAMES = ["http_get", "html_to_text", "docs_search", "crm_find_company", "crm_add_company"]
BIG_BODY_BYTES = 20_000_000
SLOW_ANSWER_SECONDS = 20.0  # /slow answers this late: a timeout is far from it, even when loaded


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", cards_dir=tmp_path / "cards", docs_dir=HANDBOOK)


@pytest.fixture
def registry(settings: Settings) -> Registry:
    return default_registry(settings)


# --- a real HTTP server on 127.0.0.1 ------------------------------------------------------------


class Site:
    """What the test server saw: bytes it sent for /big before the client hung up.

    Loopback is refused by default; the tests allow this server's host:port as a user would.
    """

    def __init__(self, base: str) -> None:
        self.base = base
        self.netloc = base.split("://", 1)[-1]
        self.policy = AddressPolicy.of([self.netloc]) if self.netloc else AddressPolicy()
        self.big_bytes_sent = 0
        self.big_done = threading.Event()


PAGE = "<html><head><title>Hello</title></head><body><p>Grüße aus dem Test</p></body></html>"


def make_handler(site: Site) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # keep pytest output clean
            pass

        def send(self, status: int, body: bytes, ctype: str = "text/html; charset=utf-8") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def redirect(self, to: str) -> None:
            self.send_response(302)
            self.send_header("Location", to)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def do_GET(self) -> None:
            routes = {
                "/page": lambda: self.send(200, PAGE.encode()),
                "/hop": lambda: self.redirect("/page"),
                "/hop2": lambda: self.redirect("/hop"),
                "/loop": lambda: self.redirect("/loop"),
                "/to-missing": lambda: self.redirect("/missing"),
                "/to-ftp": lambda: self.redirect("ftp://127.0.0.1/file"),
                "/latin1": lambda: self.send(
                    200, "Müller & Söhne".encode("latin-1"), "text/plain; charset=iso-8859-1"
                ),
                "/meta-charset": lambda: self.send(
                    200,
                    '<meta charset="windows-1252"><p>Preis: 5 €</p>'.encode("cp1252"),
                    "text/html",
                ),
                "/image": lambda: self.send(200, b"\x89PNG\r\n\x1a\n", "image/png"),
                "/json": lambda: self.send(200, b'{"ok": true}', "application/json"),
                "/error": lambda: self.send(500, b"boom"),
                "/big": self.big,
                "/slow": self.slow,
            }
            routes.get(self.path, lambda: self.send(404, b"not here"))()

        def big(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(BIG_BODY_BYTES))
            self.end_headers()
            chunk = b"x" * 65536
            try:
                while site.big_bytes_sent < BIG_BODY_BYTES:
                    self.wfile.write(chunk)
                    site.big_bytes_sent += len(chunk)
            except OSError:  # the client stopped reading and closed: what we want
                pass
            finally:
                site.big_done.set()

        def slow(self) -> None:
            time.sleep(SLOW_ANSWER_SECONDS)
            self.send(200, b"late")

    return Handler


@pytest.fixture
def site() -> Iterator[Site]:
    server = LoopbackServer(("127.0.0.1", 0), make_handler(Site("")))
    host, port = server.server_address[:2]
    holder = Site(f"http://{host}:{port}")
    server.RequestHandlerClass = make_handler(holder)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield holder
    server.shutdown()
    server.server_close()


@pytest.fixture
def web_registry(settings: Settings, site: Site) -> Registry:
    """The registry with the test server allowed through the user's setting."""
    return default_registry(replace(settings, allow_hosts=(site.netloc,)))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --- http_get ---------------------------------------------------------------------------------


def test_http_get_tool_fetches_a_page(web_registry: Registry, site: Site) -> None:
    assert web_registry["http_get"](url=f"{site.base}/page") == PAGE


def test_http_get_follows_redirects(web_registry: Registry, site: Site) -> None:
    assert web_registry["http_get"](url=f"{site.base}/hop2") == PAGE


def test_http_get_bounds_redirects(site: Site) -> None:
    with pytest.raises(ToolCallError, match=r"too many redirects \(more than 5\)"):
        http_get(f"{site.base}/loop", policy=site.policy)
    with pytest.raises(ToolCallError, match="too many redirects"):
        http_get(f"{site.base}/hop2", policy=site.policy, max_redirects=1)


def test_http_get_non_2xx(web_registry: Registry, site: Site) -> None:
    url = f"{site.base}/missing"
    with pytest.raises(ToolCallError) as exc:
        web_registry["http_get"](url=url)
    assert str(exc.value) == f"HTTP 404 for {url}"
    with pytest.raises(
        ToolCallError, match=r"^HTTP 404 for .*/to-missing \(redirected to .*/missing\)"
    ):
        http_get(f"{site.base}/to-missing", policy=site.policy)
    with pytest.raises(ToolCallError, match=r"^HTTP 500 for"):
        http_get(f"{site.base}/error", policy=site.policy)


def test_http_get_size_cap_stops_reading(site: Site) -> None:
    cap = 100_000
    text = http_get(f"{site.base}/big", policy=site.policy, max_bytes=cap)
    body, marker = text.split("\n\n[cut:")
    assert body == "x" * cap
    assert f"longer than {cap} bytes" in marker
    assert site.big_done.wait(5)
    # The client hung up: the server could not push the whole body (socket buffers aside).
    assert site.big_bytes_sent < BIG_BODY_BYTES / 2


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("ftp://127.0.0.1/file", "only http and https URLs can be fetched, not ftp:"),
        ("file:///etc/passwd", "only http and https URLs can be fetched, not file:"),
        ("javascript:alert(1)", "only http and https"),
        ("example.com/page", "not an absolute URL; give it with https://"),
        ("http:///nohost", "has no host name"),
    ],
)
def test_http_get_refuses_other_schemes(url: str, message: str) -> None:
    with pytest.raises(ToolCallError, match=message.replace("(", r"\(")):
        http_get(url)


def test_http_get_refuses_redirect_to_other_scheme(site: Site) -> None:
    with pytest.raises(ToolCallError, match="redirected to an address http_get cannot fetch"):
        http_get(f"{site.base}/to-ftp", policy=site.policy)


def test_http_get_decodes_per_charset(site: Site) -> None:
    assert http_get(f"{site.base}/latin1", policy=site.policy) == "Müller & Söhne"
    assert "Preis: 5 €" in http_get(f"{site.base}/meta-charset", policy=site.policy)
    assert http_get(f"{site.base}/json", policy=site.policy) == '{"ok": true}'


def test_http_get_refuses_binary(site: Site) -> None:
    with pytest.raises(ToolCallError, match="is image/png, not text"):
        http_get(f"{site.base}/image", policy=site.policy)


def test_http_get_timeout_and_refused_connection(site: Site) -> None:
    started = time.monotonic()
    with pytest.raises(ToolCallError, match=r"timed out after 0.3s fetching"):
        http_get(f"{site.base}/slow", policy=site.policy, timeout=0.3)
    assert time.monotonic() - started < SLOW_ANSWER_SECONDS / 2  # it did not wait for the answer
    port = free_port()
    with pytest.raises(ToolCallError, match=r"cannot connect to 127\.0\.0\.1"):
        http_get(f"http://127.0.0.1:{port}/", policy=AddressPolicy.of([f"127.0.0.1:{port}"]))


def test_http_get_uses_the_injected_transport(settings: Settings) -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(200, text="from the transport")

    tools = default_registry(settings, transport=httpx.MockTransport(handler))
    assert tools["http_get"](url="https://example.org/x") == "from the transport"
    assert seen == ["https://example.org/x"]


# --- html_to_text -----------------------------------------------------------------------------

ARTICLE = """<!DOCTYPE html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <title>  Tool - Wikipedia  </title>
  <style>body { font-family: sans-serif; } .hidden { display: none }</style>
  <script type="application/ld+json">{"@context": "https://schema.org"}</script>
  <link rel="stylesheet" href="/main.css">
</head>
<body>
  <!-- navigation -->
  <nav><ul><li><a href="/">Main page</a></li><li><a href="/random">Random</a></li></ul></nav>
  <main>
    <h1 id="firstHeading">Tool</h1>
    <div class="mw-content"><div><div>
      <p>A <b>tool</b> is an object that can extend an individual's ability
         to modify features of the surrounding environment.</p>
      <p>Although many animals use simple tools,
         only human beings, whose use of stone tools dates back
         hundreds of millennia, have been observed using tools to make other tools.</p>
    </div></div></div>
    <h2>Categories</h2>
    <ul>
      <li>Cutting tools</li>
      <li>Moving tools</li>
    </ul>
    <table><tr><th>Tool</th><th>Use</th></tr><tr><td>Hammer</td><td>Nails</td></tr></table>
    <noscript>Please enable JavaScript.</noscript>
    <template><p>template text</p></template>
    <svg viewBox="0 0 10 10"><title>icon</title><path d="M0 0"/></svg>
    <div hidden>hidden text</div>
    <p>Line one<br>Line two</p>
  </main>
  <script>window.tracking = "SCRIPT-TEXT";</script>
  <footer><p>Text is available under CC BY-SA.</p></footer>
</body>
</html>
"""


def test_html_to_text_realistic_page(registry: Registry) -> None:
    text = registry["html_to_text"](html=ARTICLE)
    lines = text.splitlines()
    assert lines[0] == "Tool - Wikipedia"
    for junk in ("font-family", "schema.org", "SCRIPT-TEXT", "enable JavaScript", "template text"):
        assert junk not in text
    assert "icon" not in text and "hidden text" not in text and "navigation" not in text
    assert (
        "A tool is an object that can extend an individual's ability to modify features "
        "of the surrounding environment." in lines
    )
    assert "- Cutting tools" in lines and "- Moving tools" in lines
    assert lines.index("- Moving tools") == lines.index("- Cutting tools") + 1
    assert "Tool | Use" in lines and "Hammer | Nails" in lines
    assert lines.index("Line two") == lines.index("Line one") + 1
    assert "\n\n\n" not in text and "  " not in text
    assert all(line == line.strip() for line in lines)
    assert lines[-1] == "Text is available under CC BY-SA."


def test_html_to_text_edge_cases() -> None:
    assert html_to_text("") == ""
    assert html_to_text("just   some\n\n\n\ntext") == "just some text"
    assert html_to_text("<pre>def f():\n    return 1</pre>") == "def f():\n    return 1"
    assert html_to_text("<title>Same</title><h1>Same</h1><p>x</p>") == "Same\n\nx"
    with pytest.raises(ToolCallError, match="not a URL; call http_get first"):
        html_to_text("https://example.org/page")


@pytest.mark.parametrize(
    ("html", "text"),
    [
        ("<p>one<p>two", "one\n\ntwo"),  # an element open until the page ends
        ("<div>a</span>b</div>c", "ab\nc"),  # a stray end tag closes nothing
        ("<ul><li>x<li>y</ul>after", "- x\n- y\n\nafter"),  # an end tag closes what it holds
        ("<svg><title>icon</title></svg><title>Page</title><h1>Head</h1>", "Page\n\nHead"),
        ("<title>T <b>bold</b></title>body", "T bold\n\nbody"),
        ("line<br>next<hr>rule", "line\nnext\nrule"),  # void elements hold nothing
        ("x &amp; y &#147;q&#148; &nbsp;z", "x & y \u201cq\u201d z"),
        ("<script>var x = '<p>no</p>';</script>ok", "ok"),
    ],
)
def test_html_to_text_reads_loose_html(html: str, text: str) -> None:
    assert html_to_text(html) == text


# --- docs_search ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "page"),
    [
        ("onboarding", "onboarding.md"),
        ("how did the onboarding process work again", "onboarding.md"),
        ("wie war nochmal der ablauf beim onboarding", "onboarding.md"),
        ("ablauf beim onboarding", "onboarding.md"),
        ("what is our policy on expenses and travel", "expenses-and-travel.md"),
        ("wie beantrage ich urlaub", "urlaubsantrag.md"),
        ("where is the vacation request process documented", "urlaubsantrag.md"),
        ("I lost my laptop", "it-accounts-and-security.md"),
        ("who reviews my pull request", "code-review.md"),
        ("what to do when I get paged for a SEV1 incident", "on-call.md"),
        ("returning the badge on the last day", "offboarding.md"),
        ("core hours and working from home", "remote-work.md"),
    ],
)
def test_docs_search_ranks_the_right_page_first(registry: Registry, query: str, page: str) -> None:
    hits = registry["docs_search"](query=query)
    assert hits, query
    assert hits[0]["path"] == page
    assert set(hits[0]) == {"path", "title", "snippet", "score"}
    assert [h["score"] for h in hits] == sorted((h["score"] for h in hits), reverse=True)


def test_docs_search_snippet_is_the_matching_part(registry: Registry) -> None:
    top = registry["docs_search"](query="hotel price per night")[0]
    assert top["path"] == "expenses-and-travel.md"
    assert top["title"] == "Expenses and business travel"
    assert "€150 per night" in top["snippet"]
    assert top["snippet"].startswith("Booking business travel:")  # its section, named
    german = registry["docs_search"](query="Sonderurlaub Hochzeit")[0]
    assert "Hochzeit" in german["snippet"]


def test_docs_search_nonsense_finds_nothing(registry: Registry) -> None:
    assert registry["docs_search"](query="xylophone quantum banana") == []
    assert registry["docs_search"](query="make me a sandwich") == []
    with pytest.raises(ToolCallError, match="no searchable words"):
        registry["docs_search"](query="how do I")


def test_docs_search_limit(registry: Registry) -> None:
    assert len(registry["docs_search"](query="the first day", limit=2)) == 2
    with pytest.raises(
        ToolCallError, match="invalid arguments: limit: Input should be greater than or equal to 1"
    ):
        registry["docs_search"](query="onboarding", limit=0)
    assert registry["docs_search"].parameters["properties"]["limit"]["maximum"] == 20


def test_docs_search_missing_folder(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    settings = Settings(home=tmp_path, cards_dir=tmp_path, docs_dir=missing)
    with pytest.raises(ConfigError) as exc:  # the model cannot fix it: the run stops, said once
        default_registry(settings)["docs_search"](query="onboarding")
    assert str(exc.value).startswith(f"knowledge folder {missing} does not exist; set TINY_DOCS")


def test_docs_search_index_follows_edits(tmp_path: Path) -> None:
    folder = tmp_path / "docs"
    shutil.copytree(HANDBOOK, folder)
    handbook = Handbook(folder)
    assert handbook.search("bicycle cellar") == []
    assert handbook.search("onboarding")[0].path == "onboarding.md"
    assert handbook.search("buddy")[0].path == "onboarding.md"
    (folder / "facilities").mkdir()
    (folder / "facilities" / "bikes.txt").write_text("Bicycles\n\nThe bicycle cellar is level -2.")
    hits = handbook.search("bicycle cellar")
    assert [h.path for h in hits] == ["facilities/bikes.txt"]
    assert hits[0].title == "Bikes"  # no heading: the file name
    (folder / "facilities" / "bikes.txt").write_text(
        "Bicycles\n\nThe bicycle cellar moved to level -3."
    )
    assert "-3" in Handbook(folder).search("cellar")[0].snippet  # the next run sees the edit


def test_tokenize_folds_case_umlauts_and_word_forms() -> None:
    assert tokenize("Onboarding") == tokenize("onboarding") == tokenize("onboarded")
    assert tokenize("expenses") == tokenize("Expense")
    assert tokenize("travelling") == tokenize("travel") == tokenize("travels")
    assert tokenize("requests") == tokenize("requested") == tokenize("request")
    assert tokenize("Führung") == tokenize("fuehrung")
    assert tokenize("Kunden") == tokenize("Kunde")
    assert tokenize("the process of the") == tokenize("processes")
    assert tokenize("wie war das nochmal") == []


# --- CRM --------------------------------------------------------------------------------------


def test_crm_add_find_and_persist(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "data" / "crm.sqlite3"
    clock = lambda: datetime(2025, 3, 1, 9, 30, tzinfo=UTC)  # noqa: E731
    store = CrmStore(path, clock=clock)
    added = store.add("  Mustermann   GmbH ", "Berlin", "https://mustermann.example", "met at fair")
    assert added == {
        "company_id": 1,
        "name": "Mustermann GmbH",
        "city": "Berlin",
        "website": "https://mustermann.example",
        "notes": "met at fair",
        "created_at": "2025-03-01T09:30:00+00:00",
    }
    store.add("Beispiel AG", "Köln")
    assert path.is_file()  # parent folders were created
    again = CrmStore(path)  # a new instance, as the next process would open it
    for query in ("mustermann gmbh", "MUSTERMANN-GMBH", "Mustermann G.m.b.H.", "muster"):
        assert [c["company_id"] for c in again.find(query)] == [1], query
    assert again.find("Acme") == []
    assert [c["name"] for c in again.all()] == ["Mustermann GmbH", "Beispiel AG"]
    with sqlite3.connect(path) as db:  # really in the file, not in memory
        assert db.execute("SELECT count(*) FROM companies").fetchone() == (2,)


def test_crm_duplicate_names_the_existing_id(tmp_path: Path) -> None:
    store = CrmStore(tmp_path / "crm.sqlite3")
    store.add("Müller & Söhne KG", "Hamburg")
    with pytest.raises(CrmDuplicate) as exc:
        CrmStore(tmp_path / "crm.sqlite3").add("MUELLER & soehne kg", "Bremen")
    assert isinstance(exc.value, ValueError)
    assert "already exists as company_id 1" in str(exc.value)
    assert "Müller & Söhne KG" in str(exc.value)
    assert len(store.all()) == 1


def test_crm_find_orders_exact_match_first(tmp_path: Path) -> None:
    store = CrmStore(tmp_path / "crm.sqlite3")
    store.add("Acme Holding International", "Paris")
    store.add("Acme", "Berlin")
    assert [c["name"] for c in store.find("acme")] == ["Acme", "Acme Holding International"]


def test_crm_rejects_empty_names_and_broken_files(tmp_path: Path) -> None:
    store = CrmStore(tmp_path / "crm.sqlite3")
    with pytest.raises(ValueError, match="must contain letters or digits"):
        store.add(" -- ", "Berlin")
    with pytest.raises(ValueError, match="must contain letters or digits"):
        store.find("")
    not_a_db = tmp_path / "notes.sqlite3"
    not_a_db.write_text("this is not a database " * 100)
    with pytest.raises(ConfigError, match=f"CRM database {not_a_db}"):
        CrmStore(not_a_db).all()


def test_crm_concurrent_adds_of_one_name_keep_one_row(tmp_path: Path) -> None:
    path = tmp_path / "crm.sqlite3"
    outcomes: list[str] = []

    def add() -> None:
        try:
            CrmStore(path).add("Race GmbH", "Berlin")
            outcomes.append("added")
        except CrmDuplicate:
            outcomes.append("duplicate")

    threads = [threading.Thread(target=add) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(outcomes) == ["added"] + ["duplicate"] * 7
    assert len(CrmStore(path).all()) == 1


def test_name_key() -> None:
    assert name_key("Müller & Söhne") == name_key("mueller soehne") == "muellersoehne"
    assert name_key("Café Crème S.A.") == "cafecremesa"


def test_crm_tools_use_the_home_folder(registry: Registry, settings: Settings) -> None:
    add, find = registry["crm_add_company"], registry["crm_find_company"]
    assert add.writes and not find.writes
    assert add.parameters["required"] == ["name", "city"]
    record = add(name="Mustermann GmbH", city="Berlin")
    assert record["company_id"] == 1 and record["name"] == "Mustermann GmbH"
    assert [c["name"] for c in find(name="mustermann")] == ["Mustermann GmbH"]
    with pytest.raises(CrmDuplicate, match="company_id 1"):
        add(name="MUSTERMANN GMBH", city="Berlin")
    assert CrmStore(settings.home / "crm.sqlite3").all()[0]["city"] == "Berlin"


# --- the registry -----------------------------------------------------------------------------


def test_default_registry_builtins_only(registry: Registry, settings: Settings) -> None:
    assert list(registry) == BUILTIN_NAMES
    assert registry.writes() == {n: n == "crm_add_company" for n in BUILTIN_NAMES}
    assert not settings.home.exists()  # building the registry touches no file


def test_default_registry_adds_user_tools(settings: Settings, tmp_path: Path) -> None:
    other = tmp_path / "other_tools.py"
    other.write_text(
        'from tiny_cli.tools import tool\n\n@tool\ndef ping() -> str:\n    """Ping."""\n'
        '    return "pong"\n'
    )
    spec = f"{MY_TOOLS}, {other}"
    registry = default_registry(replace(settings, tools_spec=spec))
    assert list(registry) == [*BUILTIN_NAMES, "days_between", "word_stats", "ping"]
    assert registry.origin("ping") == str(other)
    assert registry["ping"]() == "pong"


def test_a_route_knows_the_tools_the_registry_knows(settings: Settings, tmp_path: Path) -> None:
    """A route (open_cards) checks cards against known_tools: no registry for built-ins."""
    assert known_tools(settings) == default_registry(settings).writes()
    assert builtin_writes() == default_registry(settings).writes()
    mine = tmp_path / "writer_tools.py"
    mine.write_text(
        "from tiny_cli.tools import tool\n\n@tool(writes=True)\ndef note(text: str) -> str:\n"
        '    """Save a note."""\n    return text\n'
    )
    theirs = replace(settings, tools_spec=f"{MY_TOOLS}, {mine}")
    assert known_tools(theirs) == default_registry(theirs).writes()
    assert known_tools(theirs)["note"] is True and "word_stats" in known_tools(theirs)


def test_default_registry_name_clash_names_both(settings: Settings, tmp_path: Path) -> None:
    clash = tmp_path / "clash_tools.py"
    clash.write_text(
        "from tiny_cli.tools import tool\n\n@tool\ndef http_get(url: str) -> str:\n"
        '    """Fetch."""\n    return url\n'
    )
    with pytest.raises(ToolError) as exc:
        default_registry(replace(settings, tools_spec=str(clash)))
    message = str(exc.value)
    assert "'http_get'" in message and str(clash) in message and "built-in" in message
    assert "\n" not in message


def test_docs_search_does_not_follow_a_link_out_of_its_folder(tmp_path: Path) -> None:
    secret = tmp_path / "secret.md"
    secret.write_text("# Payroll\n\nThe zanzibar passphrase is hunter2.", "utf-8")
    folder = tmp_path / "docs"
    shutil.copytree(HANDBOOK, folder)
    (folder / "payroll.md").symlink_to(secret)
    (folder / "inside.md").symlink_to(folder / "onboarding.md")  # a link within is fine
    handbook = Handbook(folder)
    assert handbook.search("zanzibar passphrase") == []
    assert "inside.md" in {h.path for h in handbook.search("onboarding", 20)}


def test_docs_search_refuses_a_folder_too_big_to_be_a_handbook(tmp_path: Path) -> None:
    """`TINY_DOCS=/` walked the whole disk: a folder past the caps is the user's to fix, one
    ConfigError when the tool is built, not a tool error the model cannot act on."""
    for i in range(6):
        (tmp_path / "many" / f"d{i}").mkdir(parents=True)
        (tmp_path / "many" / f"d{i}" / "page.md").write_text(f"# Vacation {i}\n\nvacation days\n")
    with pytest.raises(ConfigError) as exc:
        Handbook(tmp_path / "many", max_entries=10)
    assert str(exc.value).startswith(
        f"knowledge folder {tmp_path / 'many'} holds over 10 files and folders; set TINY_DOCS"
    )
    with pytest.raises(ConfigError, match=r"has over 5 pages; set TINY_DOCS"):
        Handbook(tmp_path / "many", max_pages=5)
    assert len(Handbook(tmp_path / "many", max_pages=6).search("vacation", 10)) == 6
