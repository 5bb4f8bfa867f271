"""Full-text search of the run log: a query's words, matched in the index that v5 made.

With the index (runs_fts: FTS5, brought up to date by each search) a run matches when
each word of the query is among its indexed words, a word ending in `*` as a prefix;
without it (a SQLite without FTS5), when each word is in the same text as LIKE reads it
(ASCII case folded).
"""

from __future__ import annotations

import sqlite3
from typing import Any

from tiny_cli.errors import ConfigError
from tiny_cli.runs.schema import CATCH_UP, SEARCH_COLUMNS
from tiny_cli.runs.store import transaction

# A run's text (the view runs_text) as one string: what LIKE reads without the index
TEXT_SQL = " || ' ' || ".join(f"coalesce({column}, '')" for column in SEARCH_COLUMNS)
INDEX_SQL = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'runs_fts'"


def indexed(db: sqlite3.Connection) -> bool:
    """Tell whether the log has the search index (v5 made it where SQLite has FTS5)."""
    return db.execute(INDEX_SQL).fetchone() is not None


def ready(db: sqlite3.Connection) -> bool:
    """Index the finished runs not indexed yet; tell whether the log has the index at all."""
    if not indexed(db):
        return False
    with transaction(db):  # all or nothing: a search that fails leaves the index as it was
        for statement in CATCH_UP:
            db.execute(statement)
    return True


def words(text: str) -> list[str]:
    """Return the words of a query; ConfigError when it has none."""
    found = [word for word in text.split() if any(c.isalnum() for c in word)]
    if not found:  # a word without letters or digits indexes nothing: it would match no run
        raise ConfigError(f"search {text!r}: no word to search for (letters or digits)")
    return found


def clause(text: str, with_index: bool) -> tuple[str, list[Any]]:
    """Return the condition on a runs row that the query's words match, and its parameters."""
    if with_index:
        return "id IN (SELECT rowid FROM runs_fts WHERE runs_fts MATCH ?)", [match_query(text)]
    terms = words(text)
    likes = " AND ".join(["text LIKE ? ESCAPE '\\'"] * len(terms))
    sql = f"id IN (SELECT id FROM (SELECT id, {TEXT_SQL} AS text FROM runs_text) WHERE {likes})"
    return sql, [f"%{_like_escaped(word.rstrip('*'))}%" for word in terms]


def match_query(text: str) -> str:
    """Return the FTS5 query of the words: each one a quoted phrase, so no operator, all needed."""
    return " ".join(_phrase(word) for word in words(text))


def _phrase(word: str) -> str:
    """Quote one word for FTS5 (`"` doubled); a trailing `*` stays outside: a prefix."""
    body = word.rstrip("*")
    return '"' + body.replace('"', '""') + '"' + ("*" if body != word else "")


def _like_escaped(word: str) -> str:
    return word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
