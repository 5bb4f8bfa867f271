"""The @tool decorator, the Registry and loading user tool modules."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Annotated, Literal, Optional

import jsonschema
import pydantic
import pytest

from tiny_cli.errors import ToolError
from tiny_cli.tools import Registry, Tool, ToolCallError, load_tool_module, tool

REPO = Path(__file__).resolve().parent.parent
MY_TOOLS = REPO / "examples" / "my_tools.py"


def write_module(folder: Path, name: str, body: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(body), encoding="utf-8")
    return path


def assert_one_line_tool_error(exc: pytest.ExceptionInfo[ToolError], *parts: str) -> None:
    message = str(exc.value)
    assert "\n" not in message
    for part in parts:
        assert part in message, message


# --- @tool: schema from hints and docstring ---------------------------------------------------


def test_schema_types_required_and_descriptions() -> None:
    @tool
    def book_room(
        room: str,
        people: int,
        hours: float,
        projector: bool = False,
        attendees: list[str] | None = None,
        kind: Literal["meeting", "workshop"] = "meeting",
    ) -> str:
        """Book a meeting room.

        The booking is confirmed by email,
        usually within a minute.

        Args:
            room: The room's name,
                as printed on the door.
            people: How many people come.
            hours: How long, in hours.
            projector: Whether a projector is needed.
            attendees: Email addresses to invite.
            kind: What the room is for.
        """
        return room

    params = book_room.parameters
    props = params["properties"]
    assert params["type"] == "object"
    assert params["required"] == ["room", "people", "hours"]
    assert props["room"] == {
        "type": "string",
        "description": "The room's name, as printed on the door.",
    }
    assert props["people"]["type"] == "integer"
    assert props["hours"]["type"] == "number"
    assert props["projector"] == {
        "type": "boolean",
        "default": False,
        "description": "Whether a projector is needed.",
    }
    assert props["attendees"]["anyOf"] == [
        {"type": "array", "items": {"type": "string"}},
        {"type": "null"},
    ]
    assert props["kind"]["enum"] == ["meeting", "workshop"]
    assert props["kind"]["default"] == "meeting"
    assert book_room.description == (
        "Book a meeting room. The booking is confirmed by email, usually within a minute."
    )
    assert "title" not in str(params)  # pydantic's auto titles are noise for the model


def test_schema_is_valid_json_schema_and_checks_arguments() -> None:
    @tool
    def search(query: str, limit: Annotated[int, pydantic.Field(ge=1, le=10)] = 3) -> list[str]:
        """Search something.

        Args:
            query: What to look for.
            limit: At most this many.
        """
        return [query] * limit

    jsonschema.Draft202012Validator.check_schema(search.parameters)
    validator = jsonschema.Draft202012Validator(search.parameters)
    assert validator.is_valid({"query": "x"})
    assert validator.is_valid({"query": "x", "limit": 10})
    assert not validator.is_valid({"limit": 2})  # query is required
    assert not validator.is_valid({"query": "x", "limit": 11})  # the Annotated bound
    assert not validator.is_valid({"query": 3})
    assert search.parameters["properties"]["limit"]["maximum"] == 10
    assert search(query="a", limit=2) == ["a", "a"]


def test_optional_and_dict_parameters() -> None:
    @tool
    def tag(labels: dict[str, int], note: Optional[str] = None) -> str:  # noqa: UP045
        """Tag an item.

        Args:
            labels: Label name to weight.
            note: A free note.
        """
        return str(labels)

    props = tag.parameters["properties"]
    assert props["labels"]["type"] == "object"
    assert props["labels"]["additionalProperties"] == {"type": "integer"}
    assert {"type": "null"} in props["note"]["anyOf"]
    assert tag.parameters["required"] == ["labels"]


def test_tool_schema_entry_name_and_writes() -> None:
    @tool(name="save-note", writes=True)
    def save(text: str) -> str:
        """Save a note."""
        return text

    assert isinstance(save, Tool)
    assert save.writes is True
    entry = save.schema()
    assert entry["type"] == "function"
    assert entry["function"]["name"] == "save-note"
    assert entry["function"]["description"] == "Save a note."
    assert "description" not in entry["function"]["parameters"]["properties"]["text"]


def test_parameter_names_that_pydantic_or_json_schema_use_themselves() -> None:
    @tool
    def note(title: str, schema: str = "", model_config: int = 0) -> str:
        """Write a note.

        Args:
            title: The note's title.
        """
        return title

    props = note.parameters["properties"]
    assert list(props) == ["title", "schema", "model_config"]
    assert props["title"] == {"type": "string", "description": "The note's title."}
    assert note.parameters["required"] == ["title"]
    assert note(title="t", schema="s") == "t"


def test_no_parameters_gives_an_empty_object_schema() -> None:
    @tool
    def now() -> str:
        """Tell the time."""
        return "12:00"

    assert now.parameters == {"type": "object", "properties": {}}


class Point:
    pass


@pytest.mark.parametrize(
    ("annotation", "shown"),
    [
        ("Path", "Path"),
        ("Point", "Point"),
        ("set[str]", "set[str]"),
        ("tuple[int, int]", "tuple[int, int]"),
        ("int | str", "int | str"),
        ("list[Point]", "Point"),
        ("dict[int, str]", "dict[int, str]"),
    ],
)
def test_unsupported_types_are_one_line_errors(annotation: str, shown: str) -> None:
    namespace = {"Path": Path, "Point": Point}
    source = f'def f(x: {annotation}) -> str:\n    """Do it."""\n    return ""\n'
    exec(source, namespace)
    with pytest.raises(ToolError) as exc:
        tool(namespace["f"])
    assert_one_line_tool_error(exc, "'f'", "'x'", "unsupported type", shown, "use str, int")


def test_missing_hint_docstring_and_bad_shapes_are_errors() -> None:
    def no_hint(x) -> str:  # type: ignore[no-untyped-def]
        """Do it."""
        return ""

    def no_doc(x: str) -> str:
        return x

    def star(*xs: str) -> str:
        """Do it."""
        return ""

    def ghost_arg(x: str) -> str:
        """Do it.

        Args:
            y: Not a parameter.
        """
        return x

    cases = [
        (no_hint, ["'no_hint'", "'x'", "needs a type hint"]),
        (no_doc, ["'no_doc'", "needs a docstring"]),
        (star, ["'star'", "'xs'", "plain named parameter"]),
        (ghost_arg, ["'ghost_arg'", "unknown parameter 'y'"]),
    ]
    for func, parts in cases:
        with pytest.raises(ToolError) as exc:
            tool(func)
        assert_one_line_tool_error(exc, *parts)


def test_invalid_tool_name() -> None:
    def f(x: str) -> str:
        """Do it."""
        return x

    with pytest.raises(ToolError) as exc:
        tool(name="has space")(f)
    assert_one_line_tool_error(exc, "'has space'")


def test_broken_annotation_is_one_line() -> None:
    namespace: dict = {}
    exec('def f(x: "NoSuchType") -> str:\n    """Do it."""\n    return x\n', namespace)
    with pytest.raises(ToolError) as exc:
        tool(namespace["f"])
    assert_one_line_tool_error(exc, "cannot read type hints", "NoSuchType")


# --- Registry -----------------------------------------------------------------------------


def make_tool(name: str, writes: bool = False) -> Tool:
    def f(x: str) -> str:
        """Echo."""
        return x

    return tool(name=name, writes=writes)(f)


def test_registry_lookup_schemas_and_writes() -> None:
    registry = Registry([make_tool("a"), make_tool("b", writes=True)])
    assert list(registry) == ["a", "b"]
    assert len(registry) == 2
    assert registry["b"].writes
    assert registry.writes() == {"a": False, "b": True}
    assert [s["function"]["name"] for s in registry.schemas(["b", "a"])] == ["b", "a"]
    assert registry.origin("a") == f"{__name__}.make_tool.<locals>.f"  # where it was defined
    with pytest.raises(KeyError):
        registry["c"]


def test_registry_duplicate_names_both_origins() -> None:
    registry = Registry([make_tool("lookup")])
    with pytest.raises(ToolError) as exc:
        registry.add(make_tool("lookup"), origin="my_tools.py")
    assert_one_line_tool_error(exc, "'lookup'", "my_tools.py", "make_tool.<locals>.f")


# --- load_tool_module -----------------------------------------------------------------------


TWO_TOOLS = '''
from tiny_cli.tools import tool

@tool
def shout(text: str) -> str:
    """Say it louder.

    Args:
        text: What to say.
    """
    return text.upper()

@tool(writes=True)
def remember(key: str, value: str = "") -> dict:
    """Remember a value."""
    return {key: value}

alias = shout  # the same tool under a second name counts once

def helper(x):
    return x
'''


def test_load_py_path(tmp_path: Path) -> None:
    path = write_module(tmp_path, "team_tools.py", TWO_TOOLS)
    tools = {t.name: t for t in load_tool_module(str(path))}
    assert sorted(tools) == ["remember", "shout"]
    assert tools["shout"](text="hi") == "HI"
    assert tools["remember"].writes
    assert tools["remember"].parameters["required"] == ["key"]


def test_load_dotted_module(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "acme_tools_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    write_module(package, "text.py", TWO_TOOLS)
    monkeypatch.syspath_prepend(str(tmp_path))
    tools = load_tool_module("acme_tools_pkg.text")
    assert {t.name for t in tools} == {"shout", "remember"}


def test_two_files_with_the_same_name_do_not_clash(tmp_path: Path) -> None:
    for folder, name in (("one", "first"), ("two", "second")):
        (tmp_path / folder).mkdir()
        body = f'from tiny_cli.tools import tool\n\n@tool\ndef {name}() -> str:\n    """Hi."""\n'
        write_module(tmp_path / folder, "tools.py", body + '    return ""\n')
    assert [t.name for t in load_tool_module(str(tmp_path / "one" / "tools.py"))] == ["first"]
    assert [t.name for t in load_tool_module(str(tmp_path / "two" / "tools.py"))] == ["second"]


def test_module_without_tools(tmp_path: Path) -> None:
    path = write_module(tmp_path, "empty_tools.py", "def helper(x):\n    return x\n")
    with pytest.raises(ToolError) as exc:
        load_tool_module(str(path))
    assert_one_line_tool_error(exc, str(path), "no tools found")


@pytest.mark.parametrize(
    ("body", "parts"),
    [
        (
            "raise RuntimeError('database\\nis down')",
            ["failed to import", "RuntimeError", "is down"],
        ),
        ("def broken(:\n    pass\n", ["failed to import", "SyntaxError"]),
        ("import no_such_module_xyz\n", ["ModuleNotFoundError", "no_such_module_xyz"]),
        (
            "from tiny_cli.tools import tool\n@tool\ndef f(x) -> str:\n    '''Do.'''\n",
            ["'f'", "needs a type hint"],
        ),
        ("import sys\nsys.exit(0)\n", ["called sys.exit(0) while being imported"]),
    ],
)
def test_module_that_fails_to_import(tmp_path: Path, body: str, parts: list[str]) -> None:
    path = write_module(tmp_path, "bad_tools.py", body)
    with pytest.raises(ToolError) as exc:
        load_tool_module(str(path))
    assert_one_line_tool_error(exc, str(path), *parts)


def test_missing_module_file_and_dotted_name(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as exc:
        load_tool_module(str(tmp_path / "nope.py"))
    assert_one_line_tool_error(exc, "nope.py", "no such tool module file")
    with pytest.raises(ToolError) as exc:
        load_tool_module("no_such_pkg_xyz.tools")
    assert_one_line_tool_error(exc, "no_such_pkg_xyz.tools", "ModuleNotFoundError")


def test_example_user_tools() -> None:
    tools = {t.name: t for t in load_tool_module(str(MY_TOOLS))}
    assert sorted(tools) == ["days_between", "word_stats"]
    days = tools["days_between"]
    assert days.parameters["required"] == ["start", "end"]
    assert days(start="2025-01-01", end="2025-01-31") == 30
    # Fri 2025-01-03 -> Mon 2025-01-13: 6 working days (6, 7, 8, 9, 10, 13)
    assert days(start="2025-01-03", end="2025-01-13", working_days_only=True) == 6
    assert days(start="2025-01-13", end="2025-01-03", working_days_only=True) == -6
    with pytest.raises(ValueError, match="YYYY-MM-DD"):
        days(start="next friday", end="2025-01-01")
    stats = tools["word_stats"](text="the cat and the hat, the end", top=1)
    assert stats == {"words": 7, "distinct": 5, "top": [{"word": "the", "count": 3}]}


def test_arguments_are_converted_to_the_declared_types_before_the_call() -> None:
    @tool
    def repeat(word: str, times: int = 1) -> str:
        """Repeat a word.

        Args:
            word: The word.
            times: How often.
        """
        return " ".join([word] * times)  # a float `times` would raise TypeError here

    jsonschema.validate({"word": "ha", "times": 3.0}, repeat.parameters)  # the schema allows it
    assert repeat(word="ha", times=3.0) == "ha ha ha"
    with pytest.raises(ToolCallError, match="invalid arguments"):
        repeat(word="ha", times=2.5)  # not a whole number: the model is told, nothing runs


def test_validate_reports_a_tools_module_that_exits(tiny, tmp_path: Path) -> None:
    path = write_module(tmp_path, "exiting_tools.py", "import sys\nsys.exit(0)\n")
    result = tiny("validate", "--tools", str(path))
    assert result.exit_code == 2
    assert "called sys.exit(0) while being imported" in result.stderr
