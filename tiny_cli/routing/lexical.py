"""The wording side of routing: a card's capability list, and BM25 against its texts."""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tiny_cli.errors import ConfigError
from tiny_cli.text import tokenize

__all__ = ["BM25_K1", "Lexical", "capabilities"]

BM25_K1 = 1.2
LEXICAL_FILE = "lexical.json"
WORDS_FILE = "lexical_words.json"  # read only when a route is explained


def capabilities(summary: str) -> list[str]:
    """Split the list after a colon in a summary into its items ("X: a, b and c" → a, b, c)."""
    items: list[str] = []
    for sentence in _SENTENCE_END.split(summary.strip()):
        _, colon, tail = sentence.strip().rstrip(".!?").partition(":")
        if not colon:
            continue
        parts = [_LEADING_AND.sub("", p) for p in _top_level_split(tail)]
        if parts and "(" not in parts[-1]:
            parts[-1:] = _LAST_AND.split(parts[-1], maxsplit=1)
        parts = [p.strip() for p in parts if p.strip()]
        if len(parts) >= 2:  # a single item restates the summary
            items += parts
    return items


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CONJUNCTION = r"(?:and|or|und|oder|et|ou|y|o)"
_LEADING_AND = re.compile(rf"^\s*{_CONJUNCTION}\s+", re.IGNORECASE)
# the last "and" of the last item: "reads them out and sends emails" → two items
_LAST_AND = re.compile(rf"\s+{_CONJUNCTION}\s+(?!.*\s{_CONJUNCTION}\s)", re.IGNORECASE)


def _top_level_split(text: str) -> list[str]:
    """Split on commas and semicolons outside brackets: "lights (on, off), plugs" → 2."""
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for char in text:
        depth += (char in "([") - (char in ")]")
        if char in ",;" and depth <= 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p.strip() for p in parts if p.strip()]


class Lexical:
    """BM25 of a task against each card's texts, divided by the most its words could score."""

    def __init__(self, documents: Sequence[str]) -> None:
        import bm25s  # here: only routing needs it, and it costs ~0.1 s to import

        tokens = [tokenize(d) for d in documents]
        self._words: list[frozenset[str]] | None = [frozenset(words) for words in tokens]
        self._words_file: Path | None = None
        self._df = Counter(word for words in tokens for word in set(words))
        self._n = len(documents)
        self._index = bm25s.BM25(k1=BM25_K1)
        if self._df:  # bm25s cannot index a corpus without a single word
            self._index.index(tokens, show_progress=False)

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """Return (texts, cards) scores in 0-1: 1 only if every word scores its full idf."""
        out = np.zeros((len(texts), self._n), dtype=np.float32)
        for row, text in enumerate(texts):
            words = set(tokenize(text))
            known = sorted(w for w in words if w in self._df)
            if known:
                # unknown words count in the divisor at full idf: a task that is mostly words
                # no card uses is mostly not about these cards
                out[row] = self._index.get_scores(known) / sum(self._idf(w) for w in words)
        return out

    def save(self, folder: Path) -> None:
        """Write the index into `folder` (tiny_cli.routing.state): JSON and bm25s's own files."""
        words = [sorted(w) for w in self._card_words()]
        (folder / WORDS_FILE).write_text(json.dumps(words, ensure_ascii=False), "utf-8")
        counts = {"n": self._n, "df": self._df}
        (folder / LEXICAL_FILE).write_text(json.dumps(counts, ensure_ascii=False), "utf-8")
        if self._df:
            self._index.save(str(folder / "bm25"), show_progress=False)

    @classmethod
    def load(cls, folder: Path) -> Lexical:
        """Read an index `save` wrote, without tokenizing anything."""
        import bm25s

        data = json.loads((folder / LEXICAL_FILE).read_text("utf-8"))
        lexical = cls.__new__(cls)
        lexical._words = None
        lexical._n = int(data["n"])
        lexical._words_file = folder / WORDS_FILE  # each card's words: read for an explanation
        lexical._df = Counter(data["df"])
        lexical._index = (
            bm25s.BM25.load(str(folder / "bm25"), show_progress=False)
            if lexical._df
            else bm25s.BM25(k1=BM25_K1)
        )
        return lexical

    def matched(self, text: str, card: int) -> tuple[str, ...]:
        """Return the task's (stemmed) words that also occur in card `card`'s texts."""
        words = self._card_words()[card]
        return tuple(w for w in dict.fromkeys(tokenize(text)) if w in words)

    def _card_words(self) -> list[frozenset[str]]:
        if self._words is None:
            assert self._words_file is not None  # a loaded index names its words file
            try:
                rows = json.loads(self._words_file.read_text("utf-8"))
            except (OSError, ValueError) as exc:
                raise ConfigError(
                    f"{self._words_file}: the saved router state went away while in use "
                    f"({exc}); run again"
                ) from exc
            self._words = [frozenset(w) for w in rows]
        return self._words

    def _idf(self, word: str) -> float:
        # Lucene's idf, as bm25s uses it: a word in no card gets the largest value
        seen = self._df.get(word, 0)
        return math.log(1 + (self._n - seen + 0.5) / (seen + 0.5))
