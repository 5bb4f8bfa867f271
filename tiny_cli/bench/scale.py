"""The bench at scale: tool selection by tiny agents and by one all-tools agent as tools grow.

A selection task expects one call (`expect_call`: a function and the accepted values of its
arguments, as BFCL writes them) or none (an irrelevance question). At each size K every arm
works in the task's universe (`tiny_cli.bench.universe`): `oracle` is offered the expected
card's tools, `tiny` routes among the universe's cards and offers one card's, `top-k` offers
the tools of the k best-routed cards (the vendors' tool search), `hybrid` one card when the
routing margin is clear and the top-k cards' tools when it is not, `all-tools` every tool of
the universe. Each run stops at the first call the model asks for: the call is recorded and
scored (`tiny_cli.bench.selection`), never run. This is tool selection, never "right outcome".
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import cache, partial
from pathlib import Path
from typing import Any, Literal

from tiny_cli.agent.loop import invoke, tools_section
from tiny_cli.bench.arms import generalist
from tiny_cli.bench.making import Place, Prompt, arm_flag, as_offered, note_making
from tiny_cli.bench.run import MAX_CONCURRENCY
from tiny_cli.bench.scale_report import RunRecord, ScaleReport, build_report, rebuild
from tiny_cli.bench.selection import CallVerdict, expected_call, judge_call
from tiny_cli.bench.tasks import is_jsonl
from tiny_cli.bench.universe import CATALOGUE, Universe, sample_tasks, size_label, universes
from tiny_cli.cards.card import Budget, Card
from tiny_cli.digest import Cost, Digest, estimate_tokens, make_brief
from tiny_cli.errors import ConfigError
from tiny_cli.routing.embed import Embedder
from tiny_cli.routing.factory import build_router, embedder_for, folder_learned
from tiny_cli.routing.router import Router
from tiny_cli.routing.tooltexts import gathered
from tiny_cli.session import RouteBook, RouteEntry, Session
from tiny_cli.settings import Settings, model_for
from tiny_cli.text import check_task, kind_of, printable
from tiny_cli.userfiles import jsonl_lines, parse_guarded, read_text
from tiny_cli.workspace import Workspace, open_workspace

__all__ = [
    "SCALE_ARMS",
    "ScaleArm",
    "ScaleOptions",
    "SelectionTask",
    "is_selection_file",
    "load_selection_tasks",
    "run_scale",
    "scale_from_settings",
]

ScaleArm = Literal["oracle", "tiny", "top-k", "hybrid", "all-tools"]
SCALE_ARMS: tuple[ScaleArm, ...] = ("oracle", "tiny", "top-k", "hybrid", "all-tools")
DEFAULT_SIZES = (10, 30, 100, CATALOGUE)  # those the catalogue cannot fill run as `all`
DEFAULT_SAMPLE = 60  # selection tasks drawn from the file
DEFAULT_IRRELEVANCE = 30  # irrelevance tasks drawn from the file
DEFAULT_TOP_K = 3  # the anchors' tool search returns a handful of tools; 3 cards here
# One background standard deviation of the routing z-score: chosen before any run, never
# tuned on the tasks. Over it the best card is clearly ahead and hybrid offers it alone.
DEFAULT_HYBRID_MARGIN = 1.0
DEFAULT_CONTEXT_TOKENS = 32_768  # the model server's context; a larger prompt "does not fit"
MAX_SELECTION_LINE = 200_000
SELECTION_FIELDS = ("id", "task", "expected_agent", "expect_call")
# ScaleOptions a recording keeps under their own names (sizes and arms are written as flags)
RECORDED_AS_THEY_ARE = (
    "sample",
    "irrelevance",
    "seed",
    "top_k",
    "hybrid_margin",
    "context_tokens",
    "expected_tools",
    "prompt",
)


@dataclass(frozen=True)
class SelectionTask:
    """One question; `expected` is the call it needs, None for an irrelevance question."""

    id: str
    task: str
    card: str | None
    expected: Mapping[str, Any] | None = field(default=None, hash=False)


@dataclass(frozen=True)
class ScaleOptions:
    """What the scale bench runs: sizes (0 is the whole catalogue), arms, sample, seed."""

    sizes: tuple[int, ...] | None = None  # None: DEFAULT_SIZES, as many as the catalogue holds
    arms: tuple[ScaleArm, ...] = SCALE_ARMS
    sample: int = DEFAULT_SAMPLE
    irrelevance: int = DEFAULT_IRRELEVANCE
    seed: int = 0
    top_k: int = DEFAULT_TOP_K
    hybrid_margin: float = DEFAULT_HYBRID_MARGIN
    context_tokens: int = DEFAULT_CONTEXT_TOKENS
    concurrency: int = 1
    wall_scale: float = 1.0
    # where the all-tools list puts the expected card's tools: None keeps catalogue order (one
    # shared prefix per universe); "first"/"last" check that position does not decide it
    expected_tools: Place | None = None
    # same: every arm asks with the generalist's system prompt, so the arms differ only in the
    # tools they offer; card: one-card arms (oracle, tiny, a clear hybrid) ask with the card's
    # own prompt, as `tiny delegate` would (prompt and tools then both differ between arms)
    prompt: Prompt = "same"


def is_selection_file(path: Path) -> bool:
    """Whether a task file holds selection tasks (JSONL whose first entry has `expect_call`)."""
    if not is_jsonl(path):
        return False
    lines = jsonl_lines(read_text(path))  # bounded: a folder, FIFO or device is one line
    first = next((line for line in lines if line.strip()), "")
    try:
        entry = parse_guarded(json.loads, first[:MAX_SELECTION_LINE], path)
    except json.JSONDecodeError:
        return False
    return isinstance(entry, dict) and "expect_call" in entry


def load_selection_tasks(path: Path, cards: Mapping[str, Card]) -> list[SelectionTask]:
    """Read a selection task file; a bad line is a one-line ConfigError naming file and line."""
    tasks: list[SelectionTask] = []
    seen: dict[str, int] = {}
    for n, line in enumerate(jsonl_lines(read_text(path)), 1):
        if not line.strip():
            continue
        task = _selection_task(path, n, line, cards)
        if task.id in seen:
            raise ConfigError(
                f"{path}:{n}: duplicate task id {task.id!r} (first on line {seen[task.id]})"
            )
        seen[task.id] = n
        tasks.append(task)
    if not tasks:
        raise ConfigError(f"{path}: no tasks in the file")
    return tasks


def _selection_task(path: Path, n: int, line: str, cards: Mapping[str, Card]) -> SelectionTask:
    where = f"{path}:{n}"
    try:
        entry = parse_guarded(json.loads, line[:MAX_SELECTION_LINE], Path(where))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{where}: not JSON: {exc.msg} at column {exc.colno}") from None
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: a task must be a JSON object, got {kind_of(entry)}")
    try:
        expected = expected_call(entry)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    unknown = sorted(set(entry) - set(SELECTION_FIELDS))
    if unknown:  # a typo ("expected_agnet") would leave a task that cannot be right
        fields = ", ".join(SELECTION_FIELDS)
        raise ConfigError(f"{where}: {printable(unknown[0])}: unknown field (fields: {fields})")
    task_id, card = entry.get("id"), entry.get("expected_agent")
    if not isinstance(entry.get("task"), str) or not isinstance(task_id, str) or not task_id:
        raise ConfigError(f"{where}: id and task must be strings")
    check_task(entry["task"], where)
    if not (card is None or isinstance(card, str)):
        raise ConfigError(f"{where}: expected_agent must be a card id or null")
    if (card is None) != (expected is None):
        raise ConfigError(
            f"{where}: expected_agent and expect_call go together: a card and the call it "
            "should make, or null and null for a task no card takes"
        )
    if card is not None and expected is not None:
        _check_call(where, cards.get(card), card, expected)
    return SelectionTask(task_id, entry["task"], card, expected)


def _check_call(where: str, card: Card | None, card_id: str, call: Mapping[str, Any]) -> None:
    """ConfigError unless `card` is a card here that allows the call, with arguments its
    declared function names (a misspelt one could never be right)."""
    if card is None:
        raise ConfigError(f"{where}: expected_agent {card_id!r} is not a card here")
    if call["name"] not in card.tools:
        raise ConfigError(f"{where}: {call['name']!r} is not a tool of card {card_id!r}")
    for function in card.functions:
        known = (function.get("parameters") or {}).get("properties")
        if function.get("name") == call["name"] and isinstance(known, Mapping):
            extra = sorted(set(call["arguments"]) - set(known))
            if extra:
                said = f"{where}: expect_call: {call['name']!r} has no parameter {extra[0]!r}"
                raise ConfigError(f"{said} (it has: {', '.join(sorted(known)) or 'none'})")


def scale_from_settings(
    settings: Settings,
    session: Session,
    tasks_path: Path,
    options: ScaleOptions = ScaleOptions(),
    embedder: Embedder | None = None,
) -> ScaleReport:
    """Load the cards and the selection tasks, check the endpoint, and run the bench at scale.

    Routing is `tiny route`'s, with `embedder` (default: the settings' one, loaded only when a
    task routes live).
    """
    ws = open_workspace(settings)
    # the sizes that run, not the default: a recording's header replays them as they ran
    options = replace(options, sizes=_sizes(options.sizes, _catalogue(ws)))
    tasks = load_selection_tasks(tasks_path, ws.cards)
    session.exchanges.probe()
    note_making(session.exchanges, tasks_path, ws, **_recorded(options))
    learned, tool_texts = folder_learned(settings), gathered(settings)  # read once, not per size
    loaded = cache(lambda: embedder if embedder is not None else embedder_for(settings))

    def router_for(cards: Sequence[Card]) -> Router:
        return build_router(
            settings, cards, learned=learned, embedder=loaded(), tool_texts=tool_texts,
            folder=ws.cards.values(),
        )  # fmt: skip

    with session.traced("bench", **{"tiny.bench.tasks": len(tasks), "tiny.bench.scale": True}):
        report = run_scale(ws, tasks, session, router_for, options)
    replayed = session.exchanges.answered_from()
    return report if replayed is None else rebuild(report, replayed)


def _recorded(options: ScaleOptions) -> dict[str, Any]:
    """The options a recording keeps (tiny_cli.bench.making), named as their flags read."""
    sizes = ",".join(size_label(s) for s in options.sizes or ())
    kept = {name: getattr(options, name) for name in RECORDED_AS_THEY_ARE}
    return {"all_tools_sizes": sizes, "arm": arm_flag(options.arms, SCALE_ARMS), **kept}


def run_scale(
    ws: Workspace,
    tasks: Sequence[SelectionTask],
    session: Session,
    router_for: Callable[[Sequence[Card]], Router],
    options: ScaleOptions = ScaleOptions(),
) -> ScaleReport:
    """Run every sampled task in every arm at every size; return the report."""
    _check_options(options)
    picked = _sample(tasks, options)
    tools_of = {card.id: len(card.tools) for card in ws.cards.values()}
    started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    records: list[RunRecord] = []
    asked = _Asked()
    book = RouteBook(session.exchanges)
    verdicts = _verdicts_stand(session, options)
    catalogue = sum(tools_of.values())
    for size in _sizes(options.sizes, catalogue):
        jobs = _jobs(ws, picked, tools_of, size, router_for, options, book, verdicts)
        asked.own(jobs)
        records += _each(lambda job: _run(ws, session, job, options, asked), jobs, options)
    book.save()
    model = model_for(ws.settings, None)
    mode = _mode(ws)
    return build_report(records, options, model, started, catalogue, mode,
                        temperature=ws.settings.temperature)  # fmt: skip


def _verdicts_stand(session: Session, options: ScaleOptions) -> bool:
    """Whether a replayed recording's `clear` verdicts hold for this run: they were taken at
    its margin, so a `--hybrid-margin` given otherwise decides them again from the scores."""
    made = session.exchanges.recorded("bench")
    recorded = made.get("hybrid_margin") if isinstance(made, dict) else None
    return recorded is None or recorded == options.hybrid_margin


def _check_options(options: ScaleOptions) -> None:
    """Refuse a concurrency out of range, or a margin that is not finite, in one line."""
    if not 1 <= options.concurrency <= MAX_CONCURRENCY:
        raise ConfigError(
            f"concurrency={options.concurrency}: from 1 to {MAX_CONCURRENCY} runs at a time"
        )
    if not math.isfinite(options.hybrid_margin):
        raise ConfigError(f"hybrid_margin={options.hybrid_margin!r}: must be a finite number")


def _catalogue(ws: Workspace) -> int:
    """The tools of every card: the size `all` stands for."""
    return sum(len(card.tools) for card in ws.cards.values())


def _sizes(sizes: tuple[int, ...] | None, catalogue: int) -> tuple[int, ...]:
    """The sizes to run. One at or past the catalogue's tools is `all`; two given that name it
    are refused, or its runs would count twice in one row."""
    if sizes is None:
        return (*(s for s in DEFAULT_SIZES if s != CATALOGUE and s < catalogue), CATALOGUE)
    whole = [s for s in sizes if s == CATALOGUE or s >= catalogue]
    if len(whole) > 1:
        named = " and ".join(size_label(s) for s in whole)
        raise ConfigError(
            f"--all-tools-sizes: {named} are the same catalogue ({catalogue} tools); give it once"
        )
    return sizes


def _each(
    run: Callable[[Any], RunRecord], jobs: Sequence[Any], options: ScaleOptions
) -> list[RunRecord]:
    """Run the jobs `options.concurrency` at a time; their records in job order. After Ctrl-C
    the running requests are not awaited: the recording must be saved before the 2 s net."""
    pool = ThreadPoolExecutor(options.concurrency)  # checked by run_scale
    try:
        records = list(pool.map(run, jobs))
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    return records


def _sample(tasks: Sequence[SelectionTask], options: ScaleOptions) -> list[SelectionTask]:
    relevant = [t.id for t in tasks if t.card is not None]
    irrelevant = [t.id for t in tasks if t.card is None]
    chosen = set(sample_tasks(relevant, options.sample, options.seed))
    chosen |= set(sample_tasks(irrelevant, options.irrelevance, options.seed))
    return [t for t in tasks if t.id in chosen]


Ranking = tuple[str | None, tuple[str, ...], float]  # routed card (None: abstain), top k, margin


@dataclass(frozen=True)
class _Job:
    """One task in one arm at one size: the card to run (None: no request) and its routing."""

    task: SelectionTask
    arm: ScaleArm
    universe: Universe
    card: Card | None
    routed: str | None = None  # the card routing chose (tiny, hybrid)
    ranked: tuple[str, ...] = ()  # the top-k cards (top-k, hybrid)
    fits: bool = True
    offered: tuple[str, ...] = ()  # the cards whose tools `card` holds


def _jobs(
    ws: Workspace,
    tasks: Sequence[SelectionTask],
    tools_of: Mapping[str, int],
    size: int,
    router_for: Callable[[Sequence[Card]], Router],
    options: ScaleOptions,
    book: RouteBook,
    verdicts: bool,
) -> list[_Job]:
    """Build the jobs of one size, grouped by universe so a prompt prefix repeats back to back."""
    worlds = universes([t.card for t in tasks], tools_of, size, options.seed)
    by_world: dict[Universe, list[SelectionTask]] = {}
    for task, world in zip(tasks, worlds, strict=True):
        by_world.setdefault(world, []).append(task)
    jobs: list[_Job] = []
    for world, group in by_world.items():
        cards = [ws.cards[c] for c in world.cards]
        routed = set(options.arms) & {"tiny", "top-k", "hybrid"}  # else no router is needed
        ranking = (
            _rankings(book, partial(router_for, cards), ws, world, group, options, verdicts)
            if routed
            else {task.id: (None, (), 0.0) for task in group}
        )
        for arm in options.arms:
            jobs += [_job(ws, task, arm, world, ranking[task.id], options) for task in group]
    return [j for j in jobs if not (j.arm == "oracle" and j.task.card is None)]


def _rankings(
    book: RouteBook,
    router: Callable[[], Router],
    ws: Workspace,
    world: Universe,
    tasks: Sequence[SelectionTask],
    options: ScaleOptions,
    verdicts: bool,
) -> dict[str, Ranking]:
    """Route each task once: (the card or None on abstain, the top cards, the margin).

    A recorded decision is used as recorded (its `clear` verdict decided again unless
    `verdicts` stand); the others are routed live, made to agree with what the replayed
    recording's runs offered, and kept.
    """
    keys = {t.id: f"{world.label}/{t.id}" for t in tasks}
    recorded = {t.id: book.get(keys[t.id], world.cards) for t in tasks}
    entries = {task_id: entry for task_id, entry in recorded.items() if entry is not None}
    if not verdicts:
        for task_id, entry in entries.items():
            entries[task_id] = book.keep(keys[task_id], _cleared(entry, options))
    missing = [t for t in tasks if t.id not in entries]
    top = options.top_k
    decisions = router().route_many([t.task for t in missing], top + SPARE) if missing else []
    for task, d in zip(missing, decisions, strict=True):
        agent = d.agent_id if d.decision == "route" else None
        made = _cleared(RouteEntry.made(agent, d.candidates, d.score, d.threshold), options)
        runs = {arm: f"{task.id}/{arm}/{world.label}" for arm in ("tiny", "top-k", "hybrid")}
        entries[task.id] = book.keep(keys[task.id], as_offered(made, runs, book, ws.cards))
    return {t.id: _ranking(entries[t.id], top) for t in tasks}


SPARE = 2  # candidates kept past the top k: the margin needs two, a corrected order a few more


def _cleared(entry: RouteEntry, options: ScaleOptions) -> RouteEntry:
    """The decision with hybrid's `clear` verdict taken from its scores at this margin."""
    clear = _ranking(replace(entry, clear=None), options.top_k)[2] >= options.hybrid_margin
    return replace(entry, clear=clear)


