"""Built-in tools' specs kept on disk, and calls that need no arguments model."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any

import pydantic
import pytest

from tiny_cli.errors import ToolCallError
from tiny_cli.settings import Settings
from tiny_cli.tools import tool
from tiny_cli.tools.builtin import default_registry
from tiny_cli.tools.registry import Tool
from tiny_cli.tools.specs import SPEC_FILE, BuiltOnce, Spec, spec_of

from .conftest import HANDBOOK, SEED_CARDS

BUILTIN_NAMES = ["http_get", "html_to_text", "docs_search", "crm_find_company", "crm_add_company"]


def _settings(home: Path) -> Settings:
    return Settings(home=home, cards_dir=SEED_CARDS, docs_dir=HANDBOOK)


def _stored(home: Path) -> dict[str, Any]:
    return json.loads((_settings(home).cache_dir / SPEC_FILE).read_text("utf-8"))


def test_the_stored_specs_are_the_built_ones(tmp_path: Path) -> None:
    registry = default_registry(_settings(tmp_path))
    schemas = registry.schemas(BUILTIN_NAMES)
    stored = _stored(tmp_path)["specs"]
    assert len(stored) == len(BUILTIN_NAMES)
    for schema, entry in zip(schemas, stored.values(), strict=True):
        assert entry["description"] == schema["function"]["description"]
        assert json.loads(entry["schema"]) == schema["function"]["parameters"]
        assert entry["plain"] is True  # no built-in hint carries a validator


def test_a_second_folder_reads_the_specs_it_was_given(tmp_path: Path) -> None:
    default_registry(_settings(tmp_path / "a")).schemas(BUILTIN_NAMES)
    kept = _stored(tmp_path / "a")
    key = next(k for k in kept["specs"] if k.endswith(" as docs_search"))
    kept["specs"][key]["description"] = "read from the file"
    copy = _settings(tmp_path / "b").cache_dir / SPEC_FILE
    copy.parent.mkdir(parents=True)
    copy.write_text(json.dumps(kept), "utf-8")
    schema = default_registry(_settings(tmp_path / "b")).schemas(["docs_search"])[0]
    assert schema["function"]["description"] == "read from the file"  # not built again


@pytest.mark.parametrize(
    "spoil",
    [
        lambda kept: kept.update(salt="another tiny, another pydantic"),
        lambda kept: [e.update(plain="yes") for e in kept["specs"].values()],
        lambda kept: [e.pop("schema") for e in kept["specs"].values()],
    ],
    ids=["another salt", "a wrong type", "a missing field"],
)
def test_a_file_of_another_salt_or_shape_is_built_again(tmp_path: Path, spoil: Any) -> None:
    default_registry(_settings(tmp_path / "a")).schemas(BUILTIN_NAMES)
    good = _stored(tmp_path / "a")
    kept = json.loads(json.dumps(good))
    spoil(kept)
    file = _settings(tmp_path / "b").cache_dir / SPEC_FILE
    file.parent.mkdir(parents=True)
    file.write_text(json.dumps(kept), "utf-8")
    schemas = default_registry(_settings(tmp_path / "b")).schemas(BUILTIN_NAMES)
    assert schemas == default_registry(_settings(tmp_path / "a")).schemas(BUILTIN_NAMES)
    assert _stored(tmp_path / "b") == good  # and written as it should be


def test_a_number_is_still_converted_by_a_spec_read_from_disk(tmp_path: Path) -> None:
    default_registry(_settings(tmp_path)).schemas(["docs_search"])  # written
    registry = default_registry(replace(_settings(tmp_path), docs_dir=HANDBOOK))
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
    return Spec("echo", "Echo.", json.dumps(schema), plain, BuiltOnce(build))


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
