"""Bench: the same tasks run as tiny agents and as one all-tools agent, measured side by side.

Arm `tiny` routes each task with the concierge (abstaining is an outcome, with no model
call) and invokes the chosen card with only its tools; writers run approved. Arm
`all-tools` invokes one generalist card that holds every tool of every card. Both arms use
the same runner, so the fresh context, the output contract, the budget enforcement and the
ghost-call accounting are the same code. Every run gets a fresh scratch TINY_HOME, so a
write is counted and never reaches the user's CRM.

An outcome is right only on evidence: a successful tool call, every expected field's value
found in a tool call (or, where the task file allows it, in the task), and for a write
task the record in the run's scratch CRM. An answer that looks right but lacks evidence is
counted as `fabricated`, never as right (docs/bench.md, "Evidence").
"""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal, Protocol, get_args

import yaml

from tiny_cli._version import __version__
from tiny_cli.agent.loop import approve_writes, fresh_context, invoke
from tiny_cli.bench.pages import PageServer
from tiny_cli.cards.load import Budget, Card, SideEffects
from tiny_cli.digest import Brief, Digest, Routing, Status, estimate_tokens, make_brief
from tiny_cli.digest import with_caller_tokens as _with_caller_tokens
from tiny_cli.errors import ConfigError
from tiny_cli.events import Finished, Observer, ignore
from tiny_cli.provider.replay import ExchangeSource, Replayer, Volatile
from tiny_cli.settings import Settings, model_for
from tiny_cli.tools.artifacts import ArtifactStore
from tiny_cli.tools.builtin import builtin_tools
from tiny_cli.tools.crm import CRM_FILENAME, CrmStore
from tiny_cli.tools.registry import Registry
from tiny_cli.workspace import Workspace, open_workspace

Arm = Literal["tiny", "all-tools"]
ARMS: tuple[Arm, ...] = ("tiny", "all-tools")
STATUSES: tuple[Status, ...] = get_args(Status)
DEFAULT_TASKS_FILE = Path("examples/bench/tasks.yaml")
PAGES_FOLDER = "pages"  # next to the tasks file: what `{site}` serves
SITE = "{site}"
GENERALIST_ID = "all-tools"
GENERALIST_SUMMARY = "help with whatever the user asks, using the tools you have where they help."
TASK_FIELDS = ("id", "task", "expected_agent", "must_return", "expect", "writes")
RIGHT_WITHOUT_AGENT = ("abstain", "refused")  # what a task nobody should do may end in
WALL_DIGITS = 3
# What a claimed answer can lack (RunResult.missing_evidence): a successful tool call, an
# expected field whose value a tool supplied, the written record in the scratch CRM.
Evidence = Literal["tool_call", "field_source", "crm_record"]
EVIDENCE: tuple[Evidence, ...] = get_args(Evidence)
TOOL_SOURCE = "tool"
TASK_SOURCE = "task"
# Runner reasons for an `ok` the model claimed and the runner took back: no tool ran at all
# (the run is `partial`), or a writer's write never ran (`failed`, its invented fields
# withheld). Such a run is judged as the claim it was.
NO_EVIDENCE_REASON = "no_evidence"
UNVERIFIED_WRITE_REASON = "unverified_write"

Progress = Callable[[int, int], None]  # (runs done, runs in total)
ObserverFor = Callable[[str], Observer]  # the observer of one run, by its label


def _observe_nothing(run: str) -> Observer:
    return ignore


@dataclass(frozen=True)
class BenchOptions:
    """Which arms run, how often each task runs per arm, and how many runs at once."""

    arms: tuple[Arm, ...] = ARMS
    repeat: int = 1
    concurrency: int = 1


def bench_from_settings(
    settings: Settings,
    exchanges: ExchangeSource,
    router_for: Callable[[Workspace], RouterLike],
    *,
    tasks_path: Path | None = None,
    options: BenchOptions = BenchOptions(),
    on_progress: Progress | None = None,
    observe: ObserverFor = _observe_nothing,
) -> BenchReport:
    """Load the task file and the workspace, route if the tiny arm runs, and run the bench."""
    path = tasks_path or default_tasks_path(Path.cwd())
    tasks = load_tasks(path)
    ws = open_workspace(settings)
    check_agents(path, tasks, ws.cards)
    router = router_for(ws) if "tiny" in options.arms else None
    exchanges.probe()
    return run_bench(
        ws,
        tasks,
        exchanges,
        router=router,
        options=options,
        pages=pages_folder(path),
        on_progress=on_progress,
        replayed_from=exchanges.path if isinstance(exchanges, Replayer) else None,
        observe=observe,
    )


