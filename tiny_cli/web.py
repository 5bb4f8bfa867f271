"""Web tools: fetch a page over HTTP(S) with hard limits, and turn HTML into readable text."""

from __future__ import annotations

import codecs
import re
import warnings
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx

from tiny_cli import __version__
from tiny_cli.tools import ToolCallError

if TYPE_CHECKING:
    from bs4 import BeautifulSoup, Tag

DEFAULT_HTTP_TIMEOUT = 15.0  # seconds, per connect/read/write phase
DEFAULT_MAX_BYTES = 1_000_000  # a page past this is cut: the runner caps results anyway
DEFAULT_MAX_REDIRECTS = 5
USER_AGENT = f"tiny-cli/{__version__} (+https://pypi.org/project/tiny-cli/)"
ALLOWED_SCHEMES = ("http", "https")
# Non-text/* content types that are still text a model can read.
TEXT_APPLICATION_TYPES = ("json", "xml", "javascript", "ecmascript", "x-www-form-urlencoded")

# Never page text; <title> is read on its own and goes first.
SKIP_TAGS = (
    *("script", "style", "noscript", "template", "svg", "iframe", "object", "canvas"),
    *("head", "title"),
)
# Paragraph-like blocks get a blank line around them; the rest a single line break.
PARAGRAPH_TAGS = (
    *("p", "h1", "h2", "h3", "h4", "h5", "h6", "ul", "ol", "dl", "table", "blockquote", "pre"),
    *("section", "article", "header", "footer", "nav", "aside", "main", "figure", "form"),
)
LINE_TAGS = (
    *("div", "li", "tr", "dt", "dd", "figcaption", "address", "fieldset", "details"),
    *("summary", "caption", "hr", "label", "option"),
)
# Private-use characters: they survive whitespace folding, unlike real newlines.
PARAGRAPH_BREAK = "\ue001"
PRE_BREAK = "\ue000"
BREAK_RUN = re.compile(r"[\s\ue000\ue001]*[\n\ue001][\s\ue000\ue001]*")
WHITESPACE = re.compile(r"\s+")
# Spaces doubled where inline strings meet; not at a <pre> line start, whose indent counts.
SPACE_RUN = re.compile(r"(?<=[^\s\ue000]) {2,}")


def http_get(
    url: str,
    *,
    transport: httpx.BaseTransport | None = None,
    timeout: float = DEFAULT_HTTP_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_redirects: int = DEFAULT_MAX_REDIRECTS,
) -> str:
    """Fetch `url` and return its body as text; raise ToolCallError with a fixable message."""
    url = url.strip()
    _check_url(url)
    client = httpx.Client(
        transport=transport,
        timeout=timeout,
        follow_redirects=True,
        max_redirects=max_redirects,
        headers={"User-Agent": USER_AGENT},
    )
    try:
        with client, client.stream("GET", url) as response:
            _check_response(url, response)
            body, cut = _read_capped(response, max_bytes)
    except httpx.HTTPError as exc:
        raise ToolCallError(_describe(url, exc, timeout, max_redirects)) from exc
    text = body.decode(_encoding(response, body), errors="replace")
    if cut:
        text += f"\n\n[cut: the response is longer than {max_bytes} bytes; this is its start]"
    return text


def html_to_text(html: str) -> str:
    """Return the readable text of an HTML document: title first, one block per line."""
    if re.fullmatch(r"\s*https?://\S+\s*", html):
        raise ToolCallError("html_to_text takes the HTML itself, not a URL; call http_get first")
    # Imported here: bs4 costs ~0.1 s, and most commands never convert HTML.
    from bs4 import BeautifulSoup, MarkupResemblesLocatorWarning

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MarkupResemblesLocatorWarning)
        soup = BeautifulSoup(html, "html.parser")
    title = _title(soup)
    body = _layout(_render(soup))
    if not title or body.split("\n", 1)[0] == title:  # an <h1> that repeats the title
        return body
    return f"{title}\n\n{body}".strip()


# --- helpers ------------------------------------------------------------------------------


def _check_url(url: str) -> None:
    try:
        parts = urlsplit(url)
    except ValueError as exc:
        raise ToolCallError(f"invalid URL {url!r}: {exc}") from exc
    if not parts.scheme:
        raise ToolCallError(f"{url!r} is not an absolute URL; give it with https:// or http://")
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        raise ToolCallError(f"only http and https URLs can be fetched, not {parts.scheme}: ({url})")
    if not parts.hostname:
        raise ToolCallError(f"{url!r} has no host name")


