"""Example user tools for tiny: two plain functions turned into tools by @tool.

The schema each model sees comes from the type hints and the Google-style docstring
(the summary becomes the description, `Args:` the parameter help). Load the module
with any command that builds the tool registry:

    tiny validate --tools examples/my_tools.py
    tiny invoke MY_CARD "how many working days until 2025-12-24?" --tools examples/my_tools.py
    TINY_TOOLS=examples/my_tools.py tiny delegate "..."

(several modules: --tools "examples/my_tools.py,mypackage.tools"). A card of yours then
lists the tools by name, like the built-in ones:

    tools: [days_between, word_stats]

A tool raises when it cannot do its job; the message goes back to the model, so say
what to fix.
"""

from __future__ import annotations

import re
from collections import Counter
from datetime import date, timedelta
from typing import Any

from tiny_cli.tools import tool


@tool
def days_between(start: str, end: str, working_days_only: bool = False) -> int:
    """Count the days from one date to another (the start day not counted).

    Args:
        start: The first date, as YYYY-MM-DD.
        end: The last date, as YYYY-MM-DD; may be before start (the count is then negative).
        working_days_only: Count Monday to Friday only (public holidays still count).
    """
    first, last = _parse_date(start), _parse_date(end)
    if not working_days_only:
        return (last - first).days
    step = 1 if last >= first else -1
    days = (first + timedelta(days=step * i) for i in range(1, abs((last - first).days) + 1))
    return step * sum(1 for d in days if d.weekday() < 5)


@tool
def word_stats(text: str, top: int = 5) -> dict[str, Any]:
    """Count the words of a text and list the most frequent ones.

    Args:
        text: The text to analyse.
        top: How many of the most frequent words to list.
    """
    words = re.findall(r"[^\W\d_]+", text.casefold())
    return {
        "words": len(words),
        "distinct": len(set(words)),
        "top": [{"word": w, "count": c} for w, c in Counter(words).most_common(max(top, 0))],
    }


def _parse_date(value: str) -> date:
    """Parse YYYY-MM-DD, with a message the model can act on."""
    try:
        return date.fromisoformat(value.strip())
    except ValueError:
        raise ValueError(f"{value!r} is not a date; write it as YYYY-MM-DD") from None
