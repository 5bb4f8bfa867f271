"""What tiny builds once per process (tool specs) and what stays per run (tools with state)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tiny_cli.agent.loop import approve_writes, decline_writes, invoke
from tiny_cli.bench.arms import scratch_registry
from tiny_cli.digest import make_brief
from tiny_cli.provider.client import OpenAIProvider
from tiny_cli.settings import Settings, load_settings
from tiny_cli.testing import reply, tool_call
from tiny_cli.tools import Registry, tool
from tiny_cli.tools.artifacts import READ_ARTIFACT, ArtifactStore
from tiny_cli.tools.builtin import builtin_entries, default_registry
from tiny_cli.tools.registry import LazyTool, Tool
from tiny_cli.workspace import Workspace, open_workspace

from .conftest import HANDBOOK, REPO, SEED_CARDS

BUILTIN_NAMES = ["http_get", "html_to_text", "docs_search", "crm_find_company", "crm_add_company"]
DOCS_ANSWER = {"status": "ok", "summary": "Day one: laptop.", "source": "onboarding.md"}
PING = {"description": "Ping.", "parameters": {"type": "object", "properties": {}}}
CRM_ANSWER = {"status": "ok", "summary": "Added.", "company_id": 1, "name": "Acme GmbH"}


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(home=tmp_path / "home", cards_dir=SEED_CARDS, docs_dir=HANDBOOK)


@pytest.fixture
def workspace(home: Path) -> Workspace:
    env = {"TINY_HOME": str(home), "TINY_CARDS": str(SEED_CARDS), "TINY_DOCS": str(HANDBOOK)}
    return open_workspace(load_settings(env=env))


# --- tool specs: once per process ---------------------------------------------------------


def test_a_second_registry_builds_no_spec(settings: Settings, tmp_path: Path) -> None:
    first = default_registry(settings)
    first.schemas(BUILTIN_NAMES)
    [first[name] for name in BUILTIN_NAMES]
    second = default_registry(replace(settings, home=tmp_path / "other"))
    schemas = second.schemas(BUILTIN_NAMES)
    made = [second[name] for name in BUILTIN_NAMES]
    assert schemas == first.schemas(BUILTIN_NAMES)
    assert [t.arguments_model for t in made] == [first[n].arguments_model for n in BUILTIN_NAMES]


def test_a_function_made_a_tool_again_shares_its_model_not_its_schema() -> None:
    def remember(word: str, times: int = 1) -> list[str]:
        """Remember a word.

        Args:
            word: The word.
            times: How often.
        """
        return [word] * times

    one, two = tool(remember), tool(remember)
    assert one.arguments_model is two.arguments_model  # one model class, built once
    assert one.parameters == two.parameters and one.parameters is not two.parameters
    one.parameters["properties"]["word"]["description"] = "changed by one run"
    assert two.parameters["properties"]["word"]["description"] == "The word."
    assert tool(remember).parameters["properties"]["word"]["description"] == "The word."


def test_closures_made_for_two_runs_keep_their_own_state() -> None:
    def make(state: list[str]) -> Any:
        @tool
        def remember(word: str, times: int = 1) -> int:
            """Remember a word."""
            state.extend([word] * times)
            return len(state)

        return remember

    one_state: list[str] = []
    two_state: list[str] = []
    one, two = make(one_state), make(two_state)
    assert one.parameters == two.parameters
    assert one(word="a", times=2.0) == 2 and two(word="b") == 1  # each closure its own state
    assert one_state == ["a", "a"] and two_state == ["b"]


def test_a_different_default_or_docstring_is_a_different_spec() -> None:
    def make(default: int, doc: str) -> Any:
        def count(n: int = default) -> int:
            return n

        count.__doc__ = doc
        return tool(count)

    five, six = make(5, "Count."), make(6, "Count.")
    assert five.parameters["properties"]["n"]["default"] == 5
    assert six.parameters["properties"]["n"]["default"] == 6
    assert make(5, "Count on.").description == "Count on."


def test_specs_are_built_once_across_threads() -> None:
    def racing(x: int) -> int:
        """Race."""
        return x

    made: list[Any] = []
    threads = [threading.Thread(target=lambda: made.append(tool(racing))) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({id(t.arguments_model) for t in made}) == 1  # one model for every thread


# --- built-ins: lazy, per run -------------------------------------------------------------


def test_builtins_are_made_only_when_looked_up(settings: Settings) -> None:
    registry = default_registry(settings)
    assert registry.writes() == {n: n == "crm_add_company" for n in BUILTIN_NAMES}
    assert "docs_search" in registry and list(registry) == BUILTIN_NAMES
    schemas = registry.schemas(["docs_search"])
    assert schemas[0]["function"]["parameters"]["properties"]["limit"]["maximum"] == 20
    assert all(isinstance(registry.entry(n), LazyTool) for n in BUILTIN_NAMES)  # none made
    assert registry["docs_search"](query="onboarding")[0]["path"] == "onboarding.md"
    assert [n for n in BUILTIN_NAMES if isinstance(registry.entry(n), Tool)] == ["docs_search"]


def test_validating_cards_imports_no_tool_module() -> None:
    code = (
        "import sys\n"
        "from tiny_cli.settings import load_settings\n"
        "from tiny_cli.tools.builtin import default_registry\n"
        "registry = default_registry(load_settings(env={}))\n"
        "registry.writes()\n"
        "registry.schemas(list(registry))\n"
        "heavy = ('tiny_cli.tools.web', 'httpx', 'bm25s', 'numpy', 'bs4')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    env = {**os.environ, "TINY_HOME": str(REPO / "nowhere"), "TINY_ALLOW_HOSTS": ""}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env=env, check=True
    )
    assert json.loads(out.stdout.replace("'", '"')) == []


def test_a_lazy_tool_is_made_once_per_registry_across_threads() -> None:
    owners: list[object] = []

    class Owner:
        def __init__(self) -> None:
            owners.append(self)

        def ping(self) -> str:
            """Ping."""
            return "pong"

    registry = Registry([LazyTool(Owner.ping, Owner, PING)])
    found: list[object] = []
    threads = [threading.Thread(target=lambda: found.append(registry["ping"])) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(owners) == 1 and all(f is found[0] for f in found)
    assert registry["ping"]() == "pong"
    assert Registry([LazyTool(Owner.ping, Owner, PING)])["ping"]() == "pong" and len(owners) == 2


def test_two_runs_share_no_crm(workspace: Workspace, tmp_path: Path) -> None:
    one = scratch_registry(workspace.registry, replace(workspace.settings, home=tmp_path / "a"))
    two = scratch_registry(workspace.registry, replace(workspace.settings, home=tmp_path / "b"))
    one["crm_add_company"](name="Acme GmbH", city="Berlin")
    assert one["crm_find_company"](name="acme")[0]["name"] == "Acme GmbH"  # one store per run
    assert two["crm_find_company"](name="acme") == []
    assert one["crm_add_company"].func.__self__ is one["crm_find_company"].func.__self__
    assert one["crm_add_company"].func.__self__ is not two["crm_add_company"].func.__self__
    assert one["crm_add_company"].arguments_model is two["crm_add_company"].arguments_model


def test_entries_of_two_settings_are_two_owners(settings: Settings, tmp_path: Path) -> None:
    one = builtin_entries(settings)[3].build()
    two = builtin_entries(replace(settings, home=tmp_path / "elsewhere"))[3].build()
    assert one.func.__self__ is not two.func.__self__
    assert one.schema() == two.schema()


def test_approval_is_per_run_not_per_tool(workspace: Workspace, scripted_server) -> None:
    add = {"name": "Acme GmbH", "city": "Berlin"}
    for _ in range(2):
        scripted_server.add(
            tool_call("crm_find_company", {"name": "Acme GmbH"}),
            tool_call("crm_add_company", add),
            reply(json.dumps(CRM_ANSWER)),
        )
    card, brief = workspace.card("crm-writer"), make_brief("add Acme GmbH from Berlin")
    provider = OpenAIProvider(scripted_server.url)
    declined = invoke(
        card, brief, registry=workspace.registry, provider=provider, model="m",
        approve=decline_writes,
    )  # fmt: skip
    approved = invoke(
        card, brief, registry=workspace.registry, provider=provider, model="m",
        approve=approve_writes,
    )  # fmt: skip
    assert [c.outcome for c in declined.calls][-1] == "declined"
    assert [c.outcome for c in approved.calls][-1] == "ok"


# --- read_artifact: only for a run that holds artifacts -----------------------------------


@pytest.mark.parametrize("holds", [False, True], ids=["no artifacts", "an artifact"])
def test_read_artifact_is_offered_only_to_a_run_with_artifacts(
    workspace: Workspace, scripted_server, home: Path, holds: bool
) -> None:
    store = ArtifactStore(home)
    held = (store.save("a long page " * 50, tool="http_get", card="web-reader"),) if holds else ()
    scripted_server.add(
        tool_call("docs_search", {"query": "onboarding"}), reply(json.dumps(DOCS_ANSWER))
    )
    digest = invoke(
        workspace.card("docs-finder"),
        make_brief("how did the onboarding process work again"),
        registry=workspace.registry,
        provider=OpenAIProvider(scripted_server.url),
        model="m",
        artifacts=store,
        held=held,
    )
    offered = [
        [t["function"]["name"] for t in r.get("tools") or ()] for r in scripted_server.requests
    ]
    assert digest.status == "ok"
    assert all((READ_ARTIFACT in names) == holds for names in offered)
