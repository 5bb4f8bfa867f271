"""The thread rule (tiny_cli.threads): tiny's arithmetic on one thread, a user's setting wins."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

PROBE = (
    "import json, os, sys\n"
    "import tiny_cli.routing\n"  # the first import of numpy in a route
    "import threadpoolctl\n"
    "info = threadpoolctl.threadpool_info()\n"
    "blas = [i['num_threads'] for i in info if i['user_api'] == 'blas']\n"
    "print(json.dumps({'blas': blas, 'env': os.environ.get('OPENBLAS_NUM_THREADS'),\n"
    "                  'tasks': len(os.listdir('/proc/self/task'))}))\n"
)
# a route whose embedder reports the BLAS threads in force while the router embeds the task
ROUTE_PROBE = (
    "import json, threadpoolctl\n"
    "from tiny_cli.cards.load import Card\n"
    "from tiny_cli.routing.embed import HashingEmbedder\n"
    "from tiny_cli.routing.router import Router\n"
    "seen = []\n"
    "class Spy(HashingEmbedder):\n"
    "    def embed(self, texts):\n"
    "        info = threadpoolctl.threadpool_info()\n"
    "        seen.append([i['num_threads'] for i in info if i['user_api'] == 'blas'])\n"
    "        return super().embed(texts)\n"
    "cards = [Card(id=i, summary=f'Handles {i} work: {i} tasks and {i} questions.', tools=(),\n"
    "              returns_required=()) for i in ('mail', 'calendar', 'weather')]\n"
    "router = Router(cards, Spy(), cache_dir=None)\n"
    "seen.clear()\n"
    "router.route('will it rain tomorrow')\n"
    "print(json.dumps(seen))\n"
)


def _probe(env: dict[str, str], code: str = PROBE) -> object:
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


def _without_thread_settings() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS",)}


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_routing_loads_openblas_on_one_thread_and_leaves_no_setting_behind() -> None:
    found = _probe(_without_thread_settings())
    assert found == {"blas": [1], "env": None, "tasks": 1}  # no worker threads were started


def test_a_users_own_blas_setting_wins_when_numpy_loads() -> None:
    found = _probe({**os.environ, "OPENBLAS_NUM_THREADS": "2"})
    assert isinstance(found, dict)
    assert (found["blas"], found["env"]) == ([2], "2")


@pytest.mark.slow
@pytest.mark.parametrize(("setting", "threads"), [(None, 1), ("2", 2)])
def test_a_route_runs_blas_on_one_thread_unless_the_user_set_its_threads(
    setting: str | None, threads: int
) -> None:
    env = _without_thread_settings() | ({"OPENBLAS_NUM_THREADS": setting} if setting else {})
    assert _probe(env, ROUTE_PROBE) == [[threads]]  # the query's BLAS, as threadpoolctl sees it
