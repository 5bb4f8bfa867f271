"""The map tells the truth: every tiny module one `tiny delegate` imports is on the map.

A real `tiny delegate` runs in a fresh interpreter against the scripted model server; the
modules of tiny_cli it has imported when it exits must each be named in
docs/architecture.md, so the page cannot drift from the code again.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tiny_cli.testing import ScriptedServer, reply, tool_call

from .conftest import REPO

PAGE = REPO / "docs" / "architecture.md"
ANSWER = {"status": "ok", "summary": "Fill in the form.", "source": "urlaubsantrag.md"}
_TRACE = """
import atexit, json, sys
OUT = sys.argv[1]
def _dump():
    names = sorted(m for m in sys.modules if m == "tiny_cli" or m.startswith("tiny_cli."))
    with open(OUT, "w") as out:
        json.dump(names, out)
atexit.register(_dump)
from tiny_cli.cli import main
sys.argv = ["tiny", "delegate", "how do I request vacation", "--json"]
main()
"""


def _module_file(module: str) -> str:
    """How the page names a module: its path below tiny_cli/ (a package by its folder)."""
    parts = module.split(".")[1:]
    path = REPO / "tiny_cli" / Path(*parts) if parts else REPO / "tiny_cli"
    return f"{'/'.join(parts)}/" if path.is_dir() else f"{'/'.join(parts)}.py"


def _traced_delegate(tmp_path: Path, env: dict[str, str]) -> list[str]:
    out = tmp_path / "modules.json"
    script = [tool_call("docs_search", {"query": "vacation"}), reply(json.dumps(ANSWER))]
    with ScriptedServer(script) as server:
        environ = {**os.environ, **env, "TINY_BASE_URL": server.url}
        done = subprocess.run(
            [sys.executable, "-c", _TRACE, str(out)],
            env=environ,
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "ok"
    return json.loads(out.read_text())


@pytest.mark.slow
def test_every_module_a_delegate_imports_is_on_the_map(tmp_path: Path, cli_env) -> None:
    modules = _traced_delegate(tmp_path, cli_env)
    assert "tiny_cli.delegation" in modules and "tiny_cli.agent.loop" in modules
    page = PAGE.read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/]+(?:\.py|/))`", page))
    missing = [m for m in modules if m != "tiny_cli" and _module_file(m) not in named]
    assert missing == [], f"imported by `tiny delegate` but not on docs/architecture.md: {missing}"


def test_every_module_of_the_package_has_a_layer_on_the_map() -> None:
    page = PAGE.read_text(encoding="utf-8")
    named = set(re.findall(r"`([\w/]+(?:\.py|/))`", page))
    modules = sorted(
        p.relative_to(REPO / "tiny_cli").as_posix()
        for p in (REPO / "tiny_cli").rglob("*.py")
        if p.name != "__init__.py" and "_seed" not in p.parts
    )
    unnamed = [m for m in modules if m not in named and f"{m.split('/')[0]}/" not in named]
    assert unnamed == [], f"modules the map does not place in a layer: {unnamed}"
