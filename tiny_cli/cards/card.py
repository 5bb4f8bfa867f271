"""A card as the rest of tiny holds it: `Card`, its `Budget`, and a `Problem` with a card file.

Light on purpose: whoever runs, routes or shows cards imports this, never the checker
(tiny_cli.cards.load) that makes them from files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from tiny_cli.settings import ToolMode

__all__ = ["Budget", "Card", "First", "Problem", "SideEffects", "card_text", "shown_path"]

DEFAULT_MAX_TOOL_CALLS = 8
DEFAULT_MAX_OUTPUT_TOKENS = 512
DEFAULT_MAX_WALL_SECONDS = 60.0

SideEffects = Literal["none", "write"]
First = Literal["any", "tool"]  # `tool`: a tool call must come before the first answer


@dataclass(frozen=True)
class Budget:
    """The hard limits of one invocation, enforced by the runner, not the model."""

    max_tool_calls: int = DEFAULT_MAX_TOOL_CALLS
    max_output_tokens: int = DEFAULT_MAX_OUTPUT_TOKENS
    max_wall_seconds: float = DEFAULT_MAX_WALL_SECONDS


@dataclass(frozen=True)
class Card:
    """One tiny agent: who it is, what it may call, what it must return, and its budget."""

    id: str
    summary: str
    tools: tuple[str, ...]
    returns_required: tuple[str, ...]
    examples: tuple[str, ...] = ()
    does_not: tuple[str, ...] = ()
    side_effects: SideEffects = "none"
    budget: Budget = field(default_factory=Budget)
    model: str | None = None
    path: Path | None = None
    tool_mode: ToolMode | None = None  # None: the setting's (flag > env), else DEFAULT_TOOL_MODE
    first: First = "any"
    # not a YAML field: set for the bench's all-tools agent, whose job may or may not write,
    # so its `ok` without a write is no unverified write (the bench checks the CRM itself)
    write_optional: bool = False
    # field -> JSON Schema of its value; every typed field is in returns_required too
    returns: Mapping[str, dict[str, Any]] = field(default_factory=dict, hash=False)
    # tools the card declares itself, {name, description, parameters}, with no implementation
    functions: tuple[Mapping[str, Any], ...] = field(default=(), hash=False)
    instructions: str = ""  # the prompt text after who it is: a Markdown card's body

    @property
    def writes(self) -> bool:
        """True for a card that may call write tools (`side_effects: write`)."""
        return self.side_effects == "write"


@dataclass(frozen=True)
class Problem:
    """One thing wrong with one card file, printed as `file:line: field: message`."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        shown = shown_path(self.file)
        where = f"{shown}:{self.line}" if self.line else shown
        return f"{where}: {self.field}: {self.message}"


def shown_path(file: str) -> str:
    """A file as the docs write it: relative to the working folder when it lies under it."""
    path = Path(file)
    if not path.is_absolute():
        return file
    try:
        return str(path.relative_to(Path.cwd()))
    except (ValueError, OSError):  # elsewhere, or the working folder is gone
        return file


def card_text(card: Card) -> str:
    """Return the routing text of a card: its id as words, then its summary."""
    return f"{card.id.replace('-', ' ').replace('_', ' ')}: {card.summary}"
