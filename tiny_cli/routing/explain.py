"""What a route says about itself: the reason behind each score, and overlapping card texts.

`tiny route --explain` shows the reasons; `tiny validate` warns of the overlaps. A plain
route needs neither, so tiny_cli.routing.router imports this module only when asked.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tiny_cli.routing.router import Decision
    from tiny_cli.routing.space import Source

__all__ = ["Explanation", "Nearest", "Overlap", "Reason"]


@dataclass(frozen=True)
class Nearest:
    """Which of a card's vectors sits nearest a task, and its nearest example."""

    cosine: float
    source: Source
    text: str
    example: str | None
    example_cosine: float | None


@dataclass(frozen=True)
class Reason:
    """Why one card scored what it did for one task."""

    agent_id: str
    score: float
    cosine: float
    source: Source
    text: str
    lexical: float
    words: tuple[str, ...]
    nearest_example: str | None
    nearest_example_cosine: float | None
    tool: str | None = None  # the tool whose view drove the score (source "tool")

    def to_json(self) -> dict[str, Any]:
        """Return this reason as plain JSON types."""
        return {
            "agent_id": self.agent_id,
            "score": rounded(self.score),
            "cosine": rounded(self.cosine),
            "source": self.source,
            "tool": self.tool,
            "text": self.text,
            "lexical": rounded(self.lexical),
            "words": list(self.words),
            "nearest_example": self.nearest_example,
            "nearest_example_cosine": None
            if self.nearest_example_cosine is None
            else rounded(self.nearest_example_cosine),
        }


@dataclass(frozen=True)
class Explanation:
    """A routing decision with the reason behind each candidate's score."""

    decision: Decision
    reasons: tuple[Reason, ...]
    threshold_source: str = ""
    tools_source: str = ""  # where tool descriptions not in the cards came from, how old

    def to_json(self) -> dict[str, Any]:
        """Return the `tiny route --explain --json` object."""
        reasons = [r.to_json() for r in self.reasons]
        return {
            **self.decision.to_json(),
            "threshold_source": self.threshold_source,
            "tools_source": self.tools_source,
            "reasons": reasons,
        }


@dataclass(frozen=True)
class Overlap:
    """A card text that sits closer to another card than to the rest of its own card."""

    agent_id: str
    kind: str
    text: str
    other_id: str
    own: float
    other: float


def rounded(value: float) -> float:
    """Round a score for JSON output (four decimals)."""
    return round(float(value), 4)
