"""Threads: how many tiny's arithmetic runs on (one, unless you set your own), and worker
threads that put a deadline on a blocking call.

A route's linear algebra (numpy's OpenBLAS) and a query's embedding (the engine's OpenMP) are
small: extra threads only start, spin and compete with the rest of a busy machine. So numpy
loads with `OPENBLAS_NUM_THREADS=1` (`import_numpy`), and a query of at most `QUERY_BATCH_MAX`
texts is embedded on one OpenMP thread (`query_threads`); a larger batch (building card
vectors) uses one thread per core. `OPENBLAS_NUM_THREADS` or `OMP_NUM_THREADS` set by the user
wins, and a program that imported numpy before tiny keeps its own setting.

Deadlines, not timeouts: httpx's timeouts are per phase and per read, so a server that sends
its headers one byte every half second never trips one; waiting on a worker thread bounds the
whole call. A thread cannot be killed, so the worker is abandoned; code that may run long asks
`abandoned()` as it goes and stops, freeing the interpreter's lock and memory.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import ModuleType
from typing import Any, TypeVar

from tiny_cli.errors import DeadlineExceeded

BLAS_THREADS = "OPENBLAS_NUM_THREADS"  # OpenBLAS reads it once, when numpy loads it
OPENMP_THREADS = "OMP_NUM_THREADS"
QUERY_THREADS = 1
QUERY_BATCH_MAX = 8  # texts: a batch up to this size is a query, a larger one a build


def import_numpy() -> ModuleType:
    """Import numpy with OpenBLAS on one thread, unless the user set its threads."""
    if "numpy" not in sys.modules:
        with env_default(BLAS_THREADS, str(QUERY_THREADS)):
            importlib.import_module("numpy")
    return sys.modules["numpy"]


def query_threads(pools: Any, count: int) -> AbstractContextManager[object]:
    """Limit `pools` (a threadpoolctl controller) to one OpenMP thread for a query of `count`."""
    if count > QUERY_BATCH_MAX or OPENMP_THREADS in os.environ:
        return nullcontext()
    # omp_set_num_threads on the calling thread, restored on exit; it changes no other thread
    return pools.limit(limits=QUERY_THREADS, user_api="openmp")


@contextmanager
def env_default(name: str, value: str) -> Iterator[None]:
    """Set an unset environment variable for the block only; a user's own setting wins."""
    if name in os.environ:
        yield
        return
    os.environ[name] = value
    try:
        yield
    finally:
        os.environ.pop(name, None)  # tools and child processes must not inherit it


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
    """Return `call()` (run in a daemon thread), or raise DeadlineExceeded after `seconds`."""
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
