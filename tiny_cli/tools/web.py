"""Web tools: fetch a page over HTTP(S) with hard limits, and turn HTML into readable text."""

from __future__ import annotations

import ipaddress
import re
import socket
import threading
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from html.parser import HTMLParser
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import httpcore
import httpx

from tiny_cli._version import __version__
from tiny_cli.errors import AddressRefused, ToolCallError
from tiny_cli.setting_rules import parse_host

DEFAULT_HTTP_TIMEOUT = 15.0  # seconds, per connect/read/write phase
DEFAULT_MAX_BYTES = 1_000_000  # a page past this is cut: the runner caps results anyway
DEFAULT_MAX_REDIRECTS = 5
USER_AGENT = f"tiny-cli/{__version__} (+https://pypi.org/project/tiny-cli/)"
ALLOWED_SCHEMES = ("http", "https")
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
# Cloud metadata endpoints: AWS/GCP/Azure/OpenStack, AWS ECS, Alibaba, Azure wireserver, AWS v6.
# Most are caught as link-local or non-global anyway; 168.63.129.16 is in public space.
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "100.100.100.200",
        "168.63.129.16",
        "fd00:ec2::254",
    )
)
PRIVATE_NETWORKS = tuple(
    ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "fc00::/7")
)
NAT64_PREFIX = ipaddress.ip_network("64:ff9b::/96")  # IPv6 that a NAT64 gateway turns into IPv4
ALLOW_HINT = (
    "tiny's web tools only fetch public addresses "
    "(allow it with --allow-host {} or TINY_ALLOW_HOSTS)"
)
# Non-text/* content types that are still text a model can read.
TEXT_APPLICATION_TYPES = ("json", "xml", "javascript", "ecmascript", "x-www-form-urlencoded")
# Content-Encodings http_get decodes itself, a piece at a time, as zlib window bits: a
# compression bomb must not grow in memory past the size cap.
ZLIB_OR_GZIP = zlib.MAX_WBITS | 32  # deflate as the RFC has it: a zlib (or gzip) header
RAW_DEFLATE = -zlib.MAX_WBITS  # deflate as some servers send it: no header (httpx reads both)
DECODERS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": ZLIB_OR_GZIP}
ACCEPT_ENCODING = "gzip, deflate"
READ_CHUNK = 65_536  # bytes read, or decoded by one layer, at a time
# A body with no Content-Type is binary when it starts like an image, PDF, archive or font,
# or holds a NUL byte early on (text never does).
BINARY_MAGIC = (
    *(b"\x89PNG", b"GIF8", b"\xff\xd8\xff", b"%PDF-", b"PK\x03\x04", b"\x1f\x8b"),
    *(b"\x7fELF", b"wOFF", b"wOF2", b"7z\xbc\xaf"),
)
SNIFF_BYTES = 1024

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
# What goes before and after an element: where a browser breaks lines.
MARKS = {
    **dict.fromkeys(LINE_TAGS, ("\n", "\n")),
    **dict.fromkeys(PARAGRAPH_TAGS, (PARAGRAPH_BREAK, PARAGRAPH_BREAK)),
    "li": ("\n- ", "\n"),
    "br": ("\n", ""),
}
# Tried only where a run of blanks starts: a long run is scanned once, not from each character.
BREAK_RUN = re.compile(r"(?<![\s\ue000\ue001])[\s\ue000\ue001]*[\n\ue001][\s\ue000\ue001]*")
WHITESPACE = re.compile(r"\s+")
# Spaces doubled where inline strings meet; not at a <pre> line start, whose indent counts.
SPACE_RUN = re.compile(r"(?<=[^\s\ue000]) {2,}")
# Elements whose text is code or a template, never page text (not even a title's)
RAW_TEXT_TAGS = ("script", "style", "template")
# Elements that never hold anything: the parser sees no end tag for them.
VOID_TAGS = frozenset(
    {*("area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "param")}
    | {"source", "track", "wbr"}
)
# A page's own charset declaration: an XML prolog first, else a <meta> in its first 2 KiB.
XML_CHARSET = re.compile(rb"^\s*<\?.*encoding=['\"](.*?)['\"].*\?>", re.I)
META_CHARSET = re.compile(rb"<\s*meta[^>]+charset\s*=\s*[\"']?([^>]*?)[ /;'\">]", re.I)
# Put where html.parser gave up on a page's markup: the model knows the text stops short.
UNREAD = "[tiny could not read the rest of this page: its HTML is malformed here]"


def http_get(
    url: str,
    *,
    policy: AddressPolicy | None = None,
    transport: httpx.BaseTransport | None = None,
    timeout: float = DEFAULT_HTTP_TIMEOUT,
    max_bytes: int = DEFAULT_MAX_BYTES,
    max_redirects: int = DEFAULT_MAX_REDIRECTS,
) -> str:
    """Fetch `url` and return its body as text; raise ToolCallError with a fixable message."""
    url = url.strip()
    _check_url(url)
    # PinnedBackend checks each hop; a caller's transport (tests, recordings) decides itself
    client = shared_client(policy or PUBLIC_ONLY) if transport is None else _client(transport)
    try:
        response, hops = _follow(client, url, timeout, max_redirects)
        try:
            _check_response(url, response, hops)
            body, cut = _read_capped(response, max_bytes)
        finally:
            response.close()
    except httpx.HTTPError as exc:
        raise ToolCallError(_describe(url, exc, timeout)) from exc
    except zlib.error as exc:
        raise ToolCallError(f"cannot decode the compressed body of {_shown(url)}: {exc}") from None
    _check_body(url, response, body)
    text = _decoded(response, body)
    if cut:
        text += f"\n\n[cut: the response is longer than {max_bytes} bytes; this is its start]"
    return text


def html_to_text(html: str) -> str:
    """Return the readable text of an HTML document: title first, one block per line."""
    if re.fullmatch(r"\s*https?://\S+\s*", html):
        raise ToolCallError("html_to_text takes the HTML itself, not a URL; call http_get first")
    page = _Page()
    try:
        page.feed(html)
        page.close()
    except AssertionError:  # html.parser gives up on some markup (`<![ foo`): keep what it read
        page.end()
        page.out.append(f"{PARAGRAPH_BREAK}{UNREAD}")
    title = " ".join("".join(page.title or ()).split())
    body = _layout("".join(page.out))
    if not title or body.split("\n", 1)[0] == title:  # an <h1> that repeats the title
        return body
    return f"{title}\n\n{body}".strip()


# --- which addresses may be fetched -------------------------------------------------------


def address_problem(ip: IPAddress) -> str | None:
    """Return why `ip` is not a public address ("a loopback address"), or None if it is."""
    ip = _unmapped(ip)  # ::ffff:a.b.c.d as its IPv4; fe80::1%eth0 without the zone
    if isinstance(ip, ipaddress.IPv6Address):  # 6to4 and NAT64: by the IPv4 reached, and itself
        inner = ip.sixtofour or (
            ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF) if ip in NAT64_PREFIX else None
        )
        if inner is not None and (problem := address_problem(inner)):
            return problem
    checks = (
        (ip in METADATA_ADDRESSES, "a cloud metadata address"),
        (ip.is_loopback, "a loopback address"),
        (ip.is_unspecified, "the unspecified address"),
        (ip.is_link_local, "a link-local address"),
        (ip.is_multicast, "a multicast address"),
        (any(ip in net for net in PRIVATE_NETWORKS), "a private address"),
        (isinstance(ip, ipaddress.IPv6Address) and ip.is_site_local, "a site-local address"),
        (ip.is_reserved, "a reserved address"),
        (not ip.is_global, "a special-purpose address, not a public one"),
    )
    return next((why for hit, why in checks if hit), None)


@dataclass(frozen=True)
class AllowedHost:
    """One --allow-host entry: a host name or IP, on one port or (port None) on any."""

    host: str  # as httpx normalizes it: lower case, IDNA, IPv6 without brackets
    port: int | None = None

    @classmethod
    def parse(cls, entry: str) -> AllowedHost:
        """Read 'host', 'host:port', '[v6]' or '[v6]:port'; raise ConfigError if malformed."""
        return cls(*parse_host("allowed host", entry))

    def matches(self, host: str, port: int, ip: IPAddress) -> bool:
        """Tell whether a connection to `host` (resolved to `ip`) on `port` is this entry."""
        if self.port is not None and self.port != port:
            return False
        if self.host == host.lower().rstrip("."):
            return True
        try:
            return _unmapped(ipaddress.ip_address(self.host)) == _unmapped(ip)
        except ValueError:  # a name, not an address
            return False


@dataclass(frozen=True)
class AddressPolicy:
    """Public addresses only, plus the hosts the user allowed (by name or address, and port)."""

    allowed: tuple[AllowedHost, ...] = ()

    @classmethod
    def of(cls, entries: Iterable[str]) -> AddressPolicy:
        """Build the policy from 'host[:port]' entries (settings.allow_hosts)."""
        return cls(tuple(AllowedHost.parse(e) for e in entries if e.strip()))

    def check(self, host: str, port: int, ips: Iterable[IPAddress]) -> None:
        """Raise AddressRefused unless every address `host` resolved to may be fetched."""
        for ip in ips:
            problem = address_problem(ip)
            if problem is None or any(a.matches(host, port, ip) for a in self.allowed):
                continue
            shown = _unmapped(ip)
            named = str(shown) == host.strip("[]")
            where = f"{shown} is {problem}" if named else f"{host} resolves to {shown}, {problem}"
            target = f"[{host}]" if ":" in host else host
            raise AddressRefused(f"refused: {where}; " + ALLOW_HINT.format(f"{target}:{port}"))


PUBLIC_ONLY = AddressPolicy()


class PinnedBackend(httpcore.NetworkBackend):
    """Resolve the host once, check every address, connect to a checked address only.

    httpcore calls connect_tcp for each new connection: the socket goes to the address that
    passed the check, so DNS rebinding never comes into play; TLS still checks the host name.
    """

    def __init__(self, policy: AddressPolicy) -> None:
        self._policy = policy
        self._tcp = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        ips = resolve(host, port)
        self._policy.check(host, port, ips)
        failure: Exception | None = None
        for ip in ips:
            try:  # an IP literal: create_connection does no DNS lookup for it
                return self._tcp.connect_tcp(str(ip), port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure or httpcore.ConnectError(f"{host} has no address")

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        raise AddressRefused(f"refused: unix socket {path}; http_get only fetches web addresses")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def resolve(host: str, port: int) -> list[IPAddress]:
    """Return the addresses `host` resolves to, in the resolver's order, without repeats."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise httpcore.ConnectError(f"cannot resolve {host}: {exc}") from exc
    ips = (ipaddress.ip_address(info[4][0]) for info in infos if info[0] in _INET)
    return list(dict.fromkeys(ips))


class PinnedTransport(httpx.HTTPTransport):
    """httpx's own transport, its connection pool built on PinnedBackend; no proxies."""

    def __init__(self, policy: AddressPolicy) -> None:
        ssl_context = httpx.create_ssl_context()
        super().__init__(verify=ssl_context, trust_env=False)
        # HTTPTransport takes no network backend, so its pool is rebuilt with ours.
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context,
            max_connections=20,
            max_keepalive_connections=10,
            keepalive_expiry=5.0,
            network_backend=PinnedBackend(policy),
        )


def shared_client(policy: AddressPolicy) -> httpx.Client:
    """Return this process's client for `policy`: one pool, one TLS context, reused."""
    with _CLIENTS_LOCK:  # a bench's first wave of calls must not build (and leak) one each
        client = _CLIENTS.get(policy)
        if client is None:
            client = _CLIENTS[policy] = _client(PinnedTransport(policy))
        return client


_CLIENTS: dict[AddressPolicy, httpx.Client] = {}
_CLIENTS_LOCK = threading.Lock()
_INET = (socket.AF_INET, socket.AF_INET6)


def _unmapped(ip: IPAddress) -> IPAddress:
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.scope_id:
            return ipaddress.IPv6Address(int(ip))
    return ip


# --- helpers ------------------------------------------------------------------------------


def _client(transport: httpx.BaseTransport) -> httpx.Client:
    return httpx.Client(  # follows no redirect itself: `_follow` checks each hop
        transport=transport,
        timeout=DEFAULT_HTTP_TIMEOUT,
        follow_redirects=False,
        trust_env=False,  # no proxy (it would connect for us) and no .netrc
        # only the encodings _read_capped decodes, whatever decoders httpx has installed
        headers={"User-Agent": USER_AGENT, "Accept-Encoding": ACCEPT_ENCODING},
    )


def _follow(
    client: httpx.Client, url: str, timeout: float, max_redirects: int
) -> tuple[httpx.Response, int]:
    """GET `url`, each redirect checked; return the open response and the redirects taken."""
    try:
        request = client.build_request("GET", url, timeout=timeout)
    except httpx.InvalidURL as exc:
        raise ToolCallError(f"invalid URL {_shown(url)!r}: {exc}") from None
    for hops in range(max_redirects + 1):
        try:
            response = client.send(request, stream=True)
        except AddressRefused as exc:
            if hops:
                moved = f"{_shown(url)} redirected to {_shown(request.url)}"
                raise AddressRefused(f"{exc} ({moved})") from None
            raise
        if response.next_request is None:
            return response, hops
        response.close()
        request = response.next_request
        try:
            _check_url(str(request.url))
        except ToolCallError as exc:
            raise ToolCallError(
                f"{_shown(url)} redirected to an address http_get cannot fetch: {exc}"
            ) from None
    raise ToolCallError(f"too many redirects (more than {max_redirects}) for {_shown(url)}")


def _check_url(url: str) -> None:
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # not echoed: where its user:password ends is unknown
        raise ToolCallError(f"invalid URL: {exc}") from None
    shown = _shown(url)
    if not parts.scheme:
        raise ToolCallError(f"{shown!r} is not an absolute URL; give it with https:// or http://")
    if parts.scheme.lower() not in ALLOWED_SCHEMES:
        raise ToolCallError(
            f"only http and https URLs can be fetched, not {parts.scheme}: ({shown})"
        )
    if not parts.hostname:
        raise ToolCallError(f"{shown!r} has no host name")


def _shown(url: str | httpx.URL) -> str:
    """The URL without its user name and password (_check_url has split it already)."""
    parts = urlsplit(str(url))
    host = parts.netloc.rpartition("@")[2]
    return str(url) if host == parts.netloc else urlunsplit(parts._replace(netloc=host))


def _check_response(url: str, response: httpx.Response, hops: int) -> None:
    shown = _shown(url) + (f" (redirected to {_shown(response.url)})" if hops else "")
    if not response.is_success:
        raise ToolCallError(f"HTTP {response.status_code} for {shown}")
    ctype = _content_type(response)
    if ctype and not (ctype.startswith("text/") or any(t in ctype for t in TEXT_APPLICATION_TYPES)):
        raise ToolCallError(f"{shown} is {ctype}, not text; http_get only reads text pages")
    unknown = [c for c in _encodings(response) if c not in DECODERS]
    if unknown:
        raise ToolCallError(
            f"{shown} is sent with Content-Encoding {unknown[0]!r}, which "
            "http_get cannot decode; only gzip and deflate"
        )


def _check_body(url: str, response: httpx.Response, body: bytes) -> None:
    head = body[:SNIFF_BYTES]
    if not _content_type(response) and (b"\0" in head or head.startswith(BINARY_MAGIC)):
        raise ToolCallError(
            f"{_shown(url)} has no Content-Type and its body is binary, not text; "
            "http_get only reads text pages"
        )


def _content_type(response: httpx.Response) -> str:
    return response.headers.get("content-type", "").split(";")[0].strip().lower()


def _encodings(response: httpx.Response) -> list[str]:
    codings = response.headers.get_list("content-encoding", split_commas=True)
    return [c for c in (c.strip().lower() for c in codings) if c not in ("", "identity")]


def _read_capped(response: httpx.Response, max_bytes: int) -> tuple[bytes, bool]:
    """Read and decode at most `max_bytes`: a compression bomb never grows past the cap."""
    body = bytearray()
    for piece in _pieces(response):
        body += piece
        if len(body) > max_bytes or response.num_bytes_downloaded > max_bytes:
            return bytes(body[:max_bytes]), True
    return bytes(body), False


def _pieces(response: httpx.Response) -> Iterable[bytes]:
    """The body as it arrives, each compression layer decoded a piece at a time."""
    if response.is_stream_consumed:  # built whole by a caller's transport: decoded already
        return [response.content]
    pieces: Iterable[bytes] = response.iter_raw(READ_CHUNK)
    for coding in reversed(_encodings(response)):
        pieces = _inflate(pieces, DECODERS[coding])
    return pieces


def _inflate(pieces: Iterable[bytes], wbits: int) -> Iterator[bytes]:
    """Decode one layer, READ_CHUNK bytes at most a piece; a piece out for each piece in (caps)."""
    inflater = zlib.decompressobj(wbits)
    unsure = wbits == ZLIB_OR_GZIP  # until deflate's first bytes say if a header leads
    for piece in pieces:
        try:
            out = inflater.decompress(piece, READ_CHUNK)
        except zlib.error:
            if not unsure:
                raise
            inflater = zlib.decompressobj(RAW_DEFLATE)  # httpx's DeflateDecoder does the same
            out = inflater.decompress(piece, READ_CHUNK)
        unsure = unsure and not piece
        yield out
        while inflater.unconsumed_tail:
            yield inflater.decompress(inflater.unconsumed_tail, READ_CHUNK)
        if inflater.eof:  # what follows the compressed stream is not the page's
            return
    yield inflater.flush()


def _decoded(response: httpx.Response, body: bytes) -> str:
    """Decode by the header's charset, else the page's own, else UTF-8: the first Python has."""
    found = XML_CHARSET.search(body, 0, 1024) or META_CHARSET.search(body, 0, 2048)
    declared = found.group(1).decode("ascii", "replace") if found else None
    for name in filter(None, (response.charset_encoding, declared)):
        try:
            return body.decode(name, errors="replace")
        except (LookupError, ValueError):  # unknown, no text encoding (rot13, base64), idna
            continue
    return body.decode("utf-8", errors="replace")


def _describe(url: str, exc: httpx.HTTPError, timeout: float) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timed out after {timeout:g}s fetching {_shown(url)}"
    if isinstance(exc, httpx.ConnectError):
        where = urlsplit(_shown(url)).netloc
        return f"cannot connect to {where}: {str(exc) or 'connection refused'}"
    if isinstance(exc, httpx.UnsupportedProtocol):
        return f"{_shown(url)} redirected to an address http_get cannot fetch: {exc}"
    return f"cannot fetch {_shown(url)}: {type(exc).__name__}: {exc}"


class _Page(HTMLParser):
    """A page's text and break marks, written as html.parser reads it: no tree is kept.

    An element closes at its end tag, an enclosing element's, or the page's end (a stray end
    tag closes nothing). Hidden elements are skipped whole; <title> is kept apart (not an icon's).
    """

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.title: list[str] | None = None  # the first <title> outside an <svg>, once seen
        self._open: list[list[Any]] = []  # [name, mark after it, cells so far, skipped]
        self._counts: Counter[str] = Counter()  # open elements by name: no scan of _open
        self._data: list[str] = []
        self._skipped = 0  # open elements that skip what they hold
        self._title: list[Any] | None = None  # that <title>'s entry in _open, while open

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._flush()
        values = dict(attrs)
        skip = tag in SKIP_TAGS or "hidden" in values or values.get("aria-hidden") == "true"
        before, after = MARKS.get(tag, ("", ""))
        parent = self._open[-1] if self._open else None
        if not self._skipped and parent is not None and parent[0] == "tr" and tag in ("td", "th"):
            self.out.append(" | " if parent[2] else "")  # between a row's cells, hidden or not
            parent[2] += 1
        shown = not self._skipped and not skip
        if tag in VOID_TAGS:
            self.out.append(before + after if shown else "")
            return
        self.out.append(before if shown else "")
        entry = [tag, after, 0, skip]
        if tag == "title" and self.title is None and not self._counts["svg"]:
            self.title, self._title = [], entry
        self._open.append(entry)
        self._counts[tag] += 1
        self._skipped += skip

    def handle_endtag(self, tag: str) -> None:
        self._flush()
        if not self._counts[tag]:
            return
        while True:
            entry = self._open.pop()
            name, after, _, skip = entry
            self._counts[name] -= 1
            if entry is self._title:
                self._title = None
            self._skipped -= skip
            if not self._skipped and not skip:
                self.out.append(after)
            if name == tag:
                return

    def handle_data(self, data: str) -> None:
        self._data.append(data)  # one run of text may come in several pieces

    def close(self) -> None:
        super().close()
        self.end()

    def end(self) -> None:
        """Close every element still open, after the text read so far."""
        self._flush()
        while self._open:
            self.handle_endtag(self._open[-1][0])

    def _flush(self) -> None:
        text, self._data = "".join(self._data), []
        if not text:
            return
        in_code = any(self._counts[t] for t in RAW_TEXT_TAGS)  # no title's text
        if self.title is not None and self._title is not None and not in_code:
            self.title.append(text)
        if self._skipped:
            return
        if self._counts["pre"]:
            self.out.append(text.replace("\n", PRE_BREAK))
        else:
            self.out.append(WHITESPACE.sub(" ", text))


def _layout(text: str) -> str:
    text = BREAK_RUN.sub(lambda m: "\n\n" if PARAGRAPH_BREAK in m.group() else "\n", text)
    text = SPACE_RUN.sub(" ", text)
    return text.replace(PRE_BREAK, "\n").strip()
