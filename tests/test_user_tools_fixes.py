"""A user's own @tool tools: what a review found wrong in loading and calling them.

A default JSON cannot hold is refused when the module loads; a default given in `Annotated`
is used when a call leaves the argument out; a tool one module imports from another is one
tool; a module that fails to import is one scrubbed error line naming it; `@tool` on
something that is no function, and a clash in a registry of your own tools, say what they got.
Each test runs what a user runs: the `tiny` command on a tools module written under
tmp_path, or the library, with the scripted model server as the model.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

import tiny_cli
from tiny_cli.errors import ToolError
from tiny_cli.testing import ScriptedServer, reply, tool_call

OK = json.dumps({"status": "ok", "summary": "Done.", "answer": "done"})
KEY = "sk-live-SECRETKEY123456789"


def _card(folder: Path, tools: list[str]) -> Path:
    """A cards folder with one card that lists `tools`."""
    cards = folder / "cards"
    cards.mkdir()
    card = {
        "id": "mine",
        "summary": "Calls the user's own tools.",
        "examples": ["use my tools"],
        "tools": tools,
        "returns_required": ["answer"],
        "side_effects": "none",
    }
    (cards / "mine.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    return cards


def _module(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text, encoding="utf-8")
    return path


def _one_error_line(result) -> str:
    """The one line a failed command printed; no traceback, not the exit of a Ctrl-C."""
    assert result.exit_code not in (0, 130), result.output
    assert "Traceback" not in result.output
    (line,) = result.stderr.strip().splitlines()
    return line


# --- a default JSON cannot hold ---------------------------------------------------------------

INF_TOOL = """
import math
from tiny_cli.tools import tool


@tool
def find_products(query: str, max_price: float = {default}) -> list[str]:
    \"\"\"Find products in the shop catalogue.\"\"\"
    return [query]
"""


@pytest.mark.parametrize("default", ["math.inf", "-math.inf", "math.nan"])
def test_a_default_json_cannot_hold_is_refused_when_the_module_loads(
    tiny, tmp_path: Path, scripted_server: ScriptedServer, default: str
) -> None:
    module = _module(tmp_path, "shop_tools.py", INF_TOOL.format(default=default))
    cards = _card(tmp_path, ["find_products"])
    for args in (("validate",), ("invoke", "mine", "find socks", "--json")):
        env = {"TINY_TOOLS": str(module), "TINY_CARDS": str(cards)}
        result = tiny(*args, env={**env, "TINY_BASE_URL": scripted_server.url})
        line = _one_error_line(result)
        assert "tool 'find_products': parameter 'max_price' holds inf or NaN" in line
    assert scripted_server.requests == []


# --- a default given in Annotated -------------------------------------------------------------

ANNOTATED_TOOL = """
from typing import Annotated
from pydantic import Field
from tiny_cli.tools import tool


@tool
def tag_note(
    text: str,
    tags: Annotated[list[str], Field(default_factory=list)],
    times: Annotated[int, Field(default=3)],
) -> str:
    \"\"\"Tag a note.\"\"\"
    return f"{text} {tags} {times}"
