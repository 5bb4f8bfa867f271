"""Running the bench: load the tasks, route them, fan the jobs out over both arms, report.

Arm `tiny` routes each task with the concierge (abstaining is an outcome, with no model
call) and invokes the chosen card with only its tools; writers run approved. Arm
`all-tools` invokes one generalist card that holds every tool of every card. Both arms use
the same runner, so the fresh context, the output contract, the budget enforcement and the
ghost-call accounting are the same code. Every run gets a fresh scratch TINY_HOME, so a
write is counted and never reaches the user's CRM (tiny_cli.bench.arms).

An outcome is right only on evidence: a successful tool call, every expected field's value
found in a tool call (or, where the task file allows it, in the task), and for a write
task the record in the run's scratch CRM. An answer that looks right but lacks evidence is
counted as `fabricated`, never as right (tiny_cli.bench.scoring; docs/bench.md, "Evidence").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from itertools import islice
from pathlib import Path

from tiny_cli._version import __version__
from tiny_cli.bench.arms import ARMS, Arm, Job, JobContext, RouterLike, netloc, route_all, run_job
from tiny_cli.bench.making import arm_flag, note_making
from tiny_cli.bench.pages import PageServer
from tiny_cli.bench.report import BenchReport, summarize
from tiny_cli.bench.scoring import RunResult, judge
from tiny_cli.bench.tasks import (
    PAGES_FOLDER,
    SITE,
    BenchTask,
    check_agents,
    default_tasks_path,
    load_tasks,
    pages_folder,
)
from tiny_cli.errors import ConfigError
from tiny_cli.events import Observer, ignore
from tiny_cli.provider.replay import ExchangeSource, Volatile
from tiny_cli.routing.router import Decision
from tiny_cli.session import Observe, RouteBook, Session
from tiny_cli.settings import Settings, model_for
from tiny_cli.workspace import Workspace, open_workspace

__all__ = [
    "MAX_CONCURRENCY",
    "MAX_REPEAT",
    "BenchOptions",
    "Progress",
    "bench_from_settings",
    "run_bench",
]

Progress = Callable[[int, int], None]  # (runs done, runs in total)
MAX_REPEAT = 100  # runs per task and arm: more measures nothing new; a typo would hold them all
# Runs at a time: each holds a thread and a connection to the model server, whose pool (httpx's
# default) holds 100, and a served model batches a few dozen requests at once; more only wait
# in its queue, and a typo (100000) would start that many threads.
MAX_CONCURRENCY = 64
QUEUED_PER_WORKER = 2  # runs handed to the pool per worker: each finds the next one waiting


def _observe_nothing(run: str, goal: str = "", trace: Mapping[str, str] | None = None) -> Observer:
    return ignore


@dataclass(frozen=True)
class BenchOptions:
    """Which arms run, how often each task runs per arm, and how many runs at once."""

    arms: tuple[Arm, ...] = ARMS
    repeat: int = 1
    concurrency: int = 1


def bench_from_settings(
    settings: Settings,
    session: Session,
    router_for: Callable[[Workspace], RouterLike],
    *,
    tasks_path: Path | None = None,
    options: BenchOptions = BenchOptions(),
    on_progress: Progress | None = None,
) -> BenchReport:
    """Load the task file and the workspace, route if the tiny arm runs, and run the bench.

    The session's exchanges answer every run; `session.observe` watches each one, under one
    `bench` span.
    """
    path = tasks_path or default_tasks_path(Path.cwd())
    tasks = load_tasks(path)
    ws = open_workspace(settings)
    check_agents(path, tasks, ws.cards)
    router = _Deferred(lambda: router_for(ws)) if "tiny" in options.arms else None
    exchanges = session.exchanges
    exchanges.probe()
    note_making(exchanges, path, ws, arm=arm_flag(options.arms, ARMS), repeat=options.repeat)
    arms = ",".join(options.arms)
    with session.traced("bench", **{"tiny.bench.tasks": len(tasks), "tiny.bench.arms": arms}):
        return run_bench(
            ws,
            tasks,
            exchanges,
            router=router,
            options=options,
            pages=pages_folder(path),
            on_progress=on_progress,
            observe=session.observe,
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
    observe: Observe = _observe_nothing,
) -> BenchReport:
    """Run every task in every arm `options.repeat` times; return the report.

    `observe(run)` gives the observer of one run's events (`run`: e.g. `onboarding/tiny/0`).
    A report answered from a recording, even in part, names it and says it is a replay.
    """
    _check_options(options, router)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    with _site(tasks, pages) as site:
        volatile = Volatile.of({SITE: site, "{site_host}": netloc(site)})
        book = RouteBook(exchanges)
        routes = route_all(router, tasks, site, book, ws.cards) if "tiny" in options.arms else {}
        book.save()
        context = JobContext(ws, exchanges, routes, site, volatile, observe)
        jobs = [
            Job(t, arm, r) for r in range(options.repeat) for t in tasks for arm in options.arms
        ]
        results = _run_jobs(context, jobs, options.concurrency, on_progress)
    # asked after the runs: a resumed recording knows only then whether it answered any
    replayed_from = exchanges.answered_from()
    return _report(ws, tasks, results, options.arms, exchanges.host, started, replayed_from)


def _report(
    ws: Workspace,
    tasks: Sequence[BenchTask],
    results: Sequence[RunResult],
    arms: Sequence[Arm],
    host: str,
    started: str,
    recording: str | None,
) -> BenchReport:
    """Add each arm's runs up into the report."""
    model = model_for(ws.settings, None)
    return BenchReport(
        {arm: summarize(arm, [r for r in results if r.arm == arm]) for arm in arms},
        tuple(tasks),
        tuple(results),
        model,
        host,
        started,
        __version__,
        replayed=recording is not None,
        replay_file=recording,
        tool_mode=ws.settings.tool_mode,
        temperature=ws.settings.temperature,
    )


