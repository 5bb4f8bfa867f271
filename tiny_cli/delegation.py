"""Delegate: route a task; abstain, stop an unapprovable writer, or invoke the card.

After a refusal the next card over the threshold gets the task once, within the same budget.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Literal, Protocol, get_args

from tiny_cli.agent.calls import Approve, Clock, effective_budget, left_after, short_of
from tiny_cli.agent.loop import check_arguments, decline_writes, invoke
from tiny_cli.agent.verdict import WRITE_NOT_CONFIRMED
from tiny_cli.cards.card import Budget, Card
from tiny_cli.digest import Attempt, Brief, Digest, Routing
from tiny_cli.errors import ConfigError, ProviderError
from tiny_cli.events import Ended, Event, Finished, Observer, Routed, finish, ignore
from tiny_cli.provider.client import CONFIG_STATUSES, Provider
from tiny_cli.session import RouteBook, RouteEntry
from tiny_cli.setting_rules import is_number
from tiny_cli.settings import DEFAULT_TOP, Settings, model_for
from tiny_cli.text import decimals_apart, wrong_kind
from tiny_cli.tools.artifacts import Artifact, ArtifactStore
from tiny_cli.workspace import Workspace

if TYPE_CHECKING:  # numpy comes with the router; `invoke` never routes
    from tiny_cli.routing.embed import Embedder
    from tiny_cli.routing.router import Decision, Router

# A re-route needs what the first card left to hold this share of each of the next card's
# own limits: a second try on scraps could only fail.
REROUTE_MIN_SHARE = 0.25
# A recorded decision's keys after a refusal: the card tried, or why none was (a NotRerouted)
# with the budget left when that was short.
REROUTED, NOT_REROUTED, BUDGET_LEFT = "rerouted", "not_rerouted", "budget_left"
# the reasons a recording's header keeps; any other text there is an older recording's sentence
KeptReason = Literal[
    "write_ran",  # the first card refused after a write of its ran
    "write_declined",  # ... after a write of its was declined: no other card may do it anyway
    "writer_unapproved",  # the next card writes and nobody can approve a write here
    "budget_short",  # less is left of the first card's budget than REROUTE_MIN_SHARE of its own
]
NotRerouted = (
    KeptReason
    | Literal[
        "model_unavailable",  # the next card's model cannot be asked (the header says it was tried)
        "as_recorded",  # an older recording's own sentence (it kept the reason as text)
    ]
)
KEPT_REASONS: tuple[KeptReason, ...] = get_args(KeptReason)


class Routes(Protocol):
    """What `delegate` routes with: a Router (tiny_cli.build_router), or one built when asked."""

    def route(self, task: str, top: int = DEFAULT_TOP) -> Decision:
        """Route one task; the decision lists the `top` candidates."""
        ...


class LazyRouter:
    """The router of `cards`, built on the first task routed (a replay builds none); routes one
    task at a time (the build and the embedder are not thread-safe; a server's threads share it)."""

    def __init__(
        self, settings: Settings, cards: Iterable[Card], *, embedder: Embedder | None = None
    ) -> None:
        self._settings, self._cards, self._embedder = settings, cards, embedder
        self._router: Router | None = None
        self._lock = threading.Lock()

    def route(self, task: str, top: int = DEFAULT_TOP) -> Decision:
        """Route `task` (building the router first, if this is the first task)."""
        with self._lock:
            if self._router is None:
                # here: the router brings numpy, which `invoke` (sharing this module) never needs
                from tiny_cli.routing.factory import build_router

                self._router = build_router(self._settings, self._cards, embedder=self._embedder)
            return self._router.route(task, top)


def delegate(
    ws: Workspace,
    router: Routes,
    brief: Brief,
    *,
    provider: Provider,
    approve: Approve = decline_writes,
    clock: Clock = time.monotonic,
    observer: Observer = ignore,
    artifacts: ArtifactStore | None = None,
    routes: RouteBook | None = None,
) -> Digest:
    """Route the Brief's goal; abstain, or run the card with every write call put to `approve`.

    A `refused` hands the task, once, to the next card over the threshold, under what is left
    of the first card's budget (`_second_try`). `observer` sees every run's events and one
    `Finished`, the final Digest's. `routes` keeps the decision, and whether the next card was
    tried, in a recording's header; a replay uses both and never asks the router, so it
    routes alike on any machine, embedder and clock.
    """
    _check_call(ws, brief, provider, approve, clock, observer, artifacts)
    if not callable(getattr(router, "route", None)):
        raise wrong_kind("router", "a Router (tiny_cli.build_router)", router)
    if routes is not None and not isinstance(routes, RouteBook):
        raise wrong_kind("routes", "a RouteBook (tiny_cli.session.RouteBook) or None", routes)
    asked = clock()
    book = routes if routes is not None else RouteBook(None)
    decision = _decided(ws, router, brief.goal, book)
    observer(_routed(decision, clock() - asked))
    agent = decision.agent
    routing = Routing("route" if agent else "abstain", agent, round(_scores(decision)[0], 4))
    if agent is None:
        reason = _abstain_reason(decision)
        return finish(observer, Digest(None, "abstain", reason=reason, routing=routing))
    task = _Task(ws, brief, provider, approve, clock, artifacts, book)
    held = _FinishedHeldBack(observer)
    started = clock()
    first = task.run(agent, routing, held)
    left = left_after(task.budget(agent), first.cost, clock() - started)
    after = _next_candidate(decision) if first.status == "refused" else None
    if after is None:  # the card's own end is the task's: its Digest was finished by its run
        held.release()
        return first
    digest, messages = _second_try(task, first, held.messages, after, left, observer)
    return finish(observer, digest, messages)


def _decided(ws: Workspace, router: Routes, goal: str, book: RouteBook) -> RouteEntry:
    """The replayed recording's decision for `goal`, else the router's; kept in the header now,
    so a run that fails later still replays as it was routed."""
    recorded = book.get(goal, ws.cards)
    if recorded is not None and recorded.score is not None and recorded.threshold is not None:
        decision = recorded
    else:  # none, a bench's kind of entry, or edited by hand (no score to say): routed live
        decision = book.keep(goal, _entry(router.route(goal)))
    book.save()
    return decision


def _entry(d: Decision) -> RouteEntry:
    """A decision as a recording keeps it: the bench's shape, plus whether it was taught."""
    taught = getattr(d, "taught", False)  # a stand-in router's decision need not say
    score, threshold = float(d.score), float(d.threshold)
    return RouteEntry.made(d.agent_id, d.candidates, score, threshold, taught=taught)


def _scores(decision: RouteEntry) -> tuple[float, float]:
    """The score and threshold of a decision `_decided` returned (it never returns one without)."""
    score, threshold = decision.score, decision.threshold
    assert score is not None and threshold is not None
    return score, threshold


def _abstain_reason(decision: RouteEntry) -> str:
    """Why nobody took the task: it was taught out of scope, or the best score is too low."""
    if decision.taught:
        return "taught out of scope (learned.jsonl beside the cards)"
    score, threshold = _scores(decision)
    n = decimals_apart(score, threshold, 3)
    return f"no card fits: best score {score:.{n}f} < threshold {threshold:.{n}f}"


def _routed(decision: RouteEntry, seconds: float) -> Routed:
    """The routing decision as an event: what was chosen, how sure, among which cards."""
    ranked = tuple((str(card), float(score)) for card, score in decision.candidates)
    how = "route" if decision.agent else "abstain"
    return Routed(how, decision.agent, *_scores(decision), ranked, seconds)


def _next_candidate(decision: RouteEntry) -> tuple[str, float] | None:
    """Return the best other card and its score when it reaches the threshold (else None)."""
    others = [c for c in decision.candidates if c[0] != decision.agent]
    return others[0] if others and others[0][1] >= _scores(decision)[1] else None


def run_card(
    ws: Workspace,
    card_id: str,
    brief: Brief,
    *,
    provider: Provider,
    approve: Approve = decline_writes,
    clock: Clock = time.monotonic,
    observer: Observer = ignore,
    artifacts: ArtifactStore | None = None,
    handles: Sequence[str] = (),
    routing: Routing | None = None,
    cap: Budget | None = None,
) -> Digest:
    """Invoke the card named `card_id` with the workspace's tools and model settings.

    Each write call is put to `approve`; a writer under `decline_writes` stops with
    `needs_confirmation` before any model call. A tool result over the limit is stored in
    `artifacts`; `handles` name earlier artifacts the agent may read. `routing` goes into the
    Digest; `cap` lowers each limit of the card's budget.
    """
    _check_call(ws, brief, provider, approve, clock, observer, artifacts, routing, cap)
    held = _held(artifacts, handles)
    card = ws.card(card_id)
    if card.writes and approve is decline_writes:
        return finish(observer, _not_confirmed(ws, card, routing))
    model = model_for(ws.settings, card.model)
    return invoke(
        card,
        brief,
        registry=ws.registry,
        provider=provider,
        model=model,
        approve=approve,
        clock=clock,
        tool_mode=ws.settings.tool_mode,
        wall_scale=ws.settings.wall_scale,
        observer=observer,
        artifacts=artifacts,
        held=held,
        routing=routing,
        cap=cap,
        temperature=ws.settings.temperature,
    )


def _check_call(
    ws: Any,
    brief: Any,
    provider: Any,
    approve: Any,
    clock: Any,
    observer: Any,
    artifacts: Any,
    routing: Any = None,
    cap: Any = None,
) -> None:
    """Refuse a run's argument of the wrong kind before any work: a ConfigError naming it."""
    if not isinstance(ws, Workspace):
        raise wrong_kind("ws", "a Workspace (tiny_cli.open_workspace(settings))", ws)
    check_arguments(brief=brief, provider=provider, approve=approve, clock=clock)
    check_arguments(observer=observer, artifacts=artifacts, routing=routing, cap=cap)


def _held(store: ArtifactStore | None, handles: Sequence[str]) -> tuple[Artifact, ...]:
    """Look up each handle before any model call; one that is not stored is a usage error."""
    if handles and store is None:
        raise ConfigError("artifacts were named but there is no artifact store to read them from")
    return tuple(store.get(h) for h in dict.fromkeys(handles)) if store is not None else ()


def _not_confirmed(ws: Workspace, card: Card, routing: Routing | None) -> Digest:
    """A writer with nobody to approve its writes: `needs_confirmation`, before any model call."""
    writers = [t for t in card.tools if t in ws.registry and ws.registry[t].writes]
    note = (
        f"{card.id} writes ({', '.join(writers or card.tools)}) and nobody can approve a write "
        "here: run it at a terminal to approve each call, or pass --yes to approve every write "
        "(from Python: pass approve=, e.g. tiny_cli.approve_writes)"
    )
    return Digest(
        card.id,
        "needs_confirmation",
        reason=WRITE_NOT_CONFIRMED,
        notes_for_caller=(note,),
        routing=routing,
    )


# --- re-routing after a refusal ---------------------------------------------------------


@dataclass(frozen=True)
class _Task:
    """What every attempt at one delegated task shares."""

    ws: Workspace
    brief: Brief
    provider: Provider
    approve: Approve
    clock: Clock
    artifacts: ArtifactStore | None
    routes: RouteBook  # the decision, and whether the next card was tried, kept or replayed

    def run(
        self, card_id: str, routing: Routing, observer: Observer, cap: Budget | None = None
    ) -> Digest:
        """`run_card` with this task's set-up."""
        return run_card(
            self.ws,
            card_id,
            self.brief,
            provider=self.provider,
            approve=self.approve,
            clock=self.clock,
            observer=observer,
            artifacts=self.artifacts,
            routing=routing,
            cap=cap,
        )

    def budget(self, card_id: str) -> Budget:
        """Return the budget the card would run under for this Brief (wall time scaled)."""
        return effective_budget(self.ws.card(card_id), self.brief, self.ws.settings.wall_scale)


class _FinishedHeldBack:
    """Pass every event on but `Finished`, held back (the task may not be over): `Ended` instead."""

    def __init__(self, observer: Observer) -> None:
        self.observer = observer
        self.finished: Finished | None = None

    def __call__(self, event: Event) -> None:
        """Keep `Finished`; hand any other event to the observer."""
        if isinstance(event, Finished):
            self.finished = event
            self.observer(Ended(event.digest))
        else:
            self.observer(event)

    def release(self) -> None:
        """Pass the held `Finished` on: the run's end is the task's."""
        if self.finished is not None:
            self.observer(self.finished)

    @property
    def messages(self) -> tuple[Mapping[str, Any], ...]:
        """The run's transcript, as its `Finished` carried it (empty before any model call)."""
        return tuple(self.finished.messages) if self.finished is not None else ()


def _second_try(
    task: _Task,
    first: Digest,
    messages: tuple[Mapping[str, Any], ...],
    after: tuple[str, float],
    left: Budget,
    observer: Observer,
) -> tuple[Digest, tuple[Mapping[str, Any], ...]]:
    """Run the next card once under what is left of the first's budget, or note why not
    (`_why_not`: the refusal then stands). Its Digest names the first attempt; the
    transcripts follow one another."""
    card_id, score = after
    why_not = _whether_tried(task, first, card_id, left)
    if why_not is not None:
        return _not_rerouted(task, first, card_id, why_not), messages
    held = _FinishedHeldBack(observer)
    routing = Routing("route", card_id, round(score, 4), first.agent_id)
    try:
        second = task.run(card_id, routing, held, cap=left)
    except ProviderError as exc:  # the next card's model cannot be asked (a 404 for its model)
        if exc.status not in CONFIG_STATUSES or not first.calls:
            raise  # nothing done yet: the caller's to fix
        unavailable = _NotTried("model_unavailable", error=str(exc))
        return _not_rerouted(task, first, card_id, unavailable), messages
    first_score = first.routing.score if first.routing is not None else None
    return _with_attempt(first, first_score, second), (*messages, *held.messages)


@dataclass(frozen=True)
class _NotTried:
    """Why the next card was not tried after a refusal, as data; the note says it in words."""

    why: NotRerouted
    left: Budget | None = None  # budget_short: what the first card left of its budget
    error: str = ""  # model_unavailable: the error's text
    sentence: str = ""  # as_recorded: the older recording's sentence

    @classmethod
    def read(cls, raw: Any, left: Any) -> _NotTried | None:
        """A header's `not_rerouted` (and `budget_left`); None when it says none."""
        why = next((kept for kept in KEPT_REASONS if kept == raw), None)
        if why is not None:
            return cls(why, _budget_read(left) if why == "budget_short" else None)
        # made before tiny kept a reason: its own sentence, said again as it was
        return cls("as_recorded", sentence=raw) if isinstance(raw, str) and raw else None

    def kept(self) -> dict[str, Any]:
        """The reason as a recording's header keeps it (with the budget left, when short)."""
        left = {BUDGET_LEFT: asdict(self.left)} if self.left is not None else {}
        return {NOT_REROUTED: self.why, **left}


def _budget_read(raw: Any) -> Budget | None:
    """A header's `budget_left`; None unless it holds each limit as a number 0 or more."""
    names = [f.name for f in fields(Budget)]
    values: list[Any] = [raw.get(n) for n in names] if isinstance(raw, dict) else [None]
    if not all(is_number(v) and 0 <= v < math.inf for v in values):
        return None  # edited by hand: the note says the reason without the numbers
    calls, tokens, seconds = values
    return Budget(int(calls), int(tokens), float(seconds))


def _not_rerouted(task: _Task, first: Digest, card_id: str, why: _NotTried) -> Digest:
    """The first attempt's refusal, standing, with a note saying why `card_id` was not tried."""
    said = _in_words(task, first, card_id, why)
    note = f"not re-routed to {card_id} after the refusal: {said}"
    return replace(first, notes_for_caller=(*first.notes_for_caller, note))


def _in_words(task: _Task, first: Digest, card_id: str, not_tried: _NotTried) -> str:
    """The reason in words, made from the data (a replay's note is the recording's)."""
    match not_tried.why:
        case "write_ran":
            return f"{first.agent_id} refused after a write of its ran"
        case "write_declined":
            return f"{first.agent_id} refused after a write of its was declined"
        case "writer_unapproved":
            return f"{card_id} writes and nobody can approve a write here"
        case "budget_short":
            left, own = not_tried.left, task.budget(card_id)
            short = short_of(left, own, REROUTE_MIN_SHARE) if left is not None else None
            said = f"too little is left of {first.agent_id}'s budget"
            return f"{said}: {short}" if short else said
        case "model_unavailable":
            return not_tried.error
        case "as_recorded":
            return not_tried.sentence


def _whether_tried(task: _Task, first: Digest, card_id: str, left: Budget) -> _NotTried | None:
    """Say why the next card is not tried (None: it is): as the replayed recording says, else
    decided now and kept in the header, so a replay follows it and not its own clock."""
    goal = task.brief.goal
    decision = task.routes.used(goal)
    assert decision is not None  # `delegate` kept it before any card ran
    if decision.more.get(REROUTED) == card_id:  # the recording tried it
        return None
    recorded = _NotTried.read(decision.more.get(NOT_REROUTED), decision.more.get(BUDGET_LEFT))
    if recorded is not None:
        return recorded
    why = _why_not(task, first, card_id, left)
    mark = why.kept() if why is not None else {REROUTED: card_id}
    task.routes.keep(goal, replace(decision, more={**decision.more, **mark}))
    task.routes.save()
    return why


def _why_not(task: _Task, first: Digest, card_id: str, left: Budget) -> _NotTried | None:
    """Decide now why the next card is not tried (None: it is)."""
    if first.approved_writes():
        return _NotTried("write_ran")
    if first.declined_writes():  # the user said no: another card must not do it anyway
        return _NotTried("write_declined")
    card = task.ws.card(card_id)
    if card.writes and task.approve is decline_writes:
        return _NotTried("writer_unapproved")
    short = short_of(left, task.budget(card_id), REROUTE_MIN_SHARE)
    return _NotTried("budget_short", left) if short else None


def _with_attempt(first: Digest, score: float | None, second: Digest) -> Digest:
    """The second attempt's Digest naming the first: costs added, calls and artifacts kept."""
    assert first.agent_id is not None  # a card ran
    attempt = Attempt(
        first.agent_id,
        first.status,
        first.reason,
        first.summary,
        score,
        replace(first.cost, caller_tokens=0),  # the caller never received that Digest
    )
    own = [n for n in first.notes_for_caller if n not in second.notes_for_caller]
    return replace(
        second,
        artifacts=first.artifacts + second.artifacts,
        notes_for_caller=(*second.notes_for_caller, *(f"{first.agent_id}: {n}" for n in own)),
        cost=first.cost.plus(second.cost),
        calls=first.calls + second.calls,
        attempts=(*first.attempts, attempt),
    )
