"""Calls: one tool call checked, put to the approver if it writes, run within the budget, answered.

Every failure becomes a tool result the model can act on, but for a tool server that died
(ToolServerError): the call is recorded and the run ends, as no later call could reach it.

Evidence: where an answer's values came from. A returned field is `tool` when its substance is
in a call's result (or is a URL a successful call reached), `task` when the task holds it,
`args` when only the arguments the model wrote into a call do (its own value echoed), and
`model` when none does (a CRM id no tool returned). An `args` value is vouched for only when a
successful write call was given it. "Substance": the numbers, URLs and ids in the value when
it has any, else most of its words, so a field that paraphrases a page still counts as found.

The budget is here too: its limits, and the meter that tracks one invocation.
"""

from __future__ import annotations

import copy
import hashlib
import inspect
import json
import math
import re
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

from tiny_cli.cards.card import Budget, Card
from tiny_cli.digest import CHARS_PER_TOKEN, Brief, CallOutcome, CallRecord, Cost, FieldSource
from tiny_cli.errors import (
    AddressRefused,
    DeadlineExceeded,
    ToolCallError,
    ToolError,
    ToolServerError,
)
from tiny_cli.provider.client import ToolCall
from tiny_cli.text import LONE_SURROGATE, text_of, unsurrogated
from tiny_cli.threads import call_within
from tiny_cli.tools.args_check import argument_problem
from tiny_cli.tools.artifacts import READ_ARTIFACT, Artifact, ArtifactStore, stored_result
from tiny_cli.tools.registry import Tool

DEFAULT_MAX_GHOST_CALLS = 3  # tolerated per run; one more ends it `failed`, reason ghost_calls
DEFAULT_WALL_SCALE = 1.0  # multiplies every card's max_wall_seconds (for slow CPU servers)
DEFAULT_MAX_RESULT_CHARS = 6000  # per tool result, so one page cannot flood the context
CUT_MARKER = " [… cut by tiny: over the {tokens}-token budget]"
MAX_SHOWN_NAME = 64  # a ghost call's name, echoed: no tool's name is longer
MAX_CALL_ID_CHARS = 64  # a call id, echoed: servers' own are about 30 characters
ID_HASH_CHARS = 8  # of the hash that keeps two cut ids apart

Clock = Callable[[], float]


def effective_budget(card: Card, brief: Brief, wall_scale: float = DEFAULT_WALL_SCALE) -> Budget:
    """Return the card's budget: output lowered (never raised) by the Brief, wall time scaled."""
    budget = replace(card.budget, max_wall_seconds=card.budget.max_wall_seconds * wall_scale)
    cap = brief.max_output_tokens
    if cap is None or cap >= budget.max_output_tokens:
        return budget
    return replace(budget, max_output_tokens=cap)


def capped(budget: Budget, cap: Budget | None) -> Budget:
    """Return `budget` with each limit lowered (never raised) to `cap`'s; None caps nothing."""
    if cap is None:
        return budget
    return Budget(
        min(budget.max_tool_calls, cap.max_tool_calls),
        min(budget.max_output_tokens, cap.max_output_tokens),
        min(budget.max_wall_seconds, cap.max_wall_seconds),
    )


def left_after(budget: Budget, cost: Cost, seconds: float) -> Budget:
    """Return what is left of `budget` after a run spent `cost` in `seconds`, never below 0."""
    return Budget(
        max(0, budget.max_tool_calls - cost.tool_calls),
        max(0, budget.max_output_tokens - cost.tokens_out),
        max(0.0, budget.max_wall_seconds - seconds),
    )


def short_of(left: Budget, own: Budget, share: float) -> str | None:
    """Say which limit `left` holds less than `share` of `own` of, rounded up; None if none."""
    wall = share * own.max_wall_seconds
    if left.max_wall_seconds < wall:
        return f"{left.max_wall_seconds:.1f} s of wall time left, under the {wall:.1f} s needed"
    tokens = math.ceil(share * own.max_output_tokens)
    if left.max_output_tokens < tokens:
        return f"{left.max_output_tokens} output tokens left, under the {tokens} needed"
    calls = math.ceil(share * own.max_tool_calls)
    if left.max_tool_calls < calls:
        return f"{left.max_tool_calls} tool call(s) left, under the {calls} needed"
    return None


