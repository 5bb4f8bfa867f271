"""Contract: cards — the YAML agent definitions, loaded and checked against the shipped schema.

`load` reads card files and reports every problem; `snapshot` takes an unchanged set whole;
`returns` turns a card's typed `returns` fields into the JSON Schemas the runner sends and
checks answers against.
"""

from tiny_cli.cards.load import Budget, Card, Problem, card_text, check_cards, load_cards
from tiny_cli.cards.returns import answer_schema
from tiny_cli.cards.snapshot import CardSet, load_card_set

__all__ = ["Budget", "Card", "CardSet", "Problem", "answer_schema", "card_text", "check_cards",
           "load_card_set", "load_cards"]  # fmt: skip
