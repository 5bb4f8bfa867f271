"""Deadlines, not timeouts: run a blocking call and stop waiting for it when time is up.

httpx's timeouts are per phase and per read: a server that sends its headers one byte every
half second never trips a read timeout. Waiting on a worker thread bounds the whole call.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TypeVar

from tiny_cli.errors import DeadlineExceeded

T = TypeVar("T")


def call_within(seconds: float, call: Callable[[], T], name: str = "tiny-deadline") -> T:
    """Return `call()`, or raise DeadlineExceeded once `seconds` have passed.

    The call runs in a daemon thread, so one that hangs forever cannot keep the process
    alive; its exception, if any, is raised here.
    """
    outcome: dict[str, object] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=name, daemon=True)
    worker.start()
    worker.join(max(0.0, seconds))
    if worker.is_alive():
        raise DeadlineExceeded(f"still running after {seconds:.1f}s")
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]
