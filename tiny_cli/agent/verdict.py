"""Verdict: the honesty rules that turn how a run ended into a Digest, as plain functions of data.

The model claims a status; the rules check that claim against what the run recorded (the
meter's calls and evidence): a declined write, a failed one, a write no tool made and an answer
without a tool result never pass as `ok`. `judged` returns the Digest without its caller tokens.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from tiny_cli.agent.calls import (
    Meter,
    checkable,
    cut_summary,
    cut_value,
    field_sources,
    informative,
    needs_evidence,
    vouched,
)
from tiny_cli.agent.reply import Reply, field_values, missing_fields
from tiny_cli.cards.card import Card
from tiny_cli.digest import CHARS_PER_TOKEN, MODEL_STATUSES, Brief, CallRecord, Digest, Status
from tiny_cli.text import quote_name, text_of
from tiny_cli.tools.artifacts import Artifact

OUT_OF_TIME = "max_wall_seconds"  # the reason when the wall budget ran out
SUMMARY_CUT = "summary_cut"  # the summary alone was over max_output_tokens: cut, never `ok`
# the answer was over its budget: a field's value over max_output_tokens, cut by tiny, or a
# reply that hit max_tokens, its object closed by tiny; never `ok`
ANSWER_CUT = "answer_cut"
WRITE_DECLINED = "write_declined"
WRITE_FAILED = "write_failed"  # a writer's `ok`, but a failed write call was never retried
NO_EVIDENCE = "no_evidence"  # `ok` claimed, but none of the agent's tools ran: taken back
UNVERIFIED_WRITE = "unverified_write"  # a writer's `ok` without a successful write call
UNSOURCED = "unsourced_fields"  # `ok` that must stand on tools, with a field no tool gave
SCHEMA = "schema"  # the answer was still unusable after the one repair turn
GHOST_CALLS = "ghost_calls"  # more ghost calls than DEFAULT_MAX_GHOST_CALLS
MAX_TOOL_CALLS = "max_tool_calls"  # the tool budget ran out before the answer
# the server refused with 429 and its wait (Retry-After, or the backoff) outlasts the budget
RATE_LIMITED = "rate_limited"
# the server answered another error (a 5xx, 408) and the wait before a retry outlasts the budget
SERVER_UNAVAILABLE = "server_unavailable"
STOPPED = "stopped_at_first_call"
WRITE_NOT_CONFIRMED = "write_not_confirmed"  # delegate's: no one could approve a write
BY_AGENT = "_by_agent"  # `partial_by_agent`, `refused_by_agent`: the model's own status
# tiny's reasons: what the runner found, never the model's word (a bench scores by them)
RUNNER_REASONS = frozenset(
    {
        OUT_OF_TIME, SUMMARY_CUT, ANSWER_CUT, WRITE_DECLINED, WRITE_FAILED, NO_EVIDENCE,
        UNVERIFIED_WRITE, UNSOURCED, SCHEMA, GHOST_CALLS, MAX_TOOL_CALLS, RATE_LIMITED,
        SERVER_UNAVAILABLE, STOPPED, WRITE_NOT_CONFIRMED,
    }
)  # fmt: skip
_NOTHING_WRITTEN = "Nothing was written: the agent claimed a write that no tool made."
_NOT_RUN = ("declined", "not_allowed")  # the outcomes of a write call that was not run
_FAILED = ("tool_error", "timeout", "bad_arguments")  # a write call that wrote nothing
MAX_MODEL_NOTES = 10  # notes of the model's own kept, each cut as a summary is
MAX_MODEL_REASON_CHARS = 40  # a reason the model gives is kept as one only when this short
# a plain label (`no_page`, `no such file`): letters, digits, spaces, `_`, `-`, `.`
_PLAIN_REASON = re.compile(r"[^\W_][\w .-]*")
_SEPARATORS = re.compile(r"[\s._-]+")


@dataclass(frozen=True)
class Claim:
    """How a run says it ended, before the rules: a status, its reason, notes, the answer."""

    status: Status
    reason: str | None = None
    notes: tuple[str, ...] = ()
    summary: str = ""
    fields: Mapping[str, Any] = field(default_factory=dict)
    missing: tuple[str, ...] = ()  # required fields the answer left out (a partial may)
    model_notes: tuple[str, ...] = ()  # the model's own words (its reason, its notes): first


def answered(
    card: Card,
    meter: Meter,
    notes: tuple[str, ...],
    reply: Reply,
    required: Sequence[str],
    forced: str | None = None,  # why it cannot be `ok` (the tool budget ran out before it)
) -> Claim:
    """Claim a parsed answer with `required` fields, cut to the output budget."""
    data, tokens = reply.data, meter.budget.max_output_tokens
    status: Status = data["status"] if data.get("status") in MODEL_STATUSES else "partial"
    reason, said = (None, ()) if status == "ok" else _agent_reason(status, data, tokens)
    summary = field_values(data, ["summary"]).get("summary")
    summary = summary if isinstance(summary, str) else ""  # another type is a problem, noted
    fields = {} if status == "refused" else field_values(data, required)
    summary, fields, cut, cut_notes = _within_budget(summary, fields, meter)
    own_notes = _model_notes(data, tokens)
    notes += reply.problems + reply.notes + cut_notes
    if cut and status == "ok":
        status, reason = "partial", cut
    if forced and status != "refused":
        status, reason = "partial", forced
    missing = () if status == "refused" else missing_fields(data, required, card.returns)
    return Claim(status, reason, notes, summary, fields, missing, said + own_notes)


def _within_budget(
    summary: str, fields: Mapping[str, Any], meter: Meter
) -> tuple[str, dict[str, Any], str | None, tuple[str, ...]]:
    """Cut the summary and each field's value to max_output_tokens * 4 characters; return
    them, the reason (`answer_cut` for a field, `summary_cut`, or None) and the notes."""
    tokens = meter.budget.max_output_tokens
    limit = tokens * CHARS_PER_TOKEN
    summary, summary_cut = cut_summary(summary, tokens)
    values = {name: cut_value(value, tokens) for name, value in fields.items()}
    cut_fields = [name for name, (_, cut) in values.items() if cut]
    notes: tuple[str, ...] = (f"summary cut to {limit} characters",) if summary_cut else ()
    if cut_fields:
        notes += (f"{', '.join(cut_fields)} cut to {limit} characters (max_output_tokens)",)
    reason = ANSWER_CUT if cut_fields else SUMMARY_CUT if summary_cut else None
    return summary, {name: value for name, (value, _) in values.items()}, reason, notes


def out_of_time(card: Card, meter: Meter, notes: tuple[str, ...], draft: str, detail: str) -> Claim:
    """The wall clock ran out: partial with the `draft` answer if one exists, else failed."""
    notes += (detail,) if detail else ()
    if card.writes and not _wrote(meter):  # it may claim a write no tool made: not shown
        draft = ""
    if not draft:
        return Claim("failed", OUT_OF_TIME, notes)
    summary, _ = cut_summary(draft, meter.budget.max_output_tokens)
    notes += ("the summary is an unchecked draft: time ran out before a valid answer",)
    return Claim("partial", OUT_OF_TIME, notes, summary)


def judged(
    card: Card, brief: Brief, meter: Meter, claim: Claim, artifacts: tuple[Artifact, ...] = ()
) -> Digest:
    """Put the claim through every rule, in order, and build the Digest from what stands."""
    for rule in RULES:
        claim = rule(card, meter, claim)
    task = "\n".join([brief.goal, *brief.inputs.values(), brief.context_hint])  # all it says
    sources = field_sources(claim.fields, meter.evidence, task)
    claim = _unsourced(card, claim, sources, lambda value: vouched(value, meter, task))
    notes, ghosts = claim.notes, meter.ghosts()
    if ghosts:
        named = ", ".join(map(quote_name, ghosts))
        notes += (f"{len(ghosts)} ghost call(s) to tools this agent does not have: {named}",)
    return Digest(
        card.id,
        claim.status,
        claim.summary,
        claim.fields,
        artifacts,
        brief.notes + claim.model_notes + notes,
        meter.cost(),
        claim.reason,
        calls=tuple(meter.calls),
        field_sources={name: sources[name] for name in claim.fields},
        missing=claim.missing,
    )


# --- the rules ----------------------------------------------------------------------------


def _nothing_written(claim: Claim) -> Claim:
    """Drop what a claimed write no tool made may say ("Added it", an invented id, its notes)."""
    return replace(claim, summary=_NOTHING_WRITTEN, fields={}, missing=(), model_notes=())


def _unwritten(card: Card, meter: Meter, claim: Claim) -> Claim:
    """Never `ok` when a write call was declined (or not allowed): `needs_confirmation` (an
    `ok`'s answer dropped) if nothing was written, else `partial`; `refused` and `failed` stay."""
    unwritten = [c.name for c in meter.calls if c.outcome in _NOT_RUN]
    if not unwritten:
        return claim
    not_run: tuple[str, ...] = (
        f"{len(unwritten)} write call(s) not approved, so not run: {', '.join(unwritten)}",
    )
    if claim.status not in ("ok", "partial"):
        return replace(claim, notes=claim.notes + not_run)
    if claim.reason:
        not_run += (f"also: {claim.reason}",)
    if _wrote(meter):
        return replace(claim, status="partial", reason=WRITE_DECLINED, notes=claim.notes + not_run)
    shown = _nothing_written(claim) if claim.status == "ok" else claim
    return replace(
        shown, status="needs_confirmation", reason=WRITE_DECLINED, notes=shown.notes + not_run
    )


def _unverified_write(card: Card, meter: Meter, claim: Claim) -> Claim:
    """A writer's `ok` stands only on a write call that ran and succeeded (a 1.5B model once
    answered "Successfully added", company_id 12345, with no tool call)."""
    if claim.status != "ok" or not card.writes or card.write_optional or _wrote(meter):
        return claim
    note = "the agent said ok, but no write tool ran successfully: nothing was written"
    claim = _nothing_written(claim)
    return replace(claim, status="failed", reason=UNVERIFIED_WRITE, notes=(*claim.notes, note))


def _failed_write(card: Card, meter: Meter, claim: Claim) -> Claim:
    """An `ok` stands only when every failed write call was retried with success (`_retried`);
    else it is `partial`, reason `write_failed`, with a note naming each such call."""
    writes = [c for c in meter.calls if c.writes]
    failed = [
        f"{c.name} ({c.outcome})"
        for i, c in enumerate(writes)
        if c.outcome in _FAILED and not _retried(c, writes[i + 1 :])
    ]
    if claim.status != "ok" or not failed:
        return claim
    note = f"the agent said ok, but a write failed and no retry succeeded: {', '.join(failed)}"
    return replace(claim, status="partial", reason=WRITE_FAILED, notes=(*claim.notes, note))


def _retried(call: CallRecord, later: Sequence[CallRecord]) -> bool:
    """True when a `later` call retried the failed `call` with success: any of its tool after
    bad arguments, else one with the same arguments (another company added is not that one)."""
    return any(
        c.name == call.name
        and c.outcome == "ok"
        and (call.outcome == "bad_arguments" or c.arguments == call.arguments)
        for c in later
    )


def _unevidenced(card: Card, meter: Meter, claim: Claim) -> Claim:
    """An answer that needs a tool result (`needs_evidence`) has one: a write that ran, or a
    call that is no echo (`calls.informative`). Else `ok` becomes `partial`, `no_evidence`; a
    `partial` only gains the note (a bench counts that reason as an `ok` taken back)."""
    if claim.status not in ("ok", "partial") or not needs_evidence(card):
        return claim
    if _wrote(meter) or informative(meter.evidence):
        return claim
    what = "nothing was written" if card.writes else "the answer is the model's own, unchecked"
    note = f"the agent answered without a successful call of its tools: {what}"
    if claim.status == "ok":
        return replace(claim, status="partial", reason=NO_EVIDENCE, notes=(*claim.notes, note))
    return replace(claim, notes=(*claim.notes, note))


def _unsourced(
    card: Card, claim: Claim, sources: Mapping[str, str], vouched: Callable[[Any], bool]
) -> Claim:
    """An `ok` that must stand on tool results holds no field only the model vouches for (an
    id no tool returned), nor an `args` one unless `vouched` (a successful write's data)."""
    if claim.status != "ok" or not needs_evidence(card):
        return claim
    fields = claim.fields
    # a yes/no or an empty value has nothing to look up: it cannot be found, nor doubted
    alone = [n for n, source in sources.items() if source == "model" and checkable(fields[n])]
    typed = [n for n, source in sources.items() if source == "args" and not vouched(fields[n])]
    if not alone and not typed:
        return claim
    said = [
        f"{where} {', '.join(names)}: the model alone vouches"
        for where, names in (
            ("no tool result, task or call holds", alone),
            ("only the model's own call arguments hold", typed),
        )
        if names
    ]
    return replace(claim, status="partial", reason=UNSOURCED, notes=(*claim.notes, *said))


def _wrote(meter: Meter) -> bool:
    return any(c.writes and c.outcome == "ok" for c in meter.calls)


Rule = Callable[[Card, Meter, Claim], Claim]
# a failed write is judged after `_unverified_write`: with no write done at all, that
# rule's `failed` (the claimed answer dropped) is the truer verdict
RULES: tuple[Rule, ...] = (_unwritten, _unverified_write, _failed_write, _unevidenced)


def _agent_reason(
    status: Status, data: Mapping[str, Any], tokens: int
) -> tuple[str, tuple[str, ...]]:
    """Return the reason of a status the model claimed, and the note holding its own words: a
    plain short label none of tiny's stands (`no_page`), else `STATUS_by_agent` and a note (a
    model must not claim tiny's findings, `max_wall_seconds`, which a bench scores by)."""
    given = data.get("reason")
    if not given or (isinstance(given, str) and not given.strip()):  # none given
        return f"{status}{BY_AGENT}", ()
    if isinstance(given, str) and _plain_label(given):
        return given.strip(), ()
    said, _ = cut_summary(text_of(given), tokens)
    return f"{status}{BY_AGENT}", (f"the agent's reason: {said}",)


def _plain_label(text: str) -> bool:
    """True for a short plain label that names none of tiny's reasons, however written."""
    text = text.strip()
    if len(text) > MAX_MODEL_REASON_CHARS or not _PLAIN_REASON.fullmatch(text):
        return False
    slug = _SEPARATORS.sub("_", text.lower()).strip("_")
    return slug not in RUNNER_REASONS and not slug.endswith(BY_AGENT)


def _model_notes(data: Mapping[str, Any], tokens: int) -> tuple[str, ...]:
    """Return the notes the model wrote for the caller, each as text cut as a summary is, at
    most MAX_MODEL_NOTES (a note says how many more were left out)."""
    notes = data.get("notes") or data.get("notes_for_caller") or ()
    items = notes if isinstance(notes, list) else [notes] if notes else []
    kept = tuple(cut_summary(text_of(item), tokens)[0] for item in items[:MAX_MODEL_NOTES])
    left = len(items) - len(kept)
    return kept + ((f"{left} more note(s) from the agent left out",) if left else ())
