"""The front door refuses bad input up front: one ConfigError naming what is wrong, its facts
as attributes, before any model call; never a bare TypeError, AttributeError or KeyError.

Each test goes through `tiny_cli` as a library caller would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import tiny_cli
from tiny_cli import ConfigError, ScriptedServer, http_error, reply

ROOT = Path(__file__).resolve().parent.parent
TASK = "How does onboarding work here?"
ANSWER = json.dumps({"status": "ok", "summary": "Two weeks.", "source": "onboarding.md"})


class Never:
    """A provider that fails the test if a run gets as far as asking the model."""

    def complete(self, request: Any, *, timeout: float | None = None) -> Any:
        raise AssertionError("the model must not be asked")


@pytest.fixture
def settings(tmp_path: Path) -> tiny_cli.Settings:
    """Settings with this repository's cards and a scratch home, nothing from the caller."""
    return tiny_cli.load_settings(env={"TINY_HOME": str(tmp_path / "home")}, cwd=tmp_path)


@pytest.fixture
def workspace(settings: tiny_cli.Settings) -> tiny_cli.Workspace:
    return tiny_cli.open_workspace(settings.with_flags(cards_dir=ROOT / "cards"))


def _refused(call: Any) -> ConfigError:
    """Run `call`, which must raise ConfigError, and return it."""
    with pytest.raises(ConfigError) as caught:
        call()
    return caught.value


# --- 1. a key in the base URL's query ----------------------------------------------------


def test_a_key_in_the_base_urls_query_is_refused_and_never_shown() -> None:
    error = _refused(lambda: tiny_cli.OpenAIProvider("http://127.0.0.1:9/v1?api_key=SECRET123"))
    assert error.field == "base_url" and "SECRET123" not in str(error)
    assert "base_url" in str(error)


def test_a_plain_query_goes_after_the_path_and_is_never_shown() -> None:
    with ScriptedServer([reply("hi"), http_error(401)]) as server:
        provider = tiny_cli.OpenAIProvider(server.url + "?api-version=1", retries=0)
        request = tiny_cli.ChatRequest("m", [{"role": "user", "content": "hi"}], [], 8)
        assert provider.complete(request).content == "hi"  # posted to /v1/chat/completions
        with pytest.raises(tiny_cli.ProviderError) as caught:
            provider.complete(request)
    assert caught.value.url == server.url and "api-version" not in str(caught.value)
    assert "api-version" not in repr(provider)


# --- 2, 3. one check of every Brief, made directly or by make_brief ----------------------


@pytest.mark.parametrize(
    ("fields", "wrong"),
    [
        ({"goal": ""}, "goal"),
        ({"goal": None}, "goal"),
        ({"goal": "x", "max_output_tokens": 3}, "max_output_tokens"),
        ({"goal": "x", "max_output_tokens": "50"}, "max_output_tokens"),
        ({"goal": "x", "must_return": [1]}, "must_return"),
        ({"goal": "x", "inputs": ["a"]}, "inputs"),
        ({"goal": "x", "context_hint": 5}, "context_hint"),
    ],
)
def test_a_brief_made_directly_is_checked_as_make_brief_checks_it(fields, wrong) -> None:
    assert _refused(lambda: tiny_cli.Brief(**fields)).field == wrong
    assert _refused(lambda: tiny_cli.make_brief(**fields)).field == wrong


def test_must_return_as_one_string_is_comma_separated_names_either_way() -> None:
    direct = tiny_cli.Brief(" go ", must_return="source, owner,,source")
    assert direct == tiny_cli.make_brief("go", must_return="source,owner")
    assert direct.must_return == ("source", "owner") and direct.goal == "go"


def test_a_long_hint_given_directly_is_cut_and_the_cut_noted() -> None:
    brief = tiny_cli.Brief("x", context_hint="h" * 900)
    assert len(brief.context_hint) == 800
    assert brief.notes == ("context_hint cut from 900 to 800 characters",)


