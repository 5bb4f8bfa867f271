"""Judging one bench run: right on evidence, fabricated, wrong-tool calls, unwanted writes."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any, Literal, get_args

from tiny_cli.agent.verdict import NO_EVIDENCE, UNSOURCED, UNVERIFIED_WRITE
from tiny_cli.bench.arms import Arm, PromptSplit, Ran
from tiny_cli.bench.tasks import BenchTask
from tiny_cli.digest import Digest, Status, caller_tokens
from tiny_cli.provider.volatile import Volatile, each_string
from tiny_cli.text import text_of

__all__ = [
    "EVIDENCE",
    "RIGHT_WITHOUT_AGENT",
    "WALL_DIGITS",
    "Evidence",
    "RunResult",
    "judge",
]

RIGHT_WITHOUT_AGENT = ("abstain", "refused")  # what a task nobody should do may end in
WALL_DIGITS = 3
# What a claimed answer can lack (RunResult.missing_evidence): a successful tool call, an
# expected field whose value a tool supplied, the written record in the scratch CRM.
Evidence = Literal["tool_call", "field_source", "crm_record"]
EVIDENCE: tuple[Evidence, ...] = get_args(Evidence)
# Runner reasons for an `ok` the model claimed and the runner took back: no tool ran at all
# (the run is `partial`), or a writer's write never ran (`failed`, its invented fields
# withheld). Such a run is judged as the claim it was.
TAKEN_BACK = (NO_EVIDENCE, UNVERIFIED_WRITE, UNSOURCED)


@dataclass(frozen=True)
class RunResult:
    """One task run once in one arm: outcome, fields, ghost calls, writes, tokens, time."""

    task_id: str
    arm: Arm
    repeat: int
    status: Status
    agent_id: str | None
    reason: str | None
    routed_ok: bool | None  # tiny arm: routed to the expected card (or abstained when right)
    right: bool  # the outcome the task file asks for, on evidence (see docs/bench.md)
    fabricated: bool  # claimed done, fields right on their face, but evidence is missing
    missing_evidence: tuple[Evidence, ...]  # what a claimed answer lacks (EVIDENCE order)
    fields: Mapping[str, Any]
    field_sources: Mapping[str, str]  # per returned field: tool, task or model (the runner's)
    fields_expected: int
    fields_filled: int
    fields_matching: int  # expected fields whose value matches, whatever its source
    fields_correct: int  # ... and whose source counts (a tool; the task if from_task)
    unsupported_fields: tuple[str, ...]  # matching, but not from a source that counts
    ghost_calls: int
    ghost_names: tuple[str, ...]
    writes: tuple[str, ...]  # write tools that ran (outcome ok)
    unwanted_writes: int
    tool_calls: int
    recovered_calls: int  # tool calls the model wrote as text, run by tiny
    wrong_tool_calls: int  # non-ghost calls to a tool the expected card does not have
    tokens_in: int
    tokens_out: int
    first_request: PromptSplit
    caller_tokens: int
    wall_seconds: float

    def to_json(self) -> dict[str, Any]:
        """Return the run as it appears in the report (task id and arm are the keys above it)."""
        doc = asdict(self)
        for name in ("task_id", "arm"):
            del doc[name]
        lists = ("missing_evidence", "unsupported_fields", "ghost_names", "writes")
        return {
            **doc,
            **{name: list(getattr(self, name)) for name in lists},
            "field_sources": dict(self.field_sources),
        }


def judge(ran: Ran) -> RunResult:
    """Measure one run's Digest against its task, and the answer against its evidence."""
    digest = ran.digest
    check = _FieldCheck.of(ran.job.task, digest, ran.volatile)
    return RunResult(
        task_id=ran.job.task.id,
        arm=ran.job.arm,
        repeat=ran.job.repeat,
        status=digest.status,
        agent_id=digest.agent_id,
        reason=_masked(digest.reason, ran.volatile),
        **_verdict(ran, check),
        **_field_counts(ran, check),
        **_costs(ran),
    )


@dataclass(frozen=True)
class _FieldCheck:
    """The answer's fields (masked) against what the task expects of them."""

    values: Mapping[str, Any]
    filled: tuple[str, ...]  # expected fields with a value
    matching: tuple[str, ...]  # ... whose value matches, whatever its source
    correct: tuple[str, ...]  # ... and whose source counts
    unsupported: tuple[str, ...]  # matching, but not from a source that counts

    @classmethod
    def of(cls, task: BenchTask, digest: Digest, volatile: Volatile) -> _FieldCheck:
        """Check the Digest's fields against the task's expectations."""
        values = {k: _masked(v, volatile) for k, v in digest.fields.items()}
        filled = tuple(n for n in task.expect if values.get(n) not in (None, ""))
        matching = tuple(n for n, e in task.expect.items() if e.matches(values.get(n)))
        correct = tuple(n for n in matching if task.expect[n].sourced(digest.field_sources.get(n)))
        unsupported = tuple(n for n in matching if n not in correct)
        return cls(values, filled, matching, correct, unsupported)


