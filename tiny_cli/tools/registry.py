"""Tools: the registry of every callable tool, the @tool decorator, and user tool modules.

A tool's description and schema come from its signature and docstring (`tiny_cli.tools.specs`),
or, for a built-in, from its literal schema: a `LazyTool`, made only when a run asks for it.
"""

from __future__ import annotations

import copy
import hashlib
import importlib
import importlib.util
import inspect
import json
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pydantic

from tiny_cli.errors import ConfigError, ToolCallError, ToolError
from tiny_cli.secrets import scrubber
from tiny_cli.setting_rules import is_tool_file
from tiny_cli.text import wrong_kind
from tiny_cli.tools.args_check import built_schema_problem, fast_pass
from tiny_cli.tools.specs import Spec, one_line, spec_of

__all__ = [
    "LazyTool",
    "Registry",
    "Tool",
    "ToolSource",
    "declared_tool",
    "load_tool_module",
    "tool",
]


@dataclass(frozen=True)
class Tool:
    """A named callable with the JSON Schema of its arguments; `writes` marks side effects."""

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any]
    writes: bool = False
    # The spec behind `parameters`: its pydantic model turns JSON values into the declared
    # types (5.0 for an int parameter is 5), as the schema check alone does not.
    spec: Spec | None = field(default=None, repr=False)

    @property
    def arguments_model(self) -> type[pydantic.BaseModel] | None:
        """The pydantic model that types the arguments (built on first use), if any."""
        return self.spec.model if self.spec is not None else None

    def schema(self) -> dict[str, Any]:
        """Return the OpenAI `tools` entry for this tool."""
        return _schema_entry(self.name, self.description, self.parameters)

    def __call__(self, /, **arguments: Any) -> Any:  # `self` may be an argument's name too
        """Call the tool with keyword arguments converted to the types its signature declares."""
        if self.spec is not None and not self._as_given(arguments):
            arguments = self._typed(self.spec.model, arguments)
        return self.func(**arguments)

    def _as_given(self, arguments: dict[str, Any]) -> bool:
        """Whether the model would leave the arguments unchanged, so it need not be built."""
        assert self.spec is not None
        known = self.parameters.get("properties", {})
        return (
            self.spec.plain
            and all(name in known for name in arguments)
            and not _has_number(arguments)
            and fast_pass(self.parameters, arguments)
        )

    @staticmethod
    def _typed(model: type[pydantic.BaseModel], arguments: dict[str, Any]) -> dict[str, Any]:
        try:
            typed = model.model_validate(arguments)
        except pydantic.ValidationError as exc:
            first = exc.errors()[0]
            where = ".".join(map(str, first["loc"])) or "arguments"
            raise ToolCallError(f"invalid arguments: {where}: {first['msg']}") from None
        return {f.alias or name: getattr(typed, name) for name, f in model.model_fields.items()}


