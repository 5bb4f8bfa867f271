"""Ground: the one secret scrubber, which every store passes what it writes through.

API keys and anything shaped like a key or an Authorization header are replaced by [redacted]
before the run log, an artifact, a recording, a bench report or a run export is written; in
the ground layer, so the edges use it as the run log does. The run log's JSON columns are
compact ASCII (\\u escapes, which SQLite's json functions decode). What the faces print for a
caller goes through its `for_caller()` twin, which takes the known keys only.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

__all__ = [
    "MIN_SERVER_SECRET_CHARS",
    "REDACTED",
    "SECRET_ENV",
    "Scrubber",
    "env_secrets",
    "named_value",
    "scrubber",
    "written_forms",
]

SECRET_ENV = ("TINY_API_KEY", "OPENAI_API_KEY")  # where settings read the key from
MIN_SECRET_CHARS = 6  # a shorter "key" would scrub ordinary words out of transcripts
# a value the user put in an MCP server's config as a `${VAR}`: named a secret by them, so
# shorter ones go too (a PIN, a short password), still not a word of two or three letters
MIN_SERVER_SECRET_CHARS = 4
REDACTED = "[redacted]"
# keys of a JSON object whose string values are never stored
SECRET_KEYS = frozenset(
    (
        *("authorization", "proxy-authorization", "x-api-key", "api_key", "api-key", "apikey"),
        *("password", "passwd", "client_secret", "secret_key"),
        *("access_token", "auth_token", "refresh_token"),
    )
)
# Built once (dumps(default=) is not); ASCII and compact: less to scan, bind and store
_JSON = json.JSONEncoder(default=str, separators=(",", ":"))
_SECRET_TEXT = re.compile(
    # header-like "Authorization: Bearer X", "api_key=X", "x-api-key: X": the name is kept.
    # ASCII case folding only, as _may_hold_secret's look at bytes.lower() sees it
    r"(?ai)\b(?P<name>(?:proxy-)?authorization|x-api-key|api[-_]?key|passw(?:or)?d"
    r"|client[-_]?secret|secret[-_]?key|(?:access|auth|refresh)[-_]?token)"
    r"(?P<sep>['\"]?\s*[:=]\s*['\"]?)(?:(?:bearer|basic|token)\s+)?[^\s'\",;\\]+"
    r"|\b(?P<scheme>bearer)(?P<space>\s+)[A-Za-z0-9._~+/=-]{8,}"
    # a URL's password, scheme://user:password@host: the user name is kept
    r"|\b(?P<userinfo>[a-z][a-z0-9+.-]{0,31}://[^\s/?#@:'\"]*:)[^\s/?#'\"]*@"
    # keys and tokens by their vendors' own shapes, wherever they appear: OpenAI-style,
    # GitHub, Stripe, an AWS access key id, Slack
    r"|\bsk-[A-Za-z0-9_-]{16,}|\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_\w{30,})"
    r"|\b[rs]k_(?:live|test)_[A-Za-z0-9]{16,}|\bAKIA[0-9A-Z]{16}\b|\bxox[abprs]-[\w-]{10,}"
)
# what each shape above holds, lowercased: a text with none of them skips the pattern (tokens
# by full name: "_token" is in every Digest's "caller_tokens")
_SHAPE_MARKS = (b"authorization", b"key", b"bearer", b"sk-", b"passw", b"secret",
                b"access_token", b"access-token", b"accesstoken", b"auth_token", b"auth-token",
                b"authtoken", b"refresh_token", b"refresh-token", b"refreshtoken", b"ghp_",
                b"gho_", b"ghu_", b"ghs_", b"ghr_", b"github_pat_", b"k_live_", b"k_test_",
                b"akia", b"xox")  # fmt: skip
# a value an error line may echo: a word, a number, a host (no URL, path, user:password@)
_SHOWN_VALUE = re.compile(r"[\w.+:\[\]-]{1,40}")
KEY_LIKE_CHARS = 20  # a word this long of letters and digits may be a token: not echoed
_PLAIN = (str, int, float, type(None))  # column values stored as they are; the rest as JSON


class Scrubber:
    """Replace known secrets and (`shapes`) anything shaped like a key or an Authorization
    header: what tiny prints for its caller keeps a page's `Bearer X` example as written."""

    def __init__(
        self, secrets: Iterable[str], *, shapes: bool = True, min_chars: int = MIN_SECRET_CHARS
    ) -> None:
        self.secrets = sorted({s for s in secrets if len(s) >= min_chars}, key=len)[::-1]
        self.shapes = shapes
        self._forms = written_forms(self.secrets)
        # each form as it reads inside JSON text (quotes and backslashes escaped)
        self._encoded = [_JSON.encode(f)[1:-1] for f in self._forms]

    def text(self, text: str) -> str:
        """Return `text` with every secret replaced by [redacted], as written or JSON-escaped."""
        for form in self._forms:
            text = text.replace(form, REDACTED)
        # a pass in C spares most texts the slow pattern
        if self.shapes and _may_hold_secret(_lowered(text)):
            text = _SECRET_TEXT.sub(_redact, text)
        return text

    def tree(self, value: Any) -> Any:
        """Scrub every string in a JSON-like value; a key named like a secret hides its value."""
        kind = type(value)  # exact types first: this runs for every value of a transcript
        if kind is str:
            return self.text(value)
        if kind is dict or (kind is not list and isinstance(value, Mapping)):  # keys too: a
            return {self._key(k): self._entry(k, v) for k, v in value.items()}  # model names them
        if kind is list or kind is tuple:
            return [self.tree(v) for v in value]
        return self.text(value) if isinstance(value, str) else value

    def document(self, value: Any) -> Any:
        """Return a JSON-like value to be stored whole, scrubbed; a clean one as it is."""
        # one look in C spares a clean one the walk
        return self.tree(value) if self._suspect(_JSON.encode(value)) else value

    def columns(self, values: Iterable[Any]) -> list[Any]:
        """Return a row's column values to store; one look in C spares a clean row the walk."""
        raw = list(values)
        encoded = [v if type(v) in _PLAIN else _JSON.encode(v) for v in raw]
        if not self._suspect("\n".join(v for v in encoded if type(v) is str)):
            return encoded
        # only a column that may hold one is walked: a JSON column whose encoding is clean is
        # that encoding, as column() would return it (one suspect column walked the transcript)
        return [
            e if isinstance(v, Mapping | list | tuple) and not self._suspect(e) else self.column(v)
            for v, e in zip(raw, encoded, strict=True)
        ]

    def column(self, value: Any) -> Any:
        """Return a column value to store: JSON for lists and mappings, scrubbed first."""
        if isinstance(value, Mapping | list | tuple):
            encoded = _JSON.encode(value)  # one pass in C tells whether any string needs a look
            if not self._suspect(encoded):
                return encoded
            # scrubbed before encoding: a replacement can never split a JSON escape
            return _JSON.encode(self.tree(value))
        return self.tree(value)

    def _suspect(self, encoded: str) -> bool:
        """Tell whether JSON text may hold a secret, a key-like token or a secret-named key."""
        found = any(e in encoded for e in self._encoded)
        return found or (self.shapes and _may_hold_secret(_lowered(encoded)))

    def for_caller(self) -> Scrubber:
        """Return the scrubber of what tiny prints for its caller: the known secrets only."""
        return Scrubber(self.secrets, shapes=False)

    def _key(self, key: Any) -> Any:
        return self.text(key) if type(key) is str else key

    def _entry(self, key: Any, value: Any) -> Any:
        if self.shapes and type(value) is str and str(key).lower() in SECRET_KEYS:
            return REDACTED
        return self.tree(value)


