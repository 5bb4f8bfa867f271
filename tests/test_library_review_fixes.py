"""The front door after a review: `tiny_cli.delegate` stays the function, the scripted server
fails a test it could not serve, and wrong arguments are ConfigErrors naming the argument.

Each test goes through `tiny_cli` (or `tiny_cli.testing`) as a library caller would.
"""

from __future__ import annotations

import os
import pkgutil
import subprocess
import sys
from datetime import date
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest

import tiny_cli
from tiny_cli import ConfigError, ScriptedServer, reply
from tiny_cli.testing import Turn

ROOT = Path(__file__).resolve().parent.parent
TASK = "How does onboarding work here?"


class Never:
    """A provider that fails the test if a run gets as far as asking the model."""

    def complete(self, request: Any, *, timeout: float | None = None) -> Any:
        raise AssertionError("the model must not be asked")


@pytest.fixture
def settings(tmp_path: Path) -> tiny_cli.Settings:
    """This repository's cards, a scratch home and the hashing embedder (no model to load)."""
    env = {"TINY_HOME": str(tmp_path / "home"), "TINY_EMBEDDER": "hashing"}
    loaded = tiny_cli.load_settings(env=env, cwd=tmp_path)
    return loaded.with_flags(cards_dir=ROOT / "cards")


@pytest.fixture
def workspace(settings: tiny_cli.Settings) -> tiny_cli.Workspace:
    return tiny_cli.open_workspace(settings)


@pytest.fixture
def router(settings: tiny_cli.Settings, workspace: tiny_cli.Workspace) -> tiny_cli.Router:
    return tiny_cli.build_router(settings, workspace.cards.values())


def _refused(call: Any) -> ConfigError:
    """Run `call`, which must raise ConfigError, and return it."""
    with pytest.raises(ConfigError) as caught:
        call()
    return caught.value


# --- 1. `delegate` is the function, whatever loaded its module ---------------------------


@pytest.mark.slow
@pytest.mark.parametrize("face", ["tiny_cli.cli.run", "tiny_cli.serve"])
def test_delegate_is_the_function_after_a_face_was_imported(face: str, tmp_path: Path) -> None:
    # a test that first runs the `tiny` command, then calls tiny_cli.delegate(...)
    check = (
        f"import {face}\nimport tiny_cli\nfrom tiny_cli import delegate\n"
        "print(callable(tiny_cli.delegate), callable(delegate))\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TINY_", "OPENAI_"))}
    env.update(TINY_HOME=str(tmp_path / "home"), PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "-c", check], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert done.stdout == "True True\n", done.stderr[-3000:]


def test_no_export_is_named_as_a_module_of_the_package() -> None:
    # importing such a module sets the package's attribute to it, over the export
    modules = {module.name for module in pkgutil.iter_modules(tiny_cli.__path__)}
    assert modules & set(tiny_cli.__all__) == set()


# --- 4. the scripted server fails a test it could not serve ------------------------------


def test_a_turn_that_is_no_turn_is_refused_when_scripted() -> None:
    message = {"role": "assistant", "content": "hi"}
    error = _refused(lambda: ScriptedServer([message]))
    assert "turn #1" in str(error) and "dict" in str(error)
    server = ScriptedServer()
    assert "turn #2" in str(_refused(lambda: server.add(reply("ok"), message)))
    assert "turn #1" in str(_refused(lambda: server.on(lambda body: True, message)))


def test_a_turn_that_breaks_when_played_is_an_error_the_test_sees() -> None:
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    with ScriptedServer([Turn(message="hi")]) as server:  # type: ignore[arg-type]
        answered = httpx.post(server.url + "/chat/completions", json=body)
    assert answered.status_code == 500
    assert len(server.errors) == 1 and "POST /v1/chat/completions" in server.errors[0]
    with pytest.raises(AssertionError, match="POST /v1/chat/completions"):
        server.assert_done()


@pytest.mark.parametrize("method", ["PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"])
def test_a_method_the_server_does_not_serve_is_an_error_the_test_sees(method: str) -> None:
    with ScriptedServer() as server:
        answered = httpx.request(method, server.url + "/chat/completions")
    assert answered.status_code == 501
    assert len(server.errors) == 1 and server.errors[0].startswith(f"{method} /v1/")
    with pytest.raises(AssertionError, match=method):
        server.assert_done()


