"""The house rules of docs/architecture.md, checked: sizes, docstrings, exports, import layers."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "tiny_cli"
# a module of one purpose may run to 800 lines: splitting it only to stay short makes two
# fragments that call each other (issue 32), e.g. provider/replay.py, which records, reads and
# upgrades one file format
MAX_MODULE_LINES = 800
MAX_CLASS_LINES = 200
MAX_FUNCTION_LINES = 50


def _modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if "_seed" not in p.parts)


def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text("utf-8"), str(path))


def test_no_module_class_or_function_is_over_its_limit() -> None:
    over = []
    for path in _modules():
        name = path.relative_to(ROOT)
        lines = len(path.read_text("utf-8").splitlines())
        if lines > MAX_MODULE_LINES:
            over.append(f"{name}: {lines} lines")
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                size = (node.end_lineno or node.lineno) - node.lineno + 1
                limit = MAX_CLASS_LINES if isinstance(node, ast.ClassDef) else MAX_FUNCTION_LINES
                if size > limit:
                    over.append(f"{name}:{node.lineno} {node.name}: {size} lines")
    assert over == []


def test_every_module_opens_with_a_docstring() -> None:
    missing = [str(p.relative_to(ROOT)) for p in _modules() if ast.get_docstring(_tree(p)) is None]
    assert missing == []


def test_every_package_says_what_it_exports() -> None:
    inits = [p for p in _modules() if p.name == "__init__.py"]
    assert len(inits) >= 9  # the root and one per layer package
    for init in inits:
        names = {
            t.id
            for node in _tree(init).body
            if isinstance(node, ast.Assign)
            for t in node.targets
            if isinstance(t, ast.Name)
        }
        assert "__all__" in names, init


@pytest.mark.slow
def test_every_exception_class_lives_in_the_error_tree() -> None:
    from tiny_cli import errors

    elsewhere = []
    for path in _modules():
        for node in ast.walk(_tree(path)):
            if isinstance(node, ast.ClassDef) and path.name != "errors.py":
                bases = {getattr(b, "id", getattr(b, "attr", "")) for b in node.bases}
                if any(b.endswith(("Error", "Exception")) or b in vars(errors) for b in bases):
                    elsewhere.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert elsewhere == []


@pytest.mark.parametrize(
    ("module", "upward"),
    [
        ("tiny_cli/errors.py", "import tiny_cli.cli"),  # ground reaching for a face
        ("tiny_cli/agent/loop.py", "import tiny_cli.routing.router"),  # one wing into another
        ("tiny_cli/tools/web.py", "import tiny_cli.provider.client"),  # edge into edge
        ("tiny_cli/routing/router.py", "import rich"),  # rich outside the faces
    ],
)
@pytest.mark.slow
def test_a_broken_layer_rule_fails_the_import_contracts(
    tmp_path: Path, module: str, upward: str
) -> None:
    """`make lint` runs import-linter: a copy of the package with one bad import must fail it."""
    lint = shutil.which("lint-imports", path=str(Path(sys.executable).parent))
    assert lint, "import-linter is a dev dependency"
    shutil.copytree(PACKAGE, tmp_path / "tiny_cli", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    clean = subprocess.run([lint], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert clean.returncode == 0, clean.stdout[-2000:]
    target = tmp_path / module
    target.write_text(target.read_text("utf-8") + f"\n{upward}  # noqa\n", "utf-8")
    broken = subprocess.run([lint], cwd=tmp_path, capture_output=True, text=True, check=False)
    assert broken.returncode == 1
    assert "BROKEN" in broken.stdout


# each "only in X" contract must name every other top-level module: a module it leaves out
# could import the library unchecked while the docs say lint forbids it
ONLY_IN = {
    "only the faces import typer and rich": {"cli", "serve", "testing"},
    "the MCP SDK only in tools (client) and serve (server)": {"tools", "serve"},
    "OpenTelemetry only in telemetry": {"telemetry"},
}


def _top_level() -> set[str]:
    modules = {p.stem for p in PACKAGE.glob("*.py")} - {"__init__", "__main__"}
    return modules | {p.parent.name for p in PACKAGE.glob("*/__init__.py")}


@pytest.mark.parametrize("contract", sorted(ONLY_IN))
def test_each_only_in_contract_names_every_other_module(contract: str) -> None:
    contracts = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["tool"]
    [found] = [c for c in contracts["importlinter"]["contracts"] if c["name"].startswith(contract)]
    named = {m.removeprefix("tiny_cli.") for m in found["source_modules"]}
    assert named == _top_level() - ONLY_IN[contract]