def written_forms(secrets: Iterable[str]) -> list[str]:
    """Each secret as text may hold it, longest first: as it is, percent-encoded, and escaped
    inside a JSON string once or twice (a tool result's JSON text inside a JSON document)."""
    forms: set[str] = set()
    for secret in secrets:
        for once in (
            secret,
            quote(secret, safe=""),
            quote_plus(secret, safe=""),
            json.dumps(secret)[1:-1],
            json.dumps(secret, ensure_ascii=False)[1:-1],
        ):
            forms.update((once, json.dumps(once)[1:-1]))
    return sorted(forms, key=len, reverse=True)


def _lowered(text: str) -> bytes:
    """Return the text as UTF-8 with ASCII letters lowered: bytes.lower and `in` on bytes
    run in C several times faster than on a str holding one non-Latin-1 character."""
    return text.encode("utf-8", "surrogatepass").lower()


def _may_hold_secret(low: bytes) -> bool:
    return any(mark in low for mark in _SHAPE_MARKS) or (b"@" in low and b"://" in low)


def _redact(found: re.Match[str]) -> str:
    if found.group("name"):
        return f"{found.group('name')}{found.group('sep')}{REDACTED}"
    if found.group("scheme"):
        return f"{found.group('scheme')}{found.group('space')}{REDACTED}"
    if found.group("userinfo"):
        return f"{found.group('userinfo')}{REDACTED}@"
    return REDACTED


def env_secrets(env: Mapping[str, str] | None = None) -> list[str]:
    """The API keys settings would read from `env` (os.environ), stripped as settings strip them."""
    env = os.environ if env is None else env
    return [env[name].strip() for name in SECRET_ENV if (env.get(name) or "").strip()]


def scrubber(*also: str | None) -> Scrubber:
    """Return the scrubber of the environment's API keys and `also` (e.g. settings.api_key)."""
    return Scrubber([*env_secrets(), *(s for s in also if s)])


def named_value(name: str, value: str) -> str:
    """`NAME='value'` for an error line when the value is a plain word, number or host; else
    the name alone: a URL or a key pasted into the wrong place must not be echoed."""
    plain = _SHOWN_VALUE.fullmatch(value) and not _SECRET_TEXT.search(value)
    key_like = len(value) >= KEY_LIKE_CHARS and any(c.isdigit() for c in value)
    if plain and not key_like:
        return f"{name}={value!r}"
    return f"{name} (its value not shown: it may hold a secret)"
