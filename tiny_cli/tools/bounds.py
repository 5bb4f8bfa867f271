"""Bounds of built-in tools' arguments; as pydantic fields, built when a tool's schema is.

The numbers are plain: the handbook and the tool's signature read them without pydantic.
`SearchLimit` (PEP 562) imports pydantic when a schema first reads it.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Annotated, Any

__all__ = ["DEFAULT_SEARCH_LIMIT", "MAX_SEARCH_LIMIT", "SearchLimit"]

DEFAULT_SEARCH_LIMIT = 5  # docs_search's pages, unless the model asks for more
MAX_SEARCH_LIMIT = 20

if TYPE_CHECKING:  # what _search_limit builds
    import pydantic

    SearchLimit = Annotated[int, pydantic.Field(ge=1, le=MAX_SEARCH_LIMIT)]


def __getattr__(name: str) -> Any:
    """Build `SearchLimit` (and import pydantic) on first use."""
    if name == "SearchLimit":
        return _search_limit()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@functools.cache
def _search_limit() -> Any:
    import pydantic

    # The bound goes into the schema, so the runner rejects limit=500 before the call.
    return Annotated[int, pydantic.Field(ge=1, le=MAX_SEARCH_LIMIT)]
