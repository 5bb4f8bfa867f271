"""Tools: the registry of every callable tool, the @tool decorator, and user tool modules."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import inspect
import re
import sys
import types
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, Union, get_args, get_origin, get_type_hints

import docstring_parser
import pydantic

from tiny_cli.errors import ToolCallError, ToolError

# What OpenAI-compatible servers accept as a function name.
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SCALAR_TYPES = (str, int, float, bool)
SUPPORTED_TYPES_HINT = (
    "str, int, float, bool, list[...], dict[str, ...], Literal[...], Optional[...], Annotated[...]"
)


@dataclass(frozen=True)
class Tool:
    """A named callable with the JSON Schema of its arguments; `writes` marks side effects."""

    name: str
    description: str
    parameters: dict[str, Any]
    func: Callable[..., Any]
    writes: bool = False
    # The pydantic model behind `parameters`: it turns JSON values into the declared types
    # (5.0 for an int parameter is 5), as the schema check alone does not.
    arguments_model: type[pydantic.BaseModel] | None = None

    def schema(self) -> dict[str, Any]:
        """Return the OpenAI `tools` entry for this tool."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }

    def __call__(self, **arguments: Any) -> Any:
        """Call the tool with keyword arguments converted to the types its signature declares."""
        if self.arguments_model is not None:
            try:
                typed = self.arguments_model.model_validate(arguments)
            except pydantic.ValidationError as exc:
                first = exc.errors()[0]
                where = ".".join(map(str, first["loc"])) or "arguments"
                raise ToolCallError(f"invalid arguments: {where}: {first['msg']}") from None
            fields = self.arguments_model.model_fields.items()
            arguments = {f.alias or name: getattr(typed, name) for name, f in fields}
        return self.func(**arguments)


def declared_tool(name: str, description: str, parameters: dict[str, Any]) -> Tool:
    """A tool a card declares with a schema and no implementation: a call is told it cannot run.

    A function-calling bench scores the first call and never runs it; anywhere else the model
    gets this answer, and the run cannot claim work that no tool did.
    """

    def refuse(**_: Any) -> Any:
        raise ToolCallError(f"{name} is declared only: it has no implementation to run")

    return Tool(name, description, parameters, refuse)


class ToolSource(Protocol):
    """Tools that exist only once something is started (an MCP server): bound on demand."""

    def owns(self, name: str) -> bool:
        """Say whether `name` is one of this source's tools (without starting anything)."""
        ...

    def bind(self, names: Sequence[str], seconds: float, may_write: bool) -> None:
        """Make `names` ready within `seconds`; raise ToolServerError when they cannot be."""
        ...

    def bound(self, name: str) -> Tool | None:
        """Return the tool `name` if it is ready, else None (never starts anything)."""
        ...


class Registry(Mapping[str, Tool]):
    """Every tool that exists, by name; cards pick their allowlist from it.

    Tools of a `ToolSource` (MCP servers) are found once bound: `bind` before a run.
    """

    def __init__(self, tools: Iterable[Tool] = (), origin: str = "built-in") -> None:
        self._tools: dict[str, Tool] = {}
        self._origins: dict[str, str] = {}
        self.sources: list[ToolSource] = []
        for t in tools:
            self.add(t, origin)

    def add_source(self, source: ToolSource) -> None:
        """Add tools that are bound on demand (see `bind`)."""
        self.sources.append(source)

    def bind(self, names: Iterable[str], seconds: float, may_write: bool = False) -> None:
        """Start what the source tools among `names` need, within `seconds` per source.

        Raises ToolServerError when a server cannot be used; `may_write` False refuses a
        source tool that writes.
        """
        for source in self.sources:
            mine = [n for n in names if n not in self._tools and source.owns(n)]
            if mine:
                source.bind(mine, seconds, may_write)

    def add(self, tool: Tool, origin: str = "built-in") -> None:
        """Register a tool; a second tool with the same name is a ToolError naming both origins."""
        if tool.name in self._tools:
            first = self._origins[tool.name]
            raise ToolError(
                f"tool {tool.name!r} from {origin} clashes with tool {tool.name!r} from {first}; "
                "rename one of them (@tool(name=...))"
            )
        self._tools[tool.name] = tool
        self._origins[tool.name] = origin

    def origin(self, name: str) -> str:
        """Return where the tool `name` came from ('built-in' or a tool module spec)."""
        return self._origins[name]

    def schemas(self, names: Iterable[str]) -> list[dict[str, Any]]:
        """Return the OpenAI tool schemas of `names`, in that order."""
        return [self[n].schema() for n in names]

    def writes(self) -> dict[str, bool]:
        """Map every tool name to whether it writes (what card validation needs)."""
        return {name: t.writes for name, t in self._tools.items()}

    def __getitem__(self, name: str) -> Tool:
        if name in self._tools:
            return self._tools[name]
        for source in self.sources:
            found = source.bound(name)
            if found is not None:
                return found
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(self._tools)

    def __len__(self) -> int:
        return len(self._tools)


