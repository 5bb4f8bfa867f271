"""The model server as a person meets it: a request may take the time its run has left; a
broken embeddings answer, a host no resolver takes, a certificate not trusted, a recording's
tool mode, a URL's case and blanks, a blank variable, a dead server at the end of the budget
and a redirect are each said for what they are, in one line."""

from __future__ import annotations

import json
import shutil
import ssl
import subprocess
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tiny_cli.errors import ProviderError
from tiny_cli.provider.client import ChatRequest, OpenAIProvider
from tiny_cli.testing import ScriptedServer, http_error, raw_response, reply

from .conftest import one_error_line

ONBOARDING = "how did the onboarding process work again"
ANSWER = '{"status": "ok", "summary": "A buddy and a plan.", "source": "onboarding.md"}'
INVOKE = ("invoke", "docs-finder", ONBOARDING, "--json")
REPO = Path(__file__).resolve().parent.parent
NATIVE_RECORDING = REPO / "examples" / "bench" / "recordings" / "qwen2.5-coder-1.5b-native.jsonl"


@pytest.fixture
def cli_env(cli_env: dict[str, str], plain_cards: Path) -> dict[str, str]:
    """Cards whose answers need no tool result; no project file but the one a test names."""
    return {**cli_env, "TINY_CARDS": str(plain_cards), "TINY_PROJECT": "none"}


def _dead_port() -> int:
    """A loopback port bound, then closed: nobody listens there."""
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        return closed.server_address[1]


