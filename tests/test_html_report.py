"""The bench-at-scale HTML report: one self-contained page, read as text and in a real browser."""

from __future__ import annotations

import json
import re
import struct
import sys
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from tiny_cli.bench.html import write_html
from tiny_cli.errors import ConfigError

FIXTURE = Path(__file__).resolve().parent / "data" / "scale-report.json"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# attributes whose value a browser would fetch (or navigate to)
FETCHED = {"src", "href", "xlink:href", "srcset", "action", "poster", "data", "background"}


def _report() -> dict[str, Any]:
    return json.loads(FIXTURE.read_text("utf-8"))


class _Page(HTMLParser):
    """What the tests look at: figures and their SVGs, table body rows, fetched addresses."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.stack: list[str] = []
        self.figures: dict[str, list[str]] = {}  # figure id -> tags inside it
        self.body_rows = 0
        self.addresses: list[str] = []
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        values = dict(attrs)
        self.addresses += [v or "" for k, v in attrs if k in FETCHED]
        if tag == "figure":
            self.figures[values.get("id") or ""] = []
        elif "figure" in self.stack:
            self.figures[list(self.figures)[-1]].append(tag)
        if tag == "tr" and "tbody" in self.stack:
            self.body_rows += 1
        if tag not in {"meta", "br", "hr", "img", "input", "link"}:  # void elements
            self.stack.append(tag)

    def handle_endtag(self, tag: str) -> None:
        if tag in self.stack:
            del self.stack[len(self.stack) - 1 - self.stack[::-1].index(tag) :]


def _parse(text: str) -> _Page:
    page = _Page()
    page.feed(text)
    page.close()
    return page


@pytest.fixture
def page_file(tmp_path: Path) -> Path:
    """The fixture report written as HTML, with a headline to show."""
    report = _report()
    report["headline"] = "Tiny agents keep 80 % right calls at 557 tools; all-tools does not fit."
    path = tmp_path / "out" / "scale.html"
    write_html(report, path)
    return path


def test_the_page_holds_both_charts_and_every_row_and_fetches_nothing(page_file: Path) -> None:
    text = page_file.read_text("utf-8")
    page = _parse(text)
    assert text.startswith("<!DOCTYPE html>")
    assert set(page.figures) == {"accuracy-chart", "tokens-chart"}
    for tags in page.figures.values():
        assert "svg" in tags and "figcaption" in tags
    assert text.count("<svg") == 2
    assert page.body_rows == len(_report()["rows"]) == 20
    assert ">failed runs</th>" in text  # the table's columns, the failed runs included
    assert "Tiny agents keep 80 %" in text
    # self-contained: nothing to fetch, no scripts, no stylesheets or fonts from elsewhere
    assert all(a.startswith("#") for a in page.addresses), page.addresses
    assert not {"script", "link", "img", "iframe"} & set(page.tags)
    assert not re.search(r"url\(\s*['\"]?(?!#)", text)
    assert "@import" not in text
    assert not re.search(r"(src|href)\s*=\s*['\"]?\s*(https?:)?//", text)
    # the all-tools row at 557 tools did not fit: said so, never drawn or counted as 0 %
    lost = re.findall(r'<tr class="[^"]*nofit[^"]*">(.*?)</tr>', text)
    assert len(lost) == 1 and "all-tools" in lost[0] and "does not fit" in lost[0]
    assert not re.search(r"(?<![\d,])0/60|\(0 %\)", text)
    # one file, moved into place: no temp file left beside it
    assert [p.name for p in page_file.parent.iterdir()] == ["scale.html"]


def test_every_string_from_the_report_is_escaped(tmp_path: Path) -> None:
    report = _report()
    report["model"] = "<script>alert('model')</script>"
    report["headline"] = 'a <b onclick="x()">bold</b> claim & more'
    report["replayed_from"] = "runs/<img src=x>.jsonl"
    report["rows"][0]["arm"] = "<i>oracle</i>"
    path = tmp_path / "scale.html"
    write_html(report, path)
    text = path.read_text("utf-8")
    assert "<script" not in text.lower()
    assert "&lt;script&gt;alert(&#x27;model&#x27;)&lt;/script&gt;" in text
    assert "&lt;b onclick=&quot;x()&quot;&gt;bold&lt;/b&gt; claim &amp; more" in text
    assert "replay of runs/&lt;img src=x&gt;.jsonl" in text
    assert "<i>oracle</i>" not in text and "&lt;i&gt;oracle&lt;/i&gt;" in text
    assert "<img" not in text


def test_writing_again_replaces_the_file(tmp_path: Path) -> None:
    path = tmp_path / "scale.html"
    path.write_text("old", "utf-8")
    write_html(_report(), path)
    assert path.read_text("utf-8").startswith("<!DOCTYPE html>")
    assert [p.name for p in tmp_path.iterdir()] == ["scale.html"]


def test_without_matplotlib_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)  # the import now fails
    with pytest.raises(ConfigError, match=r"pip install 'tiny-cli\[report\]'"):
        write_html(_report(), tmp_path / "scale.html")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_the_page_renders_in_headless_chromium(page_file: Path, tmp_path: Path) -> None:
    """The real browser: no errors, no requests but the file, both charts drawn, every row."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is missing (CI installs Debian's chromium)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed")
    problems: list[str] = []
    requests: list[str] = []
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch_persistent_context(
            str(tmp_path / "profile"),
            executable_path=str(CHROMIUM),
            args=CHROMIUM_ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            page = browser.new_page()
            page.on("console", lambda m: m.type == "error" and problems.append(f"console {m.text}"))
            page.on("pageerror", lambda e: problems.append(f"pageerror {e}"))
            page.on("requestfailed", lambda r: problems.append(f"failed {r.url}"))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_file.as_uri(), wait_until="load")
            for figure in ("#accuracy-chart", "#tokens-chart"):
                assert page.locator(figure).is_visible()
                svg = page.locator(f"{figure} svg")
                assert svg.count() == 1 and svg.is_visible()
                box = svg.bounding_box()
                assert box is not None and box["width"] > 300 and box["height"] > 150, box
                drawn = svg.evaluate("s => s.querySelectorAll('path, use').length")
                assert drawn > 20
                assert page.locator(f"{figure} figcaption").is_visible()
            assert page.locator("#rows tbody tr").count() == len(_report()["rows"])
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert problems == []
    assert requests == [page_file.as_uri()]
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width >= 1280 and height > 900