def tool(
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    writes: bool = False,
) -> Any:
    """Turn a typed, documented function into a Tool; usable as @tool or @tool(writes=True)."""

    def wrap(f: Callable[..., Any]) -> Tool:
        tool_name = name or f.__name__
        if not TOOL_NAME_PATTERN.match(tool_name):
            raise ToolError(f"tool {tool_name!r}: a name is 1-64 letters, digits, '_' or '-'")
        doc = docstring_parser.parse(inspect.getdoc(f) or "")
        # Docstrings wrap at the code's line length; the model should see flowing text.
        description = _flow(doc.short_description, doc.long_description)
        if not description:
            raise ToolError(f"tool {tool_name!r} needs a docstring: the model reads it")
        model = _arguments_model(tool_name, f, doc)
        return Tool(tool_name, description, _schema(tool_name, model), f, writes, model)

    return wrap(func) if func is not None else wrap


def load_tool_module(spec: str) -> list[Tool]:
    """Import a module (dotted name or .py path) and return every Tool defined at its top."""
    module = _import(spec.strip())
    found: list[Tool] = []
    for value in vars(module).values():
        if isinstance(value, Tool) and all(value is not t for t in found):
            found.append(value)
    if not found:
        raise ToolError(f"{spec}: no tools found; decorate functions with @tiny_cli.tools.tool")
    return found


# --- helpers ------------------------------------------------------------------------------


def _arguments_model(
    tool_name: str, f: Callable[..., Any], doc: docstring_parser.Docstring
) -> type[pydantic.BaseModel]:
    """Build the arguments' model from the signature, type hints and docstring Args."""
    hints = _hints(tool_name, f)
    params = inspect.signature(f).parameters
    helps = {p.arg_name: _flow(p.description) for p in doc.params}
    unknown = sorted(set(helps) - set(params))
    if unknown:
        raise ToolError(f"tool {tool_name!r}: docstring documents unknown parameter {unknown[0]!r}")
    fields: dict[str, Any] = {}
    for i, (pname, param) in enumerate(params.items()):
        _check_param(tool_name, pname, param, hints)
        default = ... if param.default is inspect.Parameter.empty else param.default
        # Placeholder field names, the real name as alias: a parameter may be called
        # "schema" or "model_config", which would clash with pydantic's own attributes.
        field = pydantic.Field(default, alias=pname, description=helps.get(pname) or None)
        fields[f"arg{i}"] = (hints[pname], field)
    try:
        return pydantic.create_model(f"{tool_name}_arguments", **fields)
    except Exception as exc:  # pydantic's messages span lines; the user needs one
        raise ToolError(f"tool {tool_name!r}: cannot build a schema: {_one_line(exc)}") from exc


def _schema(tool_name: str, model: type[pydantic.BaseModel]) -> dict[str, Any]:
    try:
        return _clean(model.model_json_schema())
    except Exception as exc:  # pydantic's messages span lines; the user needs one
        raise ToolError(f"tool {tool_name!r}: cannot build a schema: {_one_line(exc)}") from exc


