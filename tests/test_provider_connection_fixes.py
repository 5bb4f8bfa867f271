"""Connecting to a model server (review): an unusable SSL_CERT_FILE or proxy variable is one
line naming it, proxies are honoured as documented, blank tool-call ids get ids of their own,
credentials in a library base URL are refused, and a slow server passes the probe."""

from __future__ import annotations

import importlib.util
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from typer.testing import Result

from tiny_cli.errors import ConfigError, ProviderError
from tiny_cli.provider.client import ChatRequest, OpenAIProvider
from tiny_cli.routing.remote_embed import OpenAIEmbedder
from tiny_cli.testing import ScriptedServer, Turn, http_error, reply, respond, tool_calls

from .conftest import one_error_line

KEY = "sk-abcdefghijklmnopqrstuvwx"
ANSWER = '{"status": "ok", "summary": "A buddy and a plan.", "source": "onboarding.md"}'
INVOKE = ("invoke", "docs-finder", "how did the onboarding process work again", "--json")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY")


@pytest.fixture(autouse=True)
def no_proxies(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy or CA variable from the machine running the tests: each test sets its own."""
    for name in (*PROXY_VARIABLES, "SSL_CERT_FILE", "SSL_CERT_DIR"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)


def _dead_port() -> int:
    """A loopback port bound, then closed: nobody listens there."""
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        return closed.server_address[1]


def _ask(provider: OpenAIProvider) -> str | None:
    request = ChatRequest("m", [{"role": "user", "content": "hi"}], [], 16)
    return provider.complete(request, timeout=10).content


def _no_pem(tmp_path: Path) -> Path:
    path = tmp_path / "ca.pem"
    path.write_text("not a certificate\n", "utf-8")
    return path


# --- 1. an SSL_CERT_FILE TLS cannot load -----------------------------------------------------


@pytest.mark.parametrize(
    ("ca_file", "why"),
    [
        (lambda tmp: tmp / "missing.pem", "No such file or directory"),
        (_no_pem, "no PEM certificate in it"),
        (lambda tmp: tmp, "Is a directory"),
    ],
)
def test_an_unusable_ssl_cert_file_is_one_line_naming_it(
    tiny: Callable[..., Result], tmp_path: Path, ca_file: Callable[[Path], Path], why: str
) -> None:
    path = ca_file(tmp_path)
    env = {"SSL_CERT_FILE": str(path), "TINY_BASE_URL": "https://127.0.0.1:9/v1"}
    line = one_error_line(tiny(*INVOKE, env={**env, "TINY_PROJECT": "none"}))
    assert line == (
        f"SSL_CERT_FILE ({path}) cannot be used ({why}); set it to your CA's PEM file, or unset it"
    )


def test_the_remote_embedder_refuses_an_unusable_ssl_cert_file_the_same_way(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("SSL_CERT_FILE", str(_no_pem(tmp_path)))
    with pytest.raises(ConfigError, match=r"^SSL_CERT_FILE \(.*\(no PEM certificate in it\)"):
        OpenAIEmbedder("m", "https://127.0.0.1:9/v1")


# --- 2. a proxy httpx cannot use; proxies honoured, NO_PROXY too -------------------------------


def test_a_proxy_of_an_unknown_scheme_is_one_line_naming_its_variable(
    tiny: Callable[..., Result], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTP_PROXY", "ftp://proxyuser:hunter2@127.0.0.1:1")
    line = one_error_line(tiny(*INVOKE, env={"TINY_PROJECT": "none"}))
    assert line == (
        "the proxy in HTTP_PROXY cannot be used (not an http://, https:// or socks5:// URL); "
        "fix it, or unset it"
    )
    with pytest.raises(ConfigError, match=r"^the proxy in HTTP_PROXY cannot be used"):
        OpenAIEmbedder("m", "http://127.0.0.1:9/v1")


@pytest.mark.skipif(importlib.util.find_spec("socksio") is not None, reason="socksio installed")
def test_a_socks_proxy_without_socksio_is_one_line_naming_its_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ALL_PROXY", "socks5://127.0.0.1:1080")
    url = "http://127.0.0.1:9/v1"
    for make in (lambda: OpenAIProvider(url), lambda: OpenAIEmbedder("m", url)):
        with pytest.raises(ConfigError) as info:
            make()
        assert str(info.value) == (
            "the proxy in ALL_PROXY cannot be used (a SOCKS proxy needs the socksio package: "
            "pip install 'httpx[socks]'); fix it, or unset it"
        )


def test_a_proxy_applies_to_a_loopback_server_unless_no_proxy_names_it(
    scripted_server: ScriptedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As docs/providers.md says: the proxy is used, a local server needs NO_PROXY."""
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{_dead_port()}")
    with pytest.raises(ProviderError, match=r"^cannot reach"):
        OpenAIProvider(scripted_server.url, retries=0).probe(timeout=5)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    scripted_server.add(reply("through"))
    assert _ask(OpenAIProvider(scripted_server.url, retries=0)) == "through"


# --- 3. blank tool-call ids -------------------------------------------------------------------


def test_blank_tool_call_ids_get_ids_of_their_own(scripted_server: ScriptedServer) -> None:
    search = ("docs_search", {"query": "onboarding"})
    scripted_server.add(tool_calls((*search, ""), (*search, " "), (*search, "call_1")))
    request = ChatRequest("m", [{"role": "user", "content": "hi"}], [], 16)
    calls = OpenAIProvider(scripted_server.url).complete(request, timeout=10).tool_calls
    assert [call.id for call in calls] == ["call_0", "call_1", "call_2"]


def _refuse_blank_tool_call_ids(request: dict) -> Turn:
    """LM Studio: a tool message whose tool_call_id is empty is a 400."""
    tools = [m for m in request["messages"] if m["role"] == "tool"]
    if any(not m.get("tool_call_id") for m in tools):
        return http_error(400, "Invalid 'messages' in payload")
    return reply(ANSWER)


def test_a_run_answers_a_call_the_server_sent_with_an_empty_id(
    tiny: Callable[..., Result], scripted_server: ScriptedServer
) -> None:
    scripted_server.add(
        tool_calls(("docs_search", {"query": "onboarding"}, "")),
        respond(_refuse_blank_tool_call_ids),
    )
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_PROJECT": "none"}
    result = tiny(*INVOKE, "--tool-mode", "native", env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "ok"
    (tool,) = [m for m in scripted_server.requests[1]["messages"] if m["role"] == "tool"]
    assert tool["tool_call_id"] == "call_0"


# --- 6. credentials in a library base URL -----------------------------------------------------


def test_a_library_base_url_with_credentials_is_refused_as_the_cli_refuses_it() -> None:
    with pytest.raises(ConfigError) as info:
        OpenAIProvider("http://proxyuser:proxypw@127.0.0.1:9/v1", KEY)
    assert str(info.value) == (
        "base_url: credentials in the URL; keep them out of it (the key goes in api_key)"
    )


# --- 7. the probe: a slow server is there -------------------------------------------------------


class _SlowModels(BaseHTTPRequestHandler):
    """Answers GET /v1/models only when the test is done: a server up, but slow."""

    done: threading.Event

    def do_GET(self) -> None:
        self.done.wait(10)
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def slow_server() -> Iterator[str]:
    """The base URL of a server that takes the GET it received and answers only at the end."""
    done = threading.Event()
    handler = type("SlowModels", (_SlowModels,), {"done": done})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    done.set()
    server.shutdown()
    server.server_close()


def test_the_probe_passes_a_server_that_is_slow_to_answer(slow_server: str) -> None:
    OpenAIProvider(slow_server).probe(timeout=0.2)  # connected: something listens


def test_the_probe_still_says_nothing_listens_at_a_dead_port() -> None:
    with pytest.raises(ProviderError, match=r"^cannot reach .* is the server running\?"):
        OpenAIProvider(f"http://127.0.0.1:{_dead_port()}/v1").probe(timeout=5)
