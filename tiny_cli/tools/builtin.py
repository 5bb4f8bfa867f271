"""The built-in tools, bound to one Settings, and the registry with the user's tools added."""

from __future__ import annotations

from typing import Annotated, Any

import httpx
import pydantic

from tiny_cli.settings import Settings
from tiny_cli.tools import web
from tiny_cli.tools.crm import CRM_FILENAME, CrmStore
from tiny_cli.tools.handbook import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT, Handbook
from tiny_cli.tools.registry import Registry, Tool, load_tool_module, tool

# The bound goes into the schema, so the runner rejects limit=500 before the call.
SearchLimit = Annotated[int, pydantic.Field(ge=1, le=MAX_SEARCH_LIMIT)]


def default_registry(settings: Settings, transport: httpx.BaseTransport | None = None) -> Registry:
    """Return the built-in tools plus the user's tools from `settings.tools_spec`."""
    registry = Registry(builtin_tools(settings, transport), origin="built-in")
    for spec in _specs(settings.tools_spec):
        for t in load_tool_module(spec):
            registry.add(t, origin=spec)
    return registry


def builtin_tools(settings: Settings, transport: httpx.BaseTransport | None = None) -> list[Tool]:
    """Return http_get, html_to_text, docs_search and the CRM tools, bound to `settings`.

    http_get fetches public addresses plus `settings.allow_hosts`; a malformed entry there
    raises ConfigError here, before any tool runs.
    """
    return [
        *_web_tools(web.AddressPolicy.of(settings.allow_hosts), transport),
        _docs_tool(Handbook(settings.docs_dir)),
        *_crm_tools(CrmStore(settings.home / CRM_FILENAME)),
    ]


# --- helpers ------------------------------------------------------------------------------


def _specs(tools_spec: str | None) -> list[str]:
    """Split 'a.py, pkg.mod' into specs; an empty setting means no user tools."""
    return [s.strip() for s in (tools_spec or "").split(",") if s.strip()]


def _web_tools(policy: web.AddressPolicy, transport: httpx.BaseTransport | None) -> list[Tool]:
    @tool
    def http_get(url: str) -> str:
        """Fetch a web page over HTTP(S) and return its body (HTML as served).

        Redirects are followed; a page over the size cap is cut and says so. Pass the
        HTML to html_to_text to read it.

        Args:
            url: The absolute http:// or https:// address to fetch.
        """
        return web.http_get(url, policy=policy, transport=transport)

    @tool
    def html_to_text(html: str) -> str:
        """Turn an HTML document into readable text: title first, scripts and styles dropped.

        Args:
            html: The HTML source, for example what http_get returned.
        """
        return web.html_to_text(html)

    return [http_get, html_to_text]


def _docs_tool(handbook: Handbook) -> Tool:
    @tool
    def docs_search(query: str, limit: SearchLimit = DEFAULT_SEARCH_LIMIT) -> list[dict[str, Any]]:
        """Search the internal handbook and return matching pages, best first.

        Each hit has the page's path, title, the best-matching passage (snippet) and a
        relevance score. An empty list means no page matched: try other key words.

        Args:
            query: Key words of what you are looking for, in English or German.
            limit: How many pages to return at most (1-20).
        """
        return [hit.as_dict() for hit in handbook.search(query, limit)]

    return docs_search


def _crm_tools(store: CrmStore) -> list[Tool]:
    @tool
    def crm_find_company(name: str) -> list[dict[str, Any]]:
        """Find companies in the CRM by name; matching ignores case, spaces and punctuation.

        Part of a name is enough ("mustermann" finds "Mustermann GmbH"). An empty list
        means the company is not in the CRM yet.

        Args:
            name: The company name or a part of it.
        """
        return store.find(name)

    @tool(writes=True)
    def crm_add_company(name: str, city: str, website: str = "", notes: str = "") -> dict[str, Any]:
        """Add a new company to the CRM and return its record with the new company_id.

        Fails if a company with the same name exists: check with crm_find_company first.

        Args:
            name: The company's full name, e.g. "Mustermann GmbH".
            city: The city the company is in; an empty string if the user did not say.
            website: The company's website, if the user gave one.
            notes: Short notes about the company, if any.
        """
        return store.add(name, city, website, notes)

    return [crm_find_company, crm_add_company]