def run_bench(
    ws: Workspace,
    tasks: Sequence[BenchTask],
    exchanges: ExchangeSource,
    *,
    router: RouterLike | None,
    options: BenchOptions = BenchOptions(),
    pages: Path | None = None,
    on_progress: Progress | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    replayed_from: Path | None = None,
    observe: ObserverFor = _observe_nothing,
) -> BenchReport:
    """Run every task in every arm `options.repeat` times; return the report.

    `observe(run)` gives the observer of one run's events (`run` is e.g. `onboarding/tiny/0`).

    `replayed_from` names the recording `exchanges` answers from: the report says it is a
    replay, whose wall times are the replay's, not the model's.
    """
    _check_options(options, router)
    started = now().isoformat(timespec="seconds")
    with _site(tasks, pages) as site:
        volatile = Volatile.of({SITE: site, "{site_host}": _netloc(site)})
        routes = _route_all(router, tasks, site) if "tiny" in options.arms else {}
        context = _Context(ws, exchanges, routes, site, volatile, observe)
        jobs = [
            _Job(t, arm, r) for r in range(options.repeat) for t in tasks for arm in options.arms
        ]
        results = _run_jobs(context, jobs, options.concurrency, on_progress)
    model = model_for(ws.settings, None)
    arms = {arm: summarize(arm, [r for r in results if r.arm == arm]) for arm in options.arms}
    return BenchReport(
        arms,
        tuple(tasks),
        tuple(results),
        model,
        exchanges.host,
        started,
        __version__,
        replayed=replayed_from is not None,
        replay_file=str(replayed_from) if replayed_from is not None else None,
        tool_mode=ws.settings.tool_mode,
    )


# --- the task file ------------------------------------------------------------------------


@dataclass(frozen=True)
class Expect:
    """What one field must hold: an exact value, or a regex searched in its text.

    `from_task`: the value may honestly be copied from the task text, so a field the runner
    found only in the task counts; otherwise its value must come from a tool call.
    """

    value: Any = None
    regex: str | None = None
    from_task: bool = False

    def matches(self, actual: Any) -> bool:
        """Tell whether `actual` (with `{site}` for the page server) is what was expected."""
        if actual is None or actual == "":
            return False
        if self.regex is not None:
            return re.search(self.regex, _text(actual)) is not None
        return _text(actual).strip() == _text(self.value).strip()

    def sourced(self, source: str | None) -> bool:
        """Tell whether a field from `source` (Digest.field_sources) may count as correct."""
        return source == TOOL_SOURCE or (self.from_task and source == TASK_SOURCE)

    def to_json(self) -> Any:
        """Return the expectation as written in a task file."""
        if not self.from_task:
            return {"regex": self.regex} if self.regex is not None else self.value
        key, value = ("regex", self.regex) if self.regex is not None else ("value", self.value)
        return {key: value, "from_task": True}


@dataclass(frozen=True)
class BenchTask:
    """One task of the task file; `expected_agent` None means abstaining is right."""

    id: str
    task: str
    expected_agent: str | None
    must_return: tuple[str, ...] = ()
    expect: Mapping[str, Expect] = field(default_factory=dict)
    writes: bool = False

    def text(self, site: str | None) -> str:
        """Return the task with `{site}` replaced by the page server's base URL."""
        return self.task.replace(SITE, site) if site else self.task

    def asked_fields(self) -> tuple[str, ...]:
        """Return must_return plus every field `expect` checks: both arms are asked for them."""
        return tuple(dict.fromkeys((*self.must_return, *self.expect)))


def load_tasks(path: Path) -> list[BenchTask]:
    """Read a task file (YAML list, or JSONL); raise ConfigError naming file, entry and field."""
    entries = _read_entries(path)
    if not entries:
        raise ConfigError(f"{path}: no tasks in the file")
    tasks, seen = [], set()
    for where, entry in entries:
        task = _task(f"{path}: {where}", entry)
        if task.id in seen:
            raise ConfigError(f"{path}: {where} ({task.id}): id: duplicate task id {task.id!r}")
        seen.add(task.id)
        tasks.append(task)
    return tasks