def _ranking(entry: RouteEntry, top: int) -> Ranking:
    """(card, top cards, margin); a recorded `clear` verdict stands for the margin's side."""
    ids = tuple(str(card) for card, _ in entry.candidates)
    scores = [float(score) for _, score in entry.candidates]
    margin = scores[0] - scores[1] if len(scores) > 1 else float("inf")
    if entry.clear is not None:
        margin = float("inf") if entry.clear else float("-inf")
    return (entry.agent, ids[:top], margin)


def _job(
    ws: Workspace,
    task: SelectionTask,
    arm: ScaleArm,
    world: Universe,
    ranking: Ranking,
    options: ScaleOptions,
) -> _Job:
    """Choose what one arm offers for one task in its universe."""
    routed, top, margin = ranking
    cards = ws.cards
    if arm == "oracle":
        own = (task.card,) if task.card else ()
        return _Job(task, arm, world, _one(cards, task.card, options), offered=own)
    if arm == "all-tools":
        order = _placed(world.cards, task.card, options.expected_tools)
        card = _generalist(cards, order)
        return _Job(task, arm, world, card, fits=_fits(ws, card, task, options), offered=order)
    if arm == "top-k":
        return _Job(task, arm, world, _generalist(cards, top), ranked=top, offered=top)
    if routed is None:  # tiny and hybrid share the abstain rule: no card, no request
        return _Job(task, arm, world, None, routed=None, ranked=top)
    if arm == "tiny" or margin >= options.hybrid_margin:
        one = _one(cards, routed, options)
        return _Job(task, arm, world, one, routed=routed, ranked=top, offered=(routed,))
    card = _generalist(cards, top)
    return _Job(task, arm, world, card, routed=routed, ranked=top, offered=top)


