"""A library caller's wrong argument is one ConfigError naming it, before any work: a run's
tool mode, wall scale and temperature; a Settings built directly; what a custom provider
returns; OpenAIProvider's options; with_flags' keywords; approve's arguments; a script's turns.

Each test goes through `tiny_cli` as a library caller would, with the scripted model server.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

import tiny_cli as T
from tiny_cli import ConfigError, ScriptedServer

ROOT = Path(__file__).resolve().parent.parent
TASK = "How does onboarding work here?"
ANSWER = json.dumps({"status": "ok", "summary": "Two weeks.", "source": "onboarding.md"})


def _refused(call: Any) -> ConfigError:
    """Run `call`, which must raise ConfigError, and return it."""
    with pytest.raises(ConfigError) as caught:
        call()
    return caught.value


@pytest.fixture
def settings(tmp_path: Path) -> T.Settings:
    """This repository's cards, a scratch home, no project file."""
    env = {"TINY_HOME": str(tmp_path / "home"), "TINY_PROJECT": "none"}
    return T.load_settings(env=env, cwd=tmp_path).with_flags(cards_dir=ROOT / "cards")


@pytest.fixture
def workspace(settings: T.Settings) -> T.Workspace:
    return T.open_workspace(settings)


# --- 1. invoke's tool_mode, wall_scale and temperature -------------------------------------


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"temperature": "hot"}, "temperature: must be a number"),
        ({"temperature": 9}, "temperature 9: must be a number from 0"),
        ({"tool_mode": "xml"}, "tool_mode='xml': use one of native, json, auto"),
        ({"tool_mode": 3}, "tool_mode: must be one of native, json, auto"),
        ({"wall_scale": "2"}, "wall_scale: must be a number"),
        ({"wall_scale": -1}, "wall_scale=-1.0: must be a number above 0"),
    ],
)
def test_invoke_refuses_a_bad_run_setting_by_its_keyword_before_any_request(
    workspace: T.Workspace, scripted_server: ScriptedServer, given: dict, said: str
) -> None:
    scripted_server.add(T.tool_call("docs_search", {"query": "onboarding"}), T.reply(ANSWER))
    card, brief = workspace.cards["docs-finder"], T.make_brief(TASK)
    with T.OpenAIProvider(scripted_server.url, retries=0) as provider:
        error = _refused(
            lambda: T.invoke(
                card, brief, registry=workspace.registry, provider=provider, model="m", **given
            )
        )
        assert str(error).startswith(said) and error.field == next(iter(given))
        assert scripted_server.requests == []  # nothing reached the model
        digest = T.invoke(card, brief, registry=workspace.registry, provider=provider, model="m",
                          tool_mode="native", wall_scale=2, temperature=0)  # fmt: skip
    assert digest.status == "ok" and scripted_server.requests[0]["temperature"] == 0


# --- 2. a Settings built directly ---------------------------------------------------------


def test_a_settings_built_with_str_folders_holds_them_as_paths(tmp_path: Path) -> None:
    settings = T.Settings(home=str(tmp_path / "home"), cards_dir=str(ROOT / "cards"), docs_dir="d")
    assert settings.home == tmp_path / "home" and settings.docs_dir == Path("d")
    assert "docs-finder" in T.open_workspace(settings).cards


def test_a_settings_built_directly_holds_its_values_as_with_flags_does(tmp_path: Path) -> None:
    direct = T.Settings(home=tmp_path, cards_dir=tmp_path, docs_dir=tmp_path, wall_scale=2)
    flagged = T.load_settings({"TINY_HOME": str(tmp_path)}).with_flags(wall_scale=2)
    assert direct.wall_scale == flagged.wall_scale and type(direct.wall_scale) is float


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"wall_scale": "3"}, "Settings: wall_scale must be a number, got str"),
        ({"wall_scale": 0}, "wall_scale=0.0: must be a number above 0"),
        ({"tool_mode": "xml"}, "tool_mode='xml': use one of native, json, auto"),
        ({"temperature": "0.2"}, "Settings: temperature must be a number, got str"),
        ({"temperature": 5}, "temperature 5: must be a number from 0"),
        ({"home": 3}, "Settings: home must be a path, got int"),
        ({"log_runs": "no"}, "Settings: log_runs must be True or False, got str"),
    ],
)
def test_a_settings_built_directly_refuses_a_bad_field_by_name(
    tmp_path: Path, given: dict, said: str
) -> None:
    folders: dict[str, Any] = {"home": tmp_path, "cards_dir": tmp_path, "docs_dir": tmp_path}
    error = _refused(lambda: T.Settings(**{**folders, **given}))
    assert str(error).startswith(said) and error.field == next(iter(given))


# --- 3. what a custom provider returns ----------------------------------------------------


