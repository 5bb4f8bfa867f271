"""Contract: cards — the YAML agent definitions, loaded and checked against the shipped schema.

`card` holds what a card is (`Card`, `Budget`, `Problem`) and turns a card's typed `returns`
fields into the JSON Schemas the runner sends and checks answers against; `load` checks card
files (YAML and Markdown) and reports every problem, worded; `index` lists a cards folder,
keeps what the check of each unchanged file found, and holds what a check rests on besides the
file (the card schema among it).
"""

from __future__ import annotations

from tiny_cli.cards.card import Budget, Card, Problem, answer_schema, card_text
from tiny_cli.cards.load import check_cards, load_cards

__all__ = ["Budget", "Card", "Problem", "answer_schema", "card_text", "check_cards", "load_cards"]
