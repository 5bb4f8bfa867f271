"""The wording side of routing: a card's capability list, and BM25 against its texts."""

from __future__ import annotations

import json
import math
import re
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from tiny_cli.errors import ConfigError
from tiny_cli.text import tokenize

__all__ = ["BM25_K1", "Lexical", "capabilities", "read_saved"]

BM25_K1 = 1.2
LEXICAL_FILE = "lexical.json"
WORDS_FILE = "lexical_words.json"  # read only when a route is explained
MATRIX = ("data", "indices", "indptr")  # bm25s's score matrix, by word (compressed columns)


def capabilities(summary: str) -> list[str]:
    """Split the list of capabilities after a colon ("Handles X: a, b and c" → a, b, c)."""
    # never inside quotes or brackets, at a time's ("9:30") or a URL's colon, nor a list of
    # values: quoted, numbers, times, formats ("HH:MM"), or examples ("e.g. a, b")
    items: list[str] = []
    for sentence in _split_free(summary.strip(), _SENTENCE_END):
        items += _listed(sentence.strip().rstrip(".!?"))
    return items


# Patterns as text: `re` compiles each when a state is first built (a route that loads one
# never splits a summary) and keeps it
_SENTENCE_END = r"(?<![Ee]\.g\.)(?<![Ii]\.e\.)(?<=[.!?])\s+"
_CONJUNCTION = r"(?:and|or|und|oder|et|ou|y|o)"
_LEADING_AND = rf"(?i)^\s*{_CONJUNCTION}\s+"
_AND = rf"(?i)\s+{_CONJUNCTION}\s+"  # the last of the last item: "reads and sends" → two
# quoted spans: straight, curly and guillemet quotes, backticks; a single quote only as
# a quote, not as the apostrophe of "team's"
_QUOTED = (
    r"\"[^\"\n]*\"|“[^”\n]*”|\u2018[^\u2019\n]*\u2019|„[^“”\n]*[“”]|«[^»\n]*»"
    r"|`[^`\n]*`|(?<!\w)'[^'\n]*'(?!\w)"
)
_BRACKETED = r"\([^()]*\)|\[[^\[\]]*\]"
# a head that introduces values, not capabilities: "Format: ...", "e.g.: ..."
_VALUE_HEAD = r"(?i)\b(?:formats?|e\.\s?g|i\.\s?e|examples?|such as|like|defaults?|values?)\W*$"
_EXAMPLE = r"(?i)^(?:e\.\s?g\.|i\.\s?e\.|for example|for instance|such as)"
_FORMAT_WORD = r"(?:YYYY|YY|MM|DD|HH|hh|mm|ss)"
_TIME_OR_FORMAT = (
    rf"\b\d{{1,2}}:\d{{2}}\b|\b\d{{4}}-\d{{2}}|\b{_FORMAT_WORD}(?:[-:/.]{_FORMAT_WORD})+\b"
)


def _listed(sentence: str) -> list[str]:
    """The capabilities one sentence lists after its colon; none if it lists values."""
    colon = _list_colon(sentence)
    if colon is None or re.search(_VALUE_HEAD, sentence[:colon]):
        return []
    parts = [
        re.sub(_LEADING_AND, "", p).strip() for p in _split_free(sentence[colon + 1 :], "[,;]")
    ]
    parts = [p for p in parts if p]
    if parts:  # `_split_free` gives stripped, non-empty pieces
        parts[-1:] = _split_free(parts[-1], _AND, last_only=True)
    if len(parts) < 2 or any(_is_value(p) for p in parts):  # one item restates the summary
        return []
    return parts


def _list_colon(sentence: str) -> int | None:
    """The first colon that opens a list: outside quotes and brackets, a space after it."""
    shield = _shielded(sentence)
    for at, char in enumerate(sentence[:-1]):
        if char == ":" and not shield[at] and sentence[at + 1].isspace():
            return at
    return None


def _is_value(item: str) -> bool:
    """Tell a listed value (quoted, a number, a time, a format, an example) from a capability."""
    bare = re.sub(_BRACKETED, " ", re.sub(_QUOTED, " ", item))
    return (
        not re.search(r"[^\W\d_]", bare)  # no letter outside quotes: a value or a number
        or re.search(_TIME_OR_FORMAT, item) is not None
        or re.match(_EXAMPLE, item) is not None
    )


def _split_free(text: str, pattern: str, last_only: bool = False) -> list[str]:
    """Split `text` where `pattern` matches outside quotes and brackets (stripped, non-empty)."""
    shield = _shielded(text)
    cuts = [m for m in re.finditer(pattern, text) if not shield[m.start()]]
    pieces, start = [], 0
    for cut in cuts[-1:] if last_only else cuts:
        pieces.append(text[start : cut.start()])
        start = cut.end()
    pieces.append(text[start:])
    return [p.strip() for p in pieces if p.strip()]


def _shielded(text: str) -> list[bool]:
    """Mark each character inside quotes or brackets: "lights (on, off), plugs" → 2 items."""
    marks = [False] * len(text)
    for quoted in re.finditer(_QUOTED, text):
        marks[quoted.start() : quoted.end()] = [True] * (quoted.end() - quoted.start())
    depth = 0
    for at, char in enumerate(text):
        if not marks[at]:  # a bracket inside quotes is text
            depth = max(0, depth + (char in "([") - (char in ")]"))
            marks[at] = depth > 0
    return marks


