"""`tiny runs stats`: figures over the matching runs, in all, per card and per model."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from tiny_cli.runs.query import RunSummary

UNFINISHED = ("running", "interrupted")  # no Digest: left out of the means in `stats`
RESCUED = ("ok", "partial")  # a re-routed task's final statuses that count as rescued


@dataclass(frozen=True)
class GroupStats:
    """Figures for one card or one model over the matching runs."""

    name: str | None
    runs: int
    statuses: Mapping[str, int]
    ghost_calls: int
    ghost_rate: float | None  # ghost calls / tool calls attempted
    repair_rate: float | None  # finished runs that needed a repair / finished runs
    mean_tokens_in: float | None
    mean_tokens_out: float | None
    mean_caller_tokens: float | None
    compression: float | None  # caller tokens / tokens the agent read
    wall_p50: float | None
    wall_p95: float | None

    def to_json(self) -> dict[str, Any]:
        """Return the figures as a JSON object."""
        return {**asdict(self), "statuses": dict(self.statuses)}


@dataclass(frozen=True)
class Reroutes:
    """Delegated runs re-routed after a refusal, and how many the next card rescued."""

    rerouted: int = 0  # runs whose Digest names an earlier attempt that was refused
    rescued: int = 0  # of those, the runs that ended ok or partial


@dataclass(frozen=True)
class RunStats:
    """`tiny runs stats`: every matching run, per card and per model, and the re-routes."""

    total: GroupStats
    by_card: tuple[GroupStats, ...]
    by_model: tuple[GroupStats, ...]
    reroutes: Reroutes = field(default_factory=Reroutes)

    def to_json(self) -> dict[str, Any]:
        """Return the statistics as a JSON object."""
        return {
            "total": self.total.to_json(),
            "by_card": [g.to_json() for g in self.by_card],
            "by_model": [g.to_json() for g in self.by_model],
            "reroutes": asdict(self.reroutes),
        }


def run_stats(found: Sequence[RunSummary], reroutes: Reroutes | None = None) -> RunStats:
    """Return the figures of these runs, in all, per card and per model, with `reroutes`."""
    return RunStats(
        _group(None, found),
        tuple(_group(name, rows) for name, rows in _by(found, lambda r: r.card)),
        tuple(_group(name, rows) for name, rows in _by(found, lambda r: r.model)),
        reroutes or Reroutes(),
    )


def count_reroutes(rows: Iterable[tuple[str, str | None]]) -> Reroutes:
    """Count (status, stored Digest JSON) rows re-routed after a refusal, and those rescued.

    Read from the Digest's `attempts` statuses and the run's final status, never from text;
    a Digest that does not parse counts for nothing.
    """
    rerouted = rescued = 0
    for status, stored in rows:
        try:
            attempts = json.loads(stored or "null").get("attempts")
        except (ValueError, AttributeError):
            continue
        if not isinstance(attempts, list):
            continue
        if any(isinstance(a, dict) and a.get("status") == "refused" for a in attempts):
            rerouted += 1
            rescued += status in RESCUED
    return Reroutes(rerouted, rescued)


def _by(
    runs: Sequence[RunSummary], key: Callable[[RunSummary], str | None]
) -> list[tuple[str | None, list[RunSummary]]]:
    """Group runs by `key`, the largest group first."""
    groups: dict[str | None, list[RunSummary]] = {}
    for run in runs:
        groups.setdefault(key(run), []).append(run)
    return sorted(groups.items(), key=lambda g: (-len(g[1]), g[0] or ""))


def _group(name: str | None, runs: Sequence[RunSummary]) -> GroupStats:
    """Compute one group's figures; means over runs that finished."""
    done = [r for r in runs if r.status not in UNFINISHED]
    statuses: dict[str, int] = {}
    for r in runs:
        statuses[r.status] = statuses.get(r.status, 0) + 1
    ghosts, calls = sum(r.ghost_calls for r in runs), sum(r.tool_calls for r in runs)
    read = [r for r in done if r.tokens_in > 0]
    walls = sorted(r.wall_seconds for r in done if r.wall_seconds is not None)
    return GroupStats(
        name,
        len(runs),
        statuses,
        ghosts,
        _ratio(ghosts, calls),
        _ratio(sum(bool(r.repaired) for r in done), len(done)),
        _mean([r.tokens_in for r in done]),
        _mean([r.tokens_out for r in done]),
        _mean([r.caller_tokens for r in done]),
        _ratio(sum(r.caller_tokens for r in read), sum(r.tokens_in for r in read)),
        percentile(walls, 50),
        percentile(walls, 95),
    )


def _ratio(part: float, whole: float) -> float | None:
    return round(part / whole, 4) if whole else None


def _mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 1) if values else None


def percentile(ordered: Sequence[float], p: float) -> float | None:
    """Return the nearest-rank `p`th percentile of sorted values (None when there are none)."""
    if not ordered:
        return None
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)]
