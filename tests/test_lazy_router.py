"""`LazyRouter`: the one router a command may never need, built on its first task and kept.

`tiny delegate` and `tiny serve` both route with it: a delegate replay routes as recorded and
never builds it (tests/test_delegate_replay.py, "a replay builds no router"); a server's
threads share it, one task at a time. Real workspace on the repo's cards, the hashing embedder.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import anyio
import numpy as np
import pytest
from mcp import Client

from tiny_cli.delegation import LazyRouter
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.routing.embed import HashingEmbedder
from tiny_cli.routing.factory import build_router
from tiny_cli.serve import Served, build_server
from tiny_cli.settings import load_settings
from tiny_cli.workspace import Workspace, open_workspace

from .conftest import SEED_CARDS, Counting, run_at_once

# each test routes tasks of its own: a task another test routed may come from the vector cache
VACATION = "how many vacation days do I get per year"
CRM = "please add mustermann gmbh as a new customer"
ONBOARDING = "how did the onboarding process work again"
WEATHER = "what is the weather in Berlin tomorrow"
CLOCK = "what time is it in Tokyo"
CALL_SECONDS = 60  # a hung server fails the test instead of the suite
OVERLAP_WINDOW = 0.01  # long enough for a second, unserialised thread to walk in


class Watched:
    """The hashing embedder, telling how many calls were ever inside it at once."""

    def __init__(self) -> None:
        self.inner = HashingEmbedder()
        self.name, self.fingerprint = self.inner.name, self.inner.fingerprint
        self.lock = threading.Lock()
        self.inside = self.most = self.calls = 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self.lock:
            self.inside, self.calls = self.inside + 1, self.calls + 1
            self.most = max(self.most, self.inside)
        try:
            time.sleep(OVERLAP_WINDOW)
            return self.inner.embed(texts)
        finally:
            with self.lock:
                self.inside -= 1


@pytest.fixture(scope="module")
def ws(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """The repo's cards in a home of this module's: the first build's saved state serves all."""
    home = tmp_path_factory.mktemp("home")
    settings = load_settings(env={"TINY_HOME": str(home), "TINY_CARDS": str(SEED_CARDS)})
    return open_workspace(settings)


def test_it_asks_the_embedder_nothing_until_its_first_task_then_routes_as_build_router(
    ws: Workspace,
) -> None:
    counting = Counting(HashingEmbedder())
    router = LazyRouter(ws.settings, ws.cards.values(), embedder=counting)
    assert counting.texts == []  # a command that routes nothing loads no embedder
    decision = router.route(VACATION, top=2)
    assert VACATION in counting.texts
    built = build_router(ws.settings, ws.cards.values(), embedder=HashingEmbedder())
    assert decision.to_json() == built.route(VACATION, 2).to_json()
    assert len(decision.candidates) == 2


def test_threads_routing_at_once_build_one_router_and_route_one_task_at_a_time(
    ws: Workspace,
) -> None:
    watched = Watched()
    router = LazyRouter(ws.settings, ws.cards.values(), embedder=watched)
    decisions: list[Any] = []
    run_at_once(lambda: decisions.append(router.route(ONBOARDING).to_json()), 4)
    assert watched.most == 1  # the build and the embedder never serve two threads at once
    assert len(decisions) == 4 and all(d == decisions[0] for d in decisions)
    before = watched.calls
    router.route(WEATHER)
    assert watched.calls - before == 1  # kept: only the new task is embedded, no second build


def test_serve_builds_no_router_until_a_route_and_serialises_concurrent_routes(
    ws: Workspace,
) -> None:
    watched = Watched()
    provider = OpenAIProvider("http://127.0.0.1:9/v1")  # routing asks no model
    server = build_server(Served(ws, provider), LazyRouter(ws.settings, ws.cards.values(),
                                                            embedder=watched))  # fmt: skip
    assert watched.calls == 0
    texts: list[str] = []

    async def route_at_once() -> None:
        with anyio.fail_after(CALL_SECONDS):
            async with Client(server) as client, anyio.create_task_group() as group:
                for task in (CRM, CLOCK, CRM, CLOCK):
                    group.start_soon(_route, client, task, texts)

    anyio.run(route_at_once)
    provider.close()
    assert watched.most == 1 and len(texts) == 4
    assert all(t.startswith(("route", "abstain")) for t in texts)


async def _route(client: Client, task: str, texts: list[str]) -> None:
    result = await client.call_tool("route", {"task": task})
    assert not result.is_error, result.content
    texts.append(result.content[0].text)  # type: ignore[union-attr]
