"""http_get stays on the public internet: real loopback servers hold a secret it must not fetch."""

from __future__ import annotations

import ipaddress
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

import httpcore
import pytest

from tiny_cli.bench.pages import LoopbackServer
from tiny_cli.errors import ConfigError
from tiny_cli.settings import Settings, load_settings
from tiny_cli.tools import ToolCallError, web
from tiny_cli.tools.builtin import default_registry
from tiny_cli.tools.web import AddressPolicy, AllowedHost, address_problem, http_get

SECRET = "SECRET-7f3a9c-do-not-leak"
HINT = "tiny's web tools only fetch public addresses"


@dataclass
class Server:
    """A loopback server: /secret holds the secret, /to?u=URL redirects; it counts requests."""

    host: str
    port: int
    paths: list[str] = field(default_factory=list)

    @property
    def netloc(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"

    @property
    def base(self) -> str:
        return f"http://{self.netloc}"


def serve(host: str, family: socket.AddressFamily = socket.AF_INET) -> Iterator[Server]:
    info = Server(host, 0)

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            info.paths.append(self.path)
            if self.path.startswith("/to?u="):
                self.send_response(302)
                self.send_header("Location", self.path.removeprefix("/to?u="))
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = (SECRET if self.path == "/secret" else "<p>public page</p>").encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server_class = type("Server6", (LoopbackServer,), {"address_family": family})
    server = server_class((host, 0), Handler)
    info.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield info
    server.shutdown()
    server.server_close()


@pytest.fixture
def secret() -> Iterator[Server]:
    """The service a model must never reach: bound to 127.0.0.1 only, never allowed."""
    yield from serve("127.0.0.1")


@pytest.fixture
def secret6() -> Iterator[Server]:
    try:
        yield from serve("::1", socket.AF_INET6)
    except OSError:
        pytest.skip("no IPv6 loopback here")


@pytest.fixture
def allowed() -> Iterator[Server]:
    """A loopback server the user allowed by host:port."""
    yield from serve("127.0.0.1")


def refused(url: str, policy: AddressPolicy = web.PUBLIC_ONLY) -> str:
    """Call http_get, which must refuse; return the message the model would see."""
    with pytest.raises(ToolCallError) as exc:
        result = http_get(url, policy=policy, timeout=3)
        pytest.fail(f"fetched {url}: {result!r}")
    message = str(exc.value)
    assert SECRET not in message
    return message


# --- every loopback spelling, against a real server ---------------------------------------


@pytest.mark.parametrize(
    ("host", "shown"),
    [
        ("127.0.0.1", "127.0.0.1 is a loopback address"),
        ("localhost", "localhost resolves to 127.0.0.1, a loopback address"),
        ("2130706433", "2130706433 resolves to 127.0.0.1, a loopback address"),
        ("0x7f000001", "0x7f000001 resolves to 127.0.0.1, a loopback address"),
        ("127.1", "127.1 resolves to 127.0.0.1, a loopback address"),
        ("017700000001", "017700000001 resolves to 127.0.0.1, a loopback address"),
        ("0x7f.1", "0x7f.1 resolves to 127.0.0.1, a loopback address"),
        ("[::ffff:127.0.0.1]", "::ffff:127.0.0.1 resolves to 127.0.0.1, a loopback address"),
        ("0.0.0.0", "0.0.0.0 is the unspecified address"),
    ],
)
def test_loopback_spellings_are_refused(secret: Server, host: str, shown: str) -> None:
    message = refused(f"http://{host}:{secret.port}/secret")
    assert message.startswith(f"refused: {shown}; {HINT}")
    assert f"--allow-host {host}:{secret.port}" in message
    assert secret.paths == []  # refused before any connection, not after reading


def test_octal_dotted_quad_is_refused(secret: Server) -> None:
    message = refused(f"http://0177.0.0.1:{secret.port}/secret")
    assert "invalid URL" in message and secret.paths == []


def test_ipv6_loopback_is_refused(secret6: Server) -> None:
    message = refused(f"{secret6.base}/secret")
    assert message.startswith(f"refused: ::1 is a loopback address; {HINT}")
    assert f"--allow-host [::1]:{secret6.port}" in message
    assert secret6.paths == []


def test_metadata_address_is_refused() -> None:
    message = refused("http://169.254.169.254/latest/meta-data/")
    assert message.startswith("refused: 169.254.169.254 is a cloud metadata address;")


@pytest.mark.parametrize("url", ["file:///etc/passwd", "FILE:///etc/passwd", "gopher://x/"])
def test_other_schemes_are_refused(url: str) -> None:
    message = refused(url)
    assert "only http and https URLs can be fetched" in message
    assert "root:" not in message


# --- redirects: every hop is checked ------------------------------------------------------


def test_allowed_host_is_fetched(allowed: Server) -> None:
    policy = AddressPolicy.of([allowed.netloc])
    assert http_get(f"{allowed.base}/page", policy=policy) == "<p>public page</p>"
    assert http_get(f"{allowed.base}/to?u=/page", policy=policy) == "<p>public page</p>"
    assert allowed.paths == ["/page", "/to?u=/page", "/page"]


@pytest.mark.parametrize("target", ["127.0.0.1:{port}", "localhost:{port}", "127.0.0.2:{port}"])
def test_redirect_to_a_host_not_allowed_is_refused(
    allowed: Server, secret: Server, target: str
) -> None:
    policy = AddressPolicy.of([allowed.netloc])
    hop = f"http://{target.format(port=secret.port)}/secret"
    message = refused(f"{allowed.base}/to?u={hop}", policy)
    assert message.startswith("refused: ") and "a loopback address" in message
    assert f"redirected to {hop}" in message
    assert allowed.paths == [f"/to?u={hop}"] and secret.paths == []


def test_redirect_to_ipv6_loopback_is_refused(allowed: Server, secret6: Server) -> None:
    policy = AddressPolicy.of([allowed.netloc])
    message = refused(f"{allowed.base}/to?u={secret6.base}/secret", policy)
    assert message.startswith("refused: ::1 is a loopback address")
    assert secret6.paths == []


def test_redirect_to_other_port_of_allowed_ip_is_refused(allowed: Server, secret: Server) -> None:
    policy = AddressPolicy.of([f"127.0.0.1:{allowed.port}"])  # that port only
    message = refused(f"{allowed.base}/to?u={secret.base}/secret", policy)
    assert message.startswith("refused: 127.0.0.1 is a loopback address")
    assert secret.paths == []
    everywhere = AddressPolicy.of(["127.0.0.1"])  # no port: every port of that address
    assert http_get(f"{allowed.base}/to?u={secret.base}/secret", policy=everywhere) == SECRET


def test_redirect_to_file_is_refused(allowed: Server) -> None:
    policy = AddressPolicy.of([allowed.netloc])
    message = refused(f"{allowed.base}/to?u=file:///etc/passwd", policy)
    assert "redirected to an address http_get cannot fetch" in message and "not file" in message


# --- the connection goes to the address that was checked -----------------------------------


Resolver = Callable[..., Any]


def fake_dns(monkeypatch: pytest.MonkeyPatch, answers: dict[str, list[list[str]]]) -> list[str]:
    """Answer names in `answers` (one list per lookup, in turn); count the name lookups."""
    real: Resolver = socket.getaddrinfo
    looked_up: list[str] = []

    def getaddrinfo(host: Any, port: Any, *args: Any, **kwargs: Any) -> Any:
        if host not in answers:
            return real(host, port, *args, **kwargs)
        turn = min(looked_up.count(host), len(answers[host]) - 1)
        looked_up.append(host)
        return [
            (
                socket.AF_INET6 if ":" in ip else socket.AF_INET,
                socket.SOCK_STREAM,
                6,
                "",
                (ip, port, 0, 0) if ":" in ip else (ip, port),
            )
            for ip in answers[host][turn]
        ]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return looked_up


def test_no_second_lookup_so_no_rebinding(monkeypatch: pytest.MonkeyPatch, allowed: Server) -> None:
    # A rebinding resolver: the first answer is the checked one, the next would go elsewhere.
    looked_up = fake_dns(monkeypatch, {"pinned.test": [["127.0.0.1"], ["192.0.2.1"]]})
    policy = AddressPolicy.of([f"pinned.test:{allowed.port}"])
    url = f"http://pinned.test:{allowed.port}/page"
    assert http_get(url, policy=policy, timeout=3) == "<p>public page</p>"
    assert looked_up == ["pinned.test"]  # resolved once; the socket went to that answer
    assert allowed.paths == ["/page"]


def test_any_blocked_answer_refuses_the_name(monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up = fake_dns(monkeypatch, {"mixed.test": [["93.184.216.34", "127.0.0.1"]]})
    message = refused("http://mixed.test/")
    assert message.startswith("refused: mixed.test resolves to 127.0.0.1, a loopback address")
    assert looked_up == ["mixed.test"]


def test_public_answer_is_dialled_as_the_checked_ip(monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dns(monkeypatch, {"public.test": [["93.184.216.34"], ["127.0.0.1"]]})
    dialled: list[tuple[str, int]] = []

    def connect_tcp(self: Any, host: str, port: int, *args: Any, **kwargs: Any) -> Any:
        dialled.append((host, port))
        raise httpcore.ConnectError("no network in tests")

    monkeypatch.setattr(httpcore.SyncBackend, "connect_tcp", connect_tcp)
    backend = web.PinnedBackend(web.PUBLIC_ONLY)
    with pytest.raises(httpcore.ConnectError):
        backend.connect_tcp("public.test", 443, timeout=1)
    assert dialled == [("93.184.216.34", 443)]  # the address, never the name again


def test_one_client_per_policy() -> None:
    a, b = AddressPolicy.of(["127.0.0.1:1"]), AddressPolicy.of([" 127.0.0.1:1 "])
    assert web.shared_client(a) is web.shared_client(b)
    assert web.shared_client(a) is not web.shared_client(web.PUBLIC_ONLY)
    assert web.shared_client(a).trust_env is False  # no env proxy, no .netrc


# --- the address classifier ----------------------------------------------------------------


@pytest.mark.parametrize(
    "ip", ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700::1", "::ffff:93.184.216.34"]
)
def test_public_addresses_pass(ip: str) -> None:
    assert address_problem(ipaddress.ip_address(ip)) is None


@pytest.mark.parametrize(
    ("ip", "why"),
    [
        ("127.0.0.1", "a loopback address"),
        ("127.255.0.9", "a loopback address"),
        ("::1", "a loopback address"),
        ("::ffff:127.0.0.1", "a loopback address"),
        ("::ffff:10.0.0.1", "a private address"),
        ("2002:7f00:1::", "a loopback address"),  # 6to4 around 127.0.0.1
        ("64:ff9b::7f00:1", "a loopback address"),  # NAT64 around 127.0.0.1
        ("10.1.2.3", "a private address"),
        ("172.16.5.4", "a private address"),
        ("172.31.255.255", "a private address"),
        ("192.168.1.1", "a private address"),
        ("fd12:3456::1", "a private address"),
        ("fc00::1", "a private address"),
        ("169.254.169.254", "a cloud metadata address"),
        ("100.100.100.200", "a cloud metadata address"),
        ("168.63.129.16", "a cloud metadata address"),
        ("fd00:ec2::254", "a cloud metadata address"),
        ("169.254.1.1", "a link-local address"),
        ("fe80::1", "a link-local address"),
        ("fe80::1%1", "a link-local address"),
        ("224.0.0.1", "a multicast address"),
        ("239.255.255.250", "a multicast address"),
        ("ff02::1", "a multicast address"),
        ("0.0.0.0", "the unspecified address"),
        ("::", "the unspecified address"),
        ("240.0.0.1", "a reserved address"),
        ("255.255.255.255", "a reserved address"),
        ("fec0::1", "a site-local address"),
        ("100.64.0.1", "a special-purpose address, not a public one"),
        ("198.18.0.1", "a special-purpose address, not a public one"),  # benchmarking
    ],
)
def test_non_public_addresses_fail(ip: str, why: str) -> None:
    assert address_problem(ipaddress.ip_address(ip)) == why


# --- the setting users have ----------------------------------------------------------------


def test_allowed_host_entries_parse() -> None:
    assert AllowedHost.parse("127.0.0.1:8080") == AllowedHost("127.0.0.1", 8080)
    assert AllowedHost.parse("LocalHost") == AllowedHost("localhost", None)
    assert AllowedHost.parse("[::1]:9") == AllowedHost("::1", 9)
    assert AllowedHost.parse("::1") == AllowedHost("::1", None)
    assert AllowedHost.parse("intranet.example.") == AllowedHost("intranet.example", None)
    for bad in ("http://x/", "host:port", "a/b", "user@host", ""):
        with pytest.raises(ConfigError, match="allowed host"):
            AllowedHost.parse(bad)


def test_settings_read_tiny_allow_hosts_and_flags(tmp_path: Path) -> None:
    env = {"TINY_HOME": str(tmp_path), "TINY_ALLOW_HOSTS": " 127.0.0.1:8080, ,intranet.example "}
    settings = load_settings(env=env, cwd=tmp_path)
    assert settings.allow_hosts == ("127.0.0.1:8080", "intranet.example")
    assert load_settings(env={"TINY_HOME": str(tmp_path)}, cwd=tmp_path).allow_hosts == ()
    assert settings.with_flags(allow_hosts=None).allow_hosts == settings.allow_hosts
    assert settings.with_flags(allow_hosts=["[::1]:9", "[::1]:9"]).allow_hosts == ("[::1]:9",)


def test_builtin_http_get_uses_the_setting(tmp_path: Path, allowed: Server) -> None:
    settings = Settings(home=tmp_path, cards_dir=tmp_path, docs_dir=tmp_path)
    url = f"{allowed.base}/page"
    closed = default_registry(settings)["http_get"]
    assert refused_by_tool(closed, url).startswith("refused: 127.0.0.1 is a loopback address")
    opened = default_registry(replace(settings, allow_hosts=(allowed.netloc,)))
    assert opened["http_get"](url=url) == "<p>public page</p>"
    with pytest.raises(ConfigError, match=r"allowed host \(its value not shown"):
        default_registry(replace(settings, allow_hosts=("a/b",)))


def refused_by_tool(tool: Any, url: str) -> str:
    with pytest.raises(ToolCallError) as exc:
        tool(url=url)
    return str(exc.value)