def check_agents(path: Path, tasks: Iterable[BenchTask], cards: Mapping[str, Card]) -> None:
    """Raise ConfigError if a task expects a card that is not loaded."""
    for t in tasks:
        if t.expected_agent is not None and t.expected_agent not in cards:
            known = ", ".join(sorted(cards)) or "none"
            raise ConfigError(
                f"{path}: task {t.id!r}: expected_agent: no card "
                f"{t.expected_agent!r} (known: {known})"
            )


def default_tasks_path(cwd: Path) -> Path:
    """Return ./examples/bench/tasks.yaml, else the repository's copy next to the package."""
    for base in (cwd, Path(__file__).resolve().parent.parent):
        if (base / DEFAULT_TASKS_FILE).is_file():
            return base / DEFAULT_TASKS_FILE
    raise ConfigError(f"no task file {DEFAULT_TASKS_FILE} here; pass --tasks FILE")


def pages_folder(tasks_path: Path) -> Path | None:
    """Return the `pages/` folder next to a task file, if there is one."""
    folder = tasks_path.parent / PAGES_FOLDER
    return folder if folder.is_dir() else None


# --- results ------------------------------------------------------------------------------


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

    def total(name: str) -> int:
        return sum(getattr(r, name) for r in results)

    return ArmSummary(
        arm=arm,
        runs=len(results),
        outcomes={s: counts.get(s, 0) for s in STATUSES},
        right=total("right"),
        fabricated=total("fabricated"),
        missing_evidence={e: missing.get(e, 0) for e in EVIDENCE},
        routing_accuracy=round(sum(routed) / len(routed), 4) if routed else None,
        fields_expected=total("fields_expected"),
        fields_filled=total("fields_filled"),
        fields_matching=total("fields_matching"),
        fields_correct=total("fields_correct"),
        ghost_calls=total("ghost_calls"),
        ghost_names=dict(sorted(Counter(n for r in results for n in r.ghost_names).items())),
        unwanted_writes=total("unwanted_writes"),
        tool_calls=total("tool_calls"),
        recovered_calls=total("recovered_calls"),
        wrong_tool_calls=total("wrong_tool_calls"),
        tokens_in=total("tokens_in"),
        tokens_out=total("tokens_out"),
        first_request=sum((r.first_request for r in results), PromptSplit()),
        caller_tokens=total("caller_tokens"),
        wall_seconds=round(sum(walls), WALL_DIGITS),
        wall_median=round(statistics.median(walls), WALL_DIGITS) if walls else 0.0,
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
        """Return the report: arms, tasks, model, base_url, started_at, tiny_version, replayed."""
        return {
            "arms": {arm: s.to_json() for arm, s in self.arms.items()},
            "tasks": [self._task_json(t) for t in self.tasks],
            "model": self.model,
            "base_url": self.base_url,
            "started_at": self.started_at,
            "tiny_version": self.tiny_version,
            "replayed": self.replayed,
            "tool_mode": self.tool_mode,
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


def generalist(cards: Iterable[Card], expected: Card | None) -> Card:
    """Build the all-tools card: every tool, a generic job, the largest budget of any card.

    Its required fields, their types and `first` are the expected card's (none when
    abstaining is right), so both arms are asked for the same answer whenever the tiny arm
    routes right.
    """
    cards = list(cards)
    tools = tuple(dict.fromkeys(t for c in cards for t in c.tools))
    budget = Budget(
        max((c.budget.max_tool_calls for c in cards), default=Budget().max_tool_calls),
        max((c.budget.max_output_tokens for c in cards), default=Budget().max_output_tokens),
        max((c.budget.max_wall_seconds for c in cards), default=Budget().max_wall_seconds),
    )
    writes: SideEffects = "write" if any(c.writes for c in cards) else "none"
    required = expected.returns_required if expected is not None else ()
    return Card(
        GENERALIST_ID,
        GENERALIST_SUMMARY,
        tools,
        required,
        side_effects=writes,
        budget=budget,
        returns=expected.returns if expected is not None else {},
        first=expected.first if expected is not None else "any",  # the same help as tiny's
        write_optional=True,
    )


def scratch_registry(registry: Registry, settings: Settings) -> Registry:
    """Return the built-in tools bound to `settings` (a scratch home) plus the user's tools.

    The user's own tools are reused as loaded: the scratch home isolates the built-in CRM,
    not what a user's tool does.
    """
    scratch = Registry(builtin_tools(settings), origin="built-in")
    for name in registry:
        if registry.origin(name) != "built-in":
            scratch.add(registry[name], registry.origin(name))
    for source in registry.sources:  # MCP servers: one per process, shared by every run
        scratch.add_source(source)
    return scratch


def first_request_split(card: Card, brief: Brief, registry: Registry) -> PromptSplit:
    """Estimate the first request's tokens: system prompt, tool schemas, task message."""
    system, task = fresh_context(card, brief)
    bound = [t for t in card.tools if t in registry]  # an MCP server may have failed to start
    schemas = registry.schemas(bound)
    return PromptSplit(_tokens(system), _tokens(schemas) if schemas else 0, _tokens(task))


# --- routing ------------------------------------------------------------------------------


class RoutingDecision(Protocol):
    """What the bench reads from the concierge's decision."""

    @property
    def decision(self) -> str: ...
    @property
    def agent_id(self) -> str | None: ...
    @property
    def score(self) -> float: ...
    @property
    def threshold(self) -> float: ...


class RouterLike(Protocol):
    """The concierge as the bench uses it."""

    def route(self, task: str) -> RoutingDecision: ...


@dataclass(frozen=True)
class _Route:
    agent_id: str | None
    routing: Routing
    threshold: float
    seconds: float


def _route_all(
    router: RouterLike | None, tasks: Sequence[BenchTask], site: str | None
) -> dict[str, _Route]:
    """Route every task once, in this thread (the embedder need not be thread-safe)."""
    assert router is not None  # _check_options made sure
    if tasks:  # the embedder's one-time load is not any task's routing time
        router.route(tasks[0].text(site))
    routes = {}
    for t in tasks:
        start = time.perf_counter()
        d = router.route(t.text(site))
        seconds = time.perf_counter() - start
        routing = Routing("route" if d.agent_id else "abstain", d.agent_id, round(d.score, 4))
        routes[t.id] = _Route(d.agent_id, routing, d.threshold, seconds)
    return routes


# --- running ------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Job:
    task: BenchTask
    arm: Arm
    repeat: int

    @property
    def run(self) -> str:
        return f"{self.task.id}/{self.arm}/{self.repeat}"


@dataclass(frozen=True)
class _Context:
    ws: Workspace
    exchanges: ExchangeSource
    routes: Mapping[str, _Route]
    site: str | None
    volatile: Volatile
    observe: ObserverFor = _observe_nothing


def _run_jobs(
    context: _Context, jobs: Sequence[_Job], concurrency: int, on_progress: Progress | None
) -> list[RunResult]:
    """Run the jobs `concurrency` at a time; results in job order; the first error stops all."""
    report = on_progress or (lambda done, total: None)
    report(0, len(jobs))
    results: list[RunResult | None] = [None] * len(jobs)
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="tiny-bench")
    pending: dict[Future[RunResult], int] = {
        pool.submit(_run_one, context, job): i for i, job in enumerate(jobs)
    }
    interrupted = False
    try:
        while pending:
            done, _ = wait(pending, return_when=FIRST_EXCEPTION)
            for future in done:
                i = pending.pop(future)
                error = future.exception()
                if error is not None:
                    raise error
                results[i] = future.result()
            report(len(jobs) - len(pending), len(jobs))
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:  # queued runs never start; after Ctrl-C running ones are left behind, not awaited
        pool.shutdown(wait=not interrupted, cancel_futures=True)
    return [r for r in results if r is not None]


def _run_one(context: _Context, job: _Job) -> RunResult:
    """Run one task in one arm from a fresh context, in a scratch home."""
    brief = make_brief(job.task.text(context.site), job.task.asked_fields())
    route = context.routes[job.task.id] if job.arm == "tiny" else None
    observer = context.observe(job.run)
    if route is not None and route.agent_id is None:
        result = _abstained(job, route, context.volatile)
        observer(Finished(_abstain_digest(route)))
        return result
    if route is not None and route.agent_id is not None:
        card = context.ws.card(route.agent_id)
    else:
        card = generalist(
            context.ws.cards.values(), context.ws.cards.get(job.task.expected_agent or "")
        )
    with tempfile.TemporaryDirectory(prefix="tiny-bench-") as scratch:
        settings = _with_site(replace(context.ws.settings, home=Path(scratch)), context.site)
        volatile = context.volatile.plus({"{home}": scratch})
        provider = context.exchanges.for_run(job.run, card.id, volatile)
        digest = invoke(
            card,
            brief,
            registry=scratch_registry(context.ws.registry, settings),
            provider=provider,
            model=model_for(settings, card.model),
            approve=approve_writes,  # only the scratch home can be written; each write is counted
            tool_mode=settings.tool_mode,
            wall_scale=settings.wall_scale,
            observer=observer,
            artifacts=ArtifactStore(Path(scratch)),  # kept in the scratch home, gone with it
        )
        records = _crm_records(Path(scratch)) if job.task.writes else ()  # before it is gone
    if route is not None:  # what `tiny delegate` hands its caller
        digest = replace(digest, routing=route.routing)
    split = first_request_split(card, brief, context.ws.registry)
    seen = _Seen(_expected_tools(context.ws, job.task), records)
    return _result(job, digest, split, route, volatile, seen)


def _abstained(job: _Job, route: _Route, volatile: Volatile) -> RunResult:
    """The concierge found no card: no model call, the outcome is `abstain`."""
    return _result(job, _abstain_digest(route), PromptSplit(), route, volatile, _Seen())


def _abstain_digest(route: _Route) -> Digest:
    reason = f"no card fits: best score {route.routing.score:.3f} < threshold {route.threshold:.3f}"
    return Digest(None, "abstain", reason=reason, routing=route.routing)


@dataclass(frozen=True)
class _Seen:
    """What a run is judged against besides its Digest."""

    expected_tools: frozenset[str] = frozenset()  # the expected card's tools (none: abstain)
    crm_records: tuple[Mapping[str, Any], ...] = ()  # the scratch CRM after a write task


def _result(
    job: _Job,
    digest: Digest,
    split: PromptSplit,
    route: _Route | None,
    volatile: Volatile,
    seen: _Seen,
) -> RunResult:
    """Measure one run's Digest against its task, and the answer against its evidence."""
    task, cost = job.task, digest.cost
    fields = {k: _masked(v, volatile) for k, v in digest.fields.items()}
    filled = [n for n in task.expect if fields.get(n) not in (None, "")]
    matching = [n for n, e in task.expect.items() if e.matches(fields.get(n))]
    correct = [n for n in matching if task.expect[n].sourced(digest.field_sources.get(n))]
    unsupported = tuple(n for n in matching if n not in correct)
    missing = _missing_evidence(task, digest, fields, unsupported, seen.crm_records)
    writes = tuple(c.name for c in digest.calls if c.writes and c.outcome == "ok")
    unwanted = 0 if task.writes else len(writes)
    routed_ok = None if route is None else route.agent_id == task.expected_agent
    evidenced = len(correct) == len(task.expect) and not missing
    right = _right(task, digest.status, evidenced, unwanted, routed_ok)
    wall = cost.wall_seconds + (route.seconds if route is not None else 0.0)
    return RunResult(
        task_id=task.id,
        arm=job.arm,
        repeat=job.repeat,
        status=digest.status,
        agent_id=digest.agent_id,
        reason=_masked(digest.reason, volatile),
        routed_ok=routed_ok,
        right=right,
        fabricated=_fabricated(task, digest, missing, len(matching)),
        missing_evidence=missing,
        fields=fields,
        field_sources=dict(digest.field_sources),
        fields_expected=len(task.expect),
        fields_filled=len(filled),
        fields_matching=len(matching),
        fields_correct=len(correct),
        unsupported_fields=unsupported,
        ghost_calls=cost.ghost_calls,
        ghost_names=cost.ghost_names,
        writes=writes,
        unwanted_writes=unwanted,
        tool_calls=cost.tool_calls,
        recovered_calls=cost.recovered_calls,
        wrong_tool_calls=sum(
            c.outcome != "ghost" and c.name not in seen.expected_tools for c in digest.calls
        ),
        tokens_in=cost.tokens_in,
        tokens_out=cost.tokens_out,
        first_request=split,
        caller_tokens=_caller_tokens(digest),
        wall_seconds=round(wall, WALL_DIGITS),
    )


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
    fields: Mapping[str, Any],
    unsupported: Sequence[str],
    records: Sequence[Mapping[str, Any]],
) -> tuple[Evidence, ...]:
    """Return what a claimed answer lacks; nothing for an answer nobody claimed.

    Claimed: status `ok`, or an `ok` the runner took back for want of evidence, on a task
    some card should do.
    """
    claimed = digest.status == "ok" or digest.reason in (
        NO_EVIDENCE_REASON,
        UNVERIFIED_WRITE_REASON,
    )
    if task.expected_agent is None or not claimed:
        return ()
    lacks = {
        "tool_call": not any(c.outcome == "ok" for c in digest.calls),
        "field_source": bool(unsupported),
        "crm_record": task.writes and not _in_crm(task, fields, records),
    }
    return tuple(e for e in EVIDENCE if lacks[e])