def cut_summary(summary: str, max_output_tokens: int) -> tuple[str, bool]:
    """Cut a summary longer than max_output_tokens * 4 characters, marked; say if it was cut."""
    limit = max_output_tokens * CHARS_PER_TOKEN
    if len(summary) <= limit:
        return summary, False
    marker = CUT_MARKER.format(tokens=max_output_tokens)
    return summary[: max(0, limit - len(marker))].rstrip() + marker, True


def cut_value(value: Any, max_output_tokens: int) -> tuple[Any, bool]:
    """Cut a field's value as a summary is, a list or object to its leading items; say if cut."""
    if isinstance(value, str):
        return cut_summary(value, max_output_tokens)
    limit = max_output_tokens * CHARS_PER_TOKEN
    if not isinstance(value, list | dict) or _json_chars(value) <= limit:
        return value, False
    items = list(value.items()) if isinstance(value, dict) else value
    kept, size = [], 0
    for item in items:
        size += _json_chars(item)
        if size > limit:
            break
        kept.append(item)
    return (dict(kept) if isinstance(value, dict) else kept), True


def _json_chars(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, default=str))


def shown_name(name: str) -> str:
    """Return a tool name to echo: whole up to 64 characters (every valid one), else cut."""
    return name if len(name) <= MAX_SHOWN_NAME else f"{name[:MAX_SHOWN_NAME]}…"


def short_id(call_id: str) -> str:
    """Return a call id to echo: whole up to MAX_CALL_ID_CHARS, else cut, with a hash of it."""
    if len(call_id) <= MAX_CALL_ID_CHARS:
        return call_id
    whole = hashlib.sha256(call_id.encode("utf-8", "surrogatepass")).hexdigest()
    return f"{call_id[: MAX_CALL_ID_CHARS - ID_HASH_CHARS - 1]}-{whole[:ID_HASH_CHARS]}"


def cap_result(text: str) -> str:
    """Keep the head of a long tool result and say how much was cut."""
    limit = DEFAULT_MAX_RESULT_CHARS
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[… cut by tiny: {len(text) - limit} more characters not shown]"


@dataclass
class Meter:
    """Counts what one invocation spends and how much wall time is left."""

    budget: Budget
    clock: Clock = time.monotonic
    started: float = field(init=False)
    tokens_in: int = 0
    tokens_out: int = 0
    calls: list[CallRecord] = field(default_factory=list)
    model_seconds: float = 0.0  # waiting for the model server
    tool_seconds: float = 0.0  # running tools
    turns: int = 0  # model requests answered
    evidence: list[str] = field(default_factory=list)  # arguments and results of calls that ran
    server_seconds: float | None = None  # starting the card's MCP servers; None: it has none

    def __post_init__(self) -> None:
        self.started = self.clock()

    def remaining(self) -> float:
        """Seconds left of max_wall_seconds (never negative)."""
        return max(0.0, self.budget.max_wall_seconds - (self.clock() - self.started))

    def ghosts(self) -> list[str]:
        """Names of the ghost calls so far, in order."""
        return [shown_name(c.name) for c in self.calls if c.outcome == "ghost"]

    def tools_spent(self) -> bool:
        """True when every allowed tool call has been attempted."""
        return len(self.calls) >= self.budget.max_tool_calls

    def answerable(self) -> int:
        """How many calls of one reply are answered: the budget's room, and ghosts to end a run."""
        room = max(0, self.budget.max_tool_calls - len(self.calls))
        return room + DEFAULT_MAX_GHOST_CALLS + 1

    def slowest(self) -> str:
        """Say where the wall time went, for a note when it ran out."""
        model, tools = self.model_seconds, self.tool_seconds
        spent = f"{model:.1f}s waiting for the model ({self.turns} answer(s))"
        spent += f" and {tools:.1f}s in tools"
        if self.clock() - self.started - model - tools > max(model, tools):
            servers = self.server_seconds
            started = "" if servers is None else f" ({servers:.1f}s starting its MCP servers)"
            slow = f"the time went to starting the run{started}"
        else:
            slow = "the model server was slow" if model >= tools else "a tool was slow"
        return f"time ran out after {spent}: {slow}"

    def cost(self) -> Cost:
        """Freeze the tally into a Cost (caller_tokens is filled in by the Digest builder)."""
        ghosts = self.ghosts()
        return Cost(
            self.tokens_in,
            self.tokens_out,
            len(self.calls),
            len(ghosts),
            tuple(ghosts),
            round(self.clock() - self.started, 3),
            recovered_calls=sum(c.recovered for c in self.calls),
        )