class _Serving:
    """A real loopback HTTP server of one handler class, in a thread; `context` makes it TLS."""

    def __init__(self, handler: type, context: ssl.SSLContext | None = None) -> None:
        self.http = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        if context is not None:
            self.http.socket = context.wrap_socket(self.http.socket, server_side=True)
        self.port = self.http.server_address[1]
        threading.Thread(target=self.http.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.http.shutdown()
        self.http.server_close()


# --- 1. a request may take the time its run has left -------------------------------------


def test_a_slow_answer_within_the_cards_budget_is_waited_for(tiny, plain_cards: Path) -> None:
    # 300 s scaled by 0.01 is 3 s of budget; a fixed 60 s timeout so scaled cuts a try at 0.6 s
    card = plain_cards / "docs-finder.yaml"
    card.write_text(
        card.read_text("utf-8").replace("max_wall_seconds: 45", "max_wall_seconds: 300")
    )
    with ScriptedServer([reply(ANSWER, delay=1.2)] * 4) as server:
        result = tiny(*INVOKE, "--wall-scale", "0.01", env={"TINY_BASE_URL": server.url})
    digest = json.loads(result.stdout)
    assert digest["status"] == "ok", result.output
    assert len(server.requests) == 1  # asked once, answered once


# --- 2. an embeddings answer that is no vector is refused, and nothing is cached ------------


def _embeddings(first: str) -> type:
    """A handler answering each text with a vector whose first number is `first` (JSON text);
    a `first` starting with `{` is the whole body instead."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            asked = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            rows = [
                f'{{"index": {i}, "embedding": [{first}, 1.0, {i % 3}]}}'
                for i in range(len(asked["input"]))
            ]
            body = first if first.startswith("{") else f'{{"data": [{", ".join(rows)}]}}'
            data = body.encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@pytest.mark.parametrize(
    ("first", "said"),
    [
        ("NaN", "NaN, Infinity"),
        ("-Infinity", "NaN, Infinity"),
        ("1e308", "too large for float32"),
        ('{"data": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ],
)
@pytest.mark.slow
def test_an_embedding_that_is_no_vector_is_one_line_and_not_cached(
    tiny, first: str, said: str
) -> None:
    broken = _Serving(_embeddings(first))
    env = {"TINY_EMBEDDER": "openai:m", "TINY_BASE_URL": f"http://127.0.0.1:{broken.port}/v1"}
    try:
        result = tiny("route", "book a flight to rome", env=env)
    finally:
        broken.close()
    assert said in one_error_line(result)
    fixed = _Serving(_embeddings("0.25"))
    try:  # the server fixed, the route works: no broken vector was kept
        url = f"http://127.0.0.1:{fixed.port}/v1"
        result = tiny("route", "book a flight to rome", env={**env, "TINY_BASE_URL": url})
    finally:
        fixed.close()
    assert result.exit_code == 0, result.output


# --- 3. a host no resolver takes is one line naming the setting -----------------------------


@pytest.mark.parametrize("host", ["a..b", "a" * 64 + ".example"])
def test_a_host_with_an_empty_or_long_label_is_refused_naming_the_setting(
    tiny, tmp_path: Path, host: str
) -> None:
    url = f"http://{host}/v1"
    assert "TINY_BASE_URL:" in one_error_line(tiny(*INVOKE, env={"TINY_BASE_URL": url}))
    assert "--base-url:" in one_error_line(tiny(*INVOKE, "--base-url", url))
    project = tmp_path / "tiny.toml"
    project.write_text(f'base_url = "{url}"\n')
    line = one_error_line(tiny(*INVOKE, env={"TINY_PROJECT": str(project)}))
    assert f"{project}:1: base_url" in line and "not a valid name" in line
    routed = tiny("route", "x", env={"TINY_EMBEDDER": "openai:m", "TINY_BASE_URL": url})
    assert "TINY_BASE_URL:" in one_error_line(routed)


def test_a_host_the_http_client_refuses_is_one_line_naming_the_setting(tiny) -> None:
    url = "http://\u2603.invalid/v1"  # the old IDNA takes a snowman; the HTTP client does not
    line = one_error_line(tiny(*INVOKE, env={"TINY_BASE_URL": url}))
    assert "its host is not a usable name" in line and "set TINY_BASE_URL" in line
    routed = tiny("route", "x", env={"TINY_EMBEDDER": "openai:m", "TINY_BASE_URL": url})
    assert "set TINY_BASE_URL" in one_error_line(routed)


# --- 4. a TLS failure is said as one, not retried ---------------------------------------------


def test_https_at_a_plain_http_server_is_a_tls_failure_said_at_once(tiny) -> None:
    with ScriptedServer([reply(ANSWER)]) as server:
        url = server.url.replace("http://", "https://")
        result = tiny(*INVOKE, env={"TINY_BASE_URL": url})
    reason = json.loads(result.stdout)["reason"]
    assert f"TLS with {url} failed: the TLS handshake failed" in reason
    assert "use http://" in reason and "SSL_CERT_FILE" in reason
    assert "is the server running" not in reason and "tries" not in reason


class _Answering(BaseHTTPRequestHandler):
    """Answers every request with one chat completion."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        data = json.dumps({"choices": [{"message": {"content": ANSWER}}]}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def self_signed(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """An https:// server on loopback whose certificate is its own; (its URL, the cert)."""
    if shutil.which("openssl") is None:
        pytest.skip("needs the openssl command to make a certificate")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
         "-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server = _Serving(_Answering, context)
    yield f"https://127.0.0.1:{server.port}/v1", cert
    server.close()


def test_an_untrusted_certificate_says_so_and_how_to_trust_it(tiny, self_signed) -> None:
    url, cert = self_signed
    result = tiny(*INVOKE, env={"TINY_BASE_URL": url})
    reason = json.loads(result.stdout)["reason"]
    assert f"TLS with {url} failed: certificate verify failed (self" in reason, reason
    assert "set SSL_CERT_FILE" in reason and "is the server running" not in reason
    trusted = tiny(*INVOKE, env={"TINY_BASE_URL": url, "SSL_CERT_FILE": str(cert)})
    assert json.loads(trusted.stdout)["status"] == "ok", trusted.output  # the advice holds


# --- 5. a replay uses the recording's tool mode ---------------------------------------------


def test_a_replay_uses_the_recordings_tool_mode_over_the_environment(tiny, tmp_path) -> None:
    project = tmp_path / "tiny.toml"
    project.write_text('tool_mode = "json"\n')
    replay = ("bench", "--replay", str(NATIVE_RECORDING), "-q", "--no-log")
    for env in ({"TINY_TOOL_MODE": "json"}, {"TINY_PROJECT": str(project)}):
        result = tiny(*replay, env={**env, "TINY_CARDS": ""})
        assert result.exit_code == 0, result.output
        assert "no recorded answer" not in result.output


def test_a_replay_made_in_each_cards_own_mode_ignores_the_environments(tiny, tmp_path) -> None:
    auto = NATIVE_RECORDING.with_name("qwen2.5-coder-1.5b-auto.jsonl")
    lines = auto.read_text("utf-8").splitlines()
    header = json.loads(lines[0])
    assert header["tool_mode"] == "auto"  # the seed cards' own mode: what null says
    recording = tmp_path / "own-mode.jsonl"
    recording.write_text("\n".join([json.dumps({**header, "tool_mode": None}), *lines[1:]]) + "\n")
    here = NATIVE_RECORDING.parent
    paths = (
        "--tasks",
        str(here / header["bench"]["tasks"]),
        "--cards",
        str(here / header["bench"]["cards"]),
    )
    replay = ("bench", "--replay", str(recording), *paths, "-q", "--no-log")
    result = tiny(*replay, env={"TINY_TOOL_MODE": "json"})
    assert result.exit_code == 0 and "no recorded answer" not in result.output, result.output


def test_a_replay_flag_naming_another_tool_mode_isone_error_line(tiny) -> None:
    result = tiny("bench", "--replay", str(NATIVE_RECORDING), "--tool-mode", "json", "--no-log")
    line = one_error_line(result)
    assert line.startswith("--tool-mode json: ") and "recorded in native tool mode" in line


# --- 6. a URL's scheme in any case; blanks around it refused where it was set ------------------


@pytest.mark.parametrize("scheme", ["HTTP://", "Http://"])
def test_a_scheme_in_capitals_is_a_scheme(tiny, scheme: str) -> None:
    with ScriptedServer([reply(ANSWER)]) as server:
        url = server.url.replace("http://", scheme)
        for source in ({"TINY_BASE_URL": url}, {}):
            flags = () if source else ("--base-url", url)
            result = tiny(*INVOKE, *flags, env=source)
            assert json.loads(result.stdout)["status"] == "ok", result.output
            server.add(reply(ANSWER))


def test_blanks_around_a_base_url_are_refused_naming_where_it_was_set(tiny, tmp_path) -> None:
    url = " http://127.0.0.1:9/v1"
    assert one_error_line(tiny(*INVOKE, env={"TINY_BASE_URL": url})).startswith("TINY_BASE_URL:")
    assert one_error_line(tiny(*INVOKE, "--base-url", url)).startswith("--base-url:")
    project = tmp_path / "tiny.toml"
    project.write_text(f'base_url = "{url}"\n')
    line = one_error_line(tiny(*INVOKE, env={"TINY_PROJECT": str(project)}))
    assert line.startswith(f"{project}:1: base_url: blanks around the URL")


# --- 7. a variable of blanks only is refused, not read as unset ---------------------------------


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("TINY_HOME", " "),
        ("TINY_ALLOW_HOSTS", "  "),
        ("TINY_ALLOW_HOSTS", ","),
        ("TINY_NO_LOG", "  "),
        ("TINY_ASK_ROUTE", "  "),
    ],
)
def test_a_variable_of_blanks_only_is_refused(
    tiny, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, var: str, value: str
) -> None:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)  # a TINY_HOME of " " would be a folder here
    with ScriptedServer([reply(ANSWER)]) as server:
        result = tiny(*INVOKE, env={var: value, "TINY_BASE_URL": server.url})
        assert server.requests == []
    assert one_error_line(result).startswith(f"{var}: ")
    assert list(cwd.iterdir()) == []


