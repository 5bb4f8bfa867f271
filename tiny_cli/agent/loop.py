"""The runner: one card, one Brief, a fresh context, a hard budget, a Digest back.

`invoke` sets a run up, `_loop` runs it and `_Run` holds its state; running a call is
`tiny_cli.agent.calls`, judging the end `tiny_cli.agent.verdict`. The prompts are here too.
"""

from __future__ import annotations

import inspect
import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from tiny_cli.agent import verdict
from tiny_cli.agent.calls import (
    DEFAULT_MAX_GHOST_CALLS,
    DEFAULT_WALL_SCALE,
    Approve,
    Clock,
    Meter,
    RunArtifacts,
    assistant_message,
    call_tool,
    capped,
    effective_budget,
    run_artifacts,
    short_id,
    shown_name,
    text_message,
    tool_message,
)
from tiny_cli.agent.reply import (
    Reply,
    kept_reply,
    parse_reply,
    read_actions,
    read_json,
    recover_calls,
    response_format,
    result_message,
    tool_mode_for,
    without_reasoning,
)
from tiny_cli.cards.card import Budget, Card, answer_schema, field_template
from tiny_cli.digest import (
    APPROVED_OUTCOMES,
    CHARS_PER_TOKEN,
    Brief,
    CallOutcome,
    CallRecord,
    Digest,
    Routing,
)
from tiny_cli.errors import ProviderError, ProviderTimeout, TinyError, ToolServerError
from tiny_cli.events import (
    Aborted,
    ArtifactKept,
    BudgetHit,
    GhostCall,
    ModelReplied,
    ModeSwitched,
    Observer,
    Repairing,
    RunStarted,
    ToolCalled,
    ToolFinished,
    TurnStarted,
    finish,
    ignore,
)
from tiny_cli.provider.client import (
    CONFIG_STATUSES,
    ChatRequest,
    Completion,
    Provider,
    ToolCall,
    checked_complete,
)
from tiny_cli.setting_rules import (
    MAX_TEMPERATURE,
    TOOL_MODES,
    ToolMode,
    check_temperature,
    check_tool_mode,
    check_wall_scale,
    is_number,
)
from tiny_cli.text import printable, wrong_kind
from tiny_cli.tools.artifacts import READ_ARTIFACT, Artifact, ArtifactStore, held_note
from tiny_cli.tools.registry import Registry, Tool