def _fabricated(
    task: BenchTask, digest: Digest, missing: Sequence[Evidence], matching: int
) -> bool:
    """A claimed answer that lacks evidence yet looks right: every expected field matches,
    or the runner withheld the fields of a write no tool made."""
    if not missing:
        return False
    return matching == len(task.expect) or digest.reason == UNVERIFIED_WRITE_REASON


def _in_crm(
    task: BenchTask, fields: Mapping[str, Any], records: Sequence[Mapping[str, Any]]
) -> bool:
    """Tell whether the CRM holds a record with the expected name and the returned company_id."""
    name = task.expect.get("name")
    found = [r for r in records if name is None or name.matches(r.get("name"))]
    if "company_id" in task.expect:
        returned = _text(fields.get("company_id")).strip()
        found = [r for r in found if str(r.get("company_id")) == returned]
    return bool(found)


def _crm_records(home: Path) -> tuple[Mapping[str, Any], ...]:
    """Return every company in a scratch home's CRM (none if it was never created)."""
    path = home / CRM_FILENAME
    if not path.is_file():
        return ()
    try:
        return tuple(CrmStore(path).all())
    except (ConfigError, sqlite3.Error):  # a broken CRM holds no evidence
        return ()


def _expected_tools(ws: Workspace, task: BenchTask) -> frozenset[str]:
    card = ws.cards.get(task.expected_agent) if task.expected_agent is not None else None
    return frozenset(card.tools) if card is not None else frozenset()


