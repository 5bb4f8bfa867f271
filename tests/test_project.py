"""The project file (tiny.toml, [tool.tiny]), its precedence, `tiny init` and `tiny cards`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_cli.errors import ConfigError, ToolError
from tiny_cli.setting_rules import check_tracing
from tiny_cli.settings import DEFAULT_MODEL, load_settings, model_for
from tiny_cli.testing import ScriptedServer, reply, tool_call
from tiny_cli.workspace import open_workspace

# what a user's shell has when they set nothing: every TINY_ variable empty
UNSET = dict.fromkeys(
    ["TINY_CARDS", "TINY_DOCS", "TINY_TOOLS", "TINY_BASE_URL", "TINY_MODEL", "TINY_TOOL_MODE",
     "TINY_EMBEDDER", "TINY_WALL_SCALE", "TINY_MCP", "TINY_THRESHOLD"],
    "",
)  # fmt: skip


def _project(folder: Path, text: str, name: str = "tiny.toml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_text(text, "utf-8")
    return folder / name


def _settings(cwd: Path, **env: str):
    return load_settings(env={"TINY_HOME": str(cwd / "home"), **env}, cwd=cwd)


def test_precedence_is_flag_then_env_then_project_then_card_then_default(tmp_path) -> None:
    _project(tmp_path, 'model = "from-project"\ntool_mode = "json"\nwall_scale = 2\n')
    project = _settings(tmp_path)
    assert (project.model, project.tool_mode, project.wall_scale) == ("from-project", "json", 2)
    assert model_for(project, "from-card") == "from-project"  # the project file beats the card
    env = _settings(tmp_path, TINY_MODEL="from-env", TINY_TOOL_MODE="native")
    assert (env.model, env.tool_mode) == ("from-env", "native")
    flag = env.with_flags(model="from-flag", tool_mode="auto")
    assert (flag.model, flag.tool_mode) == ("from-flag", "auto")
    bare = _settings(tmp_path, TINY_PROJECT="none")
    assert model_for(bare, "from-card") == "from-card"
    assert model_for(bare, None) == DEFAULT_MODEL
    assert bare.project_file is None and project.project_file == tmp_path / "tiny.toml"


def test_the_nearest_project_file_above_the_working_directory_wins(tmp_path) -> None:
    _project(tmp_path, '[tool.tiny]\ncards = "agents"\n', "pyproject.toml")
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    _project(tmp_path / "src", '[project]\nname = "x"\n', "pyproject.toml")  # no [tool.tiny]
    assert _settings(deep).cards_dir == tmp_path / "agents"  # relative to the file, not cwd
    _project(tmp_path, 'cards = "cards-here"\n')  # tiny.toml before pyproject.toml
    assert _settings(deep).cards_dir == tmp_path / "cards-here"
    assert _settings(deep, TINY_CARDS="elsewhere").cards_dir == Path("elsewhere")


def test_switches_from_the_file_give_way_to_the_environment(tmp_path) -> None:
    _project(tmp_path, 'log_runs = false\nask_route = true\nallow_hosts = ["127.0.0.1:8000"]\n')
    s = _settings(tmp_path)
    assert (s.log_runs, s.ask_route, s.allow_hosts) == (False, True, ("127.0.0.1:8000",))
    s = _settings(tmp_path, TINY_NO_LOG="0", TINY_ASK_ROUTE="0", TINY_ALLOW_HOSTS="a.test")
    assert (s.log_runs, s.ask_route, s.allow_hosts) == (True, False, ("a.test",))


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('api_key = "sk-abc"\n', "api_key: a project file never holds a secret"),
        ('github_token = "x"\n', "github_token: a project file never holds a secret"),
        ('githubToken = "x"\n', "githubToken: a project file never holds a secret"),
        ('apikey = "x"\n', "apikey: a project file never holds a secret"),
        ("monkey = 1\n", "monkey: unknown setting"),  # a secret word inside a word is no secret
        ('tokenizer = "x"\n', "tokenizer: unknown setting"),
        ('base_url = "https://u:pw@host/v1"\n', "base_url: credentials in the URL"),
        ('modle = "x"\n', "modle: unknown setting (did you mean 'model'?)"),
        ("wall_scale = true\n", "wall_scale: expected a number, got True"),
        ('tool_mode = "fast"\n', "tool_mode='fast': use one of native, json, auto"),
        ("cards = [\n", "not valid TOML"),
        ("allow_hosts = [1]\n", "allow_hosts: expected a list of host[:port] strings"),
    ],
)
def test_a_bad_project_file_is_one_error_naming_file_and_key(tmp_path, text, message) -> None:
    path = _project(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        _settings(tmp_path)
    assert str(err.value).startswith(str(path)) and message in str(err.value)
    assert "sk-abc" not in str(err.value) and "pw@" not in str(err.value)


def test_tiny_project_names_the_file_or_turns_it_off(tmp_path) -> None:
    chosen = _project(tmp_path / "conf", 'model = "chosen"\n', "mine.toml")
    _project(tmp_path, 'model = "nearest"\n')
    assert _settings(tmp_path, TINY_PROJECT=str(chosen)).model == "chosen"
    assert _settings(tmp_path, TINY_PROJECT="none").model is None
    with pytest.raises(ConfigError, match=r"TINY_PROJECT='nope\.toml': no such file"):
        _settings(tmp_path, TINY_PROJECT="nope.toml")


def test_init_then_validate_route_and_invoke_with_no_flags(tiny, tmp_path, monkeypatch) -> None:
    """A new user's first minutes: tiny init, edit the card, then every command bare."""
    project = tmp_path / "proj"
    project.mkdir()
    monkeypatch.chdir(project)  # where the user works: the project file is found from here
    result = tiny("init", env=UNSET)
    assert result.exit_code == 0, result.output
    assert "written  tiny.toml" in result.output
    card = project / "cards" / "word-counter.yaml"
    card.write_text(card.read_text().replace("Counts the words", "Counts all the words"))
    assert tiny("validate", env=UNSET).exit_code == 0
    routed = tiny("route", "how many words are in my essay", "--json", env=UNSET)
    assert json.loads(routed.stdout)["agent_id"] == "word-counter"
    with ScriptedServer() as server:
        toml = project / "tiny.toml"
        toml.write_text(toml.read_text() + f'base_url = "{server.url}"\n')
        server.add(
            tool_call("count_words", {"text": "one two three"}),
            reply('{"status": "ok", "summary": "3 words", "answer": "3"}'),
        )
        ran = tiny("invoke", "word-counter", "count: one two three", "--json", env=UNSET)
    assert ran.exit_code == 0, ran.output
    digest = json.loads(ran.stdout)
    assert digest["status"] == "ok" and digest["fields"]["answer"] == "3"
    first, second = server.requests
    assert [t["function"]["name"] for t in first["tools"]] == ["count_words"]
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": second["messages"][-2]["tool_calls"][0]["id"],
        "content": "3",
    }  # the user's own tool ran, from the module tiny.toml names


