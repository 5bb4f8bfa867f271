"""Imports tiny defers: httpx's command-line client stays unloaded until someone runs it.

`lazy_module` is the general form: a module whose body runs when a name is first read from it.
`import_numpy` imports numpy with OpenBLAS on one thread: its worker threads spin when they
start, about 0.1 s of CPU in every process, for the microseconds of linear algebra a route does.

`httpx/__init__` (0.28) imports `httpx._main`, its CLI, whenever click, pygments and rich are
installed (they are: the MCP SDK brings click, tiny brings rich), which about doubles the cost
of `import httpx` for a client that never runs that CLI. `defer_httpx_cli` puts a stand-in
for `httpx._main` into `sys.modules` before httpx is first imported: `httpx.main` is then a
function that loads the real CLI and runs it, and any other name read from the stand-in loads
the real module too, so nothing of httpx is lost, only delayed.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

HTTPX_CLI = "httpx._main"
STAND_IN = "__tiny_stand_in__"  # marks the stand-in module


def defer_httpx_cli() -> None:
    """Let `import httpx` skip its CLI module until `httpx.main()` (or the module) is used."""
    if "httpx" in sys.modules or HTTPX_CLI in sys.modules:
        return  # imported already (too late to defer), or deferred already
    stand_in = ModuleType(HTTPX_CLI, "Stand-in for httpx's CLI: loads the real one when used.")
    vars(stand_in).update({STAND_IN: True, "main": _main, "__getattr__": _getattr})
    sys.modules[HTTPX_CLI] = stand_in


def httpx_cli() -> ModuleType:
    """Return httpx's real CLI module, imported (click, pygments, rich) in the stand-in's place."""
    module = sys.modules.get(HTTPX_CLI)
    if module is None or vars(module).get(STAND_IN):
        sys.modules.pop(HTTPX_CLI, None)
        module = importlib.import_module(HTTPX_CLI)
    return module


def _main(*args: Any, **kwargs: Any) -> Any:
    """`httpx.main`: run httpx's command-line client."""
    return httpx_cli().main(*args, **kwargs)


def _getattr(name: str) -> Any:
    """Read any other name of `httpx._main` from the real module (PEP 562)."""
    if name.startswith("__"):  # __file__, __path__…: tools that scan sys.modules must not load it
        raise AttributeError(f"module {HTTPX_CLI!r} has no attribute {name!r}")
    return getattr(httpx_cli(), name)


def lazy_module(name: str) -> ModuleType:
    """Return module `name`, its body run when a name is first read from it (LazyLoader)."""
    if name in sys.modules:
        return sys.modules[name]
    import importlib.util  # here: `tiny --help` needs none of it

    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        raise ModuleNotFoundError(f"no module named {name!r}", name=name)
    spec.loader = importlib.util.LazyLoader(spec.loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


BLAS_THREADS = "OPENBLAS_NUM_THREADS"  # read once, when numpy loads OpenBLAS


def import_numpy() -> ModuleType:
    """Import numpy with OpenBLAS on one thread, unless the user set its threads."""
    if "numpy" not in sys.modules:
        with env_default(BLAS_THREADS, "1"):
            importlib.import_module("numpy")
    return sys.modules["numpy"]


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
