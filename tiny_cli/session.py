"""Session: the set-up every face (invoke, delegate, bench, serve) makes around its runs.

A session holds where model answers come from (live, recorded or replayed), who observes each
run (the run log, plus what the face adds) and the artifact store, which share one scrubber.
`RouteBook` keeps the routing decisions a recording used in its header: a replay routes as
recorded, never again (an embedding's last digits differ from one CPU to another).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeGuard

from tiny_cli.digest import Digest
from tiny_cli.errors import ConfigError, TinyWarning
from tiny_cli.events import Observer, fan_out
from tiny_cli.provider.client import Provider
from tiny_cli.provider.factory import Replays, endpoint_host, open_exchanges
from tiny_cli.provider.replay import ExchangeSource, Replayer
from tiny_cli.runs.log import RunLog
from tiny_cli.secrets import Scrubber, scrubber
from tiny_cli.setting_rules import check_tracing
from tiny_cli.settings import Settings
from tiny_cli.text import printable, write_call
from tiny_cli.tools.artifacts import ArtifactStore

if TYPE_CHECKING:
    from tiny_cli.telemetry import Tracing

__all__ = [
    "Observe",
    "ObserverFor",
    "RouteBook",
    "RouteEntry",
    "Session",
    "open_session",
    "write_question",
]

ObserverFor = Callable[[str], Observer]
"""The observer of one run, given its label (e.g. `invoke`, `onboarding/tiny/0`)."""


class Observe(Protocol):
    """A session's observers of one run: by its label, with its `goal` (the run log keeps it
    even for an abstain) and a caller's W3C `trace` context, which the run's spans continue."""

    def __call__(
        self, run: str, goal: str = "", trace: Mapping[str, str] | None = None
    ) -> Observer:
        """Return the observer of one run."""
        ...


@dataclass(frozen=True)
class Session:
    """One command's run set-up: the exchange source, the observers and the artifact store."""

    command: str
    exchanges: ExchangeSource
    artifacts: ArtifactStore
    observe: Observe
    log: RunLog | None = None  # None: the run log is off
    tracing: Tracing | None = None  # None: tracing is off

    def for_caller(self, digest: Digest) -> Digest:
        """Return the Digest as the caller sees it: the keys the stores scrub, redacted."""
        return digest.scrubbed(self.artifacts.scrub.for_caller())

    @contextmanager
    def traced(self, name: str, **attributes: Any) -> Iterator[None]:
        """Put the runs inside the block under one span `name` (the bench's) when tracing."""
        with self.tracing.span(name, attributes) if self.tracing is not None else nullcontext():
            yield

    def recorded(self) -> list[int]:
        """Return the ids the run log gave this session's runs so far, oldest first."""
        return self.log.recorded() if self.log is not None else []

    def provider(self, run: str) -> Provider:
        """Return the provider for one run (a recording labels its exchanges with `run`)."""
        return self.exchanges.for_run(run)


# --- routing decisions, kept in a recording's header ---------------------------------------


@dataclass(frozen=True)
class RouteEntry:
    """One routing decision as a recording keeps it: the chosen card (None: abstain) and the
    candidates, best first; score, threshold and hybrid's `clear` verdict when it says them."""

    agent: str | None
    candidates: tuple[tuple[str, float], ...]
    score: float | None = None
    threshold: float | None = None
    clear: bool | None = None
    # passed through, e.g. `taught`: any JSON a header holds (lists, objects)
    more: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def made(
        cls,
        agent: str | None,
        candidates: Sequence[Any],
        score: float,
        threshold: float,
        **more: Any,
    ) -> RouteEntry:
        """A decision routed live: `candidates` are the router's (agent_id, score)."""
        pairs = tuple((c.agent_id, float(c.score)) for c in candidates)
        return cls(agent, pairs, score, threshold, more=more)

    @classmethod
    def read(cls, raw: Any, cards: Collection[str]) -> RouteEntry | None:
        """`raw` from a recording's header; None when it is not a decision among `cards`."""
        if not _usable(raw, cards):
            return None
        pairs = tuple((c[0], c[1]) for c in raw["candidates"])
        more = {k: v for k, v in raw.items() if k not in _FIELDS}
        return cls(
            raw["agent"], pairs, raw.get("score"), raw.get("threshold"), raw.get("clear"), more
        )

    def to_json(self) -> dict[str, Any]:
        """The decision as the header keeps it: the fields it says, in this order, then `more`."""
        said = {"score": self.score, "threshold": self.threshold, "clear": self.clear}
        said = {k: v for k, v in said.items() if v is not None}
        pairs = [[agent, score] for agent, score in self.candidates]
        return {"agent": self.agent, "candidates": pairs, **said, **self.more}

    @property
    def taught(self) -> bool:
        """Whether the router's learned examples put the task out of scope (a delegate's)."""
        return self.more.get("taught") is True


