"""Text: words for matching (tokenize, stem), text made safe to show (printable, redact_url),
and the checks of a caller's argument that say what it got (wrong_kind, check_task,
check_transport).

One copy of each, for every layer: routing and docs_search stem alike, and every face escapes
what a model, a page or a file wrote with the same rule.
"""

from __future__ import annotations

import codecs
import datetime
import json
import numbers
import os
import re
import unicodedata
from collections.abc import Mapping
from decimal import Decimal
from functools import cache
from pathlib import Path, PurePath
from typing import Any
from urllib.parse import urlsplit, urlunsplit
from uuid import UUID

from tiny_cli.errors import ConfigError

__all__ = [
    "MAX_GOAL_CHARS",
    "age",
    "ascii_json",
    "check_task",
    "check_transport",
    "cut_at_word",
    "decimals_apart",
    "endpoint",
    "half_pair",
    "holds_all",
    "kind_of",
    "looks_utf16",
    "not_utf8",
    "printable",
    "printable_errors",
    "quote_name",
    "redact_url",
    "stem",
    "text_of",
    "tokenize",
    "unsurrogated",
    "write_call",
]

# A goal is one request, not a document: long material belongs in a file the agent reads.
MAX_GOAL_CHARS = 8_000

# bm25s's English and German stopword lists, frozen: a route reads them without importing bm25s
# settings.PACKAGE_DATA's file: text sits below settings (settings reads wrong_kind here)
STOPWORDS_FILE = Path(__file__).with_name("data") / "stopwords.txt"
LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # half a UTF-16 pair: no encoder takes it
MIN_STEM_CHARS = 3  # never cut a word below this, or short words start to collide
UNDOUBLE_MIN_CHARS = 5  # "install" -> "instal", but "call" and "pull" stay

# Spelt-out umlauts, so "Ablauf", "Führung"/"Fuehrung" and "Urlaubsanträge" match as typed.
FOLDS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss"})
WORD = re.compile(r"[^\W_]+")
# Longest first. English and German inflections, light enough not to need a language guess.
SUFFIXES = (
    *("ungen", "ments", "ings", "ment", "ung", "ing", "ies", "ers", "ity"),
    *("ed", "es", "en", "er", "em", "ly", "s", "e"),
)
# Question and filler words people type into a search box; not in the base stopword lists.
EXTRA_STOPWORDS = (
    *("how", "what", "where", "when", "who", "why", "which", "do", "does", "did", "done"),
    *("i", "me", "my", "we", "our", "us", "you", "your", "again", "can", "could", "should"),
    *("would", "about", "tell", "please", "get", "got", "want", "need", "know", "find"),
    *("documented", "handbook", "page", "wann", "wer", "warum", "wieso", "nochmal"),
    *("bitte", "gibt", "laut", "beim", "steht", "handbuch", "dokumentiert", "seite"),
)


def tokenize(text: str) -> list[str]:
    """Split text into stemmed, case- and umlaut-folded words without stopwords."""
    words = WORD.findall(text.casefold().translate(FOLDS))
    return [stem(w) for w in words if w not in _stopwords() and (len(w) > 1 or w.isdigit())]


def stem(word: str) -> str:
    """Strip one common English or German ending, so word forms of one stem match."""
    for suffix in SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= MIN_STEM_CHARS:
            if suffix == "s" and word[-2] in "siu":  # "process", "analysis", "status"
                continue
            word = word[: -len(suffix)] + ("y" if suffix == "ies" else "")
            break  # one ending only: stripping again turns "expenses" into "exp"
    # "travelling"/"travel", "install"/"installing": a doubled last consonant counts once.
    if len(word) >= UNDOUBLE_MIN_CHARS and word[-1] == word[-2] and word[-1] not in "aeiou":
        word = word[:-1]
    return word