def _one(cards: Mapping[str, Card], card: str | None, options: ScaleOptions) -> Card | None:
    """One card's tools, asked with the shared prompt or with the card's own (`--prompt`)."""
    if card is None:
        return None
    return cards[card] if options.prompt == "card" else _generalist(cards, (card,))


def _placed(cards: tuple[str, ...], expected: str | None, where: Place | None) -> tuple[str, ...]:
    """The universe's cards in prompt order, the expected one moved first or last if asked."""
    if where is None or expected is None:
        return cards
    rest = tuple(c for c in cards if c != expected)
    return (expected, *rest) if where == "first" else (*rest, expected)


def _generalist(cards: Mapping[str, Card], ids: Sequence[str]) -> Card:
    """The all-tools card over the cards `ids`, with a selection budget (one answer, no writes)."""
    card = generalist([cards[c] for c in ids], None)
    return Card(card.id, card.summary, card.tools, (), budget=Budget())


def _fits(ws: Workspace, card: Card, task: SelectionTask, options: ScaleOptions) -> bool:
    """Whether the all-tools request fits the model's context."""
    estimate = _prompt_estimate(ws.registry.schemas(card.tools), task, _mode(ws))
    return estimate + Budget().max_output_tokens <= options.context_tokens


def _prompt_estimate(schemas: Sequence[dict[str, Any]], task: SelectionTask, mode: str) -> int:
    return estimate_tokens(_tools_text(schemas, mode) + task.task) + SYSTEM_ESTIMATE


