"""Hostile project files and settings (issue 31): one line naming file, line and field, no
traceback, no secret echoed, every value checked before anything uses it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tiny_cli.errors import ConfigError
from tiny_cli.settings import load_settings

UNSET = dict.fromkeys(
    ["TINY_CARDS", "TINY_DOCS", "TINY_TOOLS", "TINY_BASE_URL", "TINY_MODEL", "TINY_TOOL_MODE",
     "TINY_EMBEDDER", "TINY_WALL_SCALE", "TINY_MCP", "TINY_THRESHOLD", "TINY_PROJECT"],
    "",
)  # fmt: skip
DEEP_ARRAYS = "cards = " + "[" * 50_000 + "]" * 50_000 + "\n"
DEEP_TABLES = "[project]\nname = " + "{a = " * 5_000 + "1" + "}" * 5_000 + "\n"
SECRET = "ghp_s3cretT0KENvalue"
SECRET_URLS = [
    f"http://user:{SECRET}@host/v1",
    f"http://{SECRET}@host/v1",  # user info without a password
    f"http://host/v1?api_key={SECRET}",
    f"http://host/v1?x=1&access_token={SECRET}",
    f"http://host/v1?Sig={SECRET}",
    f"https://host/v1#token={SECRET}",
    f"http://host/v1?apikey={SECRET}",
    f"http://host/v1?X-Api-Key={SECRET}",
    f"http://host/v1?authToken={SECRET}",
]


def test_a_query_parameter_is_a_credential_by_its_words_not_by_its_letters(tmp_path) -> None:
    url = "http://host/v1?api-version=2024-02-01&monkey=1&keyword=tea"
    assert _settings(tmp_path, TINY_BASE_URL=url).base_url == url


def _settings(cwd: Path, **env: str):
    return load_settings(env={"TINY_HOME": str(cwd / "home"), **UNSET, **env}, cwd=cwd)


def _error(cwd: Path, **env: str) -> str:
    with pytest.raises(ConfigError) as err:
        _settings(cwd, **env)
    message = str(err.value)
    assert "\n" not in message
    return message


def _one_line(result) -> str:
    assert "Traceback" not in result.output
    [line] = result.output.strip().splitlines()
    assert line.startswith("tiny: error: ")
    return line


def test_a_deeply_nested_tiny_toml_is_one_line_not_a_recursion_error(tiny, tmp_path) -> None:
    """Finding 1: 50,000 nested arrays crashed `tiny route` with a RecursionError."""
    (tmp_path / "tiny.toml").write_text(DEEP_ARRAYS)
    env = {**UNSET, "TINY_PROJECT": str(tmp_path / "tiny.toml")}
    result = tiny("route", "how many words", env=env)
    assert result.exit_code == 2
    assert f"{tmp_path / 'tiny.toml'}: nested too deeply to read" in _one_line(result)


def test_a_deep_pyproject_above_is_one_error_even_without_tool_tiny(tmp_path) -> None:
    """Finding 1: any pyproject.toml in a parent folder, 5,000 inline tables deep."""
    (tmp_path / "pyproject.toml").write_text(DEEP_TABLES)
    deep = tmp_path / "src" / "pkg"
    deep.mkdir(parents=True)
    assert _error(deep) == f"{tmp_path / 'pyproject.toml'}: nested too deeply to read"


@pytest.mark.skipif(not Path("/dev/zero").exists(), reason="no /dev/zero")
def test_a_project_file_that_is_a_device_or_pipe_is_read_with_a_bound(tmp_path) -> None:
    """A bound on `stat().st_size` is no bound for /dev/zero: the read itself is bounded."""
    assert "larger than 1 MiB; not read" in _error(tmp_path, TINY_PROJECT="/dev/zero")
    fifo = tmp_path / "tiny.toml"
    os.mkfifo(fifo)  # no writer: read as empty, no hang
    assert _settings(tmp_path, TINY_PROJECT=str(fifo)).project_file == fifo


@pytest.mark.parametrize("url", SECRET_URLS)
def test_credentials_in_base_url_are_refused_from_every_source(tiny, tmp_path, url) -> None:
    """Finding 17: user info without a password, or a key in the query, passed before."""
    (tmp_path / "tiny.toml").write_text(f'model = "m"\nbase_url = "{url}"\n')
    message = _error(tmp_path)
    assert message.startswith(f"{tmp_path / 'tiny.toml'}:2: base_url: ")
    assert "credential" in message and SECRET not in message
    env_message = _error(tmp_path, TINY_PROJECT="none", TINY_BASE_URL=url)
    assert env_message.startswith("TINY_BASE_URL: ") and SECRET not in env_message
    flag = tiny("invoke", "docs-finder", "hello", "--base-url", url, env={"TINY_BASE_URL": ""})
    assert flag.exit_code == 2
    line = _one_line(flag)
    assert "--base-url: " in line and "credential" in line and SECRET not in line


def test_a_base_url_with_harmless_query_or_none_passes(tmp_path) -> None:
    url = "https://host.example/openai/v1?api-version=2024-02-01"
    assert _settings(tmp_path, TINY_BASE_URL=url).base_url == url


@pytest.mark.parametrize(
    "text",
    [
        f'base_url = ["http://user:{SECRET}@host/v1"]\n',
        f'base_url = {{url = "http://{SECRET}@host/v1"}}\n',
        f'allow_hosts = "{SECRET}"\n',
        f'model = ["{SECRET}"]\n',
    ],
)
def test_a_mistyped_value_is_never_echoed(tmp_path, text) -> None:
    """Finding 9: a list holding the URL was printed, password and all."""
    (tmp_path / "tiny.toml").write_text(text)
    message = _error(tmp_path)
    assert message.startswith(f"{tmp_path / 'tiny.toml'}:1: ")
    assert "expected" in message and SECRET not in message


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("threshold = nan\n", "threshold=nan"),
        ("threshold = inf\n", "threshold=inf"),
        ("threshold = -inf\n", "threshold=-inf"),
        ("threshold = 1e400\n", "threshold=inf"),
        ("wall_scale = nan\n", "wall_scale=nan"),
        ("wall_scale = 0\n", "wall_scale=0.0"),
        ('tool_mode = "fast"\n', "tool_mode='fast'"),
        ('embedder = "bogus"\n', "embedder='bogus'"),
        ('embedder = "openai:"\n', "embedder='openai:'"),
        ('allow_hosts = ["a b"]\n', "allow_hosts"),
        ('base_url = "ftp://host/v1"\n', "base_url: must be an http:// or https:// URL"),
        ('base_url = "http://[::1/v1"\n', "base_url: not a usable URL"),
        ('cards = "a\\u0000b"\n', "cards: holds a NUL"),
        ('cards = " "\n', "cards: blank"),
    ],
)
def test_every_value_error_names_file_line_and_field(tmp_path, text, field) -> None:
    """Finding 19: `threshold = nan` named tiny.toml in none of 4 cases."""
    (tmp_path / "tiny.toml").write_text('# settings\n\nmodel = "m"\n' + text)
    message = _error(tmp_path)
    assert message.startswith(f"{tmp_path / 'tiny.toml'}:4: {field}")


def test_a_pyproject_value_error_names_its_line_in_tool_tiny(tmp_path) -> None:
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nthreshold = 1\n\n[tool.tiny]\nmodel = "m"\nthreshold = nan\n'
    )
    message = _error(tmp_path)
    assert message.startswith(f"{tmp_path / 'pyproject.toml'}:6: [tool.tiny].threshold=nan")


@pytest.mark.parametrize("command", [("route", "hi"), ("route", "hi", "--explain"), ("validate",)])
def test_threshold_nan_names_the_file_in_every_command(tiny, tmp_path, command) -> None:
    """Finding 19 through the CLI: the error names the file before any command uses the value."""
    (tmp_path / "tiny.toml").write_text("threshold = nan\n")
    result = tiny(*command, env={"TINY_PROJECT": str(tmp_path / "tiny.toml")})
    assert result.exit_code == 2
    assert f"{tmp_path / 'tiny.toml'}:1: threshold=nan" in _one_line(result)


def test_threshold_from_the_environment_and_flag_is_checked_by_name(tiny, tmp_path) -> None:
    assert _error(tmp_path, TINY_THRESHOLD="nan").startswith("TINY_THRESHOLD='nan': ")
    flagged = tiny("route", "hi", "--threshold", "nan")
    assert flagged.exit_code == 2 and "--threshold='nan': must be a finite" in _one_line(flagged)


# --- any text at all ------------------------------------------------------------------------

toml_text = st.one_of(
    st.text(max_size=200),
    st.lists(
        st.sampled_from(
            ["base_url", "threshold", "cards", "allow_hosts", "tool_mode", "wall_scale",
             "embedder", "api_key", "[tool.tiny]", "[x]", "=", " = ", '"', "'", "[", "]",
             "{", "}", ",", "\n", "nan", "inf", "1e999", "true", "@", "?token=",
             f"http://u:{SECRET}@h/", f"http://{SECRET}@h", "\x00", "\u2028", "\x1b[31m"]
        ),
        max_size=30,
    ).map("".join),
)  # fmt: skip


@settings(
    max_examples=150,
    deadline=2000,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(text=toml_text)
@example(text=DEEP_ARRAYS)
@example(text=f'base_url = ["http://user:{SECRET}@host/v1"]')
@example(text=f'base_url = "http://{SECRET}@h"')
@example(text=f'"\\u001b[31m{SECRET}" = 1')
@example(text="threshold = 99999999999999999999999999999999999999999999999999999")
def test_any_project_file_is_settings_or_one_line_that_shows_no_secret(tmp_path, text) -> None:
    """Whatever tiny.toml (or pyproject's [tool.tiny]) holds: settings, or one ConfigError
    line; never the secret, never a terminal escape."""
    for name, body in (("tiny.toml", text), ("pyproject.toml", "[tool.tiny]\n" + text)):
        (tmp_path / name).write_text(body, "utf-8", errors="surrogatepass")
        try:
            loaded = _settings(tmp_path, TINY_PROJECT=str(tmp_path / name))
        except ConfigError as err:
            message = str(err)
            assert "\n" not in message and SECRET not in message and "\x1b" not in message
            continue
        assert SECRET not in loaded.base_url


# --- tiny init: all or nothing --------------------------------------------------------------


def test_init_with_cards_a_plain_file_fails_in_one_line_and_writes_nothing(tiny, tmp_path) -> None:
    """Finding 14: it exited 0 and reported `kept cards/word-counter.yaml`, which was no file."""
    (tmp_path / "cards").write_text("not a folder\n")
    result = tiny("init", str(tmp_path), env=UNSET)
    assert result.exit_code == 2
    assert f"{tmp_path / 'cards'}: not a folder; tiny init wrote nothing" in _one_line(result)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cards", "home"]


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs /proc: a folder no one writes")
def test_a_failed_init_leaves_nothing_so_the_rerun_works(tiny, tmp_path) -> None:
    """Finding 18: a failure part way left tiny.toml behind, and the rerun refused."""
    project = tmp_path / "proj"
    project.mkdir()
    (project / "my_tools.py").write_text("# mine\n")
    (project / "cards").symlink_to("/proc/self")  # a folder whose files cannot be created
    failed = tiny("init", str(project), env=UNSET)
    assert failed.exit_code == 2
    assert "word-counter.yaml: cannot write" in _one_line(failed)
    assert sorted(p.name for p in project.iterdir()) == ["cards", "my_tools.py"]
    (project / "cards").unlink()  # the cause fixed
    again = tiny("init", str(project), env=UNSET)
    assert again.exit_code == 0, again.output
    said = [line for line in again.output.splitlines() if not line.startswith("tiny: warning:")]
    assert sorted(" ".join(said).split()) == sorted(
        ["written", str(project / "tiny.toml"), "written",
         str(project / "cards/word-counter.yaml"), "kept", str(project / "my_tools.py")]
    )  # fmt: skip
    assert (project / "my_tools.py").read_text() == "# mine\n"


def test_init_keeps_only_files_and_refuses_a_folder_in_a_file_s_place(tmp_path) -> None:
    """A folder named my_tools.py was reported `kept`, and tiny.toml pointed at it."""
    from tiny_cli.scaffold import init_project

    target = tmp_path / "proj"
    (target / "my_tools.py").mkdir(parents=True)
    with pytest.raises(ConfigError, match=r"my_tools\.py: exists and is not a file"):
        init_project(target)
    assert sorted(p.name for p in target.iterdir()) == ["my_tools.py"]


def test_a_missing_mcp_file_names_the_project_file_that_named_it(tmp_path: Path) -> None:
    """It blamed TINY_MCP, a variable the user never set."""
    from tiny_cli.workspace import open_workspace

    (tmp_path / "cards").mkdir()
    (tmp_path / "tiny.toml").write_text('mcp = "nope.yaml"\n', "utf-8")
    settings = load_settings({"TINY_HOME": str(tmp_path / "home")}, cwd=tmp_path)
    with pytest.raises(ConfigError) as caught:
        open_workspace(settings)
    toml = tmp_path / "tiny.toml"
    assert str(caught.value) == f"{tmp_path / 'nope.yaml'} (from mcp in {toml}): no such file"
    assert caught.value.field == "mcp"
    env = {"TINY_HOME": str(tmp_path / "home"), "TINY_MCP": str(tmp_path / "gone.yaml")}
    with pytest.raises(ConfigError, match=r"^TINY_MCP=.*gone\.yaml: no such file$"):
        open_workspace(load_settings(env, cwd=tmp_path))