WORD_SHARE = 0.6  # share of a prose value's words that must appear in the evidence
ECHO_SHARE = 0.9  # share of a result's words its call's arguments hold: the result is an echo
MIN_WORD_CHARS = 3  # shorter words (articles, "per") say nothing about where a value came from
ADDRESS_WORDS = frozenset(["url", "uri", "link", "href"])  # an argument naming an address, or more
_URL = re.compile(r"https?://[^\s\"'<>)\]]+")
_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_WORD = re.compile(r"\w+")
# a `does_not` line like "answer from memory" or "make up a policy": answers need a tool result
_NO_MEMORY = re.compile(r"\bfrom memory\b|\bmake up\b|\bmade up\b|\binvent\b|\bguess", re.I)


def checkable(value: Any) -> bool:
    """Tell whether a value says something to look up (a yes/no or an empty one does not)."""
    return any(True for _ in _leaves(value))


def needs_evidence(card: Card) -> bool:
    """Tell whether the card may answer only from a tool result (writer, first: tool, does_not)."""
    return card.writes or card.first == "tool" or any(map(_NO_MEMORY.search, card.does_not))


def field_sources(
    fields: Mapping[str, Any], evidence: Sequence[str], task: str
) -> dict[str, FieldSource]:
    """Say for each field whether a result, the task, a call's arguments or the model holds it."""
    echoes = _echo_calls(evidence)
    split = [_split(entry) for entry in evidence]
    results, asked = _results(evidence), _Text(task)
    # an echo's result is the model's own text: it counts as arguments
    echoed = [result for (_, result), echo in zip(split, echoes, strict=True) if echo]
    written = _Text(" ".join([*(args for args, _ in split), *echoed])).plus(results)
    return {name: _source(value, results, asked, written) for name, value in fields.items()}


def vouched(value: Any, meter: Meter, task: str) -> bool:
    """Tell whether each leaf of a value is in a result, quoted by the task, or written."""
    # a successful write's arguments are the tool's data now; a search's stay the model's word
    wrote = [c.arguments for c in meter.calls if c.writes and c.outcome == "ok"]
    stored = _Text(" ".join(_leaves(wrote))).plus(_results(meter.evidence))
    asked = _Text(task)
    return _each(value, lambda leaf: stored.holds(leaf) or asked.quotes(leaf))


def _results(evidence: Sequence[str]) -> _Text:
    """Return what the calls that are no echoes returned, and the URLs they were sent to."""
    kept = [_split(entry) for entry in informative(evidence)]
    reached = [url for args, _ in kept for url in _addresses(args)]
    return _Text(" ".join([*(result for _, result in kept), *reached]))


def informative(evidence: Sequence[str]) -> list[str]:
    """Return the calls that are evidence: all but echoes of the model's own text."""
    return [entry for entry, echo in zip(evidence, _echo_calls(evidence), strict=True) if not echo]


def _echo_calls(evidence: Sequence[str]) -> list[bool]:
    """Say of each call whether it is an echo: its result holds nothing its arguments did not
    (HTML the model wrote, as text), and it reached no address nor passed an earlier result on."""
    echoes = []
    for n, entry in enumerate(evidence):
        args, result = _split(entry)
        earlier = " ".join(_split(e)[1] for e in evidence[:n])
        passed_on = bool(earlier) and _echoes(earlier, _values(args))
        echoes.append(_echoes(args, result) and not passed_on and not _addresses(args))
    return echoes


