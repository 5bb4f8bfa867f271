"""The built-in tools, bound to one Settings, and the registry with the user's tools added.

Each built-in is a method of a small class that holds one registry's state (the address
policy, the knowledge folder, the CRM file). A registry gets them as `LazyTool`s: names,
writes flags and schemas (literal JSON Schema, in `SCHEMAS`) at once, the object a tool runs
on (and the web or handbook module it imports) only when a run looks the tool up.

The CRM the CRM tools work on (the last section) is a small real one: companies in a SQLite
file, found by a forgiving name match.
"""

from __future__ import annotations

import functools
import sqlite3
import types
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from annotated_types import Interval

from tiny_cli.errors import ConfigError, CrmDuplicate, ToolError
from tiny_cli.setting_rules import tool_specs
from tiny_cli.settings import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, Origin, Settings
from tiny_cli.tools.registry import LazyTool, Registry, Tool, load_tool_module

if TYPE_CHECKING:  # at run time, `_web` imports these (on first use)
    import httpx

    from tiny_cli.tools.web import AddressPolicy

__all__ = [
    "CRM_FILENAME",
    "SCHEMAS",
    "CrmStore",
    "builtin_descriptions",
    "builtin_entries",
    "builtin_writes",
    "default_registry",
]


def default_registry(settings: Settings, transport: httpx.BaseTransport | None = None) -> Registry:
    """Return the built-in tools plus the user's tools from `settings.tools_spec`."""
    registry = Registry(builtin_entries(settings, transport), origin="built-in")
    for spec in tool_specs(settings.tools_spec):
        for t in _user_tools(spec, settings.origin("tools_spec")):
            registry.add(t, origin=spec)
    return registry


def _user_tools(spec: str, origin: Origin | None) -> list[Tool]:
    """The tools of one module the settings name; its error names the setting (`tiny init` may
    have named a my_tools.py its user never meant as tools)."""
    try:
        return load_tool_module(spec)
    except ToolError as exc:
        if not origin:
            raise
        raise ToolError(f"{exc} (the tool module named by {origin})") from None


def builtin_entries(
    settings: Settings, transport: httpx.BaseTransport | None = None
) -> list[LazyTool]:
    """Return http_get, html_to_text, docs_search and the CRM tools as LazyTools on `settings`."""
    # a malformed allow_hosts entry is a ConfigError here, before any tool runs
    policy = _web().AddressPolicy.of(settings.allow_hosts) if settings.allow_hosts else None
    # the tools of one class share one owner, made once (a registry makes tools under its lock)
    owners: dict[type, Callable[[], Any]] = {
        _WebTools: functools.cache(lambda: _WebTools(policy, transport)),
        _DocsTools: functools.cache(lambda: _DocsTools(settings.docs_dir)),
        _CrmTools: functools.cache(lambda: _CrmTools(settings.home)),
    }
    return [
        LazyTool(method, owners[owner], SCHEMAS[method.__name__], writes)
        for owner, method, writes in _BUILTINS
    ]


def builtin_writes() -> dict[str, bool]:
    """Map each built-in tool's name to whether it writes, making none (what a route needs)."""
    return {method.__name__: writes for _, method, writes in _BUILTINS}


def builtin_descriptions() -> dict[str, str]:
    """Map each built-in tool's name to its description (its docstring's first paragraph)."""
    return {
        method.__name__: " ".join((method.__doc__ or "").split("\n\n")[0].split())
        for _, method, _ in _BUILTINS
    }


# --- the tools ----------------------------------------------------------------------------


class _WebTools:
    """http_get and html_to_text under one address policy (None: public addresses only)."""

    def __init__(self, policy: AddressPolicy | None, transport: httpx.BaseTransport | None):
        self._web, self._policy, self._transport = _web(), policy, transport

    def http_get(self, url: str) -> str:
        """Fetch a web page over HTTP(S) and return its body (HTML as served)."""
        return self._web.http_get(url, policy=self._policy, transport=self._transport)

    def html_to_text(self, html: str) -> str:
        """Turn an HTML document into readable text: title first, scripts and styles dropped."""
        return self._web.html_to_text(html)


class _DocsTools:
    """docs_search over one knowledge folder (its index is shared per folder state)."""

    def __init__(self, folder: Path) -> None:
        from tiny_cli.tools.handbook import Handbook  # imported when a run looks docs_search up

        self._handbook = Handbook(folder)

    def docs_search(
        self,
        query: str,
        limit: Annotated[int, Interval(ge=1, le=MAX_SEARCH_LIMIT)] = DEFAULT_SEARCH_LIMIT,
    ) -> list[dict[str, Any]]:
        """Search the internal handbook and return matching pages, best first."""
        return [asdict(hit) for hit in self._handbook.search(query, limit)]


class _CrmTools:
    """crm_find_company and crm_add_company over the CRM file in one data directory."""

    def __init__(self, home: Path) -> None:
        self._store = CrmStore(home / CRM_FILENAME)

    def crm_find_company(self, name: str) -> list[dict[str, Any]]:
        """Find companies in the CRM by name; matching ignores case, spaces and punctuation."""
        return self._store.find(name)

    def crm_add_company(
        self, name: str, city: str, website: str = "", notes: str = ""
    ) -> dict[str, Any]:
        """Add a new company to the CRM and return its record with the new company_id."""
        return self._store.add(name, city, website, notes)


# Each built-in tool: the class that holds its state, its method, and whether it writes.
_BUILTINS: tuple[tuple[type, Callable[..., Any], bool], ...] = (
    (_WebTools, _WebTools.http_get, False),
    (_WebTools, _WebTools.html_to_text, False),
    (_DocsTools, _DocsTools.docs_search, False),
    (_CrmTools, _CrmTools.crm_find_company, False),
    (_CrmTools, _CrmTools.crm_add_company, True),
)