_FIELDS = ("agent", "candidates", "score", "threshold", "clear")


class RouteBook:
    """The routing decisions of one command (a bench, a delegate): from its recording on
    replay, kept for a recording, keyed by what was routed (a bench's task id, a goal)."""

    def __init__(self, exchanges: ExchangeSource | None) -> None:
        recorded = exchanges.recorded("routes") if exchanges is not None else None
        self._recorded: Mapping[str, Any] = recorded if isinstance(recorded, dict) else {}
        self._exchanges = exchanges
        self._made: dict[str, RouteEntry] = {}

    def get(self, key: str, cards: Collection[str]) -> RouteEntry | None:
        """The recorded decision for `key`, kept again for this recording; None: routed live."""
        # none recorded, not a decision (a header edited by hand), or a card not in `cards`
        entry = RouteEntry.read(self._recorded.get(key), cards)
        if entry is not None:
            self._made[key] = entry
        return entry

    def keep(self, key: str, entry: RouteEntry) -> RouteEntry:
        """Keep a decision made live."""
        self._made[key] = entry
        return entry

    def used(self, key: str) -> RouteEntry | None:
        """The decision this command used for `key`: the recorded one, or the one made live."""
        return self._made.get(key)

    def save(self) -> None:
        """Note the decisions in the recording's header (if this run writes one)."""
        if self._exchanges is not None:
            made = {key: entry.to_json() for key, entry in sorted(self._made.items())}
            self._exchanges.note("routes", made)

    def first_exchange(self, run: str) -> dict[str, Any] | None:
        """The replayed recording's first exchange of `run`: the evidence of what it offered."""
        return self._exchanges.first_exchange(run) if self._exchanges is not None else None

    def replaying(self, arm: str) -> bool:
        """Whether this replays a recording whose runs include arm `arm`'s."""
        runs = self._exchanges.runs() if isinstance(self._exchanges, Replayer) else ()
        return any(f"/{arm}/" in run for run in runs)


def _usable(entry: Any, cards: Collection[str]) -> TypeGuard[dict[str, Any]]:
    """Whether `entry` is a routing decision among `cards`: agent, [id, score] candidates."""
    pairs = entry.get("candidates") if isinstance(entry, dict) else None
    if not pairs or not isinstance(pairs, list) or "agent" not in entry:
        return False
    if not all(isinstance(c, list) and len(c) == 2 for c in pairs):
        return False
    names = [c[0] for c in pairs] + ([] if entry["agent"] is None else [entry["agent"]])
    numbers = [entry.get("score", 0.0), entry.get("threshold", 0.0), *(c[1] for c in pairs)]
    return (
        all(isinstance(n, str) and n in cards for n in names)
        and all(map(_finite, numbers))
        and isinstance(entry.get("clear", False), bool)
    )


def _finite(x: Any) -> bool:
    """A number a score can be: no bool, no NaN or infinity (a header edited by hand)."""
    return isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x)


