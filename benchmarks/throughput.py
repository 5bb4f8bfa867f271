"""Bench throughput: runs per second of the example bench on the scripted server, by concurrency.

Run `python benchmarks/throughput.py` (from the repository, in the project's venv). It runs
the example bench (examples/bench/tasks.yaml: 15 tasks in both arms, the real concierge, the
real runner and tools, a scratch home per run) through the library's bench entry
(`bench_from_settings`), each task repeated `--repeat` times, at concurrency 1, 4 and 16.
The "model" is benchmarks/bench_smoke.py's rule-based `simulated_model`, served by a
scripted OpenAI-compatible server (tiny_cli.testing) in its own process, so the CPU column
is the bench's own (the client's, all its threads, by time.process_time) and never the
server's. Wall and CPU are those of the fan-out, from the first run's start to the last
run's end: loading the workspace and routing the 15 tasks happen once per bench, before it.
One untimed bench first warms the process up (imports, the embedder, what tiny
keeps per process); then every concurrency runs `--rounds` times, in a rotating order, and
the medians are shown. The ratio is against concurrency 1 of the same run.

`--json FILE` writes the numbers; `--baseline FILE` (such a file from an earlier run, e.g.
before a change) adds a column with runs/s against it.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from childserver import ChildServer  # benchmarks/childserver.py, beside this file

REPO = Path(__file__).resolve().parent.parent
TASKS = REPO / "examples" / "bench" / "tasks.yaml"
MODEL = "scripted-simulation"
CONCURRENCIES = (1, 4, 16)
REPEAT = 4  # each task this often per arm and bench: 120 runs
ROUNDS = 3
TURNS_PER_RUN = 8  # more than a run of the example bench asks for


def main(argv: Sequence[str] | None = None) -> int:
    """Measure every concurrency, print the table (and write --json); return the exit code."""
    args = _parser().parse_args(argv)
    if args.serve:
        return _serve(args.serve)
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # piped: wide enough for the table
        console = Console(width=max(console.width, 120))
    levels = tuple(args.concurrency)
    _measure(1, 1)  # untimed: imports, the embedder, what tiny keeps per process
    samples: dict[int, list[dict[str, Any]]] = {c: [] for c in levels}
    for r in range(args.rounds):
        for c in levels[r % len(levels) :] + levels[: r % len(levels)]:
            samples[c].append(_measure(c, args.repeat))
    rows = [_median(c, samples[c]) for c in levels]
    baseline = json.loads(Path(args.baseline).read_text()) if args.baseline else None
    console.print(_table(rows, baseline))
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows}, indent=2) + "\n")
    broken = [row for row in rows if row["errors"]]
    return 1 if broken else 0


def _measure(concurrency: int, repeat: int) -> dict[str, Any]:
    """Run the example bench once at `concurrency`; return runs, wall and CPU seconds."""
    from tiny_cli.bench import BenchOptions, bench_from_settings
    from tiny_cli.bench.arms import ARMS
    from tiny_cli.bench.tasks import load_tasks
    from tiny_cli.routing.factory import build_router
    from tiny_cli.session import open_session
    from tiny_cli.settings import load_settings

    requests_at_most = repeat * len(load_tasks(TASKS)) * len(ARMS) * TURNS_PER_RUN
    with Server(requests_at_most) as server, tempfile.TemporaryDirectory(prefix="tiny-tp-") as home:
        settings = replace(
            load_settings(env={}, cwd=REPO), home=Path(home), base_url=server.url, model=MODEL
        )
        options = BenchOptions(repeat=repeat, concurrency=concurrency)
        clock = _FanOutClock()
        with open_session(settings, "bench", log=False) as session:
            report = bench_from_settings(
                settings,
                session,
                lambda ws: build_router(ws.settings, ws.cards.values()),
                tasks_path=TASKS,
                options=options,
                on_progress=clock,
            )
        stats = server.stats()
    return {
        "concurrency": concurrency,
        "runs": len(report.runs),
        "wall_s": clock.wall,
        "cpu_s": clock.cpu,
        "server_cpu_s": stats["cpu_s"],
        "errors": len(stats["errors"]),
    }


class _FanOutClock:
    """The bench's progress callback: wall and CPU seconds from the first run to the last.

    Loading the tasks, the workspace and routing every task happen once per bench, before
    the fan-out; they are not what runs per second measures.
    """

    def __init__(self) -> None:
        self.wall = self.cpu = 0.0
        self._start = (0.0, 0.0)

    def __call__(self, done: int, total: int) -> None:
        now = (time.perf_counter(), time.process_time())
        if done == 0:
            self._start = now
        elif done == total:
            self.wall, self.cpu = now[0] - self._start[0], now[1] - self._start[1]


def _median(concurrency: int, samples: list[dict[str, Any]]) -> dict[str, Any]:
    """Fold one concurrency's rounds into medians; runs/s is runs over the median wall time."""
    wall = statistics.median(s["wall_s"] for s in samples)
    runs = samples[0]["runs"]
    return {
        "concurrency": concurrency,
        "runs": runs,
        "wall_s": round(wall, 3),
        "cpu_s": round(statistics.median(s["cpu_s"] for s in samples), 3),
        "server_cpu_s": round(statistics.median(s["server_cpu_s"] for s in samples), 3),
        "runs_per_s": round(runs / wall, 1),
        "cpu_ms_per_run": round(1000 * statistics.median(s["cpu_s"] for s in samples) / runs, 2),
        "errors": sum(s["errors"] for s in samples),
    }


