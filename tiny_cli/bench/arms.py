"""The bench's two arms: one job run as the routed tiny card or as the all-tools generalist."""

from __future__ import annotations

import json
import sqlite3
import tempfile
import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, Protocol

from tiny_cli.agent.loop import approve_writes, fresh_context, invoke
from tiny_cli.bench.tasks import BenchTask
from tiny_cli.cards.card import Budget, Card, SideEffects
from tiny_cli.digest import Brief, Digest, Routing, estimate_tokens, make_brief
from tiny_cli.errors import ConfigError
from tiny_cli.events import Observer, finish
from tiny_cli.provider.replay import ExchangeSource, Volatile
from tiny_cli.routing.router import Decision
from tiny_cli.session import Observe, RouteBook, RouteEntry
from tiny_cli.settings import Settings, model_for
from tiny_cli.text import decimals_apart
from tiny_cli.tools.artifacts import ArtifactStore
from tiny_cli.tools.builtin import CRM_FILENAME, CrmStore, builtin_entries
from tiny_cli.tools.registry import Registry
from tiny_cli.workspace import Workspace

__all__ = [
    "ARMS",
    "GENERALIST_ID",
    "GENERALIST_SUMMARY",
    "Arm",
    "Job",
    "JobContext",
    "PromptSplit",
    "Ran",
    "Route",
    "RouterLike",
    "first_request_split",
    "generalist",
    "netloc",
    "route_all",
    "run_job",
    "scratch_registry",
]

Arm = Literal["tiny", "all-tools"]
ARMS: tuple[Arm, ...] = ("tiny", "all-tools")
GENERALIST_ID = "all-tools"
GENERALIST_SUMMARY = "help with whatever the user asks, using the tools you have where they help."


@dataclass(frozen=True)
class PromptSplit:
    """Estimated tokens (chars / 4 of the JSON) of the first request, by part."""

    system: int = 0
    tools: int = 0
    task: int = 0

    def __add__(self, other: PromptSplit) -> PromptSplit:
        return PromptSplit(
            self.system + other.system, self.tools + other.tools, self.task + other.task
        )


# --- routing (the tiny arm) ---------------------------------------------------------------


class RouterLike(Protocol):
    """The concierge as the bench uses it (a Router, or one built when first asked)."""

    def route(self, task: str) -> Decision: ...


@dataclass(frozen=True)
class Route:
    """The concierge's pick for one task (None: abstain) and the seconds routing took."""

    agent_id: str | None
    routing: Routing  # its score rounded to 4 places, as the Digest hands it on
    threshold: float
    seconds: float
    score: float  # unrounded: an abstain's reason shows it apart from the threshold


def route_all(
    router: RouterLike | None,
    tasks: Sequence[BenchTask],
    site: str | None,
    book: RouteBook,
    cards: Collection[str],
) -> dict[str, Route]:
    """Route every task once, in this thread (the embedder need not be thread-safe); a
    decision `book` holds among `cards` is used as recorded."""
    assert router is not None  # run_bench's option check made sure
    live = [t for t in tasks if book.get(t.id, cards) is None]
    fresh = {t.id for t in live}
    if live:  # the embedder's one-time load is not any task's routing time
        router.route(live[0].text(site))
    routes = {}
    for t in tasks:
        start = time.perf_counter()
        entry = book.get(t.id, cards) or book.keep(t.id, _decided(router, t, site, book))
        seconds = time.perf_counter() - start if t.id in fresh else 0.0
        score = 0.0 if entry.score is None else entry.score
        threshold = 0.0 if entry.threshold is None else entry.threshold
        routing = Routing("route" if entry.agent else "abstain", entry.agent, round(score, 4))
        routes[t.id] = Route(entry.agent, routing, threshold, seconds, score)
    return routes


def _decided(router: RouterLike, task: BenchTask, site: str | None, book: RouteBook) -> RouteEntry:
    """Route one task live; a replayed recording's tiny run shows which card it ran, if any."""
    d = router.route(task.text(site))
    entry = RouteEntry.made(d.agent_id, d.candidates, float(d.score), d.threshold)
    if book.replaying("tiny"):
        ran = book.first_exchange(f"{task.id}/tiny/0")
        entry = replace(entry, agent=ran.get("agent") if ran is not None else None)
    return entry


# --- one job ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Job:
    """One task run once in one arm."""

    task: BenchTask
    arm: Arm
    repeat: int

    @property
    def run(self) -> str:
        """Return the run's label, e.g. `onboarding/tiny/0`."""
        return f"{self.task.id}/{self.arm}/{self.repeat}"


@dataclass(frozen=True)
class JobContext:
    """What every job of one bench shares: workspace, exchanges, routes, the page server."""

    ws: Workspace
    exchanges: ExchangeSource
    routes: Mapping[str, Route]
    site: str | None
    volatile: Volatile
    observe: Observe  # a run's observers, by its label, with its task (logged, an abstain too)


@dataclass(frozen=True)
class Ran:
    """One job's run, ready to be judged: its Digest and what it is judged against."""

    job: Job
    digest: Digest
    route: Route | None  # the tiny arm's routing, whose time counts in the run's wall time
    volatile: Volatile  # the page server's URL and the scratch home, masked in the report
    first_request: PromptSplit = PromptSplit()
    expected_tools: frozenset[str] = frozenset()  # the expected card's tools (none: abstain)
    crm_records: tuple[Mapping[str, Any], ...] = ()  # the scratch CRM after a write task