@pytest.mark.parametrize(
    ("arguments", "wrong"),
    [
        ({"goal": 123}, "goal"),
        ({"goal": "x", "max_output_tokens": "100"}, "max_output_tokens"),
        ({"goal": "x", "max_output_tokens": True}, "max_output_tokens"),
        ({"goal": "x", "context_hint": 5}, "context_hint"),
        ({"goal": "x", "inputs": ["a"]}, "inputs"),
        ({"goal": "x", "inputs": {"a": [1]}}, "inputs"),
        ({"goal": "x", "must_return": None}, "must_return"),
        ({"goal": "x", "must_return": [1]}, "must_return"),
        ({"goal": "x", "file": 5}, "file"),
    ],
)
def test_make_brief_names_the_argument_of_the_wrong_type(arguments, wrong) -> None:
    error = _refused(lambda: tiny_cli.make_brief(**arguments))
    assert error.field == wrong and wrong in str(error)


def test_make_brief_takes_text_inputs_a_str_file_and_comma_separated_fields(tmp_path) -> None:
    assert tiny_cli.make_brief("x", must_return="name,phone").must_return == ("name", "phone")
    assert tiny_cli.make_brief("x", inputs={"a": 1}).inputs == {"a": "1"}  # as a file's
    brief = tmp_path / "brief.yaml"
    brief.write_text("goal: from the file\nmust_return: a, b\n")
    made = tiny_cli.make_brief(file=str(brief), must_return="c")
    assert (made.goal, made.must_return) == ("from the file", ("a", "b", "c"))


def test_a_brief_files_inputs_and_hint_reach_the_model_as_the_user_wrote_them(tmp_path) -> None:
    # YAML 1.1 reads 12:30 as 750, the ZIP code 02134 as the octal 1116 and yes as True
    brief = tmp_path / "brief.yaml"
    brief.write_text(
        "goal: book it\ncontext_hint: 12:30\n"
        "inputs: {time: 12:30, zip: 02134, ok: yes, big: 1_000, none: ~, quoted: '007'}\n"
    )
    made = tiny_cli.make_brief(file=brief)
    assert made.context_hint == "12:30"
    assert made.inputs == {
        "time": "12:30",
        "zip": "02134",
        "ok": "yes",
        "big": "1_000",
        "none": "",
        "quoted": "007",
    }
    listed = tmp_path / "listed.yaml"
    listed.write_text("goal: g\ninputs: [02134, 12:30]\n")
    assert tiny_cli.make_brief(file=listed).inputs == {"input1": "02134", "input2": "12:30"}


def test_a_brief_file_value_that_the_brief_refuses_names_the_file(tmp_path) -> None:
    brief = tmp_path / "brief.yaml"
    brief.write_text("goal: x\nmax_output_tokens: -5\n")
    error = _refused(lambda: tiny_cli.make_brief(file=brief))
    assert str(error).startswith(f"{brief}: max_output_tokens -5 is impossible")
    assert (error.path, error.field) == (brief, "max_output_tokens")


# --- 4. with_flags ------------------------------------------------------------------------


def test_with_flags_takes_a_str_for_a_folder(settings, tmp_path) -> None:
    flagged = settings.with_flags(cards_dir=str(ROOT / "cards"), home=str(tmp_path / "h2"))
    assert flagged.cards_dir == ROOT / "cards" and flagged.home == tmp_path / "h2"
    assert isinstance(flagged.cache_dir, Path)  # home / "cache": no str / str
    assert "docs-finder" in tiny_cli.open_workspace(flagged).cards


def test_with_flags_names_a_flag_that_is_no_setting(settings) -> None:
    error = _refused(lambda: settings.with_flags(bogus=1))
    assert error.field == "bogus" and "'bogus'" in str(error)
    assert _refused(lambda: settings.with_flags(cards_dir=5)).field == "cards_dir"


# --- 5. invoke with a registry that lacks a card's tool ------------------------------------


def test_invoke_names_the_card_and_the_tool_its_registry_lacks(workspace) -> None:
    card = workspace.cards["docs-finder"]
    brief = tiny_cli.make_brief(TASK)
    error = _refused(
        lambda: tiny_cli.invoke(
            card, brief, registry=tiny_cli.Registry(), provider=Never(), model="m"
        )
    )
    assert "docs-finder" in str(error) and "'docs_search'" in str(error)
    assert error.field == "registry"


