"""The bench report: each arm's runs added up, every run, and the report's JSON."""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any, get_args

from tiny_cli.bench.arms import ARMS, Arm, PromptSplit
from tiny_cli.bench.scoring import EVIDENCE, WALL_DIGITS, RunResult
from tiny_cli.bench.tasks import BenchTask
from tiny_cli.digest import Status

__all__ = ["STATUSES", "ArmSummary", "BenchReport", "summarize"]

STATUSES: tuple[Status, ...] = get_args(Status)
# RunResult's counts that an arm's summary adds up as they are
SUMMED = (
    "right",
    "fabricated",
    "fields_expected",
    "fields_filled",
    "fields_matching",
    "fields_correct",
    "ghost_calls",
    "unwanted_writes",
    "tool_calls",
    "recovered_calls",
    "wrong_tool_calls",
    "tokens_in",
    "tokens_out",
    "caller_tokens",
)


@dataclass(frozen=True)
class ArmSummary:
    """One arm's runs added up; wall time also as a median."""

    arm: Arm
    runs: int
    outcomes: Mapping[str, int]
    right: int
    fabricated: int
    missing_evidence: Mapping[str, int]  # claimed answers lacking each kind of evidence
    routing_accuracy: float | None
    fields_expected: int
    fields_filled: int
    fields_matching: int
    fields_correct: int
    ghost_calls: int
    ghost_names: Mapping[str, int]
    unwanted_writes: int
    tool_calls: int
    recovered_calls: int
    wrong_tool_calls: int
    tokens_in: int
    tokens_out: int
    first_request: PromptSplit
    caller_tokens: int
    wall_seconds: float
    wall_median: float

    def to_json(self) -> dict[str, Any]:
        """Return the aggregate as a JSON-ready dict."""
        doc = asdict(self)
        del doc["arm"]
        maps = ("outcomes", "missing_evidence", "ghost_names")
        return {**doc, **{name: dict(getattr(self, name)) for name in maps}}


def summarize(arm: Arm, results: Sequence[RunResult]) -> ArmSummary:
    """Add up one arm's runs: outcomes grouped by status, sums, and the median wall time."""
    counts = Counter(r.status for r in results)
    missing = Counter(e for r in results for e in r.missing_evidence)
    routed = [r.routed_ok for r in results if r.routed_ok is not None]
    walls = [r.wall_seconds for r in results]
    sums: dict[str, Any] = {name: sum(getattr(r, name) for r in results) for name in SUMMED}
    return ArmSummary(
        arm=arm,
        runs=len(results),
        outcomes={s: counts.get(s, 0) for s in STATUSES},
        missing_evidence={e: missing.get(e, 0) for e in EVIDENCE},
        routing_accuracy=round(sum(routed) / len(routed), 4) if routed else None,
        ghost_names=dict(sorted(Counter(n for r in results for n in r.ghost_names).items())),
        first_request=sum((r.first_request for r in results), PromptSplit()),
        wall_seconds=round(sum(walls), WALL_DIGITS),
        wall_median=round(statistics.median(walls), WALL_DIGITS) if walls else 0.0,
        **sums,
    )


@dataclass(frozen=True)
class BenchReport:
    """Everything one bench produced: per-arm aggregates and every run."""

    arms: Mapping[Arm, ArmSummary]
    tasks: tuple[BenchTask, ...]
    runs: tuple[RunResult, ...]
    model: str
    base_url: str  # host only
    started_at: str
    tiny_version: str
    replayed: bool = False  # answered from a recording: wall times are the replay's
    replay_file: str | None = None  # the recording (shown, not in the JSON: reports compare)
    tool_mode: str | None = None  # --tool-mode / TINY_TOOL_MODE; None: each card's own
    temperature: float | None = None  # sent with every request; None: none (server default)

    def runs_of(self, task_id: str, arm: Arm) -> list[RunResult]:
        """Return one task's runs in one arm, by repeat."""
        return [r for r in self.runs if r.task_id == task_id and r.arm == arm]

    def outcome(self, task_id: str, arm: Arm) -> Status | None:
        """Return the most frequent status of a task in an arm (first in STATUSES on a tie)."""
        counts = Counter(r.status for r in self.runs_of(task_id, arm))
        if not counts:
            return None
        return max(STATUSES, key=lambda s: (counts[s], -STATUSES.index(s)))

    def disagreements(self) -> list[BenchTask]:
        """Return the tasks the arms ended differently: another status, or right in one only."""
        if len(self.arms) < len(ARMS):
            return []
        return [
            t for t in self.tasks if self._verdict(t.id, "tiny") != self._verdict(t.id, "all-tools")
        ]

    def _verdict(self, task_id: str, arm: Arm) -> tuple[str | None, int]:
        return self.outcome(task_id, arm), sum(r.right for r in self.runs_of(task_id, arm))

    def to_json(self) -> dict[str, Any]:
        """Return the report: every field but `runs` (kept by task) and `replay_file`."""
        shown = [f.name for f in fields(self) if f.name not in ("runs", "replay_file")]
        return {
            **{name: getattr(self, name) for name in shown},
            "arms": {arm: s.to_json() for arm, s in self.arms.items()},
            "tasks": [self._task_json(t) for t in self.tasks],
        }

    def _task_json(self, t: BenchTask) -> dict[str, Any]:
        return {
            "id": t.id,
            "task": t.task,
            "expected_agent": t.expected_agent,
            "writes": t.writes,
            "expect": {k: e.to_json() for k, e in t.expect.items()},
            "runs": {arm: [r.to_json() for r in self.runs_of(t.id, arm)] for arm in self.arms},
        }