def _caller_tokens(digest: Digest) -> int:
    """Size of the Digest the caller gets, with wall time and routing score zeroed."""
    # both vary in their digits from run to run (the clock; float sums in the embedder),
    # which would move the estimate by a token and a replay would not count the same
    still = replace(digest, cost=replace(digest.cost, wall_seconds=0.0))
    if still.routing is not None:
        still = replace(still, routing=replace(still.routing, score=0.0))
    return _with_caller_tokens(still).cost.caller_tokens


# --- helpers ------------------------------------------------------------------------------


def _check_options(options: BenchOptions, router: RouterLike | None) -> None:
    if not options.arms or any(a not in ARMS for a in options.arms):
        raise ConfigError(f"arms {options.arms!r}: choose from {', '.join(ARMS)}")
    if options.repeat < 1 or options.concurrency < 1:
        raise ConfigError(
            f"repeat={options.repeat}, concurrency={options.concurrency}: both must be at least 1"
        )
    if "tiny" in options.arms and router is None:
        raise ConfigError("the tiny arm needs a router")


@contextmanager
def _site(tasks: Sequence[BenchTask], pages: Path | None) -> Iterator[str | None]:
    """Serve `pages` on loopback while the bench runs, if any task uses `{site}`."""
    users = [t.id for t in tasks if SITE in t.task]
    if not users:
        yield None
        return
    if pages is None or not pages.is_dir():
        raise ConfigError(
            f"task {users[0]!r} uses {SITE} but there is no pages folder "
            f"({pages or PAGES_FOLDER + '/ next to the task file'})"
        )
    with PageServer(pages) as server:
        yield server.url