def _hints(tool_name: str, f: Callable[..., Any]) -> dict[str, Any]:
    try:
        return get_type_hints(f, include_extras=True)  # keep Annotated[..., Field(...)] bounds
    except Exception as exc:  # a broken annotation in user code is a config error
        raise ToolError(f"tool {tool_name!r}: cannot read type hints: {_one_line(exc)}") from exc


def _check_param(
    tool_name: str, pname: str, param: inspect.Parameter, hints: dict[str, Any]
) -> None:
    if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
        raise ToolError(f"tool {tool_name!r}: parameter {pname!r} must be a plain named parameter")
    if pname not in hints:
        raise ToolError(f"tool {tool_name!r}: parameter {pname!r} needs a type hint")
    if not _supported(hints[pname]):
        raise ToolError(
            f"tool {tool_name!r}: parameter {pname!r} has unsupported type "
            f"{_type_name(hints[pname])}; use {SUPPORTED_TYPES_HINT}"
        )


def _supported(hint: Any) -> bool:
    """Accept only types a model can send as JSON and a schema can describe plainly."""
    origin, args = get_origin(hint), get_args(hint)
    if hint in SCALAR_TYPES:
        return True
    if origin is Annotated:  # Annotated[int, pydantic.Field(ge=1)]: check the real type
        return _supported(args[0])
    if origin is Literal:
        return all(isinstance(a, (str, int, float, bool)) for a in args)
    if origin is list:
        return len(args) == 1 and _supported(args[0])
    if origin is dict:
        return len(args) == 2 and args[0] is str and _supported(args[1])
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return len(rest) == 1 and len(args) == 2 and _supported(rest[0])
    return False


def _flow(*parts: str | None) -> str:
    return " ".join(" ".join(filter(None, parts)).split())


def _type_name(hint: Any) -> str:
    return hint.__name__ if isinstance(hint, type) else repr(hint).replace("typing.", "")


def _clean(schema: Any) -> Any:
    """Drop pydantic's auto titles: they cost tokens and tell the model nothing."""
    if isinstance(schema, list):
        return [_clean(v) for v in schema]
    if not isinstance(schema, dict):
        return schema
    cleaned = {k: _clean(v) for k, v in schema.items() if k not in ("title", "properties")}
    if "properties" in schema:  # keys here are parameter names: a parameter may be "title"
        cleaned["properties"] = {k: _clean(v) for k, v in schema["properties"].items()}
    return cleaned


def _import(spec: str) -> Any:
    path = Path(spec)
    if path.suffix == ".py":
        if not path.is_file():
            raise ToolError(f"{spec}: no such tool module file")
        # The name carries a hash of the path: two my_tools.py in different folders must not clash.
        digest = hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]
        mod_spec = importlib.util.spec_from_file_location(f"tiny_user_tools_{digest}", path)
        if mod_spec is None or mod_spec.loader is None:
            raise ToolError(f"{spec}: cannot load as a Python module")
        module = importlib.util.module_from_spec(mod_spec)
        sys.modules[mod_spec.name] = module  # dataclasses and pickling look the module up here
        try:
            _run(spec, lambda: mod_spec.loader.exec_module(module))  # type: ignore[union-attr]
        except ToolError:
            del sys.modules[mod_spec.name]
            raise
        return module
    return _run(spec, lambda: importlib.import_module(spec))


def _run(spec: str, load: Callable[[], Any]) -> Any:
    try:
        return load()
    except ToolError as exc:
        raise ToolError(f"{spec}: {exc}") from exc
    except SystemExit as exc:  # would end `tiny validate` with its code, silently
        raise ToolError(f"{spec}: called sys.exit({exc.code!r}) while being imported") from None
    except Exception as exc:  # user code: report it as one line, not a traceback
        raise ToolError(
            f"{spec}: failed to import: {type(exc).__name__}: {_one_line(exc)}"
        ) from exc


def _one_line(exc: BaseException) -> str:
    """Fold an exception message onto one line (pydantic and SyntaxError span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__
