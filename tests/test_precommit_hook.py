"""The `tiny-validate` pre-commit hook, run by pre-commit itself on a sample repository.

The hook's fields come from .pre-commit-hooks.yaml; only `language` becomes `system` (the
installed `tiny`), so pre-commit builds no environment and downloads nothing.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from .conftest import REPO, SEED_CARDS

HOOKS = REPO / ".pre-commit-hooks.yaml"
BROKEN = (
    "id: broken\nsummary: Reads one web page and answers questions about it.\ntool: [http_get]\n"
)

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="pre-commit needs git")


def the_hook() -> dict:
    """Return the tiny-validate hook as .pre-commit-hooks.yaml declares it."""
    hooks = yaml.safe_load(HOOKS.read_text(encoding="utf-8"))
    return next(hook for hook in hooks if hook["id"] == "tiny-validate")


def test_the_hook_runs_tiny_validate_on_the_card_files() -> None:
    hook = the_hook()
    assert hook["entry"] == "tiny validate" and hook["pass_filenames"] is True
    assert hook["language"] == "python"  # pre-commit installs this repository for it


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    """Make a git repository with a good card, a README and an mcp.yaml beside it."""
    repo = tmp_path / "repo"
    (repo / "cards").mkdir(parents=True)
    shutil.copy(SEED_CARDS / "docs-finder.yaml", repo / "cards" / "docs-finder.yaml")
    (repo / "cards" / "README.md").write_text("# Our cards\n\nNot a card.\n", encoding="utf-8")
    (repo / "cards" / "mcp.yaml").write_text("servers: {}\n", encoding="utf-8")
    (repo / "notes.yaml").write_text("not: a card\n", encoding="utf-8")  # outside cards/
    local = {**the_hook(), "language": "system"}
    config = {"repos": [{"repo": "local", "hooks": [local]}]}
    (repo / ".pre-commit-config.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    return repo


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def _pre_commit(repo: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINY_", "OPENAI_"))}
    env.update(
        PRE_COMMIT_HOME=str(tmp_path / "pre-commit-home"),
        TINY_HOME=str(tmp_path / "tiny-home"),
        PATH=os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")]),
    )
    command = [sys.executable, "-m", "pre_commit", "run", "tiny-validate", "--all-files"]
    return subprocess.run(command, cwd=repo, env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_pre_commit_passes_good_cards_and_fails_naming_a_broken_one(sample, tmp_path) -> None:
    good = _pre_commit(sample, tmp_path)
    assert good.returncode == 0, good.stdout + good.stderr
    assert "tiny validate" in good.stdout and "Passed" in good.stdout

    (sample / "cards" / "broken.yaml").write_text(BROKEN, encoding="utf-8")
    _git(sample, "add", ".")
    bad = _pre_commit(sample, tmp_path)
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert "Failed" in bad.stdout
    assert "cards/broken.yaml:3: tool: unknown key (did you mean 'tools'?)" in bad.stdout
    assert "README.md" not in bad.stdout and "mcp.yaml" not in bad.stdout
