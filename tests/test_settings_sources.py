"""Settings refused where they are read, naming where they came from: a variable that is not
UTF-8, a blank flag, an allow_hosts entry no connection could match; `--tools` on every
command that loads cards; a threshold said as coming from where it was set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tiny_cli.errors import ConfigError
from tiny_cli.settings import load_settings
from tiny_cli.testing import ScriptedServer, reply
from tiny_cli.tools.web import AllowedHost

from .conftest import one_error_line

ANSWER = '{"status": "ok", "summary": "A buddy and a plan.", "source": "onboarding.md"}'
INVOKE = ("invoke", "docs-finder", "how did the onboarding process work again", "--json")
NOT_UTF8 = "\udcff"  # what Python makes of the byte 0xff in a variable or an argument
SECRET = "hunter2"


@pytest.fixture
def cli_env(cli_env: dict[str, str], plain_cards: Path) -> dict[str, str]:
    """Cards whose answers need no tool result; no project file but the one a test names."""
    return {**cli_env, "TINY_CARDS": str(plain_cards), "TINY_PROJECT": "none"}


@pytest.fixture
def project(tiny, tmp_path: Path) -> Path:
    """A `tiny init` project (word-counter, my_tools.py); its tiny.toml read by every command."""
    folder = tmp_path / "p"
    assert tiny("init", str(folder)).exit_code == 0
    return folder


def in_project(project: Path, **env: str) -> dict[str, str]:
    """The environment that makes `project` the project: its file, its cards and tools."""
    return {"TINY_PROJECT": str(project / "tiny.toml"), "TINY_CARDS": "", **env}


def toml_with(project: Path, line: str, drop: str = "") -> Path:
    """Append `line` to the project's tiny.toml, without the line starting `drop`; its path."""
    toml = project / "tiny.toml"
    lines = toml.read_text("utf-8").splitlines()
    kept = [x for x in lines if not (drop and x.startswith(drop))]
    toml.write_text("\n".join([*kept, line, ""]), "utf-8")
    return toml


# --- 1. a variable that is not UTF-8 is refused when settings are read, naming it -------------


@pytest.mark.parametrize(
    ("var", "value", "args"),
    [
        ("TINY_MODEL", f"m{NOT_UTF8}", INVOKE),
        ("TINY_BASE_URL", "{url}/" + NOT_UTF8, INVOKE),
        ("TINY_EMBEDDER", f"openai:{NOT_UTF8}", ("route", "x")),
        ("TINY_HOME", f"/tmp/{NOT_UTF8}", INVOKE),
        ("TINY_API_KEY", f"sk-{SECRET}{NOT_UTF8}", INVOKE),
    ],
)
def test_a_variable_that_is_not_utf8_is_one_line_naming_it(tiny, var, value, args) -> None:
    with ScriptedServer([reply(ANSWER)]) as server:
        env = {"TINY_BASE_URL": server.url, var: value.format(url=server.url)}
        line = one_error_line(tiny(*args, env=env))
    assert line.startswith(f"{var}: ") and server.requests == []
    assert SECRET not in line and NOT_UTF8 not in line


def test_load_settings_refuses_a_value_that_is_not_utf8() -> None:
    with pytest.raises(ConfigError) as caught:
        load_settings(env={"TINY_PROJECT": "none", "TINY_TOOLS": f"t{NOT_UTF8}.py"})
    assert caught.value.field == "TINY_TOOLS"


def test_a_flag_that_is_not_utf8_is_one_line_naming_it(tiny) -> None:
    with ScriptedServer([reply(ANSWER)]) as server:
        result = tiny(*INVOKE, "--model", NOT_UTF8, env={"TINY_BASE_URL": server.url})
    assert one_error_line(result).startswith("--model: ") and server.requests == []


# --- 2. a blank flag is refused, not read as "none" over the project file's value -------------


def test_a_blank_tools_flag_is_refused_not_dropping_the_files(tiny, project: Path) -> None:
    result = tiny("validate", "--tools", "", env=in_project(project))
    assert one_error_line(result).startswith("--tools: blank")


def test_a_blank_cards_flag_is_refused_not_read_as_the_working_folder(tiny, project) -> None:
    result = tiny("validate", "--cards", "", env=in_project(project))
    assert "Invalid value for '--cards': blank" in one_error_line(result)


def test_a_blank_allow_host_flag_is_refused(tiny, project: Path) -> None:
    toml_with(project, 'allow_hosts = ["127.0.0.1:8000"]')
    with ScriptedServer([reply(ANSWER)]) as server:
        env = in_project(project, TINY_BASE_URL=server.url)
        result = tiny("invoke", "word-counter", "count a b", "--allow-host=", env=env)
    assert one_error_line(result).startswith("--allow-host: blank") and server.requests == []


@pytest.mark.parametrize(
    "flags",
    [{"tools_spec": " "}, {"cards_dir": ""}, {"mcp_file": "\t"}, {"allow_hosts": [" ", ""]}],
)
def test_with_flags_refuses_a_blank_value_naming_the_keyword(flags: dict) -> None:
    settings = load_settings(env={"TINY_PROJECT": "none"})
    name = next(iter(flags))
    with pytest.raises(ConfigError, match=f"^{name}: blank") as caught:
        settings.with_flags(**flags)
    assert caught.value.field == name
    with pytest.raises(ConfigError, match=r"^--tools: blank"):
        settings.with_flags(from_cli=True, tools_spec="")