def test_init_keeps_what_is_there_and_never_writes_over_a_project_file(tiny, tmp_path) -> None:
    (tmp_path / "my_tools.py").write_text("# mine\n")
    result = tiny("init", str(tmp_path), "--json", env=UNSET)
    files = {f["path"]: f["status"] for f in json.loads(result.stdout)["files"]}
    assert files == {"tiny.toml": "written", "cards/word-counter.yaml": "written",
                     "my_tools.py": "kept"}  # fmt: skip
    assert (tmp_path / "my_tools.py").read_text() == "# mine\n"
    again = tiny("init", str(tmp_path), env=UNSET)
    assert again.exit_code == 2 and "tiny.toml: already exists" in again.output
    assert "Traceback" not in again.output


def test_an_unknown_tool_says_where_tools_come_from(tiny, tmp_path) -> None:
    folder = tmp_path / "cards"
    folder.mkdir()
    (folder / "w.yaml").write_text(
        "id: weather\nsummary: Says the weather.\ntools: [get_weather]\n"
        "returns_required: [answer]\nside_effects: none\n"
    )
    result = tiny("validate", env={"TINY_CARDS": str(folder)})
    assert result.exit_code == 1
    assert "unknown tool 'get_weather'" in result.output
    assert 'tools = "my_tools.py" in tiny.toml' in " ".join(result.output.split())


def test_cards_list_and_show_say_what_the_model_gets(tiny) -> None:
    listed = json.loads(tiny("cards", "list", "--json").stdout)
    assert [c["id"] for c in listed] == ["crm-writer", "docs-finder", "web-reader"]
    shown = json.loads(tiny("cards", "show", "docs-finder", "--json").stdout)
    assert shown["system_prompt"].startswith("You are docs-finder, a tiny agent with one job:")
    assert [s["function"]["name"] for s in shown["tool_schemas"]] == ["docs_search"]
    human = tiny("cards", "show", "docs-finder")
    assert "system prompt:" in human.output and "Tools you can call: docs_search." in human.output
    missing = tiny("cards", "show", "nope")
    assert missing.exit_code == 2 and "no card 'nope'" in missing.output


def test_a_missing_cards_folder_says_who_named_it_and_hints_only_without_cards(
    tiny, tmp_path, monkeypatch
) -> None:
    """`--cards nope` needs no advice to pass --cards; a variable or tiny.toml is named."""
    _project(tmp_path, 'cards = "agents"\n')
    monkeypatch.chdir(tmp_path)  # the project file is found from here
    flagged = tiny("route", "hi", "--cards", "nope", env=UNSET)
    assert flagged.exit_code == 2
    assert flagged.stderr == "tiny: error: no cards directory nope (given by --cards)\n"
    env = tiny("route", "hi", env={**UNSET, "TINY_CARDS": "gone"})
    assert "no cards directory gone (from TINY_CARDS); pass --cards or change it" in env.stderr
    toml = tiny("route", "hi", env=UNSET)
    named = f"{tmp_path / 'agents'} (from cards in {tmp_path / 'tiny.toml'}); pass --cards"
    assert toml.exit_code == 2 and named in toml.stderr


