"""Tool specs: a typed, documented function's description, arguments model and JSON Schema.

`spec_of` builds the spec of each function once per process (the bench and `tiny serve` make
the same tools for every run) and hands each caller a fresh copy of the schema, so no run can
change what another run is shown. A built-in tool's description and schema are literal
(tiny_cli.tools.registry.LazyTool); its arguments model is built from its method by `spec_of`.
"""

from __future__ import annotations

import functools
import inspect
import json
import re
import threading
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Union, get_args, get_origin, get_type_hints

import pydantic
from pydantic.fields import FieldInfo

from tiny_cli.errors import ToolError

__all__ = ["TOOL_NAME_PATTERN", "Spec", "flow", "one_line", "spec_of"]

# What OpenAI-compatible servers accept as a function name.
TOOL_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
SCALAR_TYPES = (str, int, float, bool)
SUPPORTED_TYPES_HINT = (
    "str, int, float, bool, list[...], dict[str, ...], Literal[...], Optional[...], Annotated[...]"
)
# where metadata that only bounds a value comes from: pydantic.Field(ge=1), annotated_types.Ge(1)
PLAIN_METADATA = frozenset({"pydantic.fields", "annotated_types"})
MAX_CACHED_SPECS = 512  # a tool module loaded again adds keys; the oldest go


@dataclass(frozen=True)
class Spec:
    """What the model is told about one tool, and the model that types its arguments."""

    name: str
    description: str
    schema_json: str  # the arguments' JSON Schema, as text: each caller gets its own copy
    plain: bool  # no hint carries a validator or a default: converting changes only numbers
    arguments: Callable[[], type[pydantic.BaseModel]] = field(repr=False, compare=False)

    @property
    def model(self) -> type[pydantic.BaseModel]:
        """The pydantic model of the arguments."""
        return self.arguments()

    def parameters(self) -> dict[str, Any]:
        """Return a fresh copy of the arguments' JSON Schema."""
        return json.loads(self.schema_json)


def spec_of(f: Callable[..., Any], name: str, *, bound: bool = False) -> Spec:
    """Return the spec of `f` under `name` (ToolError if it cannot describe a tool); `bound`:
    the first parameter (self) is not an argument."""
    if isinstance(f, types.MethodType):
        f, bound = f.__func__, True
    try:
        hash(f)
    except TypeError:  # a callable object that cannot be hashed: nothing to key it by
        return _build(f, name, bound)
    with _LOCK:  # one build per function, however many threads ask at once
        return _built(f, name, bound)  # a ToolError is not cached: the next call raises it again


def one_line(exc: BaseException) -> str:
    """Fold an exception message onto one line (pydantic and SyntaxError span several)."""
    return " ".join(str(exc).split()) or type(exc).__name__


# --- building a spec ----------------------------------------------------------------------


def _build(f: Callable[..., Any], name: str, bound: bool) -> Spec:
    if not TOOL_NAME_PATTERN.match(name):
        raise ToolError(f"tool {name!r}: a name is 1-64 letters, digits, '_' or '-'")
    import docstring_parser  # a built-in's literal spec parses no docstring

    doc = docstring_parser.parse(inspect.getdoc(f) or "")
    # Docstrings wrap at the code's line length; the model should see flowing text.
    description = flow(doc.short_description, doc.long_description)
    if not description:
        raise ToolError(f"tool {name!r} needs a docstring: the model reads it")
    helps = {p.arg_name: flow(p.description) for p in doc.params}
    model, schema, plain = _arguments_model(name, f, helps, bound)
    return Spec(name, description, _json_text(name, schema), plain, lambda: model)


_built = functools.lru_cache(maxsize=MAX_CACHED_SPECS)(_build)
_LOCK = threading.Lock()


def _json_text(tool_name: str, schema: dict[str, Any]) -> str:
    """The schema as JSON text; a default of inf or NaN (`Infinity`, which no server reads) is
    refused when the module loads, naming the parameter."""
    try:
        return json.dumps(schema, allow_nan=False)
    except ValueError:
        properties = schema.get("properties", {})
        bad = next((p for p, s in properties.items() if not _finite(s)), None)
        where = f"parameter {bad!r}" if bad is not None else "its schema"
        raise ToolError(
            f"tool {tool_name!r}: {where} holds inf or NaN, which JSON cannot carry; "
            "use a finite number, or None (an Optional parameter) for no limit"
        ) from None


def _finite(value: Any) -> bool:
    try:
        json.dumps(value, allow_nan=False)
    except ValueError:
        return False
    return True


def _arguments_model(
    tool_name: str, f: Callable[..., Any], helps: dict[str, str], bound: bool
) -> tuple[type[pydantic.BaseModel], dict[str, Any], bool]:
    """Build the arguments' model and schema from the signature, type hints and docstring Args,
    and say whether it is plain (no hint carries metadata but bounds)."""
    hints = _hints(tool_name, f)
    params = dict(list(inspect.signature(f).parameters.items())[1 if bound else 0 :])
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
    plain = all(_plain(hints[pname]) for pname in params)
    try:
        model = pydantic.create_model(f"{tool_name}_arguments", **fields)
        return model, _clean(model.model_json_schema()), plain
    except Exception as exc:  # pydantic's messages span lines; the user needs one
        raise ToolError(f"tool {tool_name!r}: cannot build a schema: {one_line(exc)}") from exc


def _hints(tool_name: str, f: Callable[..., Any]) -> dict[str, Any]:
    try:
        return get_type_hints(f, include_extras=True)  # keep Annotated[..., Field(...)] bounds
    except Exception as exc:  # a broken annotation in user code is a config error
        raise ToolError(f"tool {tool_name!r}: cannot read type hints: {one_line(exc)}") from exc


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
        return all(isinstance(a, SCALAR_TYPES) for a in args)
    if origin is list:
        return len(args) == 1 and _supported(args[0])
    if origin is dict:
        return len(args) == 2 and args[0] is str and _supported(args[1])
    if origin in (Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return len(rest) == 1 and len(args) == 2 and _supported(rest[0])
    return False


def _plain(hint: Any) -> bool:
    """Say whether `hint` converts as its bare types do: Annotated only with Field bounds."""
    args = get_args(hint)
    if get_origin(hint) is Annotated:
        extras = args[1:]
        if not all(type(m).__module__ in PLAIN_METADATA and not _gives_default(m) for m in extras):
            return False  # a validator, a default, or anything else pydantic might act on
        args = args[:1]
    return all(_plain(a) for a in args if not isinstance(a, SCALAR_TYPES))


def _gives_default(metadata: Any) -> bool:
    """Whether metadata is a Field with a default: only the model fills it in."""
    return isinstance(metadata, FieldInfo) and not metadata.is_required()


def flow(*parts: str | None) -> str:
    """Join text parts and fold their whitespace into single spaces."""
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