SYSTEM_ESTIMATE = 250  # tokens of a card's system prompt around its tools (measured: 200-300)


def _mode(ws: Workspace) -> str:
    """The tool mode the runs ask in: the settings', else auto (native first)."""
    return ws.settings.tool_mode or "auto"


def _tools_text(schemas: Sequence[dict[str, Any]], mode: str) -> str:
    """The tools as the request carries them: in the prompt (json mode) or as JSON schemas."""
    if mode == "json":
        return tools_section(list(schemas))
    return json.dumps(list(schemas), ensure_ascii=False)


Request = tuple[str, tuple[str, ...], str]  # what makes a request: card id, its tools, task id


class _Asked:
    """Each distinct request is asked once per bench run, and its answer shared.

    The same card, tools and task make the same prompt, whatever the arm or size; asking again
    would only cost time (and swap a sample). The request goes out under the run of the first
    job in the bench's order that makes it, so a recording agrees at any `--concurrency`.
    """

    def __init__(self) -> None:
        self._answers: dict[Request, Future[Digest]] = {}
        self._owners: dict[Request, str] = {}  # the run label each request goes out under
        self._lock = threading.Lock()

    def own(self, jobs: Sequence[_Job]) -> None:
        """Name each request of `jobs` after the first job, in the bench's order, that makes it."""
        for job in jobs:
            if job.card is not None and job.fits:
                self._owners.setdefault(_request_of(job), _run_label(job))

    def digest(self, job: _Job, ask: Callable[[str], Digest]) -> Digest:
        """The Digest of this job's request: the first job to come asks, later ones wait."""
        key = _request_of(job)
        with self._lock:
            answer = self._answers.get(key)
            first = answer is None
            if answer is None:
                answer = self._answers[key] = Future()
        if first:
            try:
                answer.set_result(ask(self._owners.get(key, _run_label(job))))
            except BaseException as exc:  # the jobs waiting on it stop with the same error
                answer.set_exception(exc)
                raise
        return answer.result()


