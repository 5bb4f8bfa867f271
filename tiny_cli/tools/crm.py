"""A small real CRM: companies in a SQLite file, found by a forgiving name match."""

from __future__ import annotations

import sqlite3
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tiny_cli.errors import ConfigError, CrmDuplicate

CRM_FILENAME = "crm.sqlite3"
DEFAULT_FIND_LIMIT = 20
DEFAULT_LOCK_TIMEOUT = 10.0  # seconds to wait for another writer (bench runs concurrently)
SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS companies (
    company_id INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL,
    name_key   TEXT NOT NULL UNIQUE,
    city       TEXT NOT NULL DEFAULT '',
    website    TEXT NOT NULL DEFAULT '',
    notes      TEXT NOT NULL DEFAULT '',
    created_at TEXT NOT NULL
);
"""
COLUMNS = ("company_id", "name", "city", "website", "notes", "created_at")
# German letters spelt out, so "Müller" and "Mueller" are the same company.
FOLDS = str.maketrans({"ä": "ae", "ö": "oe", "ü": "ue", "ß": "ss"})


class CrmStore:
    """Companies in a SQLite file; parent folders and schema are created on first use."""

    def __init__(self, path: Path, clock: Callable[[], datetime] | None = None) -> None:
        self.path = Path(path)
        self._clock = clock or (lambda: datetime.now(UTC))
        self._ready = False

    def find(self, name: str, limit: int = DEFAULT_FIND_LIMIT) -> list[dict[str, Any]]:
        """Return companies whose name contains `name`, ignoring case, spaces and punctuation."""
        key = _required_key(name, "name")
        sql = (
            f"{_select()} WHERE instr(name_key, ?) > 0 "
            "ORDER BY name_key = ? DESC, length(name_key), company_id LIMIT ?"
        )
        with self._db() as db:
            return [_row(r) for r in db.execute(sql, (key, key, limit))]

    def add(self, name: str, city: str, website: str = "", notes: str = "") -> dict[str, Any]:
        """Create a company and return its record; raise CrmDuplicate if the name exists."""
        name = " ".join(name.split())
        key = _required_key(name, "name")
        values = (name, key, city.strip(), website.strip(), notes.strip(), self._now())
        sql = (
            "INSERT INTO companies (name, name_key, city, website, notes, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)"
        )
        with self._db() as db:
            try:
                cursor = db.execute(sql, values)
            except sqlite3.IntegrityError:  # the UNIQUE key, also when two writers race
                raise self._duplicate(db, name, key) from None
            row = db.execute(_select_by_id(), (cursor.lastrowid,)).fetchone()
        return _row(row)

    def all(self) -> list[dict[str, Any]]:
        """Return every company, oldest first."""
        with self._db() as db:
            return [_row(r) for r in db.execute(f"{_select()} ORDER BY company_id")]

    # --- internals -------------------------------------------------------------------------

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """Open one connection per operation: safe across threads, commits on success."""
        self._ensure_schema()
        with closing(self._connect()) as db, db:
            yield db

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=DEFAULT_LOCK_TIMEOUT)

    def _ensure_schema(self) -> None:
        if self._ready:
            return
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with closing(self._connect()) as db, db:
                # a file at this version has its table: opening it writes (and syncs) nothing;
                # fetchall ends the read, so no shared lock is left to deadlock a writer
                if db.execute("PRAGMA user_version").fetchall() != [(SCHEMA_VERSION,)]:
                    # one transaction, so one sync to disk (a bench run's CRM is a new file);
                    # IMMEDIATE: a second writer waits its turn (timeout) instead of failing
                    db.executescript(
                        f"BEGIN IMMEDIATE; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
                    )
        except (OSError, sqlite3.DatabaseError) as exc:
            raise ConfigError(f"CRM database {self.path}: {exc}") from exc
        self._ready = True

    def _duplicate(self, db: sqlite3.Connection, name: str, key: str) -> CrmDuplicate:
        row = db.execute(f"{_select()} WHERE name_key = ?", (key,)).fetchone()
        existing = _row(row) if row else {"company_id": "?", "name": name}
        return CrmDuplicate(
            f"company {name!r} already exists as company_id {existing['company_id']} "
            f"({existing['name']!r}); do not add it again"
        )

    def _now(self) -> str:
        return self._clock().isoformat(timespec="seconds")


def name_key(name: str) -> str:
    """Normalise a company name: lower case, umlauts spelt out, no accents or punctuation."""
    composed = unicodedata.normalize("NFC", name).casefold().translate(FOLDS)
    folded = unicodedata.normalize("NFKD", composed)  # accents become separate marks, dropped
    return "".join(ch for ch in folded if ch.isalnum())


# --- helpers ------------------------------------------------------------------------------


def _required_key(value: str, field: str) -> str:
    key = name_key(value)
    if not key:
        raise ValueError(f"{field} must contain letters or digits, got {value!r}")
    return key


def _select() -> str:
    return f"SELECT {', '.join(COLUMNS)} FROM companies"


def _select_by_id() -> str:
    return f"{_select()} WHERE company_id = ?"


def _row(row: tuple[Any, ...]) -> dict[str, Any]:
    return dict(zip(COLUMNS, row, strict=True))
