"""Effects as parameters, and a reply's reasoning taken off once where it enters a run.

`generate` takes its clock and its HTTP transport as keywords, as the runner does. The run reads
a reply less its `<think>` block, but an answer's size is the reply's as the model sent it.
A scripted model server on loopback answers; the cards and learned.jsonl are real.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from typer.testing import Result

from tiny_cli.agent.reply import MAX_REPLY_CHARS
from tiny_cli.example_writer import generate
from tiny_cli.routing.examples_file import load_learned
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, reply, tool_call

from .test_generate import ANSWERS, _script

TASK = "how does onboarding work"
ANSWER = {"status": "ok", "summary": "Two weeks with a buddy.", "source": "onboarding.md"}


class _Counted(httpx.HTTPTransport):
    """A real transport that notes the path of each request it sends."""

    def __init__(self) -> None:
        super().__init__()
        self.paths: list[str] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return super().handle_request(request)


@pytest.mark.slow  # the overlap check builds a router
def test_generate_asks_through_the_transport_and_times_by_the_clock(
    cli_env: dict[str, str], seed_copy: Path, scripted_server: ScriptedServer
) -> None:
    _script(scripted_server, {c: [json.dumps(a)] for c, a in ANSWERS.items()})
    env = {"TINY_CARDS": str(seed_copy), "TINY_EMBEDDER": "hashing",
           "TINY_BASE_URL": scripted_server.url, "TINY_MODEL": "m"}  # fmt: skip
    transport, ticks = _Counted(), iter([10.0, 12.5])
    done = generate(
        load_settings(env={**cli_env, **env}), transport=transport, clock=ticks.__next__
    )
    assert done.status == "generated" and sorted(load_learned(seed_copy).generated) == sorted(
        ANSWERS
    )
    assert transport.paths.count("/v1/chat/completions") == len(ANSWERS)
    assert done.seconds == 2.5


def test_a_long_think_block_makes_the_answer_too_long(
    tiny: Callable[..., Result], scripted_server: ScriptedServer
) -> None:
    long = f"<think>{'z' * MAX_REPLY_CHARS}</think>{json.dumps(ANSWER)}"
    search = tool_call("docs_search", {"query": "onboarding"})
    scripted_server.add(search, reply(long), reply(json.dumps(ANSWER)))
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_MODEL": "m"}
    result = tiny("invoke", "docs-finder", TASK, "--json", env=env)
    assert json.loads(result.stdout)["status"] == "ok"
    repair = scripted_server.requests[2]["messages"][-1]["content"]
    assert repair.startswith(f"Your answer cannot be used: your answer is {len(long):,} characters")