# --- 8. a dead server at the end of the budget is not a slow one ------------------------------


def test_a_server_never_reached_is_said_so_when_the_budget_ends(tiny) -> None:
    url = f"http://127.0.0.1:{_dead_port()}/v1"
    result = tiny(*INVOKE, "--wall-scale", "0.02", env={"TINY_BASE_URL": url})  # 0.9 s
    digest = json.loads(result.stdout)
    assert digest["status"] == "failed", result.output
    assert digest["reason"].startswith(f"cannot reach {url} — is the server running?")
    assert "was slow" not in result.stdout and "max_wall_seconds" not in result.stdout


# --- 9. a 408 and a redirect are said for what they are ---------------------------------------


def _ask(url: str) -> str:
    """The one line a request to `url` fails with (no retry waits)."""
    provider = OpenAIProvider(url, retries=1, backoff=0)
    request = ChatRequest("m", [{"role": "user", "content": "hi"}], [], 10)
    with provider, pytest.raises(ProviderError) as info:
        provider.complete(request)
    return str(info.value)


def test_a_408_is_a_request_timeout_not_a_server_error() -> None:
    with ScriptedServer([http_error(408), http_error(408)]) as server:
        said = _ask(server.url)
    assert said.startswith(f"{server.url} answered HTTP 408 (request timeout) after 2 tries")
    assert "server error" not in said


def test_a_redirect_says_where_to_and_that_it_is_not_followed() -> None:
    moved = {"Location": "https://user:pw@models.example/v1/chat/completions?key=sk-x"}
    with ScriptedServer([raw_response("", status=302, headers=moved)]) as server:
        said = _ask(server.url)
    assert said == (
        f"{server.url} redirected the request (HTTP 302) to "
        "https://models.example/v1/chat/completions; redirects are not followed: check the "
        "scheme and path of TINY_BASE_URL"
    )