def _check_response(url: str, response: httpx.Response) -> None:
    """Refuse error statuses and binary bodies before reading them."""
    moved = f" (redirected to {response.url})" if response.history else ""
    if not response.is_success:
        raise ToolCallError(f"HTTP {response.status_code} for {url}{moved}")
    ctype = response.headers.get("content-type", "").split(";")[0].strip().lower()
    if ctype and not (ctype.startswith("text/") or any(t in ctype for t in TEXT_APPLICATION_TYPES)):
        raise ToolCallError(f"{url}{moved} is {ctype}, not text; http_get only reads text pages")


def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Read at most `max_bytes` and stop: a huge page must not be downloaded in full."""
    chunks: list[bytes] = []
    size = 0
    for chunk in response.iter_bytes():
        chunks.append(chunk)
        size += len(chunk)
        if size > max_bytes:
            return b"".join(chunks)[:max_bytes], True
    return b"".join(chunks), False


def _encoding(response: httpx.Response, body: bytes) -> str:
    """Use the header's charset, else the document's own declaration, else UTF-8."""
    from bs4.dammit import EncodingDetector

    declared = response.charset_encoding or EncodingDetector.find_declared_encoding(
        body[:4096], is_html=True
    )
    try:
        return codecs.lookup(declared).name if declared else "utf-8"
    except LookupError:
        return "utf-8"


def _describe(url: str, exc: httpx.HTTPError, timeout: float, max_redirects: int) -> str:
    """Say what went wrong in words the model can act on."""
    if isinstance(exc, httpx.TooManyRedirects):
        return f"too many redirects (more than {max_redirects}) for {url}"
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {timeout:g}s fetching {url}"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect to {urlsplit(url).netloc}: {str(exc) or 'connection refused'}"
    if isinstance(exc, httpx.UnsupportedProtocol):
        return f"{url} redirected to an address http_get cannot fetch: {exc}"
    return f"cannot fetch {url}: {type(exc).__name__}: {exc}"


def _is_hidden(tag: Tag) -> bool:
    """Match elements the page hides from readers."""
    return tag.has_attr("hidden") or tag.get("aria-hidden") == "true"


def _title(soup: BeautifulSoup) -> str:
    """Return the document's <title>, not an icon's <svg><title>."""
    for tag in soup.find_all("title"):
        if not tag.find_parent("svg"):
            return " ".join(tag.get_text().split())
    return ""


class _Mark(str):
    """A break or separator the walk writes; told apart from the page's own strings."""


def _render(root: BeautifulSoup) -> str:
    """Walk the tree once, writing text and break marks.

    The tree is read, never edited: inserting marks into a big page's tree is quadratic
    in bs4 (a 1 MB page took seconds).
    """
    from bs4 import NavigableString, Tag

    out: list[str] = []
    stack: list[tuple[Any, bool]] = [(root, False)]  # (node, inside <pre>)
    while stack:
        node, in_pre = stack.pop()
        if isinstance(node, _Mark):
            out.append(node)
        elif type(node) is NavigableString:  # subclasses are comments, doctype, CDATA
            out.append(node.replace("\n", PRE_BREAK) if in_pre else WHITESPACE.sub(" ", node))
        elif isinstance(node, Tag) and node.name not in SKIP_TAGS and not _is_hidden(node):
            stack.extend(_expand(node, in_pre or node.name == "pre"))
    return "".join(out)


def _expand(tag: Tag, in_pre: bool) -> list[tuple[Any, bool]]:
    """Return the tag's children framed by its break marks, reversed for the stack."""
    before, after = _marks(tag.name)
    items: list[tuple[Any, bool]] = [(_Mark(before), in_pre)]
    cells = 0
    for child in tag.contents:
        if tag.name == "tr" and getattr(child, "name", None) in ("td", "th"):
            if cells:
                items.append((_Mark(" | "), in_pre))
            cells += 1
        items.append((child, in_pre))
    items.append((_Mark(after), in_pre))
    return items[::-1]


def _marks(name: str) -> tuple[str, str]:
    """Return what goes before and after an element: where a browser breaks lines."""
    if name == "br":
        return "\n", ""
    if name in PARAGRAPH_TAGS:
        return PARAGRAPH_BREAK, PARAGRAPH_BREAK
    if name == "li":
        return "\n- ", "\n"
    if name in LINE_TAGS:
        return "\n", "\n"
    return "", ""


def _layout(text: str) -> str:
    """Turn break marks into lines: a run holding a paragraph break is one blank line."""
    text = BREAK_RUN.sub(lambda m: "\n\n" if PARAGRAPH_BREAK in m.group() else "\n", text)
    text = SPACE_RUN.sub(" ", text)
    return text.replace(PRE_BREAK, "\n").strip()