def write_question(
    card_id: str, tool: str, arguments: Mapping[str, Any], scrub: Callable[[str], str]
) -> str:
    """Return the question a write call asks: the exact call, the known secrets `scrub`bed."""
    # a model may copy the key a page held into a call
    return f"{printable(card_id)} wants to write: {scrub(write_call(tool, arguments))}"


@contextmanager
def open_session(
    settings: Settings,
    command: str,
    *,
    record: Path | None = None,
    replay: Replays = None,
    resume: Sequence[Path] = (),
    log: bool = True,
    watchers: Sequence[ObserverFor] = (),  # observe every run beside the log
    handles: Sequence[str] = (),  # an unknown artifact handle stops here, before any model call
    upgrade: bool = False,
) -> Iterator[Session]:
    """Open the exchanges and the run log (unless `log` or the settings turn it off)."""
    scrub = scrubber(settings.api_key)
    store = ArtifactStore(settings.home, scrub)
    for handle in handles:
        store.get(handle)
    with ExitStack() as stack:
        # entered first, so closed last: every run's spans are ended before the export
        tracing = _tracing(stack, settings, scrub) if settings.tracing else None
        wanted = log and settings.log_runs
        runlog = _run_log(stack, settings, scrub) if wanted else None
        # entered after the log, so closed before it: after Ctrl-C a recording is saved at
        # once, not after the log's wait for its queued writes (the 2 s net may end it first)
        opened = open_exchanges(
            settings, record=record, replay=replay, resume=resume, upgrade=upgrade
        )
        exchanges = stack.enter_context(opened)
        observe = _fanned(runlog, command, endpoint_host(settings.base_url), watchers, tracing)
        yield Session(command, exchanges, store, observe, runlog, tracing)


def _run_log(stack: ExitStack, settings: Settings, scrub: Scrubber) -> RunLog:
    """Open the run log, closed with `stack`; a failed write is a TinyWarning: the run stands."""
    runlog = RunLog.open(settings.home, scrub)

    def close(kind: Any, exc: Any, tb: Any) -> bool:
        try:
            runlog.__exit__(kind, exc, tb)
        except ConfigError as failure:
            _warn(str(failure))
        return False

    stack.push(close)
    return runlog


def _tracing(stack: ExitStack, settings: Settings, scrub: Scrubber) -> Tracing | None:
    """Start tracing (closed, and exported, when the session ends); without the SDK, warn. The
    OTEL_* variables are checked only here, where the SDK is there to read them."""
    try:  # the module imports the SDK: only when tracing is on
        from tiny_cli.telemetry import open_tracing
    except ImportError:
        _warn("tracing is on but OpenTelemetry is not installed: pip install 'tiny-cli[otel]'")
        return None
    except ValueError:  # the SDK reads a span limit as it loads: the check names the variable
        check_tracing(settings.tracing, os.environ)
        raise
    check_tracing(settings.tracing, os.environ)
    tracing = open_tracing(settings, scrub)

    def close() -> None:
        if not tracing.close():
            unsent = "spans not sent by then are lost"
            _warn(f"tracing: stopped waiting for the span export after {tracing.wait:g}s; {unsent}")

    stack.callback(close)
    return tracing


def _warn(message: str) -> None:
    """Warn with a TinyWarning: the face (or the library's caller) decides how it shows."""
    warnings.warn(message, TinyWarning, stacklevel=2)  # the line in _tracing that said it


def _fanned(
    runlog: RunLog | None,
    command: str,
    endpoint: str,
    watchers: Sequence[ObserverFor],
    tracing: Tracing | None,
) -> Observe:
    """Return the observers of one run: the run log's, then the watchers', then its spans."""

    def observe(run: str, goal: str = "", trace: Mapping[str, str] | None = None) -> Observer:
        logged = [runlog.observer(command, run, endpoint, goal)] if runlog is not None else []
        traced = tracing.observer(run, trace) if tracing is not None else None
        return fan_out(*logged, *(watch(run) for watch in watchers), traced)

    return observe
