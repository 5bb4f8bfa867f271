"""A call's arguments, its tool's schema and its result cannot crash a run; pages always read.

Found by a review: a huge integer in a call's arguments, a schema jsonschema cannot apply, a
result JSON cannot hold sent as its Python repr and counted ok, a page's odd charset or markup,
and an exception whose str() raises. Each test runs what a user runs: the `tiny` command or a
library function, with the scripted model server where a model is needed.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Annotated, Any

import pytest
import yaml
from pydantic import Field

from tiny_cli.agent.loop import invoke
from tiny_cli.cards.card import Card
from tiny_cli.digest import make_brief
from tiny_cli.errors import ToolError
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.testing import ScriptedServer, reply, tool_call
from tiny_cli.tools.registry import Registry, Tool, tool
from tiny_cli.tools.web import AddressPolicy, html_to_text, http_get

OK = json.dumps({"status": "ok", "summary": "Done."})
TOOLS = '''
import functools
from tiny_cli import tool


class Unprintable(Exception):
    def __str__(self):
        raise RuntimeError("cannot print me")


def _kept(f):
    @functools.wraps(f)
    def run(*args, **kwargs):
        return f(*args, **kwargs)
    return run


@tool
def count(limit: int) -> int:
    """Return the limit."""
    return limit


@tool
def fragile(x: int) -> str:
    """Fail with an exception that cannot be printed."""
    raise Unprintable()


@tool(writes=True)
def save_notes(lines: list[str]) -> list[str]:
    """Save lines: a generator, so nothing runs."""
    return (line for line in lines)


@tool
@_kept
async def later(x: int) -> str:
    """Return a coroutine from behind a wraps wrapper."""
    return "never awaited"


@tool
def tags(x: int) -> set:
    """Return a set."""
    return {"a"}


@tool
def raw(x: int) -> bytes:
    """Return bytes."""
    return b"abc"


@tool
def thing(x: int) -> object:
    """Return a plain object."""
    return object()
'''
NAMES = ["count", "fragile", "save_notes", "later", "tags", "raw", "thing"]
CARD = {
    "id": "tooly",
    "summary": "Calls the review's test tools.",
    "examples": ["run the review tools"],
    "returns_required": [],
    "side_effects": "write",
    "budget": {"max_tool_calls": 8, "max_output_tokens": 300, "max_wall_seconds": 30},
}


@pytest.fixture
def tools_env(tmp_path: Path) -> dict[str, str]:
    """A tools module and a card that lists its tools."""
    module = tmp_path / "review_tools.py"
    module.write_text(TOOLS, encoding="utf-8")
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "tooly.yaml").write_text(yaml.safe_dump({**CARD, "tools": NAMES}), encoding="utf-8")
    return {"TINY_TOOLS": str(module), "TINY_CARDS": str(cards)}


def _told(tiny, server: ScriptedServer, env: dict[str, str]) -> tuple[list[str], dict[str, Any]]:
    """Run the card; return what each tool call was answered, and the Digest's JSON."""
    result = tiny(
        "invoke", "tooly", "go", "--json", "--yes", env={**env, "TINY_BASE_URL": server.url}
    )
    assert "Traceback" not in result.output, result.output
    server.assert_done()
    told = [m["content"] for m in server.requests[-1]["messages"] if m["role"] == "tool"]
    return told, json.loads(result.stdout)


# --- 1: a huge integer in a call's arguments ------------------------------------------------


def test_a_huge_integer_in_arguments_is_answered_to_the_model(
    tiny, scripted_server, tools_env
) -> None:
    scripted_server.add(tool_call("count", '{"limit": 1' + "0" * 5000 + "}"), reply(OK))
    told, digest = _told(tiny, scripted_server, tools_env)
    assert told == [
        "error: arguments hold a number over 4,300 digits long. "
        "Call count again with valid arguments."
    ]
    assert digest["cost"]["tool_calls"] == 1


# --- 2: a schema jsonschema cannot apply ----------------------------------------------------

PATTERN_TOOL = '''
from typing import Annotated
from pydantic import Field
from tiny_cli import tool


@tool
def greet(name: Annotated[str, Field(pattern=r"^\\p{Lu}")]) -> str:
    """Greet a person by a capitalised name."""
    return f"Hello {name}"
'''


def test_a_tool_whose_pattern_python_cannot_read_is_refused_by_validate(tiny, tmp_path) -> None:
    module = tmp_path / "pattern_tools.py"
    module.write_text(PATTERN_TOOL, encoding="utf-8")
    result = tiny("validate", "--tools", str(module))
    assert result.exit_code != 0
    (line,) = result.stderr.strip().splitlines()
    assert "@tool greet: its argument schema cannot be applied: properties/name/pattern: " in line
    assert "'^\\\\p{Lu}' is no regular expression Python reads (bad escape \\p" in line