@cache
def _stopwords() -> frozenset[str]:
    lines = STOPWORDS_FILE.read_text("utf-8").splitlines()
    words = (*(w for w in lines if w and not w.startswith("#")), *EXTRA_STOPWORDS)
    return frozenset(w.casefold().translate(FOLDS) for w in words)


def text_of(value: Any) -> str:
    """A string as it is; any other value as its JSON text, never a repr (else TypeError)."""
    return (
        value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=_plain)
    )


# what a string says whole, for a model to read: never Python's repr of an object or bytes
SAID_WHOLE = (datetime.date, datetime.time, Decimal, UUID, PurePath)


def _plain(value: Any) -> str:
    """A value JSON has no type for but a string says whole: a date, a path, a decimal, an id."""
    if isinstance(value, SAID_WHOLE):
        return str(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def said_whole(value: Any) -> bool:
    """Whether `str(value)` is all a model needs of it (not bytes, a list or an object's repr)."""
    return isinstance(value, (str, numbers.Number, *SAID_WHOLE))


def write_call(tool: str, arguments: Mapping[str, Any]) -> str:
    """Return `tool {json arguments}` as plain text with no terminal control characters."""
    return printable(f"{tool} {text_of(dict(arguments))}")


def decimals_apart(score: float, threshold: float, least: int) -> int:
    """The fewest decimals, at least `least`, that show unequal `score` and `threshold` apart."""
    places = least
    # ends: two distinct finite floats differ within 1,074 decimals; nan prints "nan"
    while score != threshold and f"{score:.{places}f}" == f"{threshold:.{places}f}":
        places += 1
    return places


def age(seconds: float) -> str:
    """Say a duration in its largest whole unit: `2 d`, `5 h`, `3 min`, `40 s`."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{int(seconds // size)} {unit}"
    return f"{int(seconds)} s"


def cut_at_word(text: str, limit: int) -> str:
    """`text` whole, or cut to `limit` characters at a space and marked " …" (no word cut)."""
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0].rstrip(",;:") + " …"


def printable(text: str, keep: str = "") -> str:
    """`text` with control, format and separator characters (ESC, bidi overrides, NBSP) but
    those in `keep` as visible \\uXXXX escapes: a terminal shows exactly what it holds."""
    return "".join(
        ch if ch == " " or ch in keep or unicodedata.category(ch)[0] not in "CZ" else _escape(ch)
        for ch in text
    )


def _escape(ch: str) -> str:
    """`ch` as a visible escape: \\uXXXX, or \\UXXXXXXXX past the 16-bit plane."""
    return f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}"


PRINTABLE_ERRORS = "tiny.printable"  # the codec error handler printable_errors() registers


def printable_errors() -> str:
    """Register and name the codec error handler that escapes (\\u00fc, never `?`) a character
    a stream's encoding cannot hold."""
    codecs.register_error(PRINTABLE_ERRORS, _escaped)
    return PRINTABLE_ERRORS


def _escaped(error: UnicodeError) -> tuple[str, int]:
    """The codec error handler: the characters an encoder could not take, escaped."""
    if not isinstance(error, UnicodeEncodeError):
        raise error  # decoding has its own rule (U+FFFD, _tolerate_bad_bytes)
    return "".join(map(_escape, error.object[error.start : error.end])), error.end


def ascii_json(stream: Any) -> bool:
    """Whether JSON written to `stream` keeps to ASCII: on a terminal (a bidi override a page
    wrote must not steer it), and where its encoding cannot hold every character."""
    return stream.isatty() or not holds_all(stream)


def holds_all(stream: Any) -> bool:
    """Whether `stream`'s encoding holds every character: a Unicode one, or none (str)."""
    encoding = getattr(stream, "encoding", None)
    try:
        return encoding is None or codecs.lookup(encoding).name.startswith("utf")
    except LookupError:
        return False


def quote_name(name: str) -> str:
    """A name the model gave, as a JSON string: a blank, empty or odd one stays visible."""
    return json.dumps(name, ensure_ascii=False)


def endpoint(base_url: str, path: str) -> str:
    """`base_url` with `/path` added to its path, before any query (`?api-version=…`)."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path=f"{parts.path.rstrip('/')}/{path}"))


def redact_url(url: str) -> str:
    """Drop user:password, the query and the fragment (any may hold a key) from a URL."""
    parts = urlsplit(url)
    if "@" not in parts.netloc and not parts.query and not parts.fragment:
        return url
    netloc = parts.netloc.rsplit("@", 1)[-1]
    return urlunsplit(parts._replace(netloc=netloc, query="", fragment=""))


def kind_of(value: Any) -> str:
    """A parsed value's kind as a person names it, for an error that must not echo the value."""
    if value is None:
        return "null"
    if isinstance(value, str) and not value.strip():
        return "an empty string"
    names = {bool: "a boolean", str: "a string", list: "a list", dict: "a mapping"}
    names |= {int: "a number", float: "a number"}
    return next((n for t, n in names.items() if isinstance(value, t)), f"a {type(value).__name__}")


def wrong_kind(name: str, what: str, value: Any) -> ConfigError:
    """The error of argument `name`, which must be `what`, given `value` of another kind."""
    return ConfigError(f"{name}: must be {what}, got {kind_of(value)}", field=name)


def check_transport(transport: Any) -> None:
    """Refuse anything but None or an httpx transport (by its `handle_request`: no httpx)."""
    if transport is not None and not callable(getattr(transport, "handle_request", None)):
        # else httpx fails at the first request, with an AttributeError of its own
        raise wrong_kind("transport", "an httpx transport (httpx.BaseTransport) or None", transport)


def check_task(text: str, where: str = "") -> None:
    """Refuse a task that is empty, has no letter or digit, or is over MAX_GOAL_CHARS."""
    at = f"{where}: task: " if where else ""
    if not text.strip():
        raise ConfigError(f"{at}the task is empty: say what the agent should do")
    # "." or a lone BOM, DOS EOF or zero-width space says nothing, yet scores high somewhere
    if not any(ch.isalnum() for ch in text):
        raise ConfigError(f"{at}the task has no letter or digit: say what the agent should do")
    if len(text) > MAX_GOAL_CHARS:
        raise ConfigError(
            f"{at}the task is {len(text):,} characters; at most {MAX_GOAL_CHARS:,} "
            "(put long material in a file the agent reads, not in the task)"
        )


# UTF-16 of ASCII: every other byte a NUL, before (big-endian) or after (little-endian) it
_UTF16_ASCII = re.compile(rb"(?:[\t\n\r\x20-\x7e]\x00){2}")


def looks_utf16(data: bytes) -> bool:
    """Whether `data` is UTF-16 text (a UTF-16 BOM, or NULs between ASCII bytes)."""
    return data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)) or bool(
        _UTF16_ASCII.search(data)
    )


def half_pair(text: str) -> str | None:
    """The first half of a UTF-16 pair `text` holds (a decoded `"\\ud83d"`), or None."""
    found = LONE_SURROGATE.search(text)
    return found[0] if found else None


def not_utf8(text: str) -> bool:
    """Whether text the OS gave (an argument, a variable, a path) holds a byte not UTF-8."""
    # under an ASCII locale a UTF-8 name is escaped bytes (half pairs), and works as it is
    if half_pair(text) is None:
        return False
    try:
        os.fsencode(text).decode("utf-8")
    except UnicodeError:  # encoding: a half pair no byte stands for; decoding: not UTF-8
        return True
    return False


def unsurrogated(value: Any) -> Any:
    """A JSON value with each lone surrogate (no encoder takes one) as U+FFFD; else `value`."""
    text = json.dumps(value, ensure_ascii=False)  # a surrogate pair is one character by now
    if LONE_SURROGATE.search(text) is None:
        return value
    return json.loads(LONE_SURROGATE.sub("\ufffd", text))