def _has_number(value: Any) -> bool:
    """Whether a JSON value holds an int or a float anywhere (a bool is neither)."""
    if isinstance(value, dict):
        return any(_has_number(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_number(v) for v in value)
    return type(value) in (int, float)


def _schema_entry(name: str, description: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": name, "description": description, "parameters": parameters},
    }


@dataclass(frozen=True)
class LazyTool:
    """A built-in tool known before it exists: its literal schema now, its object later."""

    method: Callable[..., Any]  # a function of a class
    owner: Callable[[], Any]  # makes the object it is bound to, importing what the tool needs
    described: Mapping[str, Any]  # the literal `description` and `parameters` the model is shown
    writes: bool = False

    @property
    def name(self) -> str:
        """Return the name the model calls the tool by (the method's)."""
        return self.method.__name__

    def spec(self) -> Spec:
        """Return the literal spec; its arguments model is built on first use (and plain)."""
        schema = json.dumps(self.described["parameters"])
        return Spec(self.name, self.described["description"], schema, True, self._model)

    def _model(self) -> type[pydantic.BaseModel]:
        return spec_of(self.method, self.name, bound=True).model

    def schema(self) -> dict[str, Any]:
        """Return the OpenAI `tools` entry, without making the tool."""
        spec = self.spec()
        return _schema_entry(spec.name, spec.description, spec.parameters())

    def build(self) -> Tool:
        """Make the tool: its owner, and the method bound to it."""
        spec = self.spec()
        func = getattr(self.owner(), self.method.__name__)
        return Tool(spec.name, spec.description, spec.parameters(), func, self.writes, spec)


def declared_tool(name: str, description: str, parameters: dict[str, Any]) -> Tool:
    """A tool a card declares with a schema and no implementation: a call is told it cannot run."""

    def refuse(**_: Any) -> Any:
        raise ToolCallError(f"{name} is declared only: it has no implementation to run")

    return Tool(name, description, parameters, refuse)


class ToolSource(Protocol):
    """Tools that exist only once something is started (an MCP server): bound on demand."""

    def owns(self, name: str) -> bool:
        """Say whether `name` is one of this source's tools (without starting anything)."""

    def bind(self, names: Sequence[str], seconds: float, may_write: bool) -> None:
        """Make `names` ready within `seconds`; raise ToolServerError when they cannot be."""

    def bound(self, name: str) -> Tool | None:
        """Return the tool `name` if it is ready, else None (never starts anything)."""


class Registry(Mapping[str, Tool]):
    """Every tool that exists, by name; cards pick their allowlist from it.

    A `LazyTool` is made on first lookup, once (`schemas`, `writes` and `in` make none). A
    `ToolSource`'s tools (MCP servers) are found once bound, by the name the card lists.
    """

    def __init__(self, tools: Iterable[Tool | LazyTool] = (), origin: str | None = None) -> None:
        self._entries: dict[str, Tool | LazyTool] = {}  # a LazyTool until it is made
        self._origins: dict[str, str] = {}  # every name, in the order added
        self._lock = threading.Lock()
        self.sources: list[ToolSource] = []
        self._seen_by: str | None = None  # the card this view is for (`with_declared`)
        if not isinstance(tools, Iterable):
            raise wrong_kind("tools", "a list of tools (made with @tool)", tools)
        for t in tools:
            self.add(t, origin)

    def add_source(self, source: ToolSource) -> None:
        """Add tools that are bound on demand (see `bind`)."""
        self.sources.append(source)

    def bind(self, names: Iterable[str], seconds: float, may_write: bool = False) -> None:
        """Start what the source tools among `names` need, within `seconds` per source."""
        names = list(names)
        for source in self.sources:
            mine = [n for n in names if source.owns(n)]
            if mine:
                source.bind(mine, seconds, may_write)

    def add(self, tool: Tool | LazyTool, origin: str | None = None) -> None:
        """Register a tool from `origin` (default: where it was defined); a clash is a ToolError."""
        if not isinstance(tool, Tool | LazyTool):  # a tool's name, say: it has none to look up
            raise wrong_kind("tools", "tools (made with @tool)", tool)
        if self._entries.get(tool.name) is tool:  # a module that imports another's tool
            return
        origin = origin or _defined_in(tool)
        if tool.name in self._origins:
            first = self._origins[tool.name]
            raise ToolError(
                f"tool {tool.name!r} from {origin} clashes with tool {tool.name!r} from {first}; "
                "rename one of them (@tool(name=...))"
            )
        self._entries[tool.name] = tool
        self._origins[tool.name] = origin

    def with_declared(self, functions: Sequence[Mapping[str, Any]], origin: str) -> Registry:
        """This registry as one card sees it: the functions it declares win their names there."""
        tools = [
            declared_tool(f["name"], f.get("description", ""), f["parameters"]) for f in functions
        ]
        view = copy.copy(self)  # shares the sources, the lock and every tool made so far
        view._seen_by = origin  # a tool the card lists and this registry lacks is named with it
        if tools:
            view._entries = {**self._entries, **{t.name: t for t in tools}}
            view._origins = {**self._origins, **{t.name: origin for t in tools}}
        return view

    def origin(self, name: str) -> str:
        """Return where the tool `name` came from ('built-in', a tool module spec, a function)."""
        return self._origins[name]

    def entry(self, name: str) -> Tool | LazyTool:
        """Return what was added as `name`: the Tool, or the LazyTool if it is not made yet."""
        return self._entries[name]

    def schemas(self, names: Iterable[str]) -> list[dict[str, Any]]:
        """Return the OpenAI tool schemas of `names`, in that order (making no LazyTool)."""
        names = list(names)
        missing = [n for n in names if n not in self._origins and self._source_of(n) is None]
        if missing:  # a caller's registry without the card's tools: say so, not KeyError
            raise self._missing(missing[0])
        return [(self[n] if self._source_of(n) else self._entries[n]).schema() for n in names]

    def _missing(self, name: str) -> ConfigError:
        whose = f"{self._seen_by} lists tool {name!r}" if self._seen_by else f"tool {name!r}"
        return ConfigError(
            f"{whose}, which the registry given does not hold; pass a registry with it "
            "(a workspace's registry holds every tool its cards name)",
            field="registry",
        )

    def writes(self) -> dict[str, bool]:
        """Map every tool name to whether it writes (what card validation needs)."""
        return {name: self._entries[name].writes for name in self._origins}

    def _source_of(self, name: str) -> ToolSource | None:
        """The source that owns `name`, if any: it decides alone, whatever is registered."""
        return next((s for s in self.sources if s.owns(name)), None)

    def __getitem__(self, name: str) -> Tool:
        source = self._source_of(name)
        if source is not None:
            found = source.bound(name)
            if found is None:
                raise KeyError(name)
            return found
        entry = self._entries[name]
        if isinstance(entry, Tool):
            return entry
        with self._lock:  # runs share a registry (bench threads, `tiny serve`): make it once
            entry = self._entries[name]
            if isinstance(entry, LazyTool):
                entry = self._entries[name] = entry.build()
            return entry

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        source = self._source_of(name)
        if source is not None:
            return source.bound(name) is not None
        return name in self._origins  # without making it

    def __iter__(self) -> Iterator[str]:
        return iter(self._origins)

    def __len__(self) -> int:
        return len(self._origins)


def _defined_in(tool: Tool | LazyTool) -> str:
    if isinstance(tool, LazyTool):
        return "built-in"
    func = tool.func
    module, qualname = getattr(func, "__module__", None), getattr(func, "__qualname__", None)
    return f"{module}.{qualname}" if module and qualname else repr(func)


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    writes: bool = False,
) -> Any:
    """Turn a typed, documented function into a Tool: @tool, @tool(writes=True, name="name")."""
    if name is not None and not isinstance(name, str):
        raise ToolError(f"@tool: name must be a str, got {type(name).__name__}")
    if func is not None and not callable(func):  # @tool("name") too: one way to name a tool
        raise ToolError(
            f'@tool: decorates a function, got {type(func).__name__}; name it as @tool(name="name")'
        )

    def wrap(f: Callable[..., Any]) -> Tool:
        _is_function(f)
        _runs_when_called(f)
        spec = spec_of(f, name or f.__name__)
        parameters = spec.parameters()
        problem = built_schema_problem(parameters)
        if problem:  # every call would fail its argument check: say so when the module loads
            raise ToolError(f"@tool {spec.name}: its argument schema cannot be applied: {problem}")
        return Tool(spec.name, spec.description, parameters, f, writes, spec)

    return wrap(func) if callable(func) else wrap


