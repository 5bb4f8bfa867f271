"""Evidence: where an answer's values came from, and which cards must not answer without it.

The runner knows which tools ran and what they returned. A returned field is `tool` when its
substance is found in a call's result (or is a URL a successful call reached: the tool answered
from it), `task` when the task holds it, `args` when only the arguments the model itself wrote
into a call hold it (a number it put in a search query: its own value echoed, no tool's), and
`model` when none does: the model alone vouches for it (a URL no tool call used, a CRM id no
tool returned). "Substance": the numbers, URLs and ids in the value when it has any, else most
of its words; a summary-like field that paraphrases a page still counts as found.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from tiny_cli.cards.card import Card
from tiny_cli.digest import FieldSource

WORD_SHARE = 0.6  # share of a prose value's words that must appear in the evidence
MIN_WORD_CHARS = 3  # shorter words (articles, "per") say nothing about where a value came from
_URL = re.compile(r"https?://[^\s\"'<>)\]]+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"\w+")
# a `does_not` line like "answer from memory" or "make up a policy": answers need a tool result
_NO_MEMORY = re.compile(r"\bfrom memory\b|\bmake up\b|\bmade up\b|\binvent\b|\bguess", re.I)


def needs_evidence(card: Card) -> bool:
    """Tell whether the card may answer only from a tool result (`first: tool`, or its does_not)."""
    return card.first == "tool" or any(_NO_MEMORY.search(line) for line in card.does_not)


def field_sources(
    fields: Mapping[str, Any], evidence: Sequence[str], task: str
) -> dict[str, FieldSource]:
    """Say for each field whether a result, the task, a call's arguments or the model holds it."""
    split = [_split(entry) for entry in evidence]
    reached = [url for args, _ in split for url in _URL.findall(args)]
    results = _Text(" ".join([*(result for _, result in split), *reached]))
    asked = _Text(task)
    written = _Text(" ".join(args for args, _ in split)).plus(results).plus(asked)
    return {name: _source(value, results, asked, written) for name, value in fields.items()}


def _source(value: Any, results: _Text, asked: _Text, written: _Text) -> FieldSource:
    """Where `value` was found: a result first, then the task, then the model's own arguments."""
    if results.holds(value):
        return "tool"
    if asked.holds(value) or results.plus(asked).holds(value):
        return "task"
    return "args" if written.holds(value) else "model"


def evidence_of(arguments: Mapping[str, Any], result: Any) -> str:
    """Return what one successful call contributes: its arguments' JSON line, then its result."""
    shown = (
        result if isinstance(result, str) else json.dumps(result, ensure_ascii=False, default=str)
    )
    # compact JSON escapes every newline, so the first line is the arguments, whole
    return f"{json.dumps(dict(arguments), ensure_ascii=False, default=str)}\n{shown}"


def _split(entry: str) -> tuple[str, str]:
    """Return an `evidence_of` entry's arguments and result apart."""
    args, _, result = entry.partition("\n")
    return args, result


class _Text:
    """Normalised text to look values up in: case-folded, URLs and numbers indexed."""

    def __init__(self, text: str) -> None:
        self.raw = text
        self.folded = " ".join(text.casefold().split())
        self.words = set(_WORD.findall(self.folded))
        self.numbers = {_number(n) for n in _NUMBER.findall(self.folded)}

    def plus(self, other: _Text) -> _Text:
        """Return this text and `other` as one text to look values up in."""
        return _Text(f"{self.raw}\n{other.raw}")

    def holds(self, value: Any) -> bool:
        """Tell whether every leaf of `value` is found here; an empty value is never found."""
        leaves = list(_leaves(value))
        return bool(leaves) and all(self._holds_leaf(leaf) for leaf in leaves)

    def _holds_leaf(self, leaf: str) -> bool:
        folded = " ".join(leaf.casefold().split())
        if folded in self.folded:
            return True
        urls = [u.rstrip(".,;:") for u in _URL.findall(folded)]
        numbers = {_number(n) for n in _NUMBER.findall(_URL.sub(" ", folded))}
        if urls or numbers:
            return all(u in self.folded for u in urls) and numbers <= self.numbers
        words = [w for w in _WORD.findall(folded) if len(w) >= MIN_WORD_CHARS]
        found = sum(w in self.words for w in words)
        return bool(words) and found >= WORD_SHARE * len(words)


def _leaves(value: Any) -> Iterable[str]:
    """Yield the scalar values inside `value` as text (booleans and empty strings say nothing)."""
    if isinstance(value, Mapping):
        for item in value.values():
            yield from _leaves(item)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield _number(str(value))
    elif isinstance(value, str) and value.strip():
        yield value


def _number(text: str) -> str:
    """Write a number one way: '200.00' and '200' match, '1,5' and '1.5' match."""
    text = text.replace(",", ".")
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return str(float(text)).removesuffix(".0")
    return text
