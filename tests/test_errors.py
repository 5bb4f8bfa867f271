"""The error tree carries facts, not exit codes: a caller reads a provider error's status and URL.

The endpoint is a real HTTP server on 127.0.0.1 (the scripted server), reached by httpx.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import pytest

from tiny_cli import errors
from tiny_cli.errors import ConfigError, ProviderError, ProviderTimeout, TinyError
from tiny_cli.provider.client import ChatRequest, OpenAIProvider
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, http_error, raw_response
from tiny_cli.userfiles import read_text

MESSAGES = [{"role": "user", "content": "hi"}]


def _ask(url: str, api_key: str | None = None) -> ProviderError:
    """Ask the endpoint once (no retries) and return the ProviderError it ends in."""
    with (
        OpenAIProvider(url, api_key, retries=0) as provider,
        pytest.raises(ProviderError) as caught,
    ):
        provider.complete(ChatRequest("m", MESSAGES, [], 8))
    return caught.value


@pytest.mark.parametrize("status", [401, 404, 400, 503])
def test_a_caller_tells_a_401_from_a_404_by_the_status_not_the_text(status: int) -> None:
    with ScriptedServer([http_error(status)]) as server:
        error = _ask(server.url)

    assert error.status == status
    assert error.url == server.url
    assert not isinstance(error, ProviderTimeout)


def test_the_url_of_an_error_holds_no_credentials() -> None:
    with ScriptedServer([http_error(401)]) as server:
        error = _ask(server.url, api_key="sk-secret")
        parts = urlsplit(server.url)
        with_password = urlunsplit(parts._replace(netloc=f"me:hunter2@{parts.netloc}"))
        with pytest.raises(ConfigError, match="credentials in the URL") as refused:
            OpenAIProvider(with_password, "sk-secret")  # refused as the CLI refuses it

    assert error.status == 401 and error.url == server.url and "sk-secret" not in str(error)
    assert "hunter2" not in str(refused.value)


def test_no_answer_has_no_status() -> None:
    with socket.socket() as closed:  # a port that was just free: nothing listens there
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    error = _ask(f"http://127.0.0.1:{port}/v1")

    assert error.status is None and error.url == f"http://127.0.0.1:{port}/v1"


def test_an_unusable_answer_names_the_url_but_no_status() -> None:
    with ScriptedServer([raw_response("not json")]) as server:
        error = _ask(server.url)

    assert error.status is None and error.url == server.url
    assert "malformed" in str(error)


def test_a_setting_error_names_the_variable_and_a_file_error_the_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as bad_setting:
        load_settings({"TINY_THRESHOLD": "high", "TINY_HOME": str(tmp_path)}, cwd=tmp_path)
    with pytest.raises(ConfigError) as missing:
        read_text(tmp_path / "brief.yaml")

    assert (bad_setting.value.field, bad_setting.value.path) == ("TINY_THRESHOLD", None)
    assert (missing.value.path, missing.value.field) == (tmp_path / "brief.yaml", None)


def test_the_library_errors_carry_no_exit_codes_the_cli_decides_them() -> None:
    tree = [c for c in vars(errors).values() if isinstance(c, type) and issubclass(c, TinyError)]
    assert len(tree) + 1 == len(errors.__all__)  # every error, and TinyWarning
    assert "TinyWarning" in errors.__all__ and issubclass(errors.TinyWarning, UserWarning)
    assert [c.__name__ for c in tree if hasattr(c, "exit_code")] == []