@pytest.mark.parametrize(
    ("ref", "why"),
    [
        ("#/$defs/City", "'#/$defs/City' points to nothing in this schema"),
        ("https://example.com/city.json", "'https://example.com/city.json': tiny fetches no"),
    ],
)
def test_a_declared_function_with_a_ref_no_call_can_use_is_refused_by_validate(
    tiny, tmp_path, ref: str, why: str
) -> None:
    cards = tmp_path / "cards"
    cards.mkdir()
    city = {"type": "object", "properties": {"city": {"$ref": ref}}}
    card = {
        **CARD,
        "id": "geo-lookup",
        "side_effects": "none",
        "tools": ["lookup_city"],
        "functions": [{"name": "lookup_city", "description": "Look up.", "parameters": city}],
    }
    (cards / "geo.yaml").write_text(yaml.safe_dump(card), encoding="utf-8")
    result = tiny("validate", "--cards", str(cards))
    assert result.exit_code == 1
    said = "function 'lookup_city': parameters are not a valid JSON Schema: properties/city/$ref: "
    assert said + why in " ".join(result.output.split())


@pytest.mark.parametrize(
    ("city", "why"),
    [
        ({"$ref": "#/$defs/City"}, "properties/city/$ref: '#/$defs/City' points to nothing"),
        ({"type": "string", "pattern": "^\\p{Lu}"}, "'^\\\\p{Lu}' is not a 'regex'"),
    ],
)
def test_a_schema_that_cannot_be_applied_is_answered_and_noted(
    scripted_server, city: dict[str, Any], why: str
) -> None:
    """A tool made without @tool (a library's, an MCP server's): the run goes on, the model is
    told the tool cannot be called, and the caller why."""
    schema = {"type": "object", "properties": {"city": city}}
    registry = Registry([Tool("lookup_city", "Look a city up.", schema, lambda **_: "52.5 N")])
    card = Card("geo", "Looks up cities for the user.", ("lookup_city",), ())
    scripted_server.add(tool_call("lookup_city", {"city": "Berlin"}), reply(OK))
    with OpenAIProvider(scripted_server.url, "") as provider:
        digest = invoke(card, make_brief("where is Berlin"), registry=registry,
                        provider=provider, model="m")  # fmt: skip
    scripted_server.assert_done()
    told = scripted_server.requests[-1]["messages"][-1]["content"]
    assert told.startswith("error: lookup_city cannot be called: its argument schema cannot be")
    assert why in told and told.endswith("; it was not run. Answer without it.")
    assert [c.outcome for c in digest.calls] == ["bad_arguments"]
    assert any(
        n.startswith("lookup_city was not run: its argument") for n in digest.notes_for_caller
    )


def test_a_tool_whose_schema_cannot_be_applied_cannot_be_made() -> None:
    def greet(name: Annotated[str, Field(pattern=r"(?<first>\w)")]) -> str:
        """Greet a person; the pattern is pydantic's regex syntax, not Python's."""
        return name

    with pytest.raises(ToolError, match=r"^@tool greet: its argument schema cannot be applied"):
        tool(greet)


# --- 3: a result JSON cannot hold -----------------------------------------------------------


def test_a_result_json_cannot_hold_is_an_error_not_its_repr(
    tiny, scripted_server, tools_env
) -> None:
    names = ["save_notes", "later", "tags", "raw", "thing"]
    calls = [tool_call(n, {"lines": ["a note"]} if n == "save_notes" else {"x": 1}) for n in names]
    scripted_server.add(*calls, reply(OK))
    told, digest = _told(tiny, scripted_server, tools_env)
    kinds = ["generator", "coroutine", "set", "bytes", "object"]
    assert told == [
        f"error: {name} failed: its result cannot be written as JSON "
        f"(TypeError: Object of type {kind} is not JSON serializable)"
        for name, kind in zip(names, kinds, strict=True)
    ]
    assert [w["outcome"] for w in digest["approved_writes"]] == ["tool_error"]


# --- 4: a page's charset that is no text encoding --------------------------------------------

PAGES = {
    "/meta-rot13": ("text/html", '<meta charset="rot13"><p>Grüße</p>'.encode()),
    "/meta-null": ("text/html", '<meta charset="utf-8\0"><p>Grüße</p>'.encode()),
    "/header-idna": ("text/html; charset=idna", "<p>Grüße</p>".encode()),
    "/header-base64": (
        "text/html; charset=base64",
        '<meta charset="windows-1252"><p>Grüße, 5 €</p>'.encode("cp1252"),
    ),
}


class _Pages(BaseHTTPRequestHandler):
    def log_message(self, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        ctype, body = PAGES[self.path]
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def pages() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Pages)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("path", sorted(PAGES))
def test_a_charset_that_is_no_text_encoding_falls_back(pages: str, path: str) -> None:
    text = http_get(f"http://{pages}{path}", policy=AddressPolicy.of([pages]))
    assert "Grüße" in text
    if path == "/header-base64":  # the header's is no text encoding: the page's own is used
        assert "5 €" in text


# --- 5: markup html.parser gives up on -------------------------------------------------------


def test_markup_the_parser_gives_up_on_keeps_the_text_read() -> None:
    text = html_to_text("<title>T</title><ul><li>a<li>Hello <![ foo <p>World</p>")
    assert text == (
        "T\n\n- a\n- Hello\n\n"
        "[tiny could not read the rest of this page: its HTML is malformed here]"
    )


# --- 6: an exception whose str() raises ------------------------------------------------------


def test_an_exception_that_cannot_be_printed_is_named(tiny, scripted_server, tools_env) -> None:
    scripted_server.add(tool_call("fragile", {"x": 1}), reply(OK))
    told, digest = _told(tiny, scripted_server, tools_env)
    assert told == ["error: fragile failed: Unprintable"]
    assert digest["cost"]["tool_calls"] == 1