# --- 3. allow_hosts entries are checked when read, and the error says where from --------------


@pytest.mark.parametrize("entry", ["[::1", "host:abc", "127.0.0.1:99999", "127.0.0.1:0", "a b"])
def test_a_project_files_bad_allowed_host_names_the_file_and_line(tiny, project, entry) -> None:
    toml = toml_with(project, f'allow_hosts = ["ok.test", "{entry}"]')
    line_number = len(toml.read_text("utf-8").splitlines())
    line = one_error_line(tiny("validate", env=in_project(project)))
    assert line.startswith(f"{toml}:{line_number}: allow_hosts"), line
    assert "give a host or host:port" in line


def test_a_bad_allowed_host_variable_is_named_and_never_echoed(tiny) -> None:
    line = one_error_line(tiny("validate", env={"TINY_ALLOW_HOSTS": f"http://u:{SECRET}@x"}))
    assert line.startswith("TINY_ALLOW_HOSTS") and SECRET not in line


def test_a_bad_allow_host_flag_is_named_before_the_model_is_asked(tiny) -> None:
    with ScriptedServer([reply(ANSWER)]) as server:
        env = {"TINY_BASE_URL": server.url}
        result = tiny(*INVOKE, "--allow-host", "127.0.0.1:99999", env=env)
    assert one_error_line(result).startswith("--allow-host=") and server.requests == []


def test_allowed_host_parse_refuses_a_port_no_connection_has() -> None:
    for bad in ("127.0.0.1:99999", "127.0.0.1:0", "[::1]:70000"):
        with pytest.raises(ConfigError, match="allowed host"):
            AllowedHost.parse(bad)
    assert AllowedHost.parse("x.test:65535") == AllowedHost("x.test", 65535)


def test_a_cards_table_is_named_at_its_line(tiny, project: Path) -> None:
    toml = toml_with(project, '[cards]\nfolder = "cards"', drop="cards =")
    line_number = toml.read_text("utf-8").splitlines().index("[cards]") + 1
    line = one_error_line(tiny("validate", env=in_project(project)))
    assert line == f"{toml}:{line_number}: cards: expected a string, got a table"


# --- 4. --tools for learn and runs correct, as for every command -----------------------------


def test_learn_takes_tools_as_every_command_does(tiny, project: Path) -> None:
    toml_with(project, "", drop="tools =")
    env = in_project(project, TINY_EMBEDDER="hashing")
    assert "unknown tool 'count_words'" in tiny("learn", env=env).stderr
    result = tiny("learn", "--tools", str(project / "my_tools.py"), "--json", env=env)
    assert result.exit_code == 0, result.output


def test_runs_correct_takes_tools(tiny, project: Path) -> None:
    toml_with(project, "", drop="tools =")
    env = in_project(project, TINY_EMBEDDER="hashing")
    tools = ("--tools", str(project / "my_tools.py"))
    assert tiny("delegate", "make me a sandwich", "--json", *tools, env=env).exit_code == 6
    [run] = json.loads(tiny("runs", "--json", env=env).stdout)
    args = ("runs", "correct", str(run["id"]), "--card", "word-counter", "--json")
    assert "unknown tool 'count_words'" in tiny(*args, env=env).stderr
    result = tiny(*args, *tools, env=env)
    assert result.exit_code == 0, result.output


# --- 5. a threshold is said as coming from where it was set ---------------------------------


@pytest.mark.parametrize(
    ("env", "flags", "said"),
    [
        ({}, (), "threshold in {toml}"),
        ({"TINY_THRESHOLD": "50"}, (), "TINY_THRESHOLD"),
        ({}, ("--threshold", "50"), "--threshold"),
    ],
)
def test_route_explains_where_its_threshold_came_from(tiny, project, env, flags, said) -> None:
    toml = toml_with(project, "threshold = 50")
    env = in_project(project, TINY_EMBEDDER="hashing", **env)
    result = tiny("route", "count the words of my essay", "--explain", "--json", *flags, env=env)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["threshold_source"] == f"given by {said.format(toml=toml)}"


def test_learn_says_a_project_files_threshold_comes_from_the_file(tiny, project: Path) -> None:
    toml = toml_with(project, "threshold = 0")  # 0: set, though not true
    result = tiny("learn", "--json", env=in_project(project, TINY_EMBEDDER="hashing"))
    assert result.exit_code == 0, result.output
    note = json.loads(result.stdout)["threshold_note"]
    assert note.startswith(f"threshold 0 given by threshold in {toml} applies; ")


def test_where_a_setting_came_from_is_kept_by_kind_and_never_given() -> None:
    settings = load_settings({"TINY_CARDS": "/tmp/some-cards"}, cwd="/")
    assert (settings.origin("cards_dir").kind, str(settings.origin("cards_dir"))) == (
        "env",
        "TINY_CARDS",
    )
    typed = settings.with_flags(cards_dir="/tmp/other", from_cli=True)
    assert (typed.origin("cards_dir").kind, str(typed.origin("cards_dir"))) == ("flag", "--cards")
    assert settings.with_flags(cards_dir="/tmp/other").origin("cards_dir").kind == "keyword"
    assert settings.origin("model") is None  # left to its default
    with pytest.raises(ConfigError, match=r"^with_flags: origins are kept by with_flags"):
        settings.with_flags(origins=[("cards_dir", "TINY_CARDS")])