def _table(rows: list[dict[str, Any]], baseline: dict[str, Any] | None) -> Any:
    from rich.table import Table

    title = "Example bench on the scripted server: runs per second by concurrency"
    table = Table(title=title)
    for name in (
        "concurrency",
        "runs",
        "wall s",
        "CPU s",
        "CPU ms/run",
        "runs/s",
        "ratio to conc 1",
    ):
        table.add_column(name, justify="right")
    if baseline is not None:
        table.add_column("ratio to baseline", justify="right")
    before = {r["concurrency"]: r for r in (baseline or {}).get("rows", [])}
    first = rows[0]["runs_per_s"]
    for row in rows:
        cells = [
            str(row["concurrency"]),
            str(row["runs"]),
            f"{row['wall_s']:.2f}",
            f"{row['cpu_s']:.2f}",
            f"{row['cpu_ms_per_run']:.1f}",
            f"{row['runs_per_s']:.1f}",
            f"{row['runs_per_s'] / first:.2f}",
        ]
        if baseline is not None:
            old = before.get(row["concurrency"])
            cells.append(f"{row['runs_per_s'] / old['runs_per_s']:.2f}" if old else "—")
        table.add_row(*cells)
    return table


# --- the scripted server, in its own process ----------------------------------------------


def _serve(count: int) -> int:
    """Serve `count` turns of the simulated model; print the URL, then stats per stdin line."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_smoke import simulated_model

    from tiny_cli.testing import ScriptedServer, respond

    with ScriptedServer([respond(simulated_model)] * count) as server:
        print(server.url, flush=True)
        for _ in sys.stdin:  # one stats line per line from the parent; EOF stops
            usage = resource.getrusage(resource.RUSAGE_SELF)
            stats = {"errors": server.errors, "cpu_s": usage.ru_utime + usage.ru_stime}
            print(json.dumps(stats), flush=True)
    return 0


class Server(ChildServer):
    """A scripted server subprocess playing the simulated model for `count` requests."""

    def __init__(self, count: int) -> None:
        super().__init__([sys.executable, __file__, "--serve", str(count)])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=REPEAT, help="runs of each task per arm")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="benches per concurrency")
    parser.add_argument(
        "--concurrency", type=int, nargs="+", default=list(CONCURRENCIES), help="levels to run"
    )
    parser.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    parser.add_argument("--baseline", metavar="FILE", help="a --json file to compare runs/s with")
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)  # the server's own role
    return parser


if __name__ == "__main__":
    sys.exit(main())
