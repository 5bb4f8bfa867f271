"""Bounds of built-in tools' arguments, as pydantic fields: loaded when a tool's schema is built."""

from __future__ import annotations

from typing import Annotated

import pydantic

from tiny_cli.tools.handbook import MAX_SEARCH_LIMIT

__all__ = ["SearchLimit"]

# The bound goes into the schema, so the runner rejects limit=500 before the call.
SearchLimit = Annotated[int, pydantic.Field(ge=1, le=MAX_SEARCH_LIMIT)]