def _echoes(given: str, text: str) -> bool:
    """Tell whether `text` says something and nothing `given` did not: its numbers, URLs and
    nearly all its words are there."""
    source, said = _Text(given), _Text(text)
    words = {w for w in said.words if len(w) >= MIN_WORD_CHARS}
    urls = [u.rstrip(".,;:") for u in _URL.findall(said.folded)]
    if not (words or said.numbers or urls):  # an empty result says something: nothing found
        return False
    found = all(u in source.folded for u in urls) and said.numbers <= source.numbers
    return found and len(words & source.words) >= ECHO_SHARE * len(words)


def _values(args: str) -> str:
    """Return the values of a call's JSON arguments as text, without their names."""
    try:
        return " ".join(_leaves(json.loads(args)))
    except (ValueError, RecursionError):
        return args


def _source(value: Any, results: _Text, asked: _Text, written: _Text) -> FieldSource:
    """Where `value` was found: a result first, then the task, then the model's own arguments."""
    if results.holds(value):
        return "tool"
    # a leaf is the task's only where the task quotes it: most of its words are not enough
    if _each(value, lambda leaf: results.holds(leaf) or asked.quotes(leaf)):
        return "task"
    if _each(value, lambda leaf: written.holds(leaf) or asked.quotes(leaf)):
        return "args"
    return "model"


def _each(value: Any, found: Callable[[str], bool]) -> bool:
    leaves = list(_leaves(value))
    return bool(leaves) and all(map(found, leaves))


def evidence_of(arguments: Mapping[str, Any], result: Any) -> str:
    """Return what one successful call contributes: its arguments' JSON line, then its result."""
    # compact JSON escapes every newline, so the first line is the arguments, whole
    return f"{text_of(dict(arguments))}\n{text_of(result)}"


def _addresses(args: str) -> list[str]:
    """Return the URLs a call was asked to reach: whole values of arguments named as addresses
    (`url`, `uri`, `link`, `href`), not a URL the model wrote into a search query."""
    try:
        arguments = json.loads(args)
    except ValueError:
        return []
    found: list[str] = []
    for name, value in arguments.items() if isinstance(arguments, dict) else ():
        words = re.findall(r"[a-z]+", re.sub(r"([a-z])([A-Z])", r"\1 \2", str(name)).lower())
        if not ADDRESS_WORDS.intersection(w.removesuffix("s") for w in words):
            continue
        for item in value if isinstance(value, list) else [value]:
            if isinstance(item, str) and _URL.fullmatch(item.strip()):
                found.append(item.strip())
    return found


def _split(entry: str) -> tuple[str, str]:
    args, _, result = entry.partition("\n")
    return args, result


class _Text:
    """Normalised text to look values up in: case-folded, URLs and numbers indexed."""

    def __init__(self, text: str) -> None:
        self.raw = text
        self.folded = " ".join(text.casefold().split())
        self.words = set(_WORD.findall(self.folded))
        self.numbers = {_number(n) for n in _NUMBER.findall(self.folded)}
        self.tokens = f" {_tokens(self.folded)} "  # spaced, to find whole tokens in

    def plus(self, other: _Text) -> _Text:
        return _Text(f"{self.raw}\n{other.raw}")

    def holds(self, value: Any) -> bool:
        """Tell whether every leaf of `value` is found here; an empty value is never found."""
        return _each(value, self._holds_leaf)

    def quotes(self, leaf: str) -> bool:
        """Tell whether `leaf` is here as written: all its words and numbers, in order (`holds`
        finds a paraphrase: "onboarding.md" in "how does onboarding work")."""
        folded, tokens = " ".join(leaf.casefold().split()), _tokens(leaf.casefold())
        # as written, words may sit in longer ones ("Kündigung"); by tokens, whole ones only
        return _whole_in(folded, self.folded) or (bool(tokens) and f" {tokens} " in self.tokens)

    def _holds_leaf(self, leaf: str) -> bool:
        folded = " ".join(leaf.casefold().split())
        if _whole_in(folded, self.folded):
            return True
        urls = [u.rstrip(".,;:") for u in _URL.findall(folded)]
        numbers = {_number(n) for n in _NUMBER.findall(_URL.sub(" ", folded))}
        if urls or numbers:
            return all(u in self.folded for u in urls) and numbers <= self.numbers
        words = [w for w in _WORD.findall(folded) if len(w) >= MIN_WORD_CHARS]
        found = sum(w in self.words for w in words)
        return bool(words) and found >= WORD_SHARE * len(words)