def _is_function(f: Callable[..., Any]) -> None:
    """Refuse a callable that is no function (a functools.partial, an object with __call__):
    it has no name, docstring or type hints of its own to describe the tool."""
    if inspect.isfunction(f) or inspect.ismethod(f):
        return
    kind = type(f)
    what = kind.__qualname__
    if kind.__module__ != "builtins":
        what = f"{kind.__module__}.{what}"
    raise ToolError(
        f"@tool: decorates a function (def), got {what}; write a def that calls it, "
        "with the docstring and type hints the model is shown"
    )


def _runs_when_called(f: Callable[..., Any]) -> None:
    """Refuse a function whose call only makes a coroutine or a generator: tiny never runs it."""
    if inspect.iscoroutinefunction(f) or inspect.isasyncgenfunction(f):
        kind = "an async function"
    elif inspect.isgeneratorfunction(f):
        kind = "a generator function"
    else:
        return
    what = getattr(f, "__qualname__", repr(f))
    raise ToolError(
        f"@tool {what}: {kind} cannot be a tool, as tiny would never run its body; "
        "make it a plain def that returns its result"
    )


def load_tool_module(spec: str) -> list[Tool]:
    """Import a module (dotted name or .py path) and return every Tool defined at its top."""
    module = _import(spec.strip())
    found = list({id(v): v for v in vars(module).values() if isinstance(v, Tool)}.values())
    if not found:
        raise ToolError(f"{spec}: no tools found; decorate functions with @tiny_cli.tools.tool")
    return found


# --- helpers ------------------------------------------------------------------------------


def _import(spec: str) -> Any:
    path = Path(spec)
    if is_tool_file(spec):
        if not path.is_file():
            raise ToolError(f"{spec}: no such tool module file")
        # Named by a hash of its path (two my_tools.py must not clash), size and time: it runs
        # once per process, as a dotted name does, unless it changed (its import may print)
        stat = path.stat()
        key = f"{path.resolve()}\0{stat.st_size}\0{stat.st_mtime_ns}"
        name = f"tiny_user_tools_{hashlib.sha1(key.encode()).hexdigest()[:12]}"
        if name in sys.modules:
            return sys.modules[name]
        mod_spec = importlib.util.spec_from_file_location(name, path)
        assert mod_spec is not None and mod_spec.loader is not None  # a .py file always has one
        loader, module = mod_spec.loader, importlib.util.module_from_spec(mod_spec)
        sys.modules[mod_spec.name] = module  # dataclasses and pickling look the module up here
        try:
            _run(spec, lambda: loader.exec_module(module))
        except ToolError:
            del sys.modules[mod_spec.name]
            raise
        return module
    return _run(spec, lambda: importlib.import_module(spec))


def _run(spec: str, load: Callable[[], Any]) -> Any:
    try:
        return load()
    except ToolError as exc:
        raise _import_error(spec, str(exc)) from exc
    except SystemExit as exc:  # would end `tiny validate` with its code, silently
        raise _import_error(spec, f"called sys.exit({exc.code!r}) while being imported") from None
    except Exception as exc:  # user code: report it as one line, not a traceback
        raise _import_error(
            spec, f"failed to import: {type(exc).__name__}: {one_line(exc)}"
        ) from exc


def _import_error(spec: str, problem: str) -> ToolError:
    return ToolError(scrubber().text(f"{spec}: {problem}"))  # user code's words may hold a key
