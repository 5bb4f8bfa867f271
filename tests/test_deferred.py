"""Deferred imports: numpy's OpenBLAS on one thread, and modules whose body runs on first use."""

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


def _words(code: str) -> list[str]:
    """Run `code` in a fresh interpreter; return the words it printed."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return done.stdout.split()


def _probe(env: dict[str, str]) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads in /proc")
def test_routing_loads_openblas_on_one_thread_and_leaves_no_setting_behind() -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS",)}
    found = _probe(env)
    assert found == {"blas": [1], "env": None, "tasks": 1}  # no worker threads were started


def test_a_users_own_blas_setting_wins() -> None:
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "2"}
    found = _probe(env)
    assert found["blas"] == [2]
    assert found["env"] == "2"


def test_a_lazy_module_runs_its_body_on_first_use() -> None:
    code = (
        "import sys\n"
        "from tiny_cli.deferred import lazy_module\n"
        "bounds = lazy_module('tiny_cli.tools.bounds')\n"
        "print('pydantic' in sys.modules)\n"
        "print(bounds.SearchLimit.__metadata__[0].metadata[0].ge)\n"
        "print('pydantic' in sys.modules)\n"
    )
    assert _words(code) == ["False", "1", "True"]


def test_a_lazy_module_that_does_not_exist_is_an_import_error() -> None:
    from tiny_cli.deferred import lazy_module

    with pytest.raises(ModuleNotFoundError, match="no_such_module"):
        lazy_module("tiny_cli.no_such_module")


def test_html_to_text_leaves_css_selectors_unloaded_until_one_is_used() -> None:
    code = (
        "import sys\n"
        "from tiny_cli.tools.web import html_to_text\n"
        "print(html_to_text('<title>T</title><p class=a>one</p>'))\n"
        "print('soupsieve.css_parser' in sys.modules)\n"
        "from bs4 import BeautifulSoup\n"
        "print(BeautifulSoup('<p class=a>x</p>', 'html.parser').select_one('p.a').text)\n"
        "print('soupsieve.css_parser' in sys.modules)\n"
    )
    assert _words(code) == ["T", "one", "False", "x", "True"]


def test_a_stand_in_runs_nothing_on_import_and_loads_on_first_name() -> None:
    code = (
        "import sys\n"
        "from tiny_cli.deferred import stand_in\n"
        "stand_in('email.mime', package=True)\n"
        "import email.mime\n"
        "print('email.mime.base' in sys.modules, 'email.mime' in sys.modules)\n"
        "import email.mime.text\n"  # a submodule: the real package loads first
        "print(type(sys.modules['email.mime']).__name__, email.mime.text.MIMEText.__name__)\n"
        "stand_in('json.tool')\n"
        "from json import tool\n"  # as httpx imports its CLI: `from ._main import main`
        "print(hasattr(tool, '__file__'), callable(tool.main))\n"
    )
    assert _words(code) == ["False", "True", "module", "MIMEText", "False", "True"]


def test_the_first_parses_in_many_threads_load_pyyaml_once() -> None:
    code = (
        "import sys, threading\n"
        "from tiny_cli import yamlsafe\n"
        "assert 'yaml.constructor' not in sys.modules\n"
        "results, errors = [], []\n"
        "def parse():\n"
        "    try:\n"
        "        results.append(yamlsafe.load('id: a\\nexamples: [x, y]\\n')[1])\n"
        "    except Exception as exc:\n"
        "        errors.append(repr(exc))\n"
        "threads = [threading.Thread(target=parse) for _ in range(16)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "same = all(r == {'id': 'a', 'examples': ['x', 'y']} for r in results)\n"
        "print(errors, len(results), same)\n"
    )
    assert _words(code) == ["[]", "16", "True"]


def test_a_stand_in_taken_out_by_many_threads_gives_them_one_module() -> None:
    code = (
        "import sys, threading\n"
        "from tiny_cli.deferred import stand_in\n"
        "stand_in('json.tool')\n"
        "from json import tool\n"
        "seen = []\n"
        "threads = [threading.Thread(target=lambda: seen.append(tool.main)) for _ in range(16)]\n"
        "[t.start() for t in threads]; [t.join() for t in threads]\n"
        "print(len(seen), len({id(m) for m in seen}), sys.modules['json.tool'].main is seen[0])\n"
    )
    assert _words(code) == ["16", "1", "True"]