def test_invoke_runs_with_a_registry_of_the_callers_own_tools(workspace) -> None:
    @tiny_cli.tool
    def docs_search(query: str) -> str:
        """Search the handbook.

        Args:
            query: What to look for.
        """
        return "onboarding.md: two weeks, with a buddy"

    model = ScriptedServer([tiny_cli.tool_call("docs_search", {"query": "x"}), reply(ANSWER)])
    with model, tiny_cli.OpenAIProvider(model.url) as provider:
        digest = tiny_cli.invoke(
            workspace.cards["docs-finder"],
            tiny_cli.make_brief(TASK),
            registry=tiny_cli.Registry([docs_search]),
            provider=provider,
            model="m",
        )
    assert digest.status == "ok" and [c.name for c in digest.calls] == ["docs_search"]


@pytest.mark.parametrize(
    ("name", "value"),
    [("card", "docs-finder"), ("brief", TASK), ("registry", ["docs_search"]),
     ("provider", object()), ("approve", None)],
)  # fmt: skip
def test_invoke_refuses_an_argument_of_the_wrong_kind_before_the_model(workspace, name, value):
    arguments = {
        "card": workspace.cards["crm-writer"],
        "brief": tiny_cli.make_brief("add Acme GmbH from Berlin to the CRM"),
        "registry": workspace.registry,
        "provider": Never(),
    }
    arguments[name] = value
    error = _refused(lambda: tiny_cli.invoke(**arguments, model="m"))
    assert error.field == name and str(error).startswith(f"{name}: must be ")


def test_a_providers_own_error_tells_the_observers_the_run_ended(workspace) -> None:
    class Broken:
        def complete(self, request: Any, *, timeout: float | None = None) -> Any:
            raise ConnectionResetError("peer went away")

    events: list[Any] = []
    with pytest.raises(ConnectionResetError):
        tiny_cli.invoke(
            workspace.cards["docs-finder"],
            tiny_cli.make_brief(TASK),
            registry=workspace.registry,
            provider=Broken(),
            model="m",
            observer=events.append,
        )
    assert [type(e).__name__ for e in events][-1] == "Aborted"
    assert events[-1].reason == "ConnectionResetError"


def test_a_huge_number_in_a_first_call_stopped_at_is_bad_arguments(workspace) -> None:
    arguments = '{"query": "x", "limit": 1' + "0" * 5000 + "}"
    model = ScriptedServer([tiny_cli.tool_call("docs_search", arguments)])
    with model, tiny_cli.OpenAIProvider(model.url) as provider:
        digest = tiny_cli.invoke(
            workspace.cards["docs-finder"],
            tiny_cli.make_brief(TASK),
            registry=workspace.registry,
            provider=provider,
            model="m",
            stop_at_first_call=True,
        )
    assert (digest.status, [c.outcome for c in digest.calls]) == ("partial", ["bad_arguments"])


# --- 6. run_card / delegate entry checks -----------------------------------------------


def test_run_card_refuses_an_approve_that_is_no_function_before_the_model(workspace) -> None:
    brief = tiny_cli.make_brief("add Acme GmbH from Berlin to the CRM")
    error = _refused(
        lambda: tiny_cli.run_card(workspace, "crm-writer", brief, provider=Never(), approve=True)
    )
    assert error.field == "approve" and "approve" in str(error)


@pytest.mark.parametrize("brief", ["how does onboarding work", {"goal": "x"}])
def test_run_card_and_delegate_refuse_a_brief_that_is_no_brief(workspace, brief) -> None:
    error = _refused(lambda: tiny_cli.run_card(workspace, "docs-finder", brief, provider=Never()))
    assert error.field == "brief"
    router = SimpleNamespace(route=Never().complete)  # never reached
    error = _refused(lambda: tiny_cli.delegate(workspace, router, brief, provider=Never()))
    assert error.field == "brief"


def test_run_card_refuses_a_provider_that_cannot_complete(workspace) -> None:
    brief = tiny_cli.make_brief(TASK)
    error = _refused(lambda: tiny_cli.run_card(workspace, "docs-finder", brief, provider=None))
    assert error.field == "provider"


# --- 7. ConfigError's path and field ------------------------------------------------------


def test_a_missing_cards_folder_names_the_folder_and_who_gave_it(tmp_path) -> None:
    missing = tmp_path / "no-cards"
    flagged = tiny_cli.load_settings(env={"TINY_HOME": str(tmp_path)}).with_flags(cards_dir=missing)
    error = _refused(lambda: tiny_cli.open_workspace(flagged))
    assert (error.path, error.field) == (missing, "cards_dir")  # a keyword, no flag typed
    from_env = tiny_cli.load_settings(env={"TINY_HOME": str(tmp_path), "TINY_CARDS": str(missing)})
    error = _refused(lambda: tiny_cli.open_cards(from_env))
    assert (error.path, error.field) == (missing, "TINY_CARDS")


