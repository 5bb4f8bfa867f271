"""Words for matching (the frozen stopword lists), and what a cached route does not import."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from bm25s.stopwords import STOPWORDS_EN, STOPWORDS_GERMAN

from tiny_cli.text import STOPWORDS_FILE, tokenize

REPO = Path(__file__).resolve().parents[1]


def test_the_frozen_stopwords_are_bm25s_lists() -> None:
    lines = STOPWORDS_FILE.read_text("utf-8").splitlines()
    frozen = [w for w in lines if w and not w.startswith("#")]
    assert sorted(frozen) == sorted(set(STOPWORDS_EN) | set(STOPWORDS_GERMAN))


def test_stopwords_are_dropped_and_words_stemmed() -> None:
    assert tokenize("Where is the Urlaubsanträge page of the handbook?") == ["urlaubsantraeg"]
    assert tokenize("und wie viele Reisekosten") == ["viel", "reisekost"]


def test_a_cached_route_imports_no_bm25s_pydantic_httpx_tools_or_other_commands(
    tmp_path: Path,
) -> None:
    """Heavy libraries only: tiny's own light modules are plain imports since issue 32 (the
    registry's, mcp_config, explain and validation cost a cached route about 5 ms together;
    sqlite3, imported by the CRM's and the vector cache's modules, about 1.5 ms)."""
    env = {
        **os.environ,
        "TINY_HOME": str(tmp_path / "home"),
        "TINY_CARDS": str(REPO / "cards"),
        "TINY_EMBEDDER": "hashing",
        "TINY_PROJECT": "none",
    }
    code = (
        "import sys\n"
        "from tiny_cli.cli import main\n"
        "sys.argv = ['tiny', 'route', 'how did the onboarding process work again', '--json']\n"
        "try:\n"
        "    main()\n"
        "finally:\n"
        "    found = set(sys.modules)\n"
        "    heavy = {'bm25s', 'pydantic', 'httpx', 'jsonschema', 'mcp',\n"
        "             'tiny_cli.tools.handbook', 'tiny_cli.tools.web'}\n"
        "    if 'typer._adapters' in found:  # typer from 0.29 converts options with pydantic\n"
        "        heavy.discard('pydantic')\n"
        "    print(sorted(found & heavy))\n"
        "    print(sorted(m for m in found if m.startswith('tiny_cli.cli.')))\n"
    )
    first = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    built = first.stdout.splitlines()[-2]  # the first route checks the cards, builds the index
    assert "'bm25s'" in built  # PyYAML is a plain import since issue 32: a few ms, no parse
    again = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert again.returncode == 0, again.stderr
    assert '"agent_id": "docs-finder"' in again.stdout
    assert again.stdout.splitlines()[-2] == "[]", again.stdout
    # the command line builds the command it runs, not bench, serve, learn or runs
    cli = again.stdout.splitlines()[-1]
    assert "'tiny_cli.cli.route'" in cli
    assert not any(f"'tiny_cli.cli.{m}'" in cli for m in ("bench", "serve", "learn", "run", "runs"))
