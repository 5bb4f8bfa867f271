"""`tiny bench --fail-under ARM.METRIC=VALUE`: fail a CI job when the bench falls below a bar.

Metrics are shares from 0 to 1, read from the report's JSON document:

- the example bench: `right` (right outcomes per run), `ok` (status ok per run), `routing`
  (routing accuracy, tiny only);
- the bench at scale: `right_call`, `right_tool` (per selection task), `irrelevance` (right
  per irrelevance task), `routing` — checked on every size of the arm.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from tiny_cli.errors import ConfigError

__all__ = ["METRICS", "Gate", "below", "check_gates", "parse_gates"]

# a selection metric's share: (the row's count, the row's count it is out of)
_SELECTION_SHARES = {
    "right_call": ("right_call", "tasks"),
    "right_tool": ("right_tool", "tasks"),
    "irrelevance": ("irrelevance_right", "irrelevance_tasks"),
    "routing": ("routing_right", "tasks"),
}
METRICS = {"bench": ("right", "ok", "routing"), "selection": tuple(_SELECTION_SHARES)}
# the metrics only some arms measure: a bar on another arm reads n/a and would always fail
# (only tiny and hybrid route; the oracle is never asked an irrelevance question)
_MEASURED_BY = {
    ("bench", "routing"): ("tiny",),
    ("selection", "routing"): ("tiny", "hybrid"),
    ("selection", "irrelevance"): ("tiny", "top-k", "hybrid", "all-tools"),
}


@dataclass(frozen=True)
class Gate:
    """One bar: the arm, the metric, and the least share it may have."""

    arm: str
    metric: str
    least: float

    def __str__(self) -> str:
        return f"{self.arm}.{self.metric}={self.least:g}"


def parse_gates(specs: Iterable[str]) -> list[Gate]:
    """Read ARM.METRIC=VALUE specs; a malformed one is a ConfigError naming it."""
    return [_gate(spec) for spec in specs]


def check_gates(
    gates: Sequence[Gate],
    kind: str,
    arms: Sequence[str] | None = None,
    unmeasured: Mapping[str, str] | None = None,
) -> None:
    """Refuse, before any run, a bar the report of `kind` (with `arms`) could never read;
    `unmeasured` maps a metric the options leave without a figure to the option that says so."""
    for gate in gates:
        problem = _unreadable(gate, kind, arms, unmeasured or {})
        if problem:
            raise ConfigError(f"--fail-under {gate}: {problem}")


def _unreadable(
    gate: Gate, kind: str, arms: Sequence[str] | None, unmeasured: Mapping[str, str]
) -> str:
    """Why the report cannot hold the gate's figure ("" when it can)."""
    if gate.metric not in METRICS[kind]:
        return f"{gate.metric!r} is not a metric here ({', '.join(METRICS[kind])})"
    if gate.metric in unmeasured:
        return f"{unmeasured[gate.metric]}, so no run could meet it"
    if arms is None:
        return ""
    if gate.arm not in arms:
        return f"{gate.arm!r} is not an arm of this bench ({', '.join(arms)})"
    only = _MEASURED_BY.get((kind, gate.metric), arms)
    if gate.arm not in only:
        measured = f"arms with one: {', '.join(only)}"
        return f"arm {gate.arm!r} has no {gate.metric} figure, so no run could meet it ({measured})"
    return ""


def below(document: Mapping[str, Any], gates: Sequence[Gate]) -> list[str]:
    """Say, one line each, where the report falls below a gate (empty: all met)."""
    kind = document.get("kind", "bench")
    check_gates(gates, kind)
    values = _selection_values if kind == "selection" else _bench_values
    return [line for gate in gates for line in _misses(gate, values(document, gate))]


def _gate(spec: str) -> Gate:
    name, equals, value = spec.partition("=")
    arm, dot, metric = name.strip().rpartition(".")
    try:
        least = float(value)
    except ValueError:
        least = float("nan")
    if not (equals and dot and arm and metric) or not 0 <= least <= 1:
        raise ConfigError(f"--fail-under {spec!r}: write ARM.METRIC=SHARE, e.g. tiny.right=0.8")
    return Gate(arm, metric, least)


def _misses(gate: Gate, values: list[tuple[str, Fraction | None]]) -> list[str]:
    if not values:
        raise ConfigError(f"--fail-under {gate}: the report has no arm {gate.arm!r}")
    # the bar is a float, so the share is compared as one (the exact share is for the line)
    missed = [(where, v) for where, v in values if v is None or float(v) < gate.least]
    return [f"{where}: {_shown(v, gate.least)} < {gate.least:g}" for where, v in missed]


def _shown(value: Fraction | None, bar: float) -> str:
    """The share as a miss line shows it: two digits finer than the bar, cut from the exact
    share, never rounded up to the bar it missed (13/15 against 0.8667 reads 0.866666)."""
    if value is None:
        return "n/a"
    digits = max(3, len(f"{bar:g}".partition(".")[2]) + 2)
    return f"{math.floor(value * 10**digits) / 10**digits:.{digits}f}"


def _bench_values(doc: Mapping[str, Any], gate: Gate) -> list[tuple[str, Fraction | None]]:
    arm = doc.get("arms", {}).get(gate.arm)
    if arm is None:
        return []
    runs = arm["runs"] or 0
    if gate.metric == "routing":
        share = _routing(doc, gate.arm)
    else:
        hits = arm["right"] if gate.metric == "right" else arm["outcomes"].get("ok", 0)
        share = Fraction(hits) / runs if runs else None
    return [(f"{gate.arm}.{gate.metric}", share)]


def _routing(doc: Mapping[str, Any], arm: str) -> Fraction | None:
    """The arm's routing accuracy from its runs, exact (the arm's figure is rounded for show)."""
    routed = [
        r["routed_ok"]
        for task in doc.get("tasks", [])
        for r in task.get("runs", {}).get(arm, [])
        if r.get("routed_ok") is not None
    ]
    return Fraction(sum(routed), len(routed)) if routed else None


def _selection_values(doc: Mapping[str, Any], gate: Gate) -> list[tuple[str, Fraction | None]]:
    rows = [r for r in doc.get("rows", []) if r["arm"] == gate.arm]
    return [
        (f"{gate.arm}.{gate.metric} at {r['label']} tools", _share(r, gate.metric)) for r in rows
    ]


def _share(row: Mapping[str, Any], metric: str) -> Fraction | None:
    """A selection row's metric as a share; None where the arm did not fit or has none."""
    part, whole = _SELECTION_SHARES[metric]
    n, d = row.get(part), row.get(whole)
    return None if n is None or not d else Fraction(n) / d