def system_prompt(
    card: Card, required: Sequence[str], max_output_tokens: int, tools_text: str | None = None
) -> str:
    """Write the card's system prompt; `tools_text` describes the tools in json tool mode."""
    words = max(10, max_output_tokens * CHARS_PER_TOKEN // 6)
    lines = [f"You are {card.id}, a tiny agent with one job: {card.summary}"]
    if card.instructions:  # a Markdown card's body (a Claude Code subagent's system prompt)
        lines += ["", "Instructions:", card.instructions]
    if card.does_not:
        lines += ["", "You do not:", *(f"- {d}" for d in card.does_not)]
    tools = ", ".join(card.tools) if card.tools else "none"
    lines += ["", f"Tools you can call: {tools}. No other tool exists for you."]
    if tools_text:
        lines += [tools_text]
    lines += _evidence_rules(card)
    lines += [
        "",
        "When you are done, answer with exactly one JSON object and no other text:",
        _contract(required, card.returns),
        'Use "status": "partial" if you could do only part of it, and say what is missing.',
        'If the task is not your job, answer {"status": "refused", "summary": "<why>"}.',
        "",
        f"Be brief: the summary must stay under about {words} words; longer ones are cut.",
    ]
    return "\n".join(lines)


def user_message(brief: Brief) -> str:
    """Render the Brief as the one user message of a fresh context."""
    lines = [f"Task: {brief.goal}"]
    if brief.inputs:
        lines += ["Inputs:", *(f"- {k}: {v}" for k, v in brief.inputs.items())]
    if brief.context_hint:
        lines += [f"Context hint: {brief.context_hint}"]
    if brief.must_return:
        lines += [f"Also return these fields: {', '.join(brief.must_return)}"]
    return "\n".join(lines)


def repair_message(
    problems: Sequence[str], required: Sequence[str], types: Mapping[str, Any] | None = None
) -> str:
    """Name what is wrong with the answer, once, and restate the contract."""
    listed = "; ".join(problems)
    return (
        f"Your answer cannot be used: {listed}. Answer again with exactly one JSON object: "
        f"{_contract(required, types)}"
    )


def wrap_up_message(max_tool_calls: int) -> str:
    """Tell the agent its tool budget is spent and it must answer from what it has."""
    return (
        f"Your budget of {max_tool_calls} tool calls is spent; no more tools. Answer now with "
        'the JSON object from what you have, "status": "partial" if anything is missing.'
    )


def tools_section(schemas: Sequence[Mapping[str, Any]]) -> str:
    """Describe the tools for json tool mode, where the request carries no `tools` field."""
    lines = [
        'To call a tool, reply with only {"tool": "<name>", "arguments": {...}}; '
        "you get its result, then call another tool or give your final answer.",
    ]
    for schema in schemas:
        function = schema["function"]
        parameters = function.get("parameters")
        params = parameters.get("properties") if isinstance(parameters, Mapping) else None
        args = ", ".join(f"{k}: {_type_of(v)}" for k, v in (params or {}).items())
        lines.append(f"- {function['name']}({args}): {function.get('description', '')}".rstrip())
    return "\n".join(lines)


def _type_of(schema: Any) -> Any:
    """A parameter's JSON type as written (recordings hold these prompts); `true` is any."""
    return schema.get("type", "any") if isinstance(schema, Mapping) else "any"


# tells an agent that must use a tool first (`first: tool`) to do so before answering
CALL_FIRST = (
    "You answered without calling a tool. This job needs a tool result first: "
    'reply with {"tool": "<name>", "arguments": {...}} for one of your tools.'
)


def _evidence_rules(card: Card) -> list[str]:
    """Tell a writer (and a card that must not answer from memory) what `ok` requires."""
    if card.writes:
        return [
            "",
            'Say "ok" only after a write tool succeeded. If nothing was written (it exists '
            'already, a detail is missing), answer "partial" and say why.',
        ]
    if card.first == "tool":
        return ["", "Answer only from what your tools return; call a tool before answering."]
    return []


def _contract(required: Sequence[str], types: Mapping[str, Any] | None = None) -> str:
    """The answer template: JSON but for typed values, shown bare (`"rows": <integer>`)."""
    shown = {"status": '"ok"', "summary": '"<the answer, briefly>"'}
    shown |= {f: field_template((types or {}).get(f)) for f in required}
    pairs = (f"{json.dumps(k, ensure_ascii=False)}: {v}" for k, v in shown.items())
    return "{" + ", ".join(pairs) + "}"


TOO_MANY_REQUESTS = 429
# the finish reasons of a reply that ended on its own: a JSON object tiny had to close in one
# may only have lost its brackets; any other (`length`, `content_filter`, none) may have cut it
WHOLE = frozenset({"stop", "tool_calls"})
MAX_FINISH_CHARS = 40  # a finish reason quoted in a note; a server may send any length


def decline_writes(card: Card, tool: str, arguments: dict[str, Any]) -> bool:
    """Approve nothing: the default, so a caller that forgot to choose writes nothing."""
    return False


def approve_writes(card: Card, tool: str, arguments: dict[str, Any]) -> bool:
    """Approve every write (`--yes`, the bench in its scratch home); the Digest lists each one."""
    return True


def invoke(
    card: Card,
    brief: Brief,
    *,
    registry: Registry,
    provider: Provider,
    model: str,
    approve: Approve = decline_writes,  # asked before each write call; a declined one never runs
    clock: Clock = time.monotonic,
    tool_mode: ToolMode | None = None,  # flag or env: wins over the card's
    wall_scale: float = DEFAULT_WALL_SCALE,
    observer: Observer = ignore,  # every step as an event, ending `Finished` (or `Aborted`)
    artifacts: ArtifactStore | None = None,  # keeps long results whole; else they are cut
    held: Sequence[Artifact] = (),  # earlier artifacts the agent may read
    routing: Routing | None = None,  # delegate's decision, put into the Digest
    stop_at_first_call: bool = False,  # ends `partial` at the first call, never run (a bench)
    cap: Budget | None = None,  # lowers the budget
    temperature: float | None = None,
) -> Digest:
    """Run `card` on `brief` in a fresh context under its budget; return the Digest."""
    check_arguments(card=card, brief=brief, registry=registry, provider=provider, approve=approve,
                    model=model, clock=clock, observer=observer, artifacts=artifacts,
                    routing=routing, cap=cap, tool_mode=tool_mode, wall_scale=wall_scale,
                    temperature=temperature)  # fmt: skip
    meter = Meter(capped(effective_budget(card, brief, wall_scale), cap), clock)
    mode = tool_mode_for(card, tool_mode)
    registry = registry.with_declared(card.functions, f"card {card.id}")
    try:
        _start_servers(registry, card, meter)
    except ToolServerError as exc:  # `failed` before any model call
        observer(_started(card, brief, meter, model, mode, ()))
        digest = verdict.judged(card, brief, meter, verdict.Claim("failed", str(exc)))
        return finish(observer, replace(digest, routing=routing))
    artifacts_of_run = run_artifacts(card, artifacts, held)
    run = _Run(card, brief, registry, approve, meter, mode, observer, artifacts_of_run, temperature)
    observer(_started(card, brief, meter, model, mode, run.messages))
    try:
        digest = _loop(run, provider, model, stop_at_first_call)
    except BaseException as exc:  # raised to the caller (a custom provider's own too, Ctrl-C)
        observer(_aborted(exc, run))  # told first, with what the run did: the log keeps it
        raise
    return finish(observer, replace(digest, routing=routing), run.messages)


def _aborted(exc: BaseException, run: _Run) -> Aborted:
    """The run's end when `exc` stops it: an error (its message), or Ctrl-C or an exit."""
    messages = tuple(run.messages)
    if not isinstance(exc, Exception):  # KeyboardInterrupt, SystemExit: stopped, not failed
        return Aborted("interrupted", messages, interrupted=True)
    return Aborted(str(exc) if isinstance(exc, TinyError) else type(exc).__name__, messages)


def _optional(kind: type) -> Callable[[Any], bool]:
    return lambda value: value is None or isinstance(value, kind)


def _takes_three(value: Any) -> bool:
    """Whether `value` takes three positional arguments (a builtin's unreadable signature may)."""
    if not callable(value):
        return False
    try:
        signature = inspect.signature(value)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(None, None, None)
    except TypeError:
        return False
    return True


# what each argument of a run must be, and how to say so: each would fail only mid-run
# (`approve` at the first write call, after the model was asked and other tools ran;
# `routing` once the run ended), or not at all (a `model` of 3 is sent as the model's name)
ARGUMENT_KINDS: dict[str, tuple[Callable[[Any], bool], str]] = {
    "card": (lambda v: isinstance(v, Card), "a Card (a workspace's cards[...])"),
    "brief": (lambda v: isinstance(v, Brief), "a Brief (tiny_cli.make_brief(task))"),
    "registry": (lambda v: isinstance(v, Registry), "a Registry (a workspace's registry)"),
    "provider": (
        lambda v: callable(getattr(v, "complete", None)),
        "a Provider (anything with complete(request, *, timeout=None))",
    ),
    "approve": (
        _takes_three,
        "a function of three arguments (card, tool, arguments) -> bool, such as "
        "tiny_cli.approve_writes",
    ),
    "model": (lambda v: isinstance(v, str) and bool(v.strip()), "a model's name (a non-empty str)"),
    "clock": (callable, "a function () -> seconds, such as time.monotonic"),
    "observer": (callable, "a function (event) -> None, such as list.append"),
    "artifacts": (_optional(ArtifactStore), "an ArtifactStore or None"),
    "routing": (_optional(Routing), "a Routing (a delegate's decision) or None"),
    "cap": (_optional(Budget), "a Budget (a card's budget, lowered) or None"),
    "tool_mode": (_optional(str), f"one of {', '.join(TOOL_MODES)}, or None (the card's)"),
    "wall_scale": (is_number, "a number (it multiplies the card's wall budget)"),
    "temperature": (
        lambda v: v is None or is_number(v),
        f"a number from 0 (greedy) to {MAX_TEMPERATURE:g}, or None",
    ),
}
# the value's own rule past its kind, as a flag's (settings.FLAG_CHECKS), naming the keyword
ARGUMENT_RULES: dict[str, Callable[[str, Any], Any]] = {
    "tool_mode": check_tool_mode,
    "wall_scale": check_wall_scale,
    "temperature": check_temperature,
}


def check_arguments(**given: Any) -> None:
    """Refuse a run's argument of the wrong kind before any work: a ConfigError naming it."""
    for name, value in given.items():
        ok, what = ARGUMENT_KINDS[name]
        if not ok(value):
            raise wrong_kind(name, what, value)
        if name in ARGUMENT_RULES and value is not None:
            ARGUMENT_RULES[name](name, value)


def _start_servers(registry: Registry, card: Card, meter: Meter) -> None:
    """Start the MCP servers the card needs, within its wall budget, timed for the meter."""
    started = meter.clock()
    try:
        registry.bind(card.tools, meter.remaining(), card.writes)
    finally:
        if any(source.owns(name) for source in registry.sources for name in card.tools):
            meter.server_seconds = meter.clock() - started


def _loop(run: _Run, provider: Provider, model: str, stop: bool = False) -> Digest:
    """Ask the model; run the calls it asks for; take its answer, or ask once for a repair."""
    meter = run.meter
    while True:
        if meter.remaining() <= 0:  # before every request: a slow model or tool spends it too
            return run.out_of_time(meter.slowest())
        try:
            reply, text = run.ask(provider, model)
        except ProviderTimeout as exc:
            return _timed_out(run, exc)
        except ProviderError as exc:
            _count_spent(meter, exc)
            # no tool ran yet (a ghost or bad arguments ran none): config to fix, raised;
            # after one ran (a write may have happened), or any other failure, `failed`
            if exc.status in CONFIG_STATUSES and not _tool_ran(meter):
                raise
            return run.failed(str(exc))  # mid-run: the Digest keeps what the tools did
        calls = _calls_in(run, reply, text)
        if calls and stop:
            return _stopped(run, calls[0])
        if run.wrapping:  # the tool budget ran out before this reply: its calls are ghosts
            run.keep(reply, ghosts=calls)
            if _haunted(run):
                return run.failed(verdict.GHOST_CALLS)
            answer = run.take_answer(reply, text, partial=True)  # it cannot be `ok`
            return run.answered(answer, forced=verdict.MAX_TOOL_CALLS)
        if calls:
            try:
                run.call_tools(calls, reply)
            except ToolServerError as exc:  # a tool server died: no later call can reach it
                return run.failed(str(exc))
            if _haunted(run):
                return run.failed(verdict.GHOST_CALLS)
            continue
        if run.insist_on_a_tool(reply, text):
            continue
        run.keep(reply)
        answer = run.take_answer(reply, text)
        if not answer.problems:  # an object cut off mid-reply may end in a cut value
            cut = _cut_short(answer, reply.finish_reason)
            run.notes += (cut,) if cut else ()
            return run.answered(answer, forced=verdict.ANSWER_CUT if cut else None)
        if run.repaired:
            problems = "; ".join(answer.problems)
            return run.failed(verdict.SCHEMA, f"answer still unusable after one repair: {problems}")
        run.ask_for_repair(answer, text)


def _tool_ran(meter: Meter) -> bool:
    """True once a call reached its tool (a ghost, bad arguments or a declined write did not)."""
    return any(call.outcome in APPROVED_OUTCOMES for call in meter.calls)


def _haunted(run: _Run) -> bool:
    """True, and told, when the run made more ghost calls than it may: it ends `failed`."""
    if len(run.meter.ghosts()) <= DEFAULT_MAX_GHOST_CALLS:
        return False
    run.observer(BudgetHit(verdict.GHOST_CALLS))
    return True


def _count_spent(meter: Meter, spent: Completion | ProviderError) -> None:
    """Count the tokens a reply's `usage` reported (an unusable one's are spent all the same)."""
    meter.tokens_in += spent.tokens_in
    meter.tokens_out += spent.tokens_out


def _timed_out(run: _Run, exc: ProviderTimeout) -> Digest:
    """End a run whose model request ran out of time, or whose server's retry wait would."""
    if exc.status is None:
        return run.out_of_time(f"{exc}; {run.meter.slowest()}")
    left = max(0.0, run.meter.remaining())
    limited = exc.status == TOO_MANY_REQUESTS
    what = "refused with HTTP 429 (rate limited)" if limited else f"answered HTTP {exc.status}"
    return run.failed(
        verdict.RATE_LIMITED if limited else verdict.SERVER_UNAVAILABLE,
        f"the model server {what}, and the wait before a retry would outlast the "
        f"{left:.1f}s of wall budget left: {exc}",
    )


def _cut_short(answer: Reply, finish_reason: object) -> str | None:
    """The note of an answer cut short (`answer_cut`) by a reply that did not end on its own:
    tiny closed its object, or the reply was cut inside another object after it; else None."""
    if isinstance(finish_reason, str) and finish_reason in WHOLE:
        return None
    ended = f"the reply ended with {_finish(finish_reason)}, not 'stop'"
    if answer.completed:
        return f"{ended}: its last value may be cut"
    if answer.cut_after:
        return f"{ended}, inside another object after its answer: that may not be its last word"
    return None


def _finish(finish_reason: object) -> str:
    """Name how a reply ended, for a note: its finish reason, shown short."""
    if finish_reason is None:
        return "no finish reason"
    if not isinstance(finish_reason, str):
        return f"a finish reason that is not a string ({type(finish_reason).__name__})"
    return f"finish_reason {printable(finish_reason[:MAX_FINISH_CHARS])!r}"


def _calls_in(run: _Run, reply: Completion, text: str) -> tuple[ToolCall, ...]:
    """Return the calls a reply asks for: native (json mode too), json-mode, or recovered."""
    if reply.tool_calls:
        return _answerable(reply.tool_calls, run.meter)
    if run.json:
        return read_actions(text, len(run.meter.calls))
    return recover_calls(text, len(run.meter.calls))


def _said(reply: Completion, calls: Sequence[ToolCall]) -> dict[str, Any]:
    """The reply as the context keeps it: its text, bounded, and the native calls answered."""
    content = kept_reply(reply.content)
    return assistant_message(content, calls) if reply.tool_calls else text_message(content)


def _answerable(calls: Sequence[ToolCall], meter: Meter) -> tuple[ToolCall, ...]:
    """The native calls of one reply the run answers, ids short enough to echo; the rest could
    change nothing (`Meter.answerable`), and every call echoed must be answered."""
    return tuple(replace(call, id=short_id(call.id)) for call in calls[: meter.answerable()])


def _dropped(asked: int, answered: int) -> tuple[str, ...]:
    """The note for calls of one reply past what the run answers (model misbehaviour)."""
    if asked <= answered:
        return ()
    return (
        f"the model asked for {asked:,} tool calls in one reply; only the first {answered} "
        "were answered, the rest dropped (past the tool budget, they could change nothing)",
    )


def _stopped(run: _Run, call: ToolCall) -> Digest:
    """Record the first call as the model sent it, run nothing, and end the run `partial`."""
    arguments = read_json(call.arguments or "{}")
    offered = any(s["function"]["name"] == call.name for s in run.schemas)
    outcome: CallOutcome = "not_run" if offered else "ghost"
    if not isinstance(arguments, dict):
        arguments, outcome = None, "bad_arguments" if offered else outcome
    run.meter.calls.append(CallRecord(shown_name(call.name), outcome, False, arguments))
    note = ("stopped at the first tool call; it did not run",)
    return run.judged(verdict.Claim("partial", verdict.STOPPED, note))


def _started(
    card: Card, brief: Brief, meter: Meter, model: str, mode: ToolMode, messages: Sequence[Any]
) -> RunStarted:
    """Return the first event of a run: what runs, under which budget, from which context."""
    budget = meter.budget
    limits = budget.max_tool_calls, budget.max_wall_seconds, budget.max_output_tokens
    return RunStarted(card.id, model, mode, brief.goal, *limits, tuple(messages))


class _Run:
    """One invocation's state: the context so far, the tool mode, and what has happened."""

    def __init__(self, card: Card, brief: Brief, registry: Registry, approve: Approve,
                 meter: Meter, mode: ToolMode, observer: Observer = ignore,
                 artifacts: RunArtifacts | None = None,
                 temperature: float | None = None) -> None:  # fmt: skip
        self.card, self.brief, self.registry, self.approve = card, brief, registry, approve
        self.meter, self.mode, self.observer, self.artifacts = meter, mode, observer, artifacts
        self.temperature = temperature  # sent with every request when set
        self.required = required_fields(card, brief)
        self._card_schemas = registry.schemas(card.tools)
        self.json = mode == "json"  # auto starts native and may switch
        self.messages = [self._system_message(), _user(brief)]
        if artifacts is not None and artifacts.held:
            self.messages[1]["content"] += "\n\n" + held_note(artifacts.held)
        self.wrapping = self.repaired = self.insisted = False
        self.draft = ""
        self.notes: tuple[str, ...] = ()

    @property
    def schemas(self) -> list[dict[str, Any]]:
        """The tools the agent has now: its card's, and read_artifact once it holds artifacts."""
        return self._card_schemas + self._reader_schema()

    def ask(self, provider: Provider, model: str) -> tuple[Completion, str]:
        """Ask the model, count the cost; return the reply as sent and its text less reasoning."""
        forced = self._tool_first()
        offered = [] if self.wrapping else self.schemas  # the wrap-up turn offers no tool
        tools = [] if self.json else offered
        meter, asked, turn = self.meter, self.meter.clock(), self.meter.turns + 1
        self.observer(TurnStarted(turn, meter.remaining(), len(meter.calls), self.json))
        try:
            request = ChatRequest(
                model,
                list(self.messages),  # the context as asked: later turns append to it
                tools,
                meter.budget.max_output_tokens,
                response_format=self._constraint(forced, offered) if self.json else None,
                tool_choice="required" if forced and tools else None,
                temperature=self.temperature,
                agent=self.card.id,
            )
            reply = checked_complete(provider, request, meter.remaining())
        finally:
            meter.model_seconds += meter.clock() - asked
        meter.turns = turn
        _count_spent(meter, reply)
        seconds = meter.clock() - asked
        calls = tuple((c.id, c.name, c.arguments) for c in reply.tool_calls)
        replied = reply.content, len(calls), reply.finish_reason, calls
        self.observer(ModelReplied(turn, reply.tokens_in, reply.tokens_out, seconds, *replied))
        return reply, without_reasoning(reply.content)

    def call_tools(self, calls: Sequence[ToolCall], reply: Completion) -> None:
        """Run each call and answer it (as text if not sent as `tool_calls`); echo only these."""
        native, recovered = bool(reply.tool_calls), self._echo(reply, calls)
        for call in calls:
            content = self._handle(call, recovered)
            self.messages.append(
                tool_message(call, content) if native else result_message(call.name, content)
            )
        self.messages[0] = self._system_message()  # an artifact kept offers read_artifact
        if recovered and self.mode == "auto":
            self._switch_to_json("the model wrote tool calls as text")
        if self.meter.tools_spent():
            self.observer(BudgetHit(verdict.MAX_TOOL_CALLS))
            self.wrapping = True
            limit = self.meter.budget.max_tool_calls
            self.messages.append({"role": "user", "content": wrap_up_message(limit)})

    def _handle(self, call: ToolCall, recovered: bool, ghost: bool = False) -> str:
        """Run one call between its two events; a ghost (a tool not offered now) is reported."""
        name = shown_name(call.name)  # a ghost's name may be any length; no tool's is past 64
        self.observer(ToolCalled(call.id, name, call.arguments, recovered))
        started, kept = self.meter.clock(), len(self._created())
        called = call_tool(
            call,
            None if ghost else self.tool(call.name),
            card=self.card,
            approve=self.approve,
            meter=self.meter,
            artifacts=self.artifacts,
            recovered=recovered,
            have=[] if ghost else [s["function"]["name"] for s in self.schemas],
        )
        self.notes += (called.note,) if called.note else ()
        if called.outcome == "ghost":
            self.observer(GhostCall(name, len(self.meter.ghosts())))
        seconds = self.meter.clock() - started
        for artifact in self._created()[kept:]:
            self.observer(ArtifactKept(artifact.handle, artifact.tool, artifact.chars))
        self.observer(ToolFinished(call.id, name, called.outcome, seconds, called.content))
        return called.content

    def insist_on_a_tool(self, reply: Completion, text: str) -> bool:
        """`first: tool` in auto mode: an answer before any tool ran switches the run to json."""
        if not self._tool_first() or self.mode != "auto" or self.json or self.insisted:
            return False
        if parse_reply(text, (), sent=reply.content).data.get("status") == "refused":
            return False  # not its job: a refusal needs no tool result
        self.insisted = True
        self.messages += [_said(reply, ()), {"role": "user", "content": CALL_FIRST}]
        self._switch_to_json("the model answered before calling a tool")
        return True

    def keep(self, reply: Completion, ghosts: Sequence[ToolCall] = ()) -> None:
        """Put a reply taken as the answer into the context; its wrap-up turn's calls are ghosts."""
        recovered = self._echo(reply, ghosts)
        for call in ghosts:
            self._handle(call, recovered, ghost=True)

    def _echo(self, reply: Completion, calls: Sequence[ToolCall]) -> bool:
        """Append the reply with the calls taken to the context; True if they were recovered."""
        self.messages.append(_said(reply, calls))
        self.notes += _dropped(len(reply.tool_calls), len(calls))
        return not reply.tool_calls and not self.json  # a recovered call

    def take_answer(self, reply: Completion, text: str, partial: bool = False) -> Reply:
        """Parse a reply's `text` by the contract; `partial`: the tool budget ran out before it."""
        types = self.card.returns
        return parse_reply(text, self.required, types, partial=partial, sent=reply.content)

    def ask_for_repair(self, answer: Reply, text: str) -> None:
        """Keep the bad answer as the draft and tell the model, once, what is wrong with it."""
        self.repaired, self.draft = True, text.strip() or self.draft
        self.observer(Repairing(tuple(answer.problems)))
        repair = repair_message(answer.problems, self.required, self.card.returns)
        self.messages.append({"role": "user", "content": repair})

    def answered(self, answer: Reply, forced: str | None = None) -> Digest:
        """End on a usable answer (or the last one, `forced`), as the verdict rules judge it."""
        claim = verdict.answered(self.card, self.meter, self.notes, answer, self.required, forced)
        return self.judged(claim)

    def failed(self, reason: str, *notes: str) -> Digest:
        return self.judged(verdict.Claim("failed", reason, self.notes + notes))

    def out_of_time(self, detail: str) -> Digest:
        """End the run on a spent wall budget, with the draft answer if there is one."""
        self.observer(BudgetHit(verdict.OUT_OF_TIME))
        claim = verdict.out_of_time(self.card, self.meter, self.notes, self.draft, detail)
        return self.judged(claim)

    def judged(self, claim: verdict.Claim) -> Digest:
        return verdict.judged(self.card, self.brief, self.meter, claim, self._created())

    def tool(self, name: str) -> Tool | None:
        """Return the tool `name` if this agent has it now: its card's, or read_artifact."""
        # the card's own name for it (a WireName equals the name as sent): an MCP tool's says
        # which server's tool it is, so two cards' tools sent under one wire name stay apart
        own = next((t for t in self.card.tools if t == name), None)
        if own is not None and own in self.registry:
            return self.registry[own]
        if name == READ_ARTIFACT and self.artifacts is not None and self.artifacts.held:
            return self.artifacts.reader
        return None

    def _created(self) -> tuple[Artifact, ...]:
        return tuple(self.artifacts.created) if self.artifacts is not None else ()

    def _reader_schema(self) -> list[dict[str, Any]]:
        reader = None if READ_ARTIFACT in self.card.tools else self.tool(READ_ARTIFACT)
        return [] if reader is None else [reader.schema()]

    def _prompted(self) -> Card:
        """The card as its system prompt names it: with read_artifact once the run has it."""
        if not self._reader_schema():
            return self.card
        return replace(self.card, tools=(*self.card.tools, READ_ARTIFACT))

    def _constraint(self, forced: bool, tools: list[dict[str, Any]]) -> dict[str, Any]:
        answer = None if forced and tools else answer_schema(self.card, self.required)
        return response_format(tools, answer)

    def _switch_to_json(self, why: str) -> None:
        self.json = True  # the system prompt now describes json mode's answer
        self.messages[0] = self._system_message()
        self.notes += (f"switched to json tool mode: {why}",)
        self.observer(ModeSwitched("json", why))

    def _system_message(self) -> dict[str, Any]:
        """The system message as this run's mode and tools have it now."""
        tools_text = tools_section(self.schemas) if self.json else None
        return _system(self._prompted(), self.brief, self.meter.budget, tools_text)

    def _tool_first(self) -> bool:
        """True while a `first: tool` card with tool budget left had no call reach a tool."""
        if self.card.first != "tool" or self.wrapping:
            return False
        return all(c.outcome in ("ghost", "bad_arguments") for c in self.meter.calls)


def fresh_context(card: Card, brief: Brief) -> list[dict[str, Any]]:
    """Return the first request's messages: exactly [system, user], nothing inherited."""
    return [_system(card, brief, effective_budget(card, brief), None), _user(brief)]


def required_fields(card: Card, brief: Brief) -> tuple[str, ...]:
    """Return the card's required fields plus the Brief's must_return, without repeats."""
    return tuple(dict.fromkeys((*card.returns_required, *brief.must_return)))


def _system(card: Card, brief: Brief, budget: Budget, tools_text: str | None) -> dict[str, Any]:
    required = required_fields(card, brief)
    system = system_prompt(card, required, budget.max_output_tokens, tools_text)
    return {"role": "system", "content": system}


def _user(brief: Brief) -> dict[str, Any]:
    return {"role": "user", "content": user_message(brief)}
