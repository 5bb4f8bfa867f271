"""Built-in tools' literal specs, and calls that need no arguments model."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import pydantic
import pytest

from tiny_cli.errors import ToolCallError
from tiny_cli.settings import Settings
from tiny_cli.tools import tool
from tiny_cli.tools.builtin import SCHEMAS, default_registry
from tiny_cli.tools.registry import LazyTool, Tool
from tiny_cli.tools.specs import Spec, spec_of

from .conftest import HANDBOOK, SEED_CARDS


def _without_descriptions(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: _without_descriptions(v) for k, v in schema.items() if k != "description"}
    return schema


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_a_literal_schema_is_what_its_method_takes(tmp_path: Path, name: str) -> None:
    registry = default_registry(Settings(home=tmp_path, cards_dir=SEED_CARDS, docs_dir=HANDBOOK))
    entry = registry.entry(name)
    assert isinstance(entry, LazyTool)
    built = spec_of(entry.method, name, bound=True)
    literal = SCHEMAS[name]["parameters"]
    assert _without_descriptions(literal) == _without_descriptions(built.parameters())
    assert built.plain is True  # no built-in hint carries a validator: the literal says plain
    assert all(p["description"] for p in literal["properties"].values())  # the model reads them
    assert SCHEMAS[name]["description"].startswith(entry.method.__doc__.rstrip("."))
    assert registry.schemas([name])[0]["function"]["parameters"] == literal


def test_a_number_is_still_converted_by_a_literal_spec(tmp_path: Path) -> None:
    registry = default_registry(Settings(home=tmp_path, cards_dir=SEED_CARDS, docs_dir=HANDBOOK))
    hits = registry["docs_search"](query="onboarding", limit=1.0)  # 1.0 for an int: 1
    assert len(hits) == 1
    with pytest.raises(ToolCallError, match="limit"):
        registry["docs_search"](query="onboarding", limit=1.5)


def _refusing_spec(plain: bool) -> Spec:
    """A spec whose model must not be built: building it fails the test."""

    def build() -> type[pydantic.BaseModel]:
        raise AssertionError("the arguments model was built")

    schema = {
        "type": "object",
        "properties": {"word": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["word"],
    }
    return Spec("echo", "Echo.", json.dumps(schema), plain, build)


def _echo(word: str, n: int = 1) -> str:
    return word * n


def _tool(spec: Spec) -> Tool:
    return Tool(spec.name, spec.description, spec.parameters(), _echo, spec=spec)


def test_a_plain_call_without_numbers_builds_no_model() -> None:
    assert _tool(_refusing_spec(plain=True))(word="hi") == "hi"


@pytest.mark.parametrize(
    ("plain", "arguments"),
    [
        (True, {"word": "hi", "n": 2}),  # a number: the model decides what it becomes
        (True, {"word": 3}),  # fails the schema: the model words it
        (True, {"word": "hi", "extra": "x"}),  # not a parameter: the model drops it
        (False, {"word": "hi"}),  # a hint with a validator: the model runs it
    ],
    ids=["a number", "a wrong type", "an unknown name", "not plain"],
)
def test_other_calls_go_through_the_model(plain: bool, arguments: dict[str, Any]) -> None:
    with pytest.raises(AssertionError, match="the arguments model was built"):
        _tool(_refusing_spec(plain))(**arguments)


def test_a_validator_in_a_hint_still_runs() -> None:
    @tool
    def shout(word: Annotated[str, pydantic.AfterValidator(str.upper)]) -> str:
        """Say a word loudly.

        Args:
            word: The word.
        """
        return word

    assert shout.spec is not None and shout.spec.plain is False
    assert shout(word="hi") == "HI"
    assert spec_of(_echo_documented, "echo").plain is True


def _echo_documented(word: str, n: Annotated[int, pydantic.Field(ge=1)] = 1) -> str:
    """Echo a word.

    Args:
        word: The word.
        n: How often.
    """
    return word * n
