"""Corrections: where a routed run's task should have gone, kept in the run log beside the run.

A run with a routing decision (routed, or abstained on: `tiny delegate`, a served `delegate`,
the tiny arm of a bench) whose task the log kept can be corrected: to another card, or to
nowhere (it should have abstained). One correction per run: correcting again replaces it
(a new id, not learned yet). `learned_at` stays empty until the correction was taught
(`tiny runs correct`, `tiny learn --from-runs`).
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from tiny_cli.errors import ConfigError
from tiny_cli.runs.schema import now

COLUMNS = ("id", "run_id", "task", "routed", "card", "created_at", "learned_at")
SELECT = f"SELECT {', '.join(COLUMNS)} FROM corrections"
RUN_SQL = "SELECT command, goal, status, routing FROM runs WHERE id = ?"
UNFINISHED = ("running", "interrupted")


@dataclass(frozen=True)
class Correction:
    """Where one run's task should have gone, and whether that was taught yet."""

    id: int
    run_id: int
    task: str  # the run's goal, as the run log keeps it (secrets scrubbed)
    routed: str | None  # the card the router chose first; None: it abstained
    card: str | None  # where the task should have gone; None: no card (abstain)
    created_at: str  # ISO 8601, UTC
    learned_at: str | None  # None until taught

    def to_json(self) -> dict[str, Any]:
        """Return the correction as a JSON object."""
        return asdict(self)


def correctable(path: Path, run_id: int, row: Sequence[Any]) -> tuple[str, str | None]:
    """Return the task and the router's first card of a run row (RUN_SQL); ConfigError if none.

    Correctable: a run that finished with a routing decision (routed or abstained) and whose
    task the log kept.
    """
    command, goal, status, routing = row
    if routing is None:
        if command == "delegate" and status in UNFINISHED:
            raise ConfigError(f"run {run_id} did not finish ({status}): no routing to correct")
        raise ConfigError(
            f"run {run_id} ({command}) was not routed: only delegate runs, which the router "
            "routed or abstained on, can be corrected"
        )
    if not goal:
        raise ConfigError(f"run {run_id} has no task in the run log: nothing to correct")
    try:
        decision = json.loads(routing)
        first = decision.get("rerouted_from") or decision.get("agent_id")
    except (ValueError, AttributeError):
        raise ConfigError(f"{path}: run {run_id} is damaged: its routing is not JSON") from None
    routed = first if decision.get("decision") == "route" and isinstance(first, str) else None
    return goal, routed


def store(
    db: sqlite3.Connection, run_id: int, task: str, routed: str | None, card: str | None
) -> Correction:
    """Record the correction of run `run_id` (in the caller's transaction), replacing any."""
    db.execute("DELETE FROM corrections WHERE run_id = ?", (run_id,))
    at = now()
    cursor = db.execute(
        "INSERT INTO corrections (run_id, task, routed, card, created_at) VALUES (?, ?, ?, ?, ?)",
        (run_id, task, routed, card, at),
    )
    assert cursor.lastrowid is not None
    return Correction(cursor.lastrowid, run_id, task, routed, card, at, None)


def select(db: sqlite3.Connection, pending_only: bool) -> list[Correction]:
    """Return the corrections, oldest first; only those not taught yet with `pending_only`."""
    where = " WHERE learned_at IS NULL" if pending_only else ""
    rows = db.execute(f"{SELECT}{where} ORDER BY id").fetchall()
    return [Correction(*row) for row in rows]


def mark(db: sqlite3.Connection, ids: Iterable[int]) -> int:
    """Mark these corrections taught (in the caller's transaction); return how many were not."""
    at = now()
    sql = "UPDATE corrections SET learned_at = ? WHERE id = ? AND learned_at IS NULL"
    return sum(db.execute(sql, (at, i)).rowcount for i in dict.fromkeys(ids))
