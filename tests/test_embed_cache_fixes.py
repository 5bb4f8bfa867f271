"""The vector cache and the remote embedder: a change of vector size, damaged rows, a
read-only cache folder and a slow server (review rev-route 1, 2, 5 and 6)."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np
import pytest
from click.testing import Result

from tiny_cli.errors import EmbedderError
from tiny_cli.routing.embed import CACHE_FILE, HashingEmbedder, VectorCache
from tiny_cli.routing.remote_embed import OpenAIEmbedder

from .conftest import SEED_CARDS, Counting, one_error_line


class SizedServer:
    """A real HTTP server on 127.0.0.1 answering /v1/embeddings with hashing vectors of
    `dim` dimensions (`dims(batch size)` when set); it waits for `release` when `stall`."""

    def __init__(self) -> None:
        self.dim = 8
        self.dims: Callable[[int], int] | None = None
        self.stall = False
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                texts = json.loads(self.rfile.read(int(self.headers["Content-Length"])))["input"]
                if outer.stall:
                    outer.release.wait(10)
                dim = outer.dims(len(texts)) if outer.dims else outer.dim
                vectors = HashingEmbedder(dim=dim).embed(texts)
                data = [{"index": i, "embedding": v.tolist()} for i, v in enumerate(vectors)]
                payload = json.dumps({"object": "list", "data": data}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"


@pytest.fixture
def server() -> Iterator[SizedServer]:
    srv = SizedServer()
    thread = threading.Thread(target=srv.httpd.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield srv
    srv.release.set()
    srv.httpd.shutdown()
    srv.httpd.server_close()


def _sizes(folder: Path) -> set[int]:
    """The byte lengths of the vectors the cache file holds."""
    with sqlite3.connect(folder / CACHE_FILE) as db:
        return {length for (length,) in db.execute("SELECT length(vec) FROM vectors")}


# --- 1: a server that changes vector size -------------------------------------------------


def test_a_server_now_sending_another_size_is_one_error_and_nothing_is_stored(
    server: SizedServer, tmp_path: Path
) -> None:
    VectorCache(tmp_path).embed(OpenAIEmbedder("m", server.url), ["alpha", "beta"])
    server.dim = 16  # another model loaded behind the same name
    for texts in (["alpha", "gamma"], ["delta only"]):  # with cached rows, and without
        with pytest.raises(EmbedderError) as caught:
            VectorCache(tmp_path).embed(OpenAIEmbedder("m", server.url), texts)
        assert str(caught.value).startswith(
            "openai:m sent vectors of 16 dimensions, but its cached ones have 8: another model"
        )
        assert f"delete {tmp_path} to embed all again" in str(caught.value)
    assert _sizes(tmp_path) == {8 * 4}
    server.dim = 8  # the model it had, back: the cache works as before
    again = VectorCache(tmp_path).embed(OpenAIEmbedder("m", server.url), ["alpha", "gamma"])
    assert again.shape == (2, 8)


def test_batches_of_two_sizes_in_one_call_are_one_error(server: SizedServer) -> None:
    server.dims = lambda n: 8 if n == 2 else 16  # full batches from one model, the rest another
    embedder = OpenAIEmbedder("m", server.url, batch_size=2)
    said = (
        f"openai:m sent vectors of 16 dimensions, but its earlier ones from {server.url}/embeddings"
        " have 8: another model answers under that name; serve one model only there"
    )
    for texts in (["a", "b", "c"], ["d"]):  # nor in a later call
        with pytest.raises(EmbedderError) as caught:
            embedder.embed(texts)
        assert str(caught.value) == said


def _route(tiny: Callable[..., Result], cards: Path, url: str) -> Result:
    env = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "openai:m", "TINY_BASE_URL": url}
    result = tiny("route", "make me a sandwich", env=env)
    assert "Traceback" not in result.output
    return result


def test_route_says_in_one_line_that_the_server_changed_size_and_recovers(
    tiny: Callable[..., Result], server: SizedServer, home: Path, tmp_path: Path
) -> None:
    cards = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    assert _route(tiny, cards, server.url).exit_code == 0
    server.dim = 16
    saved = _route(tiny, cards, server.url)  # the router state saved: the task's vector
    assert one_error_line(saved) == (
        "the embedder sent vectors of 16 dimensions, but the cards' saved ones have 8: another"
        " model answers under that name; load the one it had, or delete TINY_HOME/cache to"
        " embed them again"
    )
    card = cards / "web-reader.yaml"
    added = "examples:\n  - bake me some bread from the recipe page\n"
    card.write_text(card.read_text("utf-8").replace("examples:\n", added), "utf-8")
    edited = _route(tiny, cards, server.url)  # a new state: card texts from the cache
    assert edited.exit_code == 2, edited.output
    assert "openai:m sent vectors of 16 dimensions, but its cached ones have 8" in edited.output
    assert _sizes(home / "cache") == {8 * 4}
    server.dim = 8
    assert _route(tiny, cards, server.url).exit_code == 0


# --- 2: damaged rows ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "damage",
    [
        "UPDATE vectors SET vec = substr(vec, 1, 4099) WHERE rowid = 2",  # not whole floats
        "UPDATE vectors SET vec = substr(vec, 1, 400) WHERE rowid = 2",  # too short
        "UPDATE vectors SET vec = 'hello' WHERE rowid = 2",  # text, not a blob
        "UPDATE vectors SET vec = vec || vec WHERE rowid = 2",  # text that is not UTF-8
    ],
)
def test_a_damaged_row_is_embedded_again_and_rewritten(tmp_path: Path, damage: str) -> None:
    texts = ["alpha beta", "gamma delta", "epsilon"]
    first = VectorCache(tmp_path).embed(HashingEmbedder(), texts)
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        db.execute(damage)
    counting = Counting(HashingEmbedder())
    again = VectorCache(tmp_path).embed(counting, texts)
    assert counting.texts == ["gamma delta"]
    assert np.array_equal(again, first)
    assert _sizes(tmp_path) == {HashingEmbedder().dim * 4}


def test_a_cache_written_before_sizes_were_recorded_is_read_as_it_is(tmp_path: Path) -> None:
    vectors = HashingEmbedder().embed(["alpha", "beta"])
    VectorCache(tmp_path).embed(HashingEmbedder(), ["alpha", "beta"])
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        db.execute("DROP TABLE sizes")  # as an older tiny wrote it
    counting = Counting(HashingEmbedder())
    assert np.array_equal(VectorCache(tmp_path).embed(counting, ["alpha", "beta"]), vectors)
    assert counting.texts == []


# --- 5: a cache folder that cannot be written ---------------------------------------------

_EMBED = """
import sys
from pathlib import Path
from tiny_cli.routing.embed import HashingEmbedder, VectorCache
print(VectorCache(Path(sys.argv[1])).embed(HashingEmbedder(), ["alpha", "new text"]).shape)
"""


def _read_only_run(folder: Path, code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` (argv[1]: `folder`) with `folder` read-only: by its modes, or, for root
    (who writes whatever the modes), as a read-only bind mount in a mount namespace."""
    python = [sys.executable, "-c", code, str(folder)]
    if os.geteuid() != 0:
        for path in (folder / CACHE_FILE, folder):
            path.chmod(0o444 if path.is_file() else 0o555)
        try:
            return subprocess.run(python, capture_output=True, text=True, timeout=120)
        finally:
            folder.chmod(0o755)
    probe = ["unshare", "-m", "sh", "-c", f"mount -o bind,ro '{folder}' '{folder}'"]
    if shutil.which("unshare") is None or subprocess.run(probe, capture_output=True).returncode:
        pytest.skip("needs a read-only folder: as root, unshare and mount")
    mount = 'mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" && shift && exec "$@"'
    command = ["unshare", "-m", "sh", "-c", mount, "sh", str(folder), *python]
    return subprocess.run(command, capture_output=True, text=True, timeout=120)


def test_a_read_only_cache_is_read_and_not_written(tmp_path: Path) -> None:
    VectorCache(tmp_path).embed(HashingEmbedder(), ["alpha"])
    done = _read_only_run(tmp_path, _EMBED)
    assert (done.returncode, done.stdout.strip()) == (0, "(2, 2048)"), done.stderr
    with sqlite3.connect(tmp_path / CACHE_FILE) as db:
        assert db.execute("SELECT count(*) FROM vectors").fetchone() == (1,)


# --- 6: a slow server ---------------------------------------------------------------------


def test_a_server_slower_than_the_timeout_is_said_to_be_slow(server: SizedServer) -> None:
    server.stall = True
    with pytest.raises(EmbedderError) as caught:
        OpenAIEmbedder("m", server.url, timeout=0.2).embed(["x"])
    assert str(caught.value).startswith(
        f"{server.url}/embeddings did not answer within 0.2 s (ReadTimeout): the server is slow"
    )