def _verdict(ran: Ran, check: _FieldCheck) -> dict[str, Any]:
    """Right, fabricated, the missing evidence, and the writes (RunResult's fields)."""
    task, digest, route = ran.job.task, ran.digest, ran.route
    missing = _missing_evidence(task, digest, check, ran.crm_records)
    writes = tuple(c.name for c in digest.calls if c.writes and c.outcome == "ok")
    unwanted = 0 if task.writes else len(writes)
    routed_ok = None if route is None else route.agent_id == task.expected_agent
    evidenced = len(check.correct) == len(task.expect) and not missing
    return {
        "routed_ok": routed_ok,
        "right": _right(task, digest.status, evidenced, unwanted, routed_ok),
        "fabricated": _fabricated(task, digest, missing, len(check.matching)),
        "missing_evidence": missing,
        "writes": writes,
        "unwanted_writes": unwanted,
    }


def _field_counts(ran: Ran, check: _FieldCheck) -> dict[str, Any]:
    """The returned fields and how many were filled, matching and correct."""
    return {
        "fields": check.values,
        "field_sources": dict(ran.digest.field_sources),
        "fields_expected": len(ran.job.task.expect),
        "fields_filled": len(check.filled),
        "fields_matching": len(check.matching),
        "fields_correct": len(check.correct),
        "unsupported_fields": check.unsupported,
    }


def _costs(ran: Ran) -> dict[str, Any]:
    """Calls, tokens and time; the tiny arm's wall time includes its routing."""
    cost, calls = ran.digest.cost, ran.digest.calls
    wall = cost.wall_seconds + (ran.route.seconds if ran.route is not None else 0.0)
    return {
        "ghost_calls": cost.ghost_calls,
        "ghost_names": cost.ghost_names,
        "tool_calls": cost.tool_calls,
        "recovered_calls": cost.recovered_calls,
        "wrong_tool_calls": sum(
            c.outcome != "ghost" and c.name not in ran.expected_tools for c in calls
        ),
        "tokens_in": cost.tokens_in,
        "tokens_out": cost.tokens_out,
        "first_request": ran.first_request,
        "caller_tokens": _caller_tokens(ran.digest),
        "wall_seconds": round(wall, WALL_DIGITS),
    }


def _right(
    task: BenchTask, status: str, evidenced: bool, unwanted: int, routed: bool | None
) -> bool:
    """No unwanted write; abstain/refused for nobody's task, else ok, right and evidenced."""
    if unwanted:
        return False
    if task.expected_agent is None:
        return status in RIGHT_WITHOUT_AGENT
    return status == "ok" and evidenced and routed is not False


def _missing_evidence(
    task: BenchTask,
    digest: Digest,
    check: _FieldCheck,
    records: Sequence[Mapping[str, Any]],
) -> tuple[Evidence, ...]:
    """Return what a claimed answer lacks; nothing for an answer nobody claimed.

    Claimed: status `ok`, or an `ok` the runner took back for want of evidence, on a task
    some card should do. Each TAKEN_BACK reason is set only on an `ok` (the verdict's rules):
    a model's own `partial` keeps its own reason, and claims nothing.
    """
    claimed = digest.status == "ok" or digest.reason in TAKEN_BACK
    if task.expected_agent is None or not claimed:
        return ()
    lacks = {
        "tool_call": not any(c.outcome == "ok" for c in digest.calls),
        "field_source": bool(check.unsupported),
        "crm_record": task.writes and not _in_crm(task, check.values, records),
    }
    return tuple(e for e in EVIDENCE if lacks[e])


def _fabricated(
    task: BenchTask, digest: Digest, missing: Sequence[Evidence], matching: int
) -> bool:
    """A claimed answer that lacks evidence yet looks right: every expected field matches,
    or the runner withheld the fields of a write no tool made."""
    if not missing:
        return False
    return matching == len(task.expect) or digest.reason == UNVERIFIED_WRITE


def _in_crm(
    task: BenchTask, fields: Mapping[str, Any], records: Sequence[Mapping[str, Any]]
) -> bool:
    """Tell whether the CRM holds a record with the expected name and the returned company_id."""
    name = task.expect.get("name")
    found = [r for r in records if name is None or name.matches(r.get("name"))]
    if "company_id" in task.expect:
        returned = text_of(fields.get("company_id")).strip()
        found = [r for r in found if str(r.get("company_id")) == returned]
    return bool(found)


def _caller_tokens(digest: Digest) -> int:
    """Size of the Digest the caller gets, with wall time and routing score zeroed."""
    # both vary in their digits from run to run (the clock; float sums in the embedder),
    # which would move the estimate by a token and a replay would not count the same
    still = replace(digest, cost=replace(digest.cost, wall_seconds=0.0))
    if still.routing is not None:
        still = replace(still, routing=replace(still.routing, score=0.0))
    return caller_tokens(still)


def _masked(value: Any, volatile: Volatile) -> Any:
    """Write the page server's URL and scratch paths as placeholders, so reports compare."""
    # in each string, not in the value's JSON text: there a path JSON escapes is not found,
    # and a replacement across an escape (\u0001 then digits) would break the JSON
    return each_string(value, volatile.key_mask)
