"""Deadlines, not timeouts: run a blocking call and stop waiting for it when time is up.

httpx's timeouts are per phase and per read: a server that sends its headers one byte every
half second never trips a read timeout. Waiting on a worker thread bounds the whole call.
A thread cannot be killed, so the worker is abandoned; code that may run long (a folder
walk) asks `abandoned()` as it goes and stops, so the thread does not hold the interpreter
(its lock, its memory) for the rest of the process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from tiny_cli.errors import DeadlineExceeded

T = TypeVar("T")

_WORKER = threading.local()  # in a call_within worker: the event set when its caller gave up


def abandoned() -> bool:
    """Whether this thread runs a call_within call whose caller stopped waiting for it."""
    given_up: threading.Event | None = getattr(_WORKER, "given_up", None)
    return given_up is not None and given_up.is_set()


def stop_if_abandoned() -> None:
    """Raise DeadlineExceeded in a call_within worker whose caller stopped waiting for it."""
    if abandoned():
        raise DeadlineExceeded("abandoned: its caller's time ran out")


def call_within(seconds: float, call: Callable[[], T], name: str = "tiny-deadline") -> T:
    """Return `call()`, or raise DeadlineExceeded once `seconds` have passed.

    The call runs in a daemon thread, so one that hangs forever cannot keep the process
    alive; its exception, if any, is raised here. When time is up the worker is told
    (`abandoned()`), so code that checks can stop early.
    """
    outcome: dict[str, object] = {}
    given_up = threading.Event()

    def run() -> None:
        _WORKER.given_up = given_up
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    # a huge budget (a wall scale of millions) would overflow the lock's timeout: wait the most
    worker.join(min(max(0.0, seconds), threading.TIMEOUT_MAX))
    if worker.is_alive():
        given_up.set()
        raise DeadlineExceeded(f"still running after {seconds:.1f}s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
