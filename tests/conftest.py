"""Shared fixtures: run the real CLI in-process with an isolated TINY_HOME."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner, Result

from tiny_cli.cli import app

REPO = Path(__file__).resolve().parent.parent
SEED_CARDS = REPO / "cards"
HANDBOOK = REPO / "examples" / "handbook"

pytest_plugins = ["tiny_cli.testing"]


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
    }


@pytest.fixture
def tiny(cli_env: dict[str, str]) -> Callable[..., Result]:
    """Run `tiny ARGS...` in-process; extra env and stdin as keywords."""

    def run(*args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        result = CliRunner().invoke(app, list(args), input=input, env={**cli_env, **(env or {})})
        if result.exception and not isinstance(result.exception, SystemExit):
            raise result.exception  # a traceback is a bug: surface it in the test
        return result

    return run
