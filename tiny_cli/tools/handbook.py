"""docs_search: BM25 over a knowledge folder of Markdown and text pages, chunked by section.

The snippet is the chunk (a paragraph, under its section heading) that matched. A page scores
as its best chunk plus its title's score (field weighting, as BM25F does): one stray mention
elsewhere does not outrank the page named after the topic.
"""

from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tiny_cli.errors import ConfigError, ToolCallError
from tiny_cli.settings import DEFAULT_SEARCH_LIMIT, MAX_SEARCH_LIMIT
from tiny_cli.text import cut_at_word, tokenize
from tiny_cli.threads import stop_if_abandoned
from tiny_cli.tools.artifacts import bm25_index

SNIPPET_CHARS = 400
DOC_SUFFIXES = (".md", ".markdown", ".txt")
TITLE_WEIGHT = 1.0  # the title field's BM25 score is added with this weight
MAX_CACHED_FOLDERS = 16  # indexes kept per process: one per folder, its latest state
# files and folders a knowledge folder may hold: a handbook, not a disk
MAX_FOLDER_ENTRIES = 100_000
MAX_PAGES = 10_000  # pages a knowledge folder may hold
MAX_PAGE_CHARS = 1_000_000  # a longer page is read up to here
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")


@dataclass(frozen=True)
class Hit:
    """One page that matched: where it is, its title, the best-matching part, its score."""

    path: str
    title: str
    snippet: str
    score: float


@dataclass(frozen=True)
class Handbook:
    """A searchable knowledge folder; its index is rebuilt when a page changes.

    Indexes are kept per process and folder state (each page's name, size and mtime_ns): every
    Handbook over an unchanged folder (one per bench run) shares one.
    """

    folder: Path
    max_entries: int = MAX_FOLDER_ENTRIES
    max_pages: int = MAX_PAGES

    def __post_init__(self) -> None:
        _page_files(self.folder, self.max_entries, self.max_pages)

    def search(self, query: str, limit: int = DEFAULT_SEARCH_LIMIT) -> list[Hit]:
        """Return the pages that best match `query`, best first; no match gives []."""
        if not 1 <= limit <= MAX_SEARCH_LIMIT:
            raise ToolCallError(f"limit must be between 1 and {MAX_SEARCH_LIMIT}, got {limit}")
        words = tokenize(query)
        if not words:
            raise ToolCallError(
                f"the query {query!r} has no searchable words; "
                "use key terms such as 'vacation request'"
            )
        return self._current_index().search(words, limit)

    def _current_index(self) -> _Index:
        """Return the folder's index, rebuilt when any page was added, removed or edited."""
        pages = _page_files(self.folder, self.max_entries, self.max_pages)
        signature = tuple(
            (p.relative_to(self.folder).as_posix(), (s := p.stat()).st_size, s.st_mtime_ns)
            for p in pages
        )
        key = str(self.folder.resolve())
        with _INDEX_LOCK:  # bench runs search from several threads: one build, not one each
            index = _INDEXES.get(key)
            if index is None or index.signature != signature:
                index = _Index.build(self.folder, pages, signature)
                _INDEXES[key] = index
                if len(_INDEXES) > MAX_CACHED_FOLDERS:
                    _INDEXES.popitem(last=False)
            _INDEXES.move_to_end(key)
            return index


_INDEXES: OrderedDict[str, _Index] = OrderedDict()  # folder -> the index of its latest state
_INDEX_LOCK = threading.Lock()


# --- index --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Chunk:
    page: int
    heading: str
    text: str


@dataclass(frozen=True)
class _Page:
    path: str
    title: str


