"""The front door: `import tiny_cli` gives the library, and docs/library.md's example runs.

Each ```python block of docs/library.md followed by a ```text block runs in a fresh
interpreter, in a folder holding a copy of cards/, against its own scripted model; what it
prints must be the text block.
"""

from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import tiny_cli

ROOT = Path(__file__).resolve().parent.parent
LIBRARY_DOC = ROOT / "docs" / "library.md"
# a python block, the prose after it (no block), and the text block of what it prints
EXAMPLE = re.compile(r"```python\n(.*?)```\s*\n((?:(?!```).)*?)```text\n(.*?)```", re.S)
HEAVY = ("httpx", "numpy", "pytest", "pydantic", "sqlite3")  # what `tiny --help` never needs


def _python(code: str, cwd: Path, home: Path) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter with no TINY_* setting of the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINY_", "OPENAI_"))}
    env.update(TINY_HOME=str(home), PYTHONPATH=str(ROOT))
    command = [sys.executable, "-c", code]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def _examples() -> list[tuple[str, str]]:
    return [
        (code, shown) for code, _prose, shown in EXAMPLE.findall(LIBRARY_DOC.read_text("utf-8"))
    ]


def test_the_doc_holds_its_three_examples_each_with_its_output() -> None:
    assert len(_examples()) == 3 == LIBRARY_DOC.read_text("utf-8").count("```python")


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(_examples())))
def test_the_library_example_runs_and_prints_what_the_doc_shows(index: int, tmp_path: Path) -> None:
    code, shown = _examples()[index]
    shutil.copytree(ROOT / "cards", tmp_path / "cards")
    done = _python(code, tmp_path, tmp_path / "home")

    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == shown


def test_import_tiny_cli_gives_each_export_from_its_module(tmp_path: Path) -> None:
    check = (
        "import importlib, tiny_cli\n"
        "for module, names in tiny_cli._FROM.items():\n"
        "    for name in names:\n"
        "        assert getattr(tiny_cli, name) is getattr(importlib.import_module(module), name)\n"
        "assert all(hasattr(tiny_cli, name) for name in tiny_cli.__all__)\n"
        "print(sorted(set(tiny_cli.__all__) - set(dir(tiny_cli))))\n"
    )
    done = _python(check, tmp_path, tmp_path / "home")

    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout == "[]\n"


def test_delegate_is_the_function_whichever_export_loaded_its_module(tmp_path: Path) -> None:
    check = (
        "import tiny_cli\n"
        "tiny_cli.run_card\n"
        "print(tiny_cli.delegate.__module__, callable(tiny_cli.delegate))\n"
    )
    done = _python(check, tmp_path, tmp_path / "home")

    assert done.stdout == "tiny_cli.delegation True\n", done.stderr[-3000:]


def test_importing_the_front_door_loads_none_of_the_library_the_cli_may_not_need(
    tmp_path: Path,
) -> None:
    # the `tiny` command runs through this package: `tiny --help` must not pay for the library
    check = f"import sys, tiny_cli\nprint([m for m in {HEAVY!r} if m in sys.modules])\n"
    done = _python(check, tmp_path, tmp_path / "home")

    assert done.stdout == "[]\n", done.stderr[-3000:]


def test_what_type_checkers_see_is_what_the_package_gives() -> None:
    tree = ast.parse(Path(tiny_cli.__file__).read_text("utf-8"))
    checked = next(n for n in tree.body if isinstance(n, ast.If))  # `if TYPE_CHECKING:`
    seen = {
        (node.module, alias.name)
        for node in checked.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    given = {(module, name) for module, names in tiny_cli._FROM.items() for name in names}
    assert seen == given


def test_every_export_is_listed_once_and_the_errors_are_all_there() -> None:
    from tiny_cli import errors

    assert len(tiny_cli.__all__) == len(set(tiny_cli.__all__))
    assert set(errors.__all__) <= set(tiny_cli.__all__)
    assert {name for names in tiny_cli._FROM.values() for name in names} <= set(tiny_cli.__all__)