def test_a_setting_a_library_caller_gave_is_named_by_its_keyword(tmp_path, monkeypatch) -> None:
    """From Python, `with_flags(cards_dir=…)` is said as the keyword, not as a flag never typed."""
    for name, value in UNSET.items():
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(tmp_path)  # no project file here
    with pytest.raises(ConfigError) as caught:
        open_workspace(load_settings().with_flags(cards_dir=tmp_path / "gone"))
    assert str(caught.value) == f"no cards directory {tmp_path / 'gone'} (given by cards_dir)"
    with pytest.raises(ToolError) as failed:
        open_workspace(load_settings().with_flags(cards_dir=tmp_path, tools_spec="no_such_tools"))
    assert str(failed.value).endswith("(the tool module named by tools_spec)")
    typed = load_settings().with_flags(from_cli=True, cards_dir=tmp_path)
    assert str(typed.origin("cards_dir")) == "--cards"


def test_init_says_it_kept_a_tool_module_and_validate_names_who_chose_it(
    tiny, tmp_path, monkeypatch
) -> None:
    """A my_tools.py of the user's own, kept by init, is named with the setting that names it."""
    (tmp_path / "my_tools.py").write_text("x = 1\n")
    monkeypatch.chdir(tmp_path)
    made = tiny("init", env=UNSET)
    assert made.exit_code == 0 and "kept     my_tools.py" in made.stdout
    assert "tiny: warning: kept my_tools.py, which was already there; tiny.toml names it" in (
        made.stderr
    )
    checked = tiny("validate", env=UNSET)
    assert checked.exit_code == 2 and "Traceback" not in checked.output
    assert checked.stderr == (
        f"tiny: error: {tmp_path / 'my_tools.py'}: no tools found; decorate functions with "
        f"@tiny_cli.tools.tool (the tool module named by tools in {tmp_path / 'tiny.toml'})\n"
    )


def test_cards_show_piped_is_not_wrapped_so_its_json_parses(tiny) -> None:
    """Not at a terminal there are no 80 columns to fit: the schemas print as one JSON text."""
    shown = json.loads(tiny("cards", "show", "crm-writer", "--json").stdout)
    human = tiny("cards", "show", "crm-writer").stdout
    prompt, schemas = human.split("\nsystem prompt:\n", 1)[1].split("\n\ntool schemas:\n")
    assert json.loads(schemas) == shown["tool_schemas"]
    assert prompt == shown["system_prompt"]
    assert max(map(len, human.splitlines())) > 80  # there were lines to wrap


# --- tracing: the OTEL_* variables as the SDK reads them, else the project file (issue 35) ---


@pytest.mark.parametrize(
    ("file", "env", "exporters"),
    [
        ("", {}, ()),
        ("", {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, ("otlp",)),
        ("", {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://c.test/v1/traces"}, ("otlp",)),
        ("", {"OTEL_TRACES_EXPORTER": "otlp, console"}, ("otlp", "console")),
        ("", {"OTEL_SERVICE_NAME": "svc"}, ()),  # names the service; says nothing of where to
        ("tracing = true\n", {}, ("otlp",)),
        ("tracing = true\n", {"OTEL_TRACES_EXPORTER": "none"}, ()),  # the variable wins
        ("tracing = false\n", {"OTEL_TRACES_EXPORTER": "console"}, ("console",)),
        ("tracing = true\n", {"OTEL_SDK_DISABLED": "true"}, ()),
    ],
)
def test_tracing_is_on_when_the_variables_or_the_file_say_so(
    tmp_path, file: str, env: dict[str, str], exporters: tuple[str, ...]
) -> None:
    _project(tmp_path, file)
    settings = load_settings(env=env, cwd=tmp_path)
    assert settings.tracing == exporters and not settings.trace_content
    capture = {**env, "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "True"}
    assert load_settings(env=capture, cwd=tmp_path).trace_content


@pytest.mark.parametrize(
    ("file", "env", "message"),
    [
        ("", {"OTEL_TRACES_EXPORTER": "zipkin"}, "OTEL_TRACES_EXPORTER='zipkin': tiny exports"),
        (
            "",
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c.test", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
            "OTEL_EXPORTER_OTLP_PROTOCOL='grpc': tiny sends OTLP as http/protobuf",
        ),
        ('tracing = "yes"\n', {}, "tracing: expected true or false, got a string"),
    ],
)
def test_a_tracing_setting_tiny_cannot_follow_is_one_clear_error(
    tmp_path, file: str, env: dict[str, str], message: str
) -> None:
    _project(tmp_path, file)
    with pytest.raises(ConfigError, match=message.replace("(", r"\(")) as caught:
        check_tracing(load_settings(env=env, cwd=tmp_path).tracing, env)  # where a run traces
    assert "\n" not in str(caught.value)