@dataclass(frozen=True)
class _Index:
    """Two BM25 fields: chunk bodies (with their heading) and page titles."""

    signature: tuple[Any, ...]
    pages: tuple[_Page, ...]
    chunks: tuple[_Chunk, ...]
    bodies: Any  # bm25s.BM25 over chunks
    titles: Any  # bm25s.BM25 over page titles

    @classmethod
    def build(cls, folder: Path, files: Sequence[Path], signature: tuple[Any, ...]) -> _Index:
        pages: list[_Page] = []
        chunks: list[_Chunk] = []
        for i, path in enumerate(files):
            stop_if_abandoned()  # the run that asked is over: free the lock and the memory
            with path.open(encoding="utf-8", errors="replace") as page:
                text = page.read(MAX_PAGE_CHARS)
            pages.append(_Page(path.relative_to(folder).as_posix(), _title(text, path)))
            chunks += [_Chunk(i, h, t) for h, t in _split(text)] or [_Chunk(i, "", "")]
        bodies = bm25_index([tokenize(f"{c.heading}\n{c.text}") for c in chunks])
        titles = bm25_index([tokenize(p.title) for p in pages])
        return cls(signature, tuple(pages), tuple(chunks), bodies, titles)

    def search(self, words: list[str], limit: int) -> list[Hit]:
        body_scores = self.bodies.get_scores(words)
        title_scores = self.titles.get_scores(words)
        best: dict[int, int] = {}  # page -> its best chunk
        for ci, chunk in enumerate(self.chunks):
            if chunk.page not in best or body_scores[ci] > body_scores[best[chunk.page]]:
                best[chunk.page] = ci
        scored = [
            (float(body_scores[ci] + TITLE_WEIGHT * title_scores[page]), page, ci)
            for page, ci in best.items()
        ]
        scored = sorted((s for s in scored if s[0] > 0), key=lambda s: (-s[0], s[1]))[:limit]
        return [self._hit(score, page, ci) for score, page, ci in scored]

    def _hit(self, score: float, page: int, ci: int) -> Hit:
        p, chunk = self.pages[page], self.chunks[ci]
        lead = f"{chunk.heading}: " if chunk.heading and chunk.heading != p.title else ""
        snippet = cut_at_word(lead + " ".join(chunk.text.split()), SNIPPET_CHARS)
        return Hit(p.path, p.title, snippet, round(score, 3))


# --- helpers ------------------------------------------------------------------------------


def _page_files(folder: Path, max_entries: int, max_pages: int) -> list[Path]:
    """Return the folder's pages, sorted: no hidden ones, links out or special files (a FIFO
    would block the read). A folder that is none, or no handbook, is the user's to fix."""
    if not folder.is_dir():  # gone since the tool was made: still the user's to fix
        what = "is not a folder" if folder.exists() else "does not exist"
        raise ConfigError(
            f"knowledge folder {folder} {what}; set TINY_DOCS (or docs in tiny.toml) to the "
            "folder of the handbook's pages",
            path=folder,
            field="TINY_DOCS",
        )
    inside = folder.resolve()
    files: list[Path] = []
    named = (path for path in _walk(folder, max_entries) if path.suffix.lower() in DOC_SUFFIXES)
    for path in named:
        if path.is_file() and path.resolve().is_relative_to(inside):
            files.append(path)
        if len(files) > max_pages:
            raise _not_a_handbook(folder, f"has over {max_pages:,} pages")
    if not files:
        raise _not_a_handbook(folder, "has no .md or .txt pages")
    return sorted(files)


def _not_a_handbook(folder: Path, why: str) -> ConfigError:
    return ConfigError(
        f"knowledge folder {folder} {why}; set TINY_DOCS (or docs in tiny.toml) to the "
        "handbook's own folder",
        path=folder,
        field="TINY_DOCS",
    )


def _walk(folder: Path, max_entries: int) -> Iterator[Path]:
    """Yield the names under `folder` that are no folder, hidden ones left out (os.walk enters
    no linked folder and skips one it cannot read), up to max_entries."""
    seen = 0
    for root, folders, names in os.walk(folder):
        stop_if_abandoned()
        folders[:] = [name for name in folders if not name.startswith(".")]
        names = [name for name in names if not name.startswith(".")]
        seen += len(folders) + len(names)
        if seen > max_entries:
            raise _not_a_handbook(folder, f"holds over {max_entries:,} files and folders")
        yield from (Path(root, name) for name in names)


def _title(text: str, path: Path) -> str:
    """Return the first heading, else the file name in words."""
    for line in text.splitlines():
        match = HEADING.match(line)
        if match and match.group(2):
            return match.group(2)
    return path.stem.replace("-", " ").replace("_", " ").strip().capitalize()


def _split(text: str) -> list[tuple[str, str]]:
    """Split a page into (section heading, paragraph) chunks."""
    out: list[tuple[str, str]] = []
    heading = ""
    for block in re.split(r"\n[ \t]*\n", text):
        lines = block.strip().splitlines()
        while lines and (match := HEADING.match(lines[0])):
            heading, lines = match.group(2), lines[1:]
        if lines:
            out.append((heading, "\n".join(lines)))
    return out