# --- 5. wrong argument types are ConfigErrors naming the argument -------------------------


def test_run_card_refuses_a_card_id_that_is_no_string(workspace) -> None:
    brief = tiny_cli.make_brief(TASK)
    error = _refused(lambda: tiny_cli.run_card(workspace, 5, brief, provider=Never()))
    assert error.field == "card_id" and "card_id" in str(error)


def test_run_card_and_delegate_refuse_a_workspace_that_is_no_workspace(router) -> None:
    brief = tiny_cli.make_brief(TASK)
    error = _refused(lambda: tiny_cli.run_card("cards", "docs-finder", brief, provider=Never()))
    assert error.field == "ws"
    error = _refused(lambda: tiny_cli.delegate("cards", router, brief, provider=Never()))
    assert error.field == "ws"


def test_delegate_refuses_a_router_that_cannot_route(workspace) -> None:
    brief = tiny_cli.make_brief(TASK)
    error = _refused(lambda: tiny_cli.delegate(workspace, None, brief, provider=Never()))
    assert error.field == "router"


@pytest.mark.parametrize(
    ("task", "top", "field"),
    [(5, 3, "task"), (None, 3, "task"), ("find the docs", "3", "top"), ("find", True, "top")],
)
def test_route_refuses_a_task_or_top_of_the_wrong_kind(router, task, top, field) -> None:
    error = _refused(lambda: router.route(task, top=top))
    assert error.field == field and str(error).startswith(f"{field}: ")


def test_route_many_refuses_one_string_for_its_list(router) -> None:
    assert _refused(lambda: router.route_many("find the docs")).field == "tasks"


@pytest.mark.parametrize("opening", [tiny_cli.open_workspace, tiny_cli.open_cards])
def test_opening_refuses_settings_that_are_no_settings(opening) -> None:
    error = _refused(lambda: opening("cards"))
    assert error.field == "settings" and "load_settings" in str(error)


@pytest.mark.parametrize("cards", [["docs-finder"], "docs-finder", 5])
def test_build_router_refuses_cards_that_are_no_cards(settings, cards) -> None:
    error = _refused(lambda: tiny_cli.build_router(settings, cards))
    assert error.field == "cards" and "workspace.cards.values()" in str(error)


def test_build_router_refuses_the_cards_mapping_itself(settings, workspace) -> None:
    assert _refused(lambda: tiny_cli.build_router(settings, workspace.cards)).field == "cards"
    assert _refused(lambda: tiny_cli.build_router("s", workspace.cards.values())).field == (
        "settings"
    )


# --- 6. a library error names the library's argument --------------------------------------


def test_route_with_top_under_one_names_the_argument_not_the_flag(router) -> None:
    error = _refused(lambda: router.route("find the docs", top=0))
    assert str(error) == "top: must be at least 1, got 0" and error.field == "top"


def test_the_command_line_still_refuses_top_zero_as_a_flag(tiny) -> None:
    result = tiny("route", "find the docs", "--top", "0")
    assert result.exit_code != 0 and "--top" in result.output


# --- 8. an input is text, a number or a boolean; bytes and objects are refused -------------


@pytest.mark.parametrize("value", [b"meeting at 10", object(), {1, 2}])
def test_make_brief_refuses_an_input_python_would_spell(value) -> None:
    error = _refused(lambda: tiny_cli.make_brief(TASK, inputs={"note": value}))
    assert error.field == "inputs" and str(error).startswith("inputs.note: must be text")
    assert "0x" not in str(error) and "b'" not in str(error)


def test_make_brief_takes_text_numbers_booleans_and_none() -> None:
    given = {"a": "x", "b": 3, "c": 2.5, "d": True, "e": None}
    brief = tiny_cli.make_brief(TASK, inputs=given)
    assert brief.inputs == {"a": "x", "b": "3", "c": "2.5", "d": "True", "e": ""}
    # and what a string says whole, as a tool result's are sent: no repr in any of them
    whole = {"day": date(2024, 1, 2), "cost": Decimal("1.50"), "file": Path("a/b.txt"),
             "n": np.int64(7)}  # fmt: skip
    assert tiny_cli.make_brief(TASK, inputs=whole).inputs == {
        "day": "2024-01-02", "cost": "1.50", "file": "a/b.txt", "n": "7"
    }  # fmt: skip
