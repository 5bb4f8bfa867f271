"""benchmarks/overhead.py: the data-type floor counts and recreates what an invoke defines."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent


def _bench(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))  # it imports childserver beside it
    spec = importlib.util.spec_from_file_location("overhead", REPO / "benchmarks" / "overhead.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_the_stand_in_types_have_the_counted_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    namespace: dict[str, object] = {}
    exec(_bench(monkeypatch)._data_types(5, 3, 12), namespace)
    types = [value for value in namespace.values() if dataclasses.is_dataclass(value)]
    assert len(types) == 5
    assert [t.__dataclass_params__.frozen for t in types] == [True, True, True, False, False]  # type: ignore[union-attr]
    assert sum(len(dataclasses.fields(t)) for t in types) == 12


def test_the_counter_runs_tiny_and_counts_its_dataclasses(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {"TINY_HOME": str(tmp_path), "PATH": "", "PYTHONPATH": str(REPO)}
    command = [sys.executable, "-c", _bench(monkeypatch).COUNT_DATA_TYPES, "invoke", "--help"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, cwd=REPO)
    assert done.returncode == 0, done.stderr
    assert "Usage" in done.stdout  # tiny itself ran
    counts = json.loads(done.stderr.strip().splitlines()[-1])
    from tiny_cli import digest

    own = [v for v in vars(digest).values() if dataclasses.is_dataclass(v)]
    assert counts["types"] >= len(own) > 0  # invoke's command module loads the Digest's types
    assert 0 < counts["frozen"] <= counts["types"] < counts["fields"]