def _text(description: str) -> dict[str, str]:
    return {"description": description, "type": "string"}


# What the model is told about each built-in tool, as literal JSON Schema: offering one builds
# and reads nothing. tests/test_tool_specs.py checks each against its method's signature.
SCHEMAS: dict[str, dict[str, Any]] = {
    "http_get": {
        "description": "Fetch a web page over HTTP(S) and return its body (HTML as served). "
        "Redirects are followed; a page over the size cap is cut and says so. Pass the HTML "
        "to html_to_text to read it.",
        "parameters": {
            "required": ["url"],
            "type": "object",
            "properties": {"url": _text("The absolute http:// or https:// address to fetch.")},
        },
    },
    "html_to_text": {
        "description": "Turn an HTML document into readable text: title first, scripts and "
        "styles dropped.",
        "parameters": {
            "required": ["html"],
            "type": "object",
            "properties": {"html": _text("The HTML source, for example what http_get returned.")},
        },
    },
    "docs_search": {
        "description": "Search the internal handbook and return matching pages, best first. "
        "Each hit has the page's path, title, the best-matching passage (snippet) and a "
        "relevance score. An empty list means no page matched: try other key words.",
        "parameters": {
            "required": ["query"],
            "type": "object",
            "properties": {
                "query": _text("Key words of what you are looking for, in English or German."),
                "limit": {
                    "default": DEFAULT_SEARCH_LIMIT,
                    "description": f"How many pages to return at most (1-{MAX_SEARCH_LIMIT}).",
                    "maximum": MAX_SEARCH_LIMIT,
                    "minimum": 1,
                    "type": "integer",
                },
            },
        },
    },
    "crm_find_company": {
        "description": "Find companies in the CRM by name; matching ignores case, spaces and "
        'punctuation. Part of a name is enough ("mustermann" finds "Mustermann GmbH"). An '
        "empty list means the company is not in the CRM yet.",
        "parameters": {
            "required": ["name"],
            "type": "object",
            "properties": {"name": _text("The company name or a part of it.")},
        },
    },
    "crm_add_company": {
        "description": "Add a new company to the CRM and return its record with the new "
        "company_id. Fails if a company with the same name exists: check with "
        "crm_find_company first.",
        "parameters": {
            "required": ["name", "city"],
            "type": "object",
            "properties": {
                "name": _text('The company\'s full name, e.g. "Mustermann GmbH".'),
                "city": _text(
                    "The city the company is in; an empty string if the user did not say."
                ),
                "website": {"default": "", **_text("The company's website, if the user gave one.")},
                "notes": {"default": "", **_text("Short notes about the company, if any.")},
            },
        },
    },
}


# --- helpers ------------------------------------------------------------------------------


def _web() -> types.ModuleType:
    """The web tools' module, imported on first use (the one place builtin imports httpx)."""
    from tiny_cli.tools import web

    return web


# --- the CRM --------------------------------------------------------------------------------

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
SELECT = f"SELECT {', '.join(COLUMNS)} FROM companies"
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
        key = _required_key(name)
        sql = (
            f"{SELECT} WHERE instr(name_key, ?) > 0 "
            "ORDER BY name_key = ? DESC, length(name_key), company_id LIMIT ?"
        )
        with self._db() as db:
            return [dict(r) for r in db.execute(sql, (key, key, limit))]

    def add(self, name: str, city: str, website: str = "", notes: str = "") -> dict[str, Any]:
        """Create a company and return its record; raise CrmDuplicate if the name exists."""
        name = " ".join(name.split())
        key = _required_key(name)
        now = self._clock().isoformat(timespec="seconds")
        values = (name, key, city.strip(), website.strip(), notes.strip(), now)
        sql = (
            "INSERT INTO companies (name, name_key, city, website, notes, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)"
        )
        with self._db() as db:
            try:
                cursor = db.execute(sql, values)
            except sqlite3.IntegrityError:  # the UNIQUE key, also when two writers race
                raise self._duplicate(db, name, key) from None
            row = db.execute(f"{SELECT} WHERE company_id = ?", (cursor.lastrowid,)).fetchone()
        return dict(row)

    def all(self) -> list[dict[str, Any]]:
        """Return every company, oldest first."""
        with self._db() as db:
            return [dict(r) for r in db.execute(f"{SELECT} ORDER BY company_id")]

    @contextmanager
    def _db(self) -> Iterator[sqlite3.Connection]:
        """Open one connection per operation: safe across threads, commits on success."""
        self._ensure_schema()
        with closing(self._connect()) as db, db:
            db.row_factory = sqlite3.Row
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
        row = db.execute(f"{SELECT} WHERE name_key = ?", (key,)).fetchone()
        existing = row or {"company_id": "?", "name": name}
        return CrmDuplicate(
            f"company {name!r} already exists as company_id {existing['company_id']} "
            f"({existing['name']!r}); do not add it again"
        )


def name_key(name: str) -> str:
    """Normalise a company name: lower case, umlauts spelt out, no accents or punctuation."""
    composed = unicodedata.normalize("NFC", name).casefold().translate(FOLDS)
    folded = unicodedata.normalize("NFKD", composed)  # accents become separate marks, dropped
    return "".join(ch for ch in folded if ch.isalnum())


# --- helpers ------------------------------------------------------------------------------


def _required_key(name: str) -> str:
    key = name_key(name)
    if not key:
        raise ValueError(f"name must contain letters or digits, got {name!r}")
    return key
