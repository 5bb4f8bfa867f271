"""Contract: cards — the YAML agent definitions, loaded and checked against the shipped schema.

`load` reads card files and reports every problem; `snapshot` takes an unchanged set whole;
`returns` turns a card's typed `returns` fields into the JSON Schemas the runner sends and
checks answers against; `basis` is what a check rests on besides the file. The names below
load on first use: a command served from the snapshot never imports the checker.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tiny_cli.cards.load import Budget, Card, Problem, card_text, check_cards, load_cards
    from tiny_cli.cards.returns import answer_schema
    from tiny_cli.cards.snapshot import CardSet, load_card_set

__all__ = ["Budget", "Card", "CardSet", "Problem", "answer_schema", "card_text", "check_cards",
           "load_card_set", "load_cards"]  # fmt: skip

_HOMES = {"answer_schema": "returns", "CardSet": "snapshot", "load_card_set": "snapshot"}


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use (PEP 562)."""
    if name not in __all__:
        raise AttributeError(f"module 'tiny_cli.cards' has no attribute {name!r}")
    module = importlib.import_module(f"tiny_cli.cards.{_HOMES.get(name, 'load')}")
    return getattr(module, name)
