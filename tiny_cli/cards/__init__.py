"""Contract: cards — the YAML agent definitions, loaded and checked against the shipped schema.

`card` holds what a card is (`Card`, `Budget`, `Problem`); `load` checks card files and reports
every problem, worded; `index` lists a cards folder, keeps what the check of each unchanged
file found, and holds what a check rests on besides the file; `returns` turns a card's typed
`returns` fields into the JSON Schemas the runner sends and checks answers against.
"""

from __future__ import annotations

from tiny_cli.cards.card import Budget, Card, Problem, card_text
from tiny_cli.cards.load import check_cards, load_cards
from tiny_cli.cards.returns import answer_schema

__all__ = ["Budget", "Card", "Problem", "answer_schema", "card_text", "check_cards", "load_cards"]