def _request_of(job: _Job) -> Request:
    assert job.card is not None
    return (job.card.id, job.card.tools, job.task.id)


def _run_label(job: _Job) -> str:
    """`<task>/<arm>/<universe>`."""
    return f"{job.task.id}/{job.arm}/{job.universe.label}"


def _run(
    ws: Workspace, session: Session, job: _Job, options: ScaleOptions, asked: _Asked
) -> RunRecord:
    """Run one job to its first call (or judge its abstention); never run a tool."""
    schemas = ws.registry.schemas(job.card.tools) if job.card is not None else []
    mode = _mode(ws)
    schema_tokens = estimate_tokens(_tools_text(schemas, mode)) if schemas else 0
    if job.card is None or not job.fits:
        verdict = judge_call(job.task.expected, None, None)
        # abstaining sends nothing (0 tokens); a prompt that does not fit counts its estimate
        unsent = 0 if job.card is None else _prompt_estimate(schemas, job.task, mode)
        return _record(job, verdict, None, schema_tokens, unsent)
    digest = asked.digest(job, lambda label: _invoke(ws, session, job, options, label))
    first = digest.calls[0] if digest.calls else None
    if first is None and digest.status == "failed":  # the server failed: the model chose nothing
        verdict = CallVerdict("failed", f"the run failed before the model chose: {digest.reason}")
    else:
        name, arguments = (first.name, first.arguments) if first else (None, None)
        verdict = judge_call(job.task.expected, name, arguments)
    return _record(job, verdict, digest, schema_tokens, 0)


