"""Threads for tiny's arithmetic: one, unless you set your own. The rule lives here.

A route's linear algebra (numpy's OpenBLAS) and a query's embedding (the engine's OpenMP)
are small: extra threads only start, spin and compete with the rest of a busy machine. So:

- numpy loads with `OPENBLAS_NUM_THREADS=1` for the import only (`import_numpy`): OpenBLAS
  starts no worker threads, and every BLAS call of the process runs on the calling thread;
- a query of at most `QUERY_BATCH_MAX` texts is embedded on one OpenMP thread
  (`query_threads`, threadpoolctl); a larger batch (building card vectors) uses the engine's
  default, one thread per core.

A thread count you set yourself wins: `OPENBLAS_NUM_THREADS` for numpy, `OMP_NUM_THREADS`
for the embedding engine. A program that imported numpy before tiny keeps its own setting.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from types import ModuleType
from typing import Any

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
    os.environ[name] = value  # what loads inside the block reads it
    try:
        yield
    finally:
        os.environ.pop(name, None)  # tools and child processes must not inherit it