"""


def test_a_default_given_in_annotated_is_used_when_a_call_leaves_it_out(
    tiny, tmp_path: Path, scripted_server: ScriptedServer
) -> None:
    module = _module(tmp_path, "note_tools.py", ANNOTATED_TOOL)
    env = {"TINY_TOOLS": str(module), "TINY_CARDS": str(_card(tmp_path, ["tag_note"]))}
    scripted_server.add(tool_call("tag_note", {"text": "hello"}), reply(OK))
    result = tiny(
        "invoke", "mine", "tag it", "--json", env={**env, "TINY_BASE_URL": scripted_server.url}
    )
    scripted_server.assert_done()
    assert json.loads(result.stdout)["status"] == "ok", result.output
    schema = scripted_server.requests[0]["tools"][0]["function"]["parameters"]
    assert schema["required"] == ["text"]
    told = [m["content"] for m in scripted_server.requests[1]["messages"] if m["role"] == "tool"]
    assert told == ["hello [] 3"]


def test_a_tool_called_in_the_library_fills_its_annotated_defaults(tmp_path: Path) -> None:
    (tag_note,) = tiny_cli.tools.load_tool_module(str(_module(tmp_path, "t.py", ANNOTATED_TOOL)))
    assert tag_note(text="hi") == "hi [] 3"
    assert tag_note(text="hi", tags=["a"], times=1) == "hi ['a'] 1"


# --- a tool one module imports from another ---------------------------------------------------


@pytest.fixture
def acme(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A package whose `extra` module imports a tool from its `base` module; its name."""
    package = tmp_path / "fixes_acme"
    package.mkdir()
    (package / "__init__.py").write_text("", encoding="utf-8")
    base = (
        "from tiny_cli.tools import tool\n\n@tool\ndef find_customer(name: str) -> str:\n"
        '    """Find a customer."""\n    return name\n'
    )
    extra = (
        "from tiny_cli.tools import tool\nfrom fixes_acme.base import find_customer\n\n"
        '@tool\ndef customer_summary(name: str) -> str:\n    """Summarise a customer."""\n'
        "    return find_customer(name=name)\n"
    )
    _module(package, "base.py", base)
    _module(package, "extra.py", extra)
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "fixes_acme"
    for name in [n for n in sys.modules if n.split(".")[0] == "fixes_acme"]:
        del sys.modules[name]


def test_a_tool_imported_from_another_listed_module_is_one_tool(
    tiny, tmp_path: Path, acme: str
) -> None:
    cards = _card(tmp_path, ["find_customer", "customer_summary"])
    result = tiny(
        "validate", env={"TINY_TOOLS": f"{acme}.base,{acme}.extra", "TINY_CARDS": str(cards)}
    )
    assert result.exit_code == 0, result.output
    assert "1 card(s) OK" in result.output


def test_the_same_tool_twice_in_a_registry_is_one_tool() -> None:
    registry = tiny_cli.Registry([lookup, lookup])
    registry.add(lookup, origin="my_tools.py")
    assert list(registry) == ["lookup"]


# --- a module that fails to import ------------------------------------------------------------

KEYED_MODULE = """
import os


class Client:
    def __init__(self, key):
        raise ConnectionError(f"could not reach billing with key {key}")


client = Client(os.environ["TINY_API_KEY"])
"""


def test_an_import_error_holding_the_api_key_is_scrubbed(tiny, tmp_path: Path) -> None:
    module = _module(tmp_path, "billing_tools.py", KEYED_MODULE)
    result = tiny("validate", "--tools", str(module), env={"TINY_API_KEY": KEY})
    line = _one_error_line(result)
    assert KEY not in result.output
    assert line.startswith(
        "tiny: error: " + str(module) + ": failed to import: ConnectionError: "
        "could not reach billing with key [redacted]"
    )


# --- the library: @tool on something that is no function, a registry's own tools -------------


def _echo(a: str, b: int = 1) -> str:
    """Echo."""
    return a


class Echo:
    """An object that can be called."""

    def __call__(self, a: str) -> str:
        """Echo."""
        return a


@pytest.mark.parametrize(
    ("given", "said"),
    [(functools.partial(_echo, b=2), "functools.partial"), (Echo(), f"{__name__}.Echo")],
)
def test_tool_on_a_callable_that_is_no_function_is_one_tool_error(given, said: str) -> None:
    for make in (lambda: tiny_cli.tool(given), lambda: tiny_cli.tool(name="echo")(given)):
        with pytest.raises(ToolError) as caught:
            make()
        assert str(caught.value).startswith(f"@tool: decorates a function (def), got {said}; ")


@tiny_cli.tool
def lookup(q: str) -> str:
    """Look up a customer."""
    return q


@tiny_cli.tool(name="lookup")
def lookup_order(q: str) -> str:
    """Look up an order."""
    return q


def test_a_clash_in_a_registry_of_your_own_tools_names_their_functions() -> None:
    with pytest.raises(ToolError) as caught:
        tiny_cli.Registry([lookup, lookup_order])
    assert str(caught.value) == (
        f"tool 'lookup' from {__name__}.lookup_order clashes with tool 'lookup' from "
        f"{__name__}.lookup; rename one of them (@tool(name=...))"
    )
    registry = tiny_cli.Registry([lookup])
    assert registry.origin("lookup") == f"{__name__}.lookup"