def _with_site(settings: Settings, site: str | None) -> Settings:
    """Let the web tools fetch the bench's own page server (host:port) and nothing else new."""
    netloc = _netloc(site)
    if netloc is None or netloc in settings.allow_hosts:
        return settings
    return replace(settings, allow_hosts=(*settings.allow_hosts, netloc))


def _netloc(url: str | None) -> str | None:
    return url.split("://", 1)[1] if url else None


def _tokens(value: Any) -> int:
    return estimate_tokens(json.dumps(value, ensure_ascii=False))


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _masked(value: Any, volatile: Volatile) -> Any:
    """Write the page server's URL and scratch paths as placeholders, so reports compare."""
    if value is None:
        return None
    if isinstance(value, str):
        return volatile.mask(value)
    return json.loads(volatile.mask(json.dumps(value, ensure_ascii=False)))


def _read_entries(path: Path) -> list[tuple[str, Any]]:
    """Return (where, entry) pairs: JSONL lines by number, YAML list items by index."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
        raise ConfigError(f"{path}: cannot read the task file: {reason}") from exc
    if path.suffix == ".jsonl":
        return [
            (f"line {n}", _json(path, n, line))
            for n, line in enumerate(text.splitlines(), 1)
            if line.strip()
        ]
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {' '.join(str(exc).split())}") from None
    if not isinstance(data, list):
        raise ConfigError(f"{path}: a task file is a YAML list of tasks (or JSONL)")
    return [(f"task {i + 1}", entry) for i, entry in enumerate(data)]


def _json(path: Path, n: int, line: str) -> Any:
    try:
        return json.loads(line)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}:{n}: not JSON: {exc.msg} at column {exc.colno}") from None


def _task(where: str, entry: Any) -> BenchTask:
    """Check one entry and build its BenchTask."""
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: a task must be a mapping with id, task, expected_agent")
    task_id = entry.get("id")
    if isinstance(task_id, str) and task_id:
        where = f"{where} ({task_id})"
    unknown = sorted(set(entry) - set(TASK_FIELDS))
    if unknown:
        fields = ", ".join(TASK_FIELDS)
        raise ConfigError(f"{where}: {unknown[0]}: unknown field (fields: {fields})")
    if not isinstance(task_id, str) or not re.fullmatch(r"[A-Za-z0-9][\w.-]*", task_id):
        raise ConfigError(f"{where}: id: must be a name of letters, digits, '-', '_' or '.'")
    text = entry.get("task")
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"{where}: task: must be the task's text")
    if "expected_agent" not in entry:
        raise ConfigError(f"{where}: expected_agent: missing (a card id, or null to abstain)")
    agent = entry["expected_agent"]
    if agent is not None and not (isinstance(agent, str) and agent.strip()):
        raise ConfigError(f"{where}: expected_agent: must be a card id or null")
    writes = entry.get("writes", False)
    if not isinstance(writes, bool):
        raise ConfigError(f"{where}: writes: must be true or false, got {writes!r}")
    return BenchTask(
        task_id,
        text.strip(),
        agent,
        _must_return(where, entry.get("must_return")),
        _expect(where, entry.get("expect")),
        writes,
    )


def _must_return(where: str, value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ConfigError(f"{where}: must_return: must be a list of field names")
    return tuple(dict.fromkeys(v.strip() for v in value))


def _expect(where: str, value: Any) -> dict[str, Expect]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: expect: must map field names to expectations ({EXPECT_FORMS})")
    return {str(name): _one_expect(f"{where}: expect.{name}", v) for name, v in value.items()}


EXPECT_FORMS = (
    "write an exact value, or {regex: PATTERN}, or {value: VALUE}; "
    "the last two may add from_task: true"
)


def _one_expect(where: str, value: Any) -> Expect:
    if not isinstance(value, dict):
        return Expect(value=_exact(where, value))
    keys = set(value) - {"from_task"}
    from_task = value.get("from_task", False)
    if len(keys) != 1 or not keys <= {"regex", "value"} or not isinstance(from_task, bool):
        raise ConfigError(f"{where}: {EXPECT_FORMS}")
    if "value" in value:
        return Expect(value=_exact(where, value["value"]), from_task=from_task)
    pattern = value["regex"]
    if not isinstance(pattern, str):
        raise ConfigError(f"{where}: {EXPECT_FORMS}")
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ConfigError(f"{where}: regex {pattern!r}: {exc}") from None
    return Expect(regex=pattern, from_task=from_task)


def _exact(where: str, value: Any) -> Any:
    if value is None or isinstance(value, list | dict):
        raise ConfigError(f"{where}: an exact value must be a string, number or boolean")
    return value