def _whole_in(needle: str, text: str) -> bool:
    """Tell whether `needle` is in `text`, its numbers whole ("20" is not in "2026"); words may
    sit inside longer ones ("東京" in "東京都")."""
    left = r"(?<!\d)" if needle[:1].isdigit() else ""
    right = r"(?!\d)" if needle[-1:].isdigit() else ""
    return bool(needle) and re.search(left + re.escape(needle) + right, text) is not None


def _tokens(folded: str) -> str:
    """Return folded text as its numbers (written one way) and words, one space apart."""
    found = re.findall(_NUMBER.pattern + r"|\w+", folded)
    return " ".join(_number(t) if t[:1].isdigit() else t for t in found)


def _leaves(value: Any) -> Iterable[str]:
    """Yield the scalar values inside `value` as text (booleans and empty strings say nothing)."""
    if isinstance(value, Mapping):
        value = list(value.values())
    if isinstance(value, list | tuple):
        for item in value:
            yield from _leaves(item)
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield _number(str(value))
    elif isinstance(value, str) and value.strip():
        yield value


def _number(text: str) -> str:
    """Write a number one way: '200.00' and '200' match, '1,5' and '1.5' match."""
    text = text.replace(",", ".")
    if re.fullmatch(r"\d+(\.\d+)?", text):
        return str(float(text)).removesuffix(".0")
    return text


Approve = Callable[[Card, str, dict[str, Any]], bool]
"""Asked before every write call, with its validated arguments (a copy); only `True` approves.
The caller decides how (a prompt, `--yes`, a bench): the runner never asks a person itself."""

MAX_ARGUMENT_CHARS = 100_000  # one call's JSON arguments; more is not a tool call


@dataclass(frozen=True)
class Called:
    """What one call gave back: the text the model sees, how it was recorded, a caller's note."""

    content: str
    outcome: CallOutcome | None = None  # None: not run and not counted (the budget is spent)
    note: str | None = None  # for the Digest: a tool that hung, a result that was not stored


class RunArtifacts:
    """The artifacts one run may read: given by the caller, or stored by this run."""

    def __init__(self, store: ArtifactStore, given: Sequence[Artifact]) -> None:
        self.store = store
        self.held: list[Artifact] = list(given)
        self.created: list[Artifact] = []

    @cached_property
    def reader(self) -> Tool:
        """Return the run's `read_artifact`, made on first use (only a run with artifacts asks)."""
        return self.store.reader(lambda: self.held, DEFAULT_MAX_RESULT_CHARS)

    def keep(self, tool: str, text: str, card: str) -> Artifact:
        """Store a result and hold it; raises OSError when it cannot be stored."""
        artifact = self.store.save(text, tool=tool, card=card)
        self.created.append(artifact)
        self.held.append(artifact)
        return artifact


def run_artifacts(
    card: Card, store: ArtifactStore | None, held: Sequence[Artifact]
) -> RunArtifacts | None:
    """Return the run's artifacts: none without a store, or if the card has a tool so named."""
    if store is None or READ_ARTIFACT in card.tools:
        return None  # long results are then cut, as they always were
    return RunArtifacts(store, held)


