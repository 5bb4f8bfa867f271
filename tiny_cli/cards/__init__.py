"""Contract: cards — the YAML agent definitions, loaded and checked against the shipped schema."""

from tiny_cli.cards.load import Budget, Card, Problem, card_text, check_cards, load_cards

__all__ = ["Budget", "Card", "Problem", "card_text", "check_cards", "load_cards"]
