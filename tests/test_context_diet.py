"""benchmarks/context_diet.py: its counting on a tiny catalogue, with the real tokenizer."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location(
        "context_diet", REPO / "benchmarks" / "context_diet.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up
    spec.loader.exec_module(module)
    return module


TIME = {
    "name": "get_current_time",
    "description": "Get the current time in a timezone.",
    "inputSchema": {"type": "object", "properties": {"timezone": {"type": "string"}}},
}


def test_the_host_array_is_what_an_openai_style_host_sends() -> None:
    bench = _bench()
    assert json.loads(bench.rendered([TIME])) == [
        {
            "type": "function",
            "function": {
                "name": "get_current_time",
                "description": "Get the current time in a timezone.",
                "parameters": TIME["inputSchema"],
            },
        }
    ]


def test_a_tiny_catalogue_is_counted_with_the_real_tokenizer() -> None:
    bench = _bench()
    count = bench.e5_counter()
    assert count("") == 0
    one = bench.measure("one", [TIME], [TIME], count)
    two = bench.measure("two", [TIME, {**TIME, "name": "other"}], [TIME], count)
    assert one.tools == 1 and one.ratio == 1.0  # the same array counted twice
    assert one.host_tokens > 10 and two.host_tokens > one.host_tokens
    assert one.host_bytes == len(bench.rendered([TIME]).encode())
    assert "| one | 1 |" in bench.table([one, two])


def test_the_scripted_catalogue_is_the_same_on_every_run() -> None:
    bench = _bench()
    first = bench.scripted_catalogue(40)
    assert len(first) == 40 and len({t["name"] for t in first}) == 40
    assert first == bench.scripted_catalogue(40)