def _invoke(
    ws: Workspace, session: Session, job: _Job, options: ScaleOptions, label: str
) -> Digest:
    assert job.card is not None
    return invoke(
        job.card,
        make_brief(job.task.task),
        registry=ws.registry,
        provider=session.provider(label),
        model=model_for(ws.settings, job.card.model),
        tool_mode=ws.settings.tool_mode,
        wall_scale=options.wall_scale,
        observer=session.observe(label),
        stop_at_first_call=True,
        temperature=ws.settings.temperature,
    )


def _record(
    job: _Job, verdict: CallVerdict, digest: Digest | None, schema_tokens: int, unsent: int
) -> RunRecord:
    """The run's record; `unsent` is the prompt tokens of a request never sent (0: none)."""
    cost = digest.cost if digest is not None else Cost(tokens_in=unsent)  # nothing was sent
    first = digest.calls[0] if digest is not None and digest.calls else None
    return RunRecord(
        task=job.task.id,
        relevant=job.task.card is not None,
        size=job.universe.size,
        universe=job.universe.label,
        tools=job.universe.tools,
        arm=job.arm,
        status=verdict.status,
        reason=verdict.reason,
        called=first.name if first else None,
        card=job.card.id if job.card is not None else None,
        offered_cards=job.offered if job.card is not None else (),
        routed_right=None if job.arm not in ("tiny", "hybrid") else job.routed == job.task.card,
        in_top=None if job.arm not in ("top-k", "hybrid") else job.task.card in job.ranked,
        fits=job.fits,
        offered=len(job.card.tools) if job.card is not None else 0,
        prompt_tokens=cost.tokens_in,
        schema_tokens=schema_tokens,
        completion_tokens=cost.tokens_out,
        wall_seconds=cost.wall_seconds,
        ghost_calls=cost.ghost_calls,
        digest_status=digest.status if digest is not None else "abstain",
    )