def test_a_missing_mcp_file_names_the_file_and_the_variable(tmp_path) -> None:
    env = {"TINY_HOME": str(tmp_path), "TINY_MCP": str(tmp_path / "no-mcp.yaml")}
    settings = tiny_cli.load_settings(env=env).with_flags(cards_dir=ROOT / "cards")
    error = _refused(lambda: tiny_cli.open_workspace(settings))
    assert (error.path, error.field) == (tmp_path / "no-mcp.yaml", "TINY_MCP")


@pytest.mark.parametrize(
    ("text", "field"),
    [(None, None), ("goal: [unclosed\n", None), ("goal: x\nfoo: 1\n", "foo")],
)
def test_a_brief_file_that_cannot_be_used_is_the_errors_path(tmp_path, text, field) -> None:
    path = tmp_path / "brief.yaml"
    if text is not None:
        path.write_text(text)
    error = _refused(lambda: tiny_cli.make_brief(file=path))
    assert (error.path, error.field) == (path, field)


# --- 8. what `import tiny_cli` loads, as architecture.md says it --------------------------


def test_the_root_loads_the_error_tree_not_the_settings_as_the_architecture_says() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TINY_")}
    check = (
        "import sys, tiny_cli\n"
        "print('tiny_cli.errors' in sys.modules, 'tiny_cli.settings' in sys.modules)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", check], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.stdout == "True False\n", done.stderr
    doc = (ROOT / "docs" / "architecture.md").read_text("utf-8")
    said = doc[doc.index("The root imports") :].split("\n\n", 1)[0]
    assert "the settings at once" not in said and "the settings too" in said


# --- 9. a ScriptedServer used in two `with` blocks ---------------------------------------


def test_a_scripted_server_starts_again_after_its_with_block() -> None:
    model = ScriptedServer([reply("one"), reply("two")])
    request = tiny_cli.ChatRequest("m", [{"role": "user", "content": "hi"}], [], 8)
    answers = []
    for _ in range(2):
        with model, tiny_cli.OpenAIProvider(model.url, retries=0) as provider:
            answers.append(provider.complete(request).content)
        assert repr(model).startswith("ScriptedServer(stopped")
    assert answers == ["one", "two"] and len(model.requests) == 2


# --- 10. the note of a writer nobody approves ---------------------------------------------


def test_the_note_of_a_writer_nobody_approves_tells_a_library_caller_of_approve(workspace):
    brief = tiny_cli.make_brief("add Acme GmbH from Berlin to the CRM")
    digest = tiny_cli.run_card(workspace, "crm-writer", brief, provider=Never())
    assert digest.status == "needs_confirmation"
    assert "approve=" in digest.notes_for_caller[0] and "--yes" in digest.notes_for_caller[0]


def test_an_unknown_card_id_is_quoted_short(tmp_path: Path) -> None:
    home = {"TINY_HOME": str(tmp_path)}
    settings = tiny_cli.load_settings(env=home).with_flags(cards_dir=ROOT / "cards")
    ws = tiny_cli.open_workspace(settings)
    with pytest.raises(ConfigError) as caught:
        ws.card("x" * 1_000_000)
    assert len(str(caught.value)) < 400 and "xxx…'" in str(caught.value)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [(("http://127.0.0.1:9/v1", 5), "api_key"), (("http://127.0.0.1:9/v1", "sk-a\nb"), "api_key"),
     (("http://[x/v1",), "base_url"), ((5,), "base_url")],
)  # fmt: skip
def test_a_provider_argument_refused_is_named_by_its_field(arguments, field) -> None:
    error = _refused(lambda: tiny_cli.OpenAIProvider(*arguments))
    assert error.field == field


def test_a_registry_of_tool_names_is_refused_naming_the_argument() -> None:
    error = _refused(lambda: tiny_cli.Registry(["docs_search"]))
    assert (error.field, str(error)) == (
        "tools",
        "tools: must be tools (made with @tool), got a string",
    )