class _Deferred:
    """The router, built when first asked: a replay that routes from its recording needs none."""

    def __init__(self, make: Callable[[], RouterLike]) -> None:
        self._router = cache(make)

    def route(self, task: str) -> Decision:
        """Route one task with the router, built now if it is not yet."""
        return self._router().route(task)


def _check_options(options: BenchOptions, router: RouterLike | None) -> None:
    if not options.arms or any(a not in ARMS for a in options.arms):
        raise ConfigError(f"arms {options.arms!r}: choose from {', '.join(ARMS)}")
    if options.repeat < 1 or options.concurrency < 1:
        raise ConfigError(
            f"repeat={options.repeat}, concurrency={options.concurrency}: both must be at least 1"
        )
    if options.repeat > MAX_REPEAT:
        raise ConfigError(f"repeat={options.repeat}: at most {MAX_REPEAT} runs per task and arm")
    if options.concurrency > MAX_CONCURRENCY:
        raise ConfigError(
            f"concurrency={options.concurrency}: at most {MAX_CONCURRENCY} runs at a time"
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


# --- the job fan-out ----------------------------------------------------------------------


def _run_jobs(
    context: JobContext, jobs: Sequence[Job], concurrency: int, on_progress: Progress | None
) -> list[RunResult]:
    """Run the jobs `concurrency` at a time; results in job order; the first error stops all."""
    report = on_progress or (lambda done, total: None)
    report(0, len(jobs))
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="tiny-bench")
    interrupted = False
    try:
        return _collect(pool, context, jobs, concurrency * QUEUED_PER_WORKER, report)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:  # queued runs never start; after Ctrl-C running ones are left behind, not awaited
        pool.shutdown(wait=not interrupted, cancel_futures=True)


def _collect(
    pool: ThreadPoolExecutor,
    context: JobContext,
    jobs: Sequence[Job],
    window: int,
    report: Progress,
) -> list[RunResult]:
    """Keep at most `window` runs in the pool, reporting progress; raise the first error."""
    results: list[RunResult | None] = [None] * len(jobs)
    waiting = enumerate(jobs)
    pending: dict[Future[RunResult], int] = {}
    finished = 0
    while True:
        for i, job in islice(waiting, window - len(pending)):
            pending[pool.submit(_run_one, context, job)] = i
        if not pending:
            return [r for r in results if r is not None]
        done, _ = wait(pending, return_when=FIRST_EXCEPTION)
        for future in done:
            i = pending.pop(future)
            error = future.exception()
            if error is not None:
                raise error
            results[i] = future.result()
        finished += len(done)
        report(finished, len(jobs))


def _run_one(context: JobContext, job: Job) -> RunResult:
    """Run one job in its arm and judge it."""
    return judge(run_job(context, job))