def call_tool(
    call: ToolCall,
    tool: Tool | None,
    *,
    card: Card,
    approve: Approve,
    meter: Meter,
    artifacts: RunArtifacts | None = None,
    recovered: bool = False,
    have: Sequence[str] = (),
) -> Called:
    """Attempt one call of `tool` (None: a ghost, answered with the tools it does `have`)."""
    # a write tool runs only on a card that writes, and only when `approve` says yes
    name = shown_name(call.name)  # a ghost's may be any size: what is echoed is cut

    def record(outcome: CallOutcome, writes: bool = False, args: Any = None) -> CallOutcome:
        meter.calls.append(CallRecord(name, outcome, writes, args, recovered))
        return outcome

    if tool is None:  # counted even past the budget
        content = f"error: unknown tool {name!r}. Your tools are: {', '.join(have) or 'none'}."
        return Called(content, record("ghost"))
    if meter.tools_spent() or meter.remaining() <= 0:
        return Called("error: not run, the budget is spent")
    try:
        args, problem = _arguments(call.arguments, tool.parameters)
    except ToolError as exc:  # its schema is broken: the caller's to fix, not the model's
        content = f"error: {name} cannot be called: {exc}; it was not run. Answer without it."
        return Called(content, record("bad_arguments", tool.writes), f"{name} was not run: {exc}")
    if problem:
        content = f"error: {problem}. Call {call.name} again with valid arguments."
        return Called(content, record("bad_arguments", tool.writes))
    shown = copy.deepcopy(args) if tool.writes else None  # as approved, whatever the tool does
    refused = _refused(call.name, tool, card, approve, args, meter)
    if refused is not None:
        outcome, content, note = refused
        return Called(content, record(outcome, True, shown), note)
    try:
        outcome, result = _run_tool(tool, args, meter)
    except ToolServerError:  # counted as a call; the loop then ends the run
        record("tool_error", tool.writes, shown)
        raise
    record(outcome, tool.writes, shown)
    return _result(call.name, outcome, result, args, meter, artifacts, card.id)


def _refused(
    name: str, tool: Tool, card: Card, approve: Approve, args: dict[str, Any], meter: Meter
) -> tuple[CallOutcome, str, str] | None:
    """Say why a write call may not run (this card may not write, or the approver said no): its
    outcome, what the model is told, and the note for the caller (the model may not say)."""
    if not tool.writes:
        return None
    if not card.writes:  # the card loader refuses this; never trust it alone
        return (
            "not_allowed",
            f"error: {name} writes and this agent may not write; it was not run. "
            "Answer without it.",
            f"{name} writes and this card may not (side_effects: none): nothing was written",
        )
    if _approved(approve, card, name, args, meter):
        return None
    return (
        "declined",
        f"declined: the user did not approve this call of {name} with these arguments, "
        "so it did not run and nothing was written. If the arguments were wrong, call it "
        "again with corrected ones; otherwise say in your answer that this was not done.",
        f"{name} was not approved: nothing was written",
    )


def _approved(approve: Approve, card: Card, name: str, args: dict[str, Any], meter: Meter) -> bool:
    """Ask `approve` about this call; time spent waiting for a person is not the agent's."""
    asked = meter.clock()
    try:
        return approve(card, name, copy.deepcopy(args)) is True
    finally:
        meter.started += meter.clock() - asked


def _run_tool(tool: Tool, args: dict[str, Any], meter: Meter) -> tuple[CallOutcome, Any]:
    """Run a tool, waiting at most the time left: the wall budget covers tools too."""
    started = meter.clock()
    try:
        return "ok", call_within(
            meter.remaining(), lambda: _contained(tool, args), name=f"tiny-tool-{tool.name}"
        )
    except DeadlineExceeded:
        return "timeout", None
    except AddressRefused as exc:  # kept whole: the caller is told the cause too (a note)
        return "tool_error", exc
    except ToolCallError as exc:  # the tool's own words: what the model should do instead
        return "tool_error", _said(exc) or type(exc).__name__
    except ToolServerError:  # the server behind the tool is gone: not input for the model
        raise
    except Exception as exc:  # a failing tool is input for the model, not a crash
        return "tool_error", _named(exc)
    finally:
        meter.tool_seconds += meter.clock() - started


def _contained(tool: Tool, args: dict[str, Any]) -> str:
    """Run the tool in its worker thread and return its result as the text the model sees (a
    SystemExit or KeyboardInterrupt here is the tool failing: the user's lands in the main one)."""
    try:
        result = tool(**args)
    except Exception:  # the caller sorts these out
        raise
    except BaseException as exc:  # sys.exit() in a tool must not end tiny
        raise ToolCallError(_named(exc)) from None
    return _as_text(result)


def _as_text(result: Any) -> str:
    """Return a result as text: itself, or its JSON; each lone surrogate (unencodable) replaced."""
    if inspect.iscoroutine(result):  # never awaited: closed, or Python warns on the terminal
        result.close()
    try:
        text = text_of(result)
    except Exception as exc:  # circular, nested too deeply, or a str() that raises
        raise ToolCallError(f"its result cannot be written as JSON ({_named(exc)})") from None
    return LONE_SURROGATE.sub("\ufffd", text)


