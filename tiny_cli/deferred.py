"""Imports tiny defers: httpx's command-line client stays unloaded until someone runs it.

`lazy_module` is the general form: a module whose body runs when a name is first read from it;
`stand_in` is the form an `import` statement finds without running the module.
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
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

HTTPX_CLI = "httpx._main"
_SWAP = threading.Lock()
STAND_IN = "__tiny_stand_in__"  # marks the stand-in module


def defer_httpx_cli() -> None:
    """Let `import httpx` skip its CLI module until `httpx.main()` (or the module) is used."""
    if "httpx" not in sys.modules:  # imported already: too late to defer
        stand_in(HTTPX_CLI, main=_main)


def httpx_cli() -> ModuleType:
    """Return httpx's real CLI module, imported (click, pygments, rich) in the stand-in's place."""
    return real_module(HTTPX_CLI)


def _main(*args: Any, **kwargs: Any) -> Any:
    """`httpx.main`: run httpx's command-line client."""
    return httpx_cli().main(*args, **kwargs)


def stand_in(name: str, package: bool = False, **names: Any) -> ModuleType:
    """Put a stand-in for module `name` into sys.modules (unless it is imported already).

    `import name` then finds the stand-in and runs nothing; `names` are its own. Any other
    name read from it imports the real module in its place (PEP 562). importlib's LazyLoader
    cannot do this: an `import` of a lazy module reads its `__spec__`, which runs its body.
    A `package`'s `__path__` loads it too, so that its submodules can still be imported.
    """
    if name in sys.modules:
        return sys.modules[name]
    module = ModuleType(name, f"Stand-in for {name}: the real module loads when a name is read.")

    def __getattr__(attr: str) -> Any:  # the module-level hook of PEP 562
        # __file__, __spec__…: tools that scan sys.modules must not load it
        if attr.startswith("__") and not (package and attr == "__path__"):
            raise AttributeError(f"module {name!r} has no attribute {attr!r}")
        return getattr(real_module(name), attr)

    vars(module).update({STAND_IN: True, "__getattr__": __getattr__, **names})
    sys.modules[name] = module
    return module


def real_module(name: str) -> ModuleType:
    """Return module `name`, imported in its stand-in's place if there is one."""
    with _SWAP:  # two threads must not both take the stand-in out (one would drop the other's)
        module = sys.modules.get(name)
        if module is not None and vars(module).get(STAND_IN):
            del sys.modules[name]
    return importlib.import_module(name)  # waits on the import lock if another thread imports


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