class Lexical:
    """BM25 of a task against each card's texts, divided by the most its words could score."""

    def __init__(self, documents: Sequence[str], owners: Sequence[int] | None = None) -> None:
        """Index `documents`; with `owners` (each one's card, in runs) a card scores its best."""
        import bm25s  # here: only building an index needs it (a route scores with numpy)

        tokens = [tokenize(d) for d in documents]
        self._words: list[frozenset[str]] | None = [frozenset(words) for words in tokens]
        self._words_file: Path | None = None
        self._df = Counter(word for words in tokens for word in set(words))
        self._n = len(documents)
        self._owners = list(owners) if owners is not None else list(range(len(documents)))
        self._vocab: dict[str, int] = {}
        self._matrix = {name: np.zeros(1 if name == "indptr" else 0) for name in MATRIX}
        if self._df:  # bm25s cannot index a corpus without a single word
            index = bm25s.BM25(k1=BM25_K1)  # Lucene's variant: no score for an absent word
            index.index(tokens, show_progress=False)
            self._vocab = dict(index.vocab_dict)
            self._matrix = {name: np.asarray(index.scores[name]) for name in MATRIX}

    def scores(self, texts: Sequence[str]) -> np.ndarray:
        """Return (texts, cards) scores in 0-1: 1 only if every word scores its full idf."""
        out = self._document_scores(texts)
        if self._owners == list(range(self._n)):
            return out
        starts = np.flatnonzero(np.diff([-1, *self._owners]))  # each card's documents in a run
        return np.maximum.reduceat(out, starts, axis=1) if self._n else out

    def _document_scores(self, texts: Sequence[str]) -> np.ndarray:
        """Return (texts, documents) scores in 0-1, before a card takes its best document."""
        out = np.zeros((len(texts), self._n), dtype=np.float32)
        for row, text in enumerate(texts):
            words = set(tokenize(text))
            known = sorted(w for w in words if w in self._df)
            if known:
                # unknown words count in the divisor at full idf: a task that is mostly words
                # no card uses is mostly not about these cards
                out[row] = self._bm25(known) / sum(self._idf(w) for w in words)
        return out

    def _bm25(self, words: Sequence[str]) -> np.ndarray:
        """Each card's BM25 score for `words`: their columns summed, in bm25s's order."""
        data, indices, indptr = (self._matrix[name] for name in MATRIX)
        total = np.zeros(self._n, dtype=np.float32)
        for word in words:
            at = self._vocab.get(word)
            if at is not None:  # a column lists each card once: a plain indexed add is exact
                total[indices[indptr[at] : indptr[at + 1]]] += data[indptr[at] : indptr[at + 1]]
        return total

    def save(self, folder: Path) -> None:
        """Write the index into `folder` (tiny_cli.routing.state): JSON and three arrays."""
        words = [sorted(w) for w in self._card_words()]
        (folder / WORDS_FILE).write_text(json.dumps(words, ensure_ascii=False), "utf-8")
        counts = {"n": self._n, "df": self._df, "vocab": self._vocab, "owners": self._owners}
        (folder / LEXICAL_FILE).write_text(json.dumps(counts, ensure_ascii=False), "utf-8")
        for name, array in self._matrix.items():
            np.save(folder / f"bm25_{name}.npy", array, allow_pickle=False)

    @classmethod
    def load(cls, folder: Path) -> Lexical:
        """Read an index `save` wrote, without tokenizing anything."""
        data = json.loads((folder / LEXICAL_FILE).read_text("utf-8"))
        lexical = cls.__new__(cls)
        lexical._words = None
        lexical._n = int(data["n"])
        lexical._owners = [int(o) for o in data["owners"]]
        lexical._words_file = folder / WORDS_FILE  # each card's words: read for an explanation
        lexical._df = Counter(data["df"])
        lexical._vocab = {str(k): int(v) for k, v in data["vocab"].items()}
        lexical._matrix = {
            name: np.load(folder / f"bm25_{name}.npy", allow_pickle=False) for name in MATRIX
        }
        return lexical

    def matched(self, text: str, card: int) -> tuple[str, ...]:
        """Return the task's (stemmed) words in the document that gave card `card` its score."""
        # `scores` takes a card's best document: a word only another one holds adds nothing
        documents = [i for i, owner in enumerate(self._owners) if owner == card]
        scored = self._document_scores([text])[0][documents] if documents else np.zeros(0)
        if not scored.size or scored.max() <= 0:
            return ()
        words = self._card_words()[documents[int(np.argmax(scored))]]
        return tuple(w for w in dict.fromkeys(tokenize(text)) if w in words)

    def _card_words(self) -> list[frozenset[str]]:
        if self._words is None:
            assert self._words_file is not None  # a loaded index names its words file
            saved = read_saved(self._words_file, _lists_of_words)
            self._words = [frozenset(w) for w in saved]
        return self._words

    def _idf(self, word: str) -> float:
        # Lucene's idf, as bm25s uses it: a word in no card gets the largest value
        seen = self._df.get(word, 0)
        return math.log(1 + (self._n - seen + 0.5) / (seen + 0.5))


def read_saved(path: Path, intact: Callable[[Any], bool]) -> Any:
    """Read a JSON file of a saved router state (tiny_cli.routing.state) after it loaded."""
    # gone is one line; not JSON, or not `intact`, is damage: removed, the next run builds it
    try:
        data = json.loads(path.read_text("utf-8"))
    except OSError as exc:  # another process pruned it
        raise ConfigError(
            f"{path}: the saved router state went away while in use ({exc}); run again"
        ) from exc
    except ValueError:  # not JSON: as damaged as a wrong shape (no shape check passes None)
        data = None
    if not intact(data):
        shutil.rmtree(path.parent, ignore_errors=True)
        raise ConfigError(f"{path}: the saved router state is damaged; removed, run again")
    return data


def _lists_of_words(data: Any) -> bool:
    """Tell whether a words file holds what `save` wrote: a list of each card's words."""
    return type(data) is list and all(
        type(words) is list and all(type(w) is str for w in words) for words in data
    )