class Canned:
    """A Provider that gives its answers in turn."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)

    def complete(self, request: T.ChatRequest, *, timeout: float | None = None) -> Any:
        return self.answers.pop(0)


SEARCH = T.ToolCall("call_1", "docs_search", {"query": "onboarding"})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        (None, "returned None, not a tiny_cli.Completion"),
        (ANSWER, "returned a str, not a tiny_cli.Completion"),
        (
            T.Completion(None, (SEARCH,), 0, 0, "tool_calls", {}),
            "whose tool_calls[0].arguments is a dict, not JSON text",
        ),
        (
            T.Completion(ANSWER, (), None, None, "stop", {}),  # type: ignore[arg-type]
            "whose tokens_in is None, not a token count",
        ),
    ],
)
def test_a_provider_that_breaks_its_contract_is_named_with_what_it_returned(
    workspace: T.Workspace, answer: Any, said: str
) -> None:
    brief = T.make_brief(TASK)
    error = _refused(lambda: T.run_card(workspace, "docs-finder", brief, provider=Canned(answer)))
    assert str(error).startswith("provider Canned: complete() ") and said in str(error)
    assert error.field == "provider"


def _searched(*calls: T.ToolCall) -> Canned:
    """A provider that asks for `calls` (a list, as a provider may give them), then answers."""
    return Canned(
        T.Completion(None, list(calls), 1, 1, "tool_calls", {}),
        T.Completion(ANSWER, (), 1, 1, None, {}),  # no finish reason: a provider may give none
    )


def test_a_provider_that_keeps_its_contract_still_runs(workspace: T.Workspace) -> None:
    search = T.ToolCall("call_1", "docs_search", '{"query": "onboarding"}')
    digest = T.run_card(workspace, "docs-finder", T.make_brief(TASK), provider=_searched(search))
    assert digest.status == "ok" and [c.name for c in digest.calls] == ["docs_search"]


# --- 4. OpenAIProvider's options ----------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"retries": "3"}, "retries: must be a whole number, 0 or more, got a str"),
        ({"retries": 2.5}, "retries: must be a whole number, 0 or more, got 2.5"),
        ({"retries": -1}, "retries: must be a whole number, 0 or more, got -1"),
        ({"timeout": None}, "timeout: must be a number of seconds above 0"),
        ({"backoff": "1"}, "backoff: must be a number of seconds, 0 or more, got a str"),
        ({"transport": "x"}, "transport: must be an httpx transport"),
    ],
)
def test_openai_provider_refuses_a_bad_option_by_name(given: dict, said: str) -> None:
    error = _refused(lambda: T.OpenAIProvider("http://127.0.0.1:9/v1", **given))
    assert str(error).startswith(said) and error.field == next(iter(given))


# --- 5. with_flags names a keyword by its keyword -----------------------------------------


@pytest.mark.parametrize(
    ("given", "keyword", "flag"),
    [
        ({"wall_scale": -1}, "wall_scale=-1.0: ", "--wall-scale=-1.0: "),
        ({"temperature": 9}, "temperature 9: ", "--temperature 9: "),
        ({"tool_mode": "xml"}, "tool_mode='xml': ", "--tool-mode='xml': "),
        ({"base_url": "foo"}, "base_url: must be an http", "--base-url: must be an http"),
    ],
)
def test_with_flags_names_the_keyword_unless_the_command_line_gave_it(
    settings: T.Settings, given: dict, keyword: str, flag: str
) -> None:
    error = _refused(lambda: settings.with_flags(**given))
    assert str(error).startswith(keyword) and error.field == next(iter(given))
    from_cli = _refused(lambda: settings.with_flags(from_cli=True, **given))
    assert str(from_cli).startswith(flag) and from_cli.field == re.split("[=: ]", flag)[0]


# --- 6. approve's arguments ---------------------------------------------------------------


def test_an_approver_that_cannot_take_three_arguments_is_refused_before_the_run(
    workspace: T.Workspace, scripted_server: ScriptedServer
) -> None:
    brief = T.make_brief("add Foo GmbH in Berlin to the CRM")
    with T.OpenAIProvider(scripted_server.url, retries=0) as provider:
        error = _refused(
            lambda: T.run_card(
                workspace, "crm-writer", brief, provider=provider, approve=lambda tool: True
            )
        )
    assert str(error).startswith("approve: must be a function of three arguments")
    assert error.field == "approve" and scripted_server.requests == []


def test_an_approver_of_three_arguments_or_any_is_taken(workspace: T.Workspace) -> None:
    card, brief = workspace.cards["docs-finder"], T.make_brief(TASK)
    for approve in (lambda card, tool, arguments: False, lambda *args: False, print):
        provider = _searched(T.ToolCall("call_1", "docs_search", '{"query": "onboarding"}'))
        digest = T.invoke(card, brief, registry=workspace.registry, model="m", approve=approve,
                          provider=provider)  # fmt: skip
        assert digest.status == "ok"


# --- 7. a script of one turn --------------------------------------------------------------


def test_a_scripted_server_given_one_turn_not_a_list_says_so() -> None:
    error = _refused(lambda: ScriptedServer(T.reply("hi")))  # type: ignore[arg-type]
    assert str(error).startswith("turns: must be a list of scripted turns")
    assert "ScriptedServer([turn])" in str(error) and error.field == "turns"