def _named(exc: BaseException) -> str:
    """Name an exception the tool raised, with its message if it has one."""
    said = _said(exc)
    return f"{type(exc).__name__}: {said}" if said else type(exc).__name__


def _said(exc: BaseException) -> str:
    """An exception's message; none where its own str() fails (a tool's exception class may)."""
    try:
        return str(exc)
    except Exception:
        return ""


def _result(
    name: str,
    outcome: CallOutcome,
    result: Any,
    args: dict[str, Any],
    meter: Meter,
    artifacts: RunArtifacts | None,
    card: str,
) -> Called:
    """Say what a call that ran gave back; a successful one is kept as evidence."""
    if outcome == "tool_error":  # a refused address is the caller's to fix: say it to them
        note = cap_result(f"{name} {result}") if isinstance(result, AddressRefused) else None
        return Called(cap_result(f"error: {name} failed: {result}"), outcome, note)
    if outcome == "timeout":  # the budget is spent with it: tell the caller which tool hung
        hung = f"{name} did not answer before the time budget ran out"
        return Called(f"error: {name} did not finish before the time budget", outcome, hung)
    shown, note = _shown(name, result, artifacts, card)
    meter.evidence.append(evidence_of(args, shown))  # what the model saw, not what was cut
    return Called(shown, outcome, note)


def _shown(
    name: str, text: str, artifacts: RunArtifacts | None, card: str
) -> tuple[str, str | None]:
    """Return what the model sees of a result (a long one stored as an artifact if the run has
    them, else cut), and a note if it could not be stored."""
    # a read_artifact window is short already: it is never stored again
    if len(text) <= DEFAULT_MAX_RESULT_CHARS or artifacts is None or name == READ_ARTIFACT:
        return cap_result(text), None
    try:
        artifact = artifacts.keep(name, text, card)
    except OSError as exc:
        why = exc.strerror or type(exc).__name__
        return cap_result(text), f"a {name} result was cut: it could not be stored ({why})"
    return stored_result(text, artifact, DEFAULT_MAX_RESULT_CHARS), None


def _arguments(raw: str, schema: dict[str, Any]) -> tuple[dict[str, Any], str | None]:
    """Parse and validate a call's JSON arguments; return them, or what is wrong with them."""
    if len(raw or "") > MAX_ARGUMENT_CHARS:
        return {}, f"arguments are {len(raw):,} characters; at most {MAX_ARGUMENT_CHARS:,}"
    try:
        args = unsurrogated(json.loads(raw or "{}"))
    except json.JSONDecodeError as exc:
        return {}, f"arguments are not valid JSON ({exc.msg} at character {exc.pos})"
    except RecursionError:
        return {}, "arguments are nested too deeply to be tool arguments"
    except ValueError:  # Python reads no integer of over 4,300 digits
        return {}, f"arguments hold a number over {sys.get_int_max_str_digits():,} digits long"
    if not isinstance(args, dict):
        return {}, "arguments must be a JSON object"
    problem = argument_problem(schema, args)
    return ({}, problem) if problem else (args, None)


# --- the messages a call adds to the context ----------------------------------------------


def tool_message(call: ToolCall, content: str) -> dict[str, Any]:
    """Return a native call's answer: a `tool` message tied to the call's (echoed) id."""
    return {"role": "tool", "tool_call_id": short_id(call.id), "content": content}


def assistant_message(content: str | None, calls: Sequence[ToolCall]) -> dict[str, Any]:
    """Return the model's reply as echoed (sent on every turn): its text and the calls answered."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if calls:
        message["tool_calls"] = [_echoed(c) for c in calls]
    return message


def _echoed(call: ToolCall) -> dict[str, Any]:
    """One call as the context keeps it: arguments over the bound were refused, not kept."""
    arguments = call.arguments if len(call.arguments or "") <= MAX_ARGUMENT_CHARS else "{}"
    function = {"name": shown_name(call.name), "arguments": arguments}
    return {"id": short_id(call.id), "type": "function", "function": function}


def text_message(content: str | None) -> dict[str, Any]:
    """Return the model's reply as plain assistant text (json mode, recovered calls, answers)."""
    return {"role": "assistant", "content": content or ""}