def run_job(context: JobContext, job: Job) -> Ran:
    """Run one task in one arm from a fresh context, in a scratch home."""
    brief = make_brief(job.task.text(context.site), job.task.asked_fields())
    route = context.routes[job.task.id] if job.arm == "tiny" else None
    observer = context.observe(job.run, goal=brief.goal)
    if route is not None and route.agent_id is None:  # no model call: the outcome is `abstain`
        digest = finish(observer, _abstain_digest(route))
        return Ran(job, digest, route, context.volatile)
    expected = context.ws.cards.get(job.task.expected_agent or "")
    card = _card(context.ws, expected, route)
    with tempfile.TemporaryDirectory(prefix="tiny-bench-") as scratch:
        volatile = context.volatile.plus({"{home}": scratch})
        home = Path(scratch)
        digest = _invoke(context, job, card, brief, route, home=home, volatile=volatile,
                         observer=observer)  # fmt: skip
        records = _crm_records(home) if job.task.writes else ()  # before it is gone
    split = first_request_split(card, brief, context.ws.registry)
    tools = frozenset(expected.tools) if expected is not None else frozenset()
    return Ran(job, digest, route, volatile, split, tools, records)


def _card(ws: Workspace, expected: Card | None, route: Route | None) -> Card:
    """The routed card in the tiny arm; the generalist, shaped like the expected card, else."""
    if route is not None and route.agent_id is not None:
        return ws.card(route.agent_id)
    return generalist(ws.cards.values(), expected)


def _invoke(
    context: JobContext,
    job: Job,
    card: Card,
    brief: Brief,
    route: Route | None,
    *,
    home: Path,
    volatile: Volatile,
    observer: Observer,
) -> Digest:
    """Invoke `card` with its home, CRM and artifacts in the scratch folder `home`."""
    settings = _with_site(replace(context.ws.settings, home=home), context.site)
    provider = context.exchanges.for_run(job.run, volatile)
    return invoke(
        card,
        brief,
        registry=scratch_registry(context.ws.registry, settings),
        provider=provider,
        model=model_for(settings, card.model),
        approve=approve_writes,  # only the scratch home can be written; each write is counted
        tool_mode=settings.tool_mode,
        wall_scale=settings.wall_scale,
        observer=observer,
        artifacts=ArtifactStore(home),  # kept in the scratch home, gone with it
        routing=route.routing if route is not None else None,
        temperature=settings.temperature,
    )


def _abstain_digest(route: Route) -> Digest:
    score, threshold = route.score, route.threshold
    n = decimals_apart(score, threshold, 3)
    reason = f"no card fits: best score {score:.{n}f} < threshold {threshold:.{n}f}"
    return Digest(None, "abstain", reason=reason, routing=route.routing)


# --- the all-tools arm's card, the scratch home -------------------------------------------


def generalist(cards: Iterable[Card], expected: Card | None) -> Card:
    """Build the all-tools card: every tool, a generic job, the largest budget of any card;
    the expected card's required fields, types and `first`, so both arms are asked alike."""
    cards = list(cards)
    tools = tuple(dict.fromkeys(t for c in cards for t in c.tools))
    writes: SideEffects = "write" if any(c.writes for c in cards) else "none"
    required = expected.returns_required if expected is not None else ()
    return Card(
        GENERALIST_ID,
        GENERALIST_SUMMARY,
        tools,
        required,
        side_effects=writes,
        budget=_largest_budget(cards),
        returns=expected.returns if expected is not None else {},
        first=expected.first if expected is not None else "any",  # the same help as tiny's
        write_optional=True,
    )


def _largest_budget(cards: Sequence[Card]) -> Budget:
    """Each limit the largest any card has (the defaults when there is no card)."""
    return Budget(
        max((c.budget.max_tool_calls for c in cards), default=Budget().max_tool_calls),
        max((c.budget.max_output_tokens for c in cards), default=Budget().max_output_tokens),
        max((c.budget.max_wall_seconds for c in cards), default=Budget().max_wall_seconds),
    )


def scratch_registry(registry: Registry, settings: Settings) -> Registry:
    """Return the built-in tools bound to `settings` (a scratch home) plus the user's tools,
    reused as loaded: the scratch home isolates the built-in CRM, not what a user's tool does."""
    scratch = Registry(builtin_entries(settings), origin="built-in")
    for name in registry:
        if registry.origin(name) != "built-in":
            scratch.add(registry.entry(name), registry.origin(name))
    for source in registry.sources:  # MCP servers: one per process, shared by every run
        scratch.add_source(source)
    return scratch


def first_request_split(card: Card, brief: Brief, registry: Registry) -> PromptSplit:
    """Estimate the first request's tokens: system prompt, tool schemas, task message."""
    system, task = fresh_context(card, brief)
    bound = [t for t in card.tools if t in registry]  # an MCP server may have failed to start
    schemas = registry.schemas(bound)
    return PromptSplit(_tokens(system), _tokens(schemas) if schemas else 0, _tokens(task))


def netloc(url: str | None) -> str | None:
    """Return a URL's host:port (None for no URL)."""
    return url.split("://", 1)[1] if url else None


def _with_site(settings: Settings, site: str | None) -> Settings:
    """Let the web tools fetch the bench's own page server (host:port) and nothing else new."""
    host = netloc(site)
    if host is None or host in settings.allow_hosts:
        return settings
    return replace(settings, allow_hosts=(*settings.allow_hosts, host))


def _crm_records(home: Path) -> tuple[Mapping[str, Any], ...]:
    """Return every company in a scratch home's CRM (none if it was never created)."""
    path = home / CRM_FILENAME
    if not path.is_file():
        return ()
    try:
        return tuple(CrmStore(path).all())
    except (ConfigError, sqlite3.Error):  # a broken CRM holds no evidence
        return ()


def _tokens(value: Any) -> int:
    return estimate_tokens(json.dumps(value, ensure_ascii=False))
