"""Secrets found by a sweep of what tiny prints and writes: a key is scrubbed however the text
holds it (escaped inside JSON, once or twice), before a message is cut, and from every error
line; an OTLP endpoint with a credential in it is refused as TINY_BASE_URL is."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from tiny_cli.errors import ConfigError, ProviderError
from tiny_cli.provider.client import ChatRequest, OpenAIProvider
from tiny_cli.secrets import REDACTED, Scrubber
from tiny_cli.setting_rules import check_tracing
from tiny_cli.settings import load_settings
from tiny_cli.testing import http_error, reply, tool_call

from .conftest import SEED_CARDS

HARD_KEY = 'tkQ"x\\SECRET9988776655é'  # a quote, a backslash and a non-ASCII letter
ASCII_KEY = 'tkQ"x\\SECRET9988776655'  # what settings accept: printable ASCII
PLAIN_KEY = "zq7PLAINSECRETxyz0042"
OTHER_KEY = "sk-test-SECRET1234567890abcdef"
TASK = "what is the vault key"


def _forms(key: str) -> list[str]:
    once = [json.dumps(key)[1:-1], json.dumps(key, ensure_ascii=False)[1:-1]]
    return [key, *once, *(json.dumps(o)[1:-1] for o in once)]


def test_a_key_is_scrubbed_as_written_and_escaped_once_or_twice() -> None:
    scrub = Scrubber([HARD_KEY])
    for form in _forms(HARD_KEY):
        assert scrub.text(f"the key is {form}.") == f"the key is {REDACTED}."
    document = json.dumps({"result": json.dumps({"token": HARD_KEY})})
    assert HARD_KEY[5:] not in scrub.text(document).replace("\\", "")
    assert json.loads(json.loads(scrub.text(document))["result"]) == {"token": REDACTED}


def _vault(tmp_path: Path, key: str) -> Path:
    docs = tmp_path / "handbook"
    docs.mkdir()
    (docs / "vault.md").write_text(f"# Vault\n\nThe vault key is {key} for all.\n", "utf-8")
    return docs


def test_a_tool_result_holding_an_escaped_key_is_stored_scrubbed(
    tiny, scripted_server, plain_cards, home: Path, tmp_path: Path
) -> None:
    scripted_server.add(
        tool_call("docs_search", {"query": "vault key"}),
        reply(json.dumps({"status": "ok", "summary": "It is in the vault page.", "source": "v"})),
    )
    env = {"TINY_API_KEY": ASCII_KEY, "TINY_DOCS": str(_vault(tmp_path, ASCII_KEY)),
           "TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards)}  # fmt: skip
    result = tiny("invoke", "docs-finder", TASK, "--json", env=env)
    assert result.exit_code == 0, result.output
    sent = json.dumps(scripted_server.requests[1]["messages"], ensure_ascii=False)
    assert "SECRET9988776655" in sent  # the model did see the page (it is not the store)
    stored = (home / "runs.sqlite3").read_bytes().decode("utf-8", "replace")
    for form in _forms(ASCII_KEY):
        assert form not in stored
    shown = tiny("runs", "show", "1", env=env)
    assert "SECRET9988776655" not in shown.output


def test_a_replay_miss_never_quotes_the_key(tiny, scripted_server, plain_cards, tmp_path) -> None:
    scripted_server.add(reply(json.dumps({"status": "ok", "summary": "Two weeks.", "source": "x"})))
    recording = tmp_path / "rec.jsonl"
    env = {"TINY_API_KEY": PLAIN_KEY, "TINY_CARDS": str(plain_cards)}
    recorded = tiny("invoke", "docs-finder", "how does onboarding work", "--record",
                    str(recording), "--base-url", scripted_server.url, env=env)  # fmt: skip
    assert recorded.exit_code == 0, recorded.output
    result = tiny("invoke", "docs-finder", f"my key is {PLAIN_KEY}", "--replay", str(recording),
                  env=env)  # fmt: skip
    assert result.exit_code != 0 and "no recorded answer" in result.stderr
    assert PLAIN_KEY[:8] not in result.stderr and REDACTED in result.stderr


def test_an_error_body_is_scrubbed_of_every_known_key(scripted_server, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", OTHER_KEY)  # the environment: the key beside the one sent
    scripted_server.add(http_error(404, f"not found for key {PLAIN_KEY} / {OTHER_KEY}"))
    provider = OpenAIProvider(scripted_server.url, PLAIN_KEY)
    with pytest.raises(ProviderError) as caught:
        provider.complete(ChatRequest("m1", [{"role": "user", "content": "hi"}], [], 64))
    said = str(caught.value)
    assert "HTTP 404" in said and "not found for key [redacted] / [redacted]" in said


@pytest.mark.parametrize(
    "endpoint",
    ["http://127.0.0.1:9/?api_key=zq7PLAINSECRETxyz0042", "http://u:zq7PLAIN@127.0.0.1:9/"],
)
@pytest.mark.parametrize(
    "var", ["OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"]
)
def test_an_otlp_endpoint_with_a_credential_is_refused(
    tmp_path: Path, var: str, endpoint: str
) -> None:
    env = {"TINY_HOME": str(tmp_path), "OTEL_TRACES_EXPORTER": "otlp", var: endpoint}
    with pytest.raises(ConfigError) as caught:
        check_tracing(load_settings(env, cwd=tmp_path).tracing, env)  # where a run traces
    assert str(caught.value).startswith(f"{var}: ")
    assert "OTEL_EXPORTER_OTLP_HEADERS" in str(caught.value) and "zq7PLAIN" not in str(caught.value)


def test_a_plain_otlp_endpoint_is_taken(tmp_path: Path) -> None:
    env = {"TINY_HOME": str(tmp_path), "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}
    assert load_settings(env, cwd=tmp_path).tracing == ("otlp",)


def test_a_key_a_url_holds_percent_encoded_is_scrubbed_in_text_and_stored_rows() -> None:
    key = "pa55 word/Q+xSECRET"
    scrub = Scrubber([key])
    said = "fetched https://x.test/?t=pa55%20word%2FQ%2BxSECRET and ?t=pa55+word%2FQ%2BxSECRET"
    assert scrub.text(said) == f"fetched https://x.test/?t={REDACTED} and ?t={REDACTED}"
    (row,) = scrub.columns([{"result": said}])  # a run-log column: looked at, then scrubbed
    assert "SECRET" not in row and REDACTED in row


SHAPED = {  # a secret by its vendor's shape or its name, as a user may paste it in a task
    "my password: hunter2hunter2 add acme": "my password: [redacted] add acme",
    "client_secret=abc123def and go": "client_secret=[redacted] and go",
    "use ghp_abcdefghijklmnopqrstuvwxyz0123456789 to add acme": "use [redacted] to add acme",
    "charge with sk_live_abcdefghijklmnop1234": "charge with [redacted]",
    "AWS id AKIAABCDEFGHIJKLMNOP here": "AWS id [redacted] here",
    "slack xoxb-1234567890-abcdef now": "slack [redacted] now",
}


def test_secrets_of_known_shapes_never_reach_learned_jsonl(tiny, tmp_path: Path) -> None:
    """`tiny learn` wrote a password and a GitHub token as the user pasted them."""
    cards = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    lesson = tmp_path / "lesson.jsonl"
    lesson.write_text("".join(json.dumps({"task": t, "card": None}) + "\n" for t in SHAPED))
    env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"}
    assert tiny("learn", str(lesson), env=env).exit_code == 0
    written = (cards / "learned.jsonl").read_text("utf-8")
    assert sorted(json.loads(line)["task"] for line in written.splitlines()[1:]) == sorted(
        SHAPED.values()
    )
    assert Scrubber([]).text("the tokens used were 12; my key: value") == (
        "the tokens used were 12; my key: value"  # words alone are no secret
    )
    named = {"client_secret": "cs_ABCDEF123456", "access_token": "tok123456", "n": "12"}
    assert Scrubber([]).document(named) == {  # a field of the name, as a Digest holds it
        "client_secret": "[redacted]", "access_token": "[redacted]", "n": "12"
    }  # fmt: skip
