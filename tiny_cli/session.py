"""Session: the set-up every face makes around its runs, written once.

A session holds where model answers come from (live, recorded or replayed), who observes each
run (the run log, plus what the face adds, such as the live view) and the artifact store.
`tiny invoke`, `tiny delegate`, `tiny bench` and `tiny serve` all open one; the Brief a face
builds from its options comes from `build_brief`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from tiny_cli.digest import Brief, load_brief, make_brief
from tiny_cli.errors import ConfigError
from tiny_cli.events import Observer, fan_out
from tiny_cli.provider.client import Provider
from tiny_cli.provider.factory import endpoint_host, open_exchanges
from tiny_cli.provider.replay import ExchangeSource
from tiny_cli.settings import Settings
from tiny_cli.tools.artifacts import ArtifactStore

__all__ = ["ObserverFor", "Session", "artifact_store", "build_brief", "open_session"]

ObserverFor = Callable[[str], Observer]
"""The observer of one run, given its label (e.g. `invoke`, `onboarding/tiny/0`)."""


@dataclass(frozen=True)
class Session:
    """One command's run set-up: the exchange source, the observers and the artifact store."""

    command: str
    exchanges: ExchangeSource
    artifacts: ArtifactStore
    observe: ObserverFor

    def provider(self, run: str, card: str) -> Provider:
        """Return the provider for one run (a recording labels its exchanges with `run`)."""
        return self.exchanges.for_run(run, card)


@contextmanager
def open_session(
    settings: Settings,
    command: str,
    *,
    record: Path | None = None,
    replay: Path | None = None,
    log: bool = True,
    watchers: Sequence[ObserverFor] = (),
    on_log_error: Callable[[str], None] | None = None,
    handles: Sequence[str] = (),
) -> Iterator[Session]:
    """Open the exchanges and the run log (unless `log` or the settings turn it off).

    `watchers` observe every run beside the log. A run log that fails while closing is
    reported to `on_log_error` (a warning: the runs happened), else raised. An unknown
    artifact handle in `handles` stops here, before any model call.
    """
    store = artifact_store(settings, handles)
    with ExitStack() as stack:
        exchanges = stack.enter_context(open_exchanges(settings, record=record, replay=replay))
        parts = list(watchers)
        if log and settings.log_runs:
            parts.insert(0, _run_log(stack, settings, command, on_log_error))
        yield Session(command, exchanges, store, _fanned(parts))


def artifact_store(settings: Settings, handles: Sequence[str] = ()) -> ArtifactStore:
    """Return the store under the data directory; an unknown handle raises ConfigError."""
    store = ArtifactStore(settings.home)
    for handle in handles:
        store.get(handle)
    return store


def build_brief(
    task: str | None,
    path: Path | None = None,
    must_return: Sequence[str] = (),
    inputs: Mapping[str, str] | None = None,
    hint: str | None = None,
    max_output_tokens: int | None = None,
) -> Brief:
    """Build the Brief from a face's options: a brief file, with the options added or winning."""
    base = load_brief(path, task) if path else make_brief(task or "")
    brief = make_brief(
        base.goal,
        [*base.must_return, *must_return],
        {**base.inputs, **(inputs or {})},
        hint if hint is not None else base.context_hint,
        max_output_tokens or base.max_output_tokens,
    )
    return replace(brief, notes=tuple(dict.fromkeys(base.notes + brief.notes)))


def _run_log(
    stack: ExitStack, settings: Settings, command: str, on_error: Callable[[str], None] | None
) -> ObserverFor:
    from tiny_cli.runs.log import RunLog  # sqlite and the scrubber: only when runs are logged

    runlog = RunLog.open(settings.home)
    stack.push(_closing(runlog, on_error))
    endpoint = endpoint_host(settings.base_url)
    return lambda run: runlog.observer(command, run, endpoint)


def _closing(runlog: Any, on_error: Callable[[str], None] | None) -> Callable[..., bool]:
    """Close the run log on the way out; with `on_error`, a failed write is only reported."""

    def close(kind: Any, exc: Any, tb: Any) -> bool:
        try:
            runlog.__exit__(kind, exc, tb)
        except ConfigError as failure:
            if on_error is None:
                raise
            on_error(str(failure))
        return False

    return close


def _fanned(parts: Sequence[ObserverFor]) -> ObserverFor:
    return lambda run: fan_out(*(part(run) for part in parts))
