"""Bad input found by a sweep of every command: each is one line naming the file, the key or
the value, and a non-zero exit; nothing is silently dropped or overwritten."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from typer.testing import Result

from tiny_cli import userfiles
from tiny_cli.digest import make_brief
from tiny_cli.errors import ConfigError
from tiny_cli.routing.examples_file import LEARNED_FILENAME
from tiny_cli.settings import load_settings
from tiny_cli.testing import reply
from tiny_cli.userfiles import load_json

SEED_CARDS = Path(__file__).resolve().parent.parent / "cards"
TIMES_TWO = "appears twice"


def _one_error_line(result: Result, code: int = 2) -> str:
    """The single `tiny: error:` line a refused input gives, with its exit code."""
    assert result.exit_code == code, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tiny: error: "), result.stderr
    return lines[0]


def test_a_brief_with_a_key_twice_is_refused_at_its_line(tiny, tmp_path: Path) -> None:
    brief = tmp_path / "brief.yaml"
    brief.write_text("goal: the first goal\nmust_return: [answer]\ngoal: the second\n", "utf-8")
    line = _one_error_line(tiny("invoke", "docs-finder", "--brief", str(brief)))
    assert f"{brief}: invalid YAML/JSON: key 'goal' {TIMES_TWO}" in line
    assert line.endswith("(line 3)")


def test_a_brief_files_yaml_error_says_what_is_wrong_not_only_where(tmp_path: Path) -> None:
    """It kept the first line of PyYAML's text: the context ("while scanning a plain scalar")."""
    brief = tmp_path / "brief.yaml"
    brief.write_text("goal: x\n\tinputs: {}\n", "utf-8")
    with pytest.raises(ConfigError) as caught:
        make_brief(file=brief)
    assert str(caught.value) == (
        f"{brief}: invalid YAML/JSON: found a tab character that violates indentation "
        "(while scanning a plain scalar, line 2)"
    )


def test_a_json_brief_with_an_emoji_as_python_writes_it_is_read(tmp_path: Path) -> None:
    """json.dump writes 🚀 as a surrogate pair libyaml refuses: a valid JSON brief was refused."""
    brief = tmp_path / "brief.json"
    brief.write_text(json.dumps({"goal": "summarise the 🚀 launch notes", "must_return": ["a"]}))
    assert "\\ud83d\\ude80" in brief.read_text("utf-8")
    made = make_brief(file=brief)
    assert (made.goal, made.must_return) == ("summarise the 🚀 launch notes", ("a",))
    brief.write_text('{"goal": "a", "goal": "b"}')
    with pytest.raises(ConfigError, match="key 'goal' appears twice"):
        make_brief(file=brief)
    brief.write_text("{goal: a YAML flow mapping}")  # not JSON: read as YAML
    assert make_brief(file=brief).goal == "a YAML flow mapping"


def test_an_input_given_twice_or_with_no_name_is_refused(tiny) -> None:
    """The last --input of a name won without a word; a blank name reached the model as "- : v"."""
    result = tiny("invoke", "docs-finder", "x", "--input", "url=http://a.example/",
                  "--input", " url =c")  # fmt: skip
    assert "Invalid value for --input: 'url' is given twice" in _one_error_line(result)
    with pytest.raises(ConfigError, match=r"^inputs: a name must not be blank$"):
        make_brief("x", inputs={" ": "v"})


@pytest.mark.parametrize("suffix", ["yaml", "jsonl"])
def test_a_bench_task_with_a_key_twice_is_refused(tiny, tmp_path: Path, suffix: str) -> None:
    tasks = tmp_path / f"tasks.{suffix}"
    if suffix == "yaml":
        tasks.write_text("- id: a\n  task: first\n  task: second\n  expected_agent: x\n", "utf-8")
    else:
        tasks.write_text('{"id": "a", "task": "first", "task": "second"}\n', "utf-8")
    line = _one_error_line(tiny("bench", "--tasks", str(tasks), "--arm", "tiny", "-q"))
    assert str(tasks) in line and f"key 'task' {TIMES_TWO}" in line


def test_an_eval_line_with_a_key_twice_is_refused(tiny, tmp_path: Path) -> None:
    tasks = tmp_path / "eval.jsonl"
    tasks.write_text('{"task": "x", "expected": "docs-finder", "expected": null}\n', "utf-8")
    result = tiny("route", "--eval", str(tasks), env={"TINY_EMBEDDER": "hashing"})
    line = _one_error_line(result, code=1)  # as any eval file tiny cannot read
    assert f"{tasks}:1: key 'expected' {TIMES_TWO}" in line  # valid JSON: not called invalid


def test_a_learned_line_with_a_key_twice_is_a_problem_not_a_rewrite(tiny, tmp_path: Path) -> None:
    cards = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    learned = cards / LEARNED_FILENAME
    text = '{"task": "dup task", "card": "docs-finder", "card": "crm-writer"}\n'
    learned.write_text(text, "utf-8")
    result = tiny("validate", "--cards", str(cards), env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 1
    assert f"{learned}:1: file: key 'card' {TIMES_TWO}" in result.output
    teach = tmp_path / "teach.jsonl"
    teach.write_text('{"task": "another task", "card": "docs-finder"}\n', "utf-8")
    result = tiny("learn", str(teach), env={"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 2 and f"key 'card' {TIMES_TWO}" in result.stderr
    assert learned.read_text("utf-8") == text  # the user's line is kept for them to fix


def _card_with_id(folder: Path, card_id: str) -> Path:
    folder.mkdir(exist_ok=True)
    text = (SEED_CARDS / "docs-finder.yaml").read_text("utf-8")
    path = folder / "card.yaml"
    path.write_text(re.sub(r"(?m)^id: .*$", f"id: {card_id}", text), "utf-8")
    return path


@pytest.mark.parametrize("length", [64, 5_000])
def test_a_long_card_id_is_too_long_and_not_echoed(tiny, tmp_path: Path, length: int) -> None:
    card = _card_with_id(tmp_path / "cards", "a" * length)
    result = tiny("validate", str(card))
    assert result.exit_code == 1
    assert f"id: is too long for a slug (lowercase letters, digits, '-' and '_'): {length} " \
        "characters, at most 63" in result.output  # fmt: skip
    assert "a" * 64 not in result.output


def test_a_card_id_with_a_wrong_character_is_still_shown(tiny, tmp_path: Path) -> None:
    card = _card_with_id(tmp_path / "cards", "Bad-Id")
    result = tiny("validate", str(card))
    assert "id: 'Bad-Id' is not a slug" in result.output


@pytest.mark.parametrize("kind", ["folder", "dead link"])
def test_a_project_file_that_is_no_file_is_an_error(tmp_path: Path, kind: str) -> None:
    (tmp_path / "tiny.toml").write_text('cards = "outer"\n', "utf-8")
    inner = tmp_path / "sub"
    inner.mkdir()
    if kind == "folder":
        (inner / "tiny.toml").mkdir()
    else:
        (inner / "tiny.toml").symlink_to(tmp_path / "nothing.toml")
    with pytest.raises(ConfigError, match=re.escape(str(inner / "tiny.toml"))):
        load_settings({"TINY_HOME": str(tmp_path / "home")}, cwd=inner)


def test_json_refusal_names_the_first_key_twice_in_any_object() -> None:
    with pytest.raises(ConfigError, match=r"^f:1: key 'c' appears twice"):
        load_json('{"a": 1, "b": {"c": 2, "c": 3}}', "f:1")
    assert load_json('{"a": {"a": 1}}', "f:1") == {"a": {"a": 1}}  # the same key in two objects


def test_json_refusal_names_the_field_holding_half_a_utf16_pair() -> None:
    with pytest.raises(ConfigError, match=r"^f:1: task: holds half of a UTF-16 pair \('\\ud83d'\)"):
        load_json('{"task": "book a taxi \\ud83d", "card": null}', "f:1")
    with pytest.raises(ConfigError, match=r"^f:2: holds half of a UTF-16 pair \('\\udc00'\)"):
        load_json('["\\udc00"]', "f:2")
    assert load_json('{"task": "a \\ud83d\\ude00"}', "f:1") == {"task": "a \U0001f600"}


def test_a_learned_line_with_half_a_utf16_pair_is_one_error_line(tiny, tmp_path: Path) -> None:
    cards = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    (cards / LEARNED_FILENAME).write_text('{"task": "book a taxi \\ud83d", "card": null}\n')
    line = _one_error_line(tiny("route", "hello", "--cards", str(cards)))
    assert line.endswith(f"{cards / LEARNED_FILENAME}:1: task: holds half of a UTF-16 pair "
                         "('\\ud83d'), no character; write the character itself")  # fmt: skip


def test_a_date_in_yaml_is_the_text_the_user_wrote(tmp_path: Path) -> None:
    """YAML 1.1 made `2024-01-01` a date: an `expect` no answer could equal, and a report's JSON
    that could not be written (a traceback)."""
    from tiny_cli.bench.tasks import load_tasks

    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "- id: a\n  task: when is it?\n  expected_agent: docs-finder\n"
        "  expect: {day: 2024-01-01, at: 2001-12-14 21:59:43}\n",
        "utf-8",
    )
    (task,) = load_tasks(tasks)
    assert {k: e.value for k, e in task.expect.items()} == {
        "day": "2024-01-01",
        "at": "2001-12-14 21:59:43",
    }
    assert task.expect["day"].matches("2024-01-01")
    assert userfiles.load_yaml("when: 2024-01-01")[1] == {"when": "2024-01-01"}


def test_a_number_only_yaml_11_reads_is_the_text_the_user_wrote(tiny, tmp_path: Path) -> None:
    """YAML 1.1 read a time `12:30` as 750 and a ZIP code `02134` as the octal 1116: an expect
    no right answer matched, and a card's `max_tool_calls: 010` allowed 8 calls without a word."""
    from tiny_cli.bench.tasks import load_tasks

    tasks = tmp_path / "tasks.yaml"
    tasks.write_text(
        "- id: a\n  task: when?\n  expected_agent: docs-finder\n"
        "  expect: {at: 12:30, zip: 02134, n: 12, hex: 0x1F, pi: 3.14, big: 1_000, bits: 0b101}\n",
        "utf-8",
    )
    (task,) = load_tasks(tasks)
    assert task.expect["at"].matches("12:30") and task.expect["zip"].matches("02134")
    assert {k: e.value for k, e in task.expect.items()} == {
        "at": "12:30", "zip": "02134", "n": 12, "hex": 31, "pi": 3.14, "big": "1_000",
        "bits": "0b101",
    }  # fmt: skip
    cards = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    card = cards / "docs-finder.yaml"
    card.write_text(
        card.read_text("utf-8").replace("max_tool_calls: 4", "max_tool_calls: 010"), "utf-8"
    )
    result = tiny("validate", str(card))
    assert result.exit_code != 0 and "max_tool_calls" in result.output


@pytest.mark.parametrize("flag", ["--out", "--html"])
def test_a_bench_report_never_lands_on_a_card_it_read(tiny, tmp_path: Path, flag: str) -> None:
    cards = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("- id: a\n  task: how does onboarding work\n  expected_agent: x\n", "utf-8")
    card = cards / "docs-finder.yaml"
    before = card.read_bytes()
    result = tiny("bench", "--tasks", str(tasks), "-q", flag, str(card),
                  env={"TINY_CARDS": str(cards)})  # fmt: skip
    assert f"{card}: used as input and output" in _one_error_line(result)
    assert card.read_bytes() == before


@pytest.mark.parametrize("margin", ["nan", "inf", "-inf"])
def test_a_hybrid_margin_no_score_can_compare_is_refused(tiny, margin: str) -> None:
    examples = SEED_CARDS.parent / "examples" / "bfcl"
    result = tiny(
        "bench", "--scale", "--tasks", str(examples / "tasks.jsonl"),
        "--cards", str(examples / "cards"), "--sizes", "10", "--arm", "hybrid",
        "--sample", "1", "--irrelevance", "0", "--hybrid-margin", margin, "-q", "--json",
    )  # fmt: skip
    assert result.exit_code == 2
    assert "--hybrid-margin" in result.stderr and "must be a finite number" in result.stderr


def _closed_stdin(args: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    """Run `tiny ARGS` as a shell's `<&-` does: the process starts with no fd 0."""
    env = {**os.environ, "TINY_HOME": str(home), "TINY_BASE_URL": "http://127.0.0.1:9/v1",
           "TINY_EMBEDDER": "hashing", "TINY_CARDS": str(SEED_CARDS)}  # fmt: skip
    return subprocess.run(
        [sys.executable, "-m", "tiny_cli", *args], env=env, capture_output=True, text=True,
        preexec_fn=lambda: os.close(0), timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.skipif(sys.platform == "win32", reason="closes fd 0 before exec (POSIX)")
@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["route", "-"], 2, "tiny: error: stdin is closed; pipe the tasks in"),
        (["serve"], 2, "tiny: error: stdin or stdout is closed: tiny serve speaks MCP"),
        (["runs", "delete", "1"], 2, "tiny: error: no run 1 in the run log"),  # before asking
        (["invoke", "crm-writer", "please add mustermann gmbh as a new customer"], 7, ""),
    ],
)
@pytest.mark.slow
def test_a_closed_stdin_is_one_line_or_no_terminal(
    tmp_path: Path, args: list[str], code: int, said: str
) -> None:
    result = _closed_stdin(args, tmp_path / "home")
    assert "Traceback" not in result.stderr, result.stderr
    assert result.returncode == code, result.stderr
    assert result.stderr.startswith(said)


def test_runs_filtered_to_nothing_say_so_and_a_wrong_status_is_refused(
    tiny, scripted_server, plain_cards
) -> None:
    scripted_server.add(reply(json.dumps({"status": "ok", "summary": "Two weeks.", "source": "x"})))
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards)}
    assert tiny("invoke", "docs-finder", "how does onboarding work", env=env).exit_code == 0
    listed = tiny("runs", "--card", "nope", env=env)
    assert listed.exit_code == 0 and "matches --card nope" in listed.output
    assert "no runs recorded" not in listed.output
    stats = tiny("runs", "stats", "--card", "nope", env=env)
    assert stats.output.strip() == "no run matches --card nope"
    line = _one_error_line(tiny("runs", "--status", "faild", env=env))
    assert "status 'faild' is no run's status; use one of ok, partial" in line


def test_a_quiet_bench_error_is_its_one_line(tiny, tmp_path: Path) -> None:
    tasks = tmp_path / "tasks.yaml"
    entry = "- id: a\n  task: {}\n  expected_agent: docs-finder\n"
    tasks.write_text(entry.format("x") + entry.format("y"), "utf-8")  # one id twice
    result = tiny("bench", "--tasks", str(tasks), "-q")
    assert result.stderr.startswith("tiny: error: ")  # no blank line a progress bar left


def test_a_routed_task_never_echoes_the_api_key(tiny) -> None:
    key = "sk-test-SECRET1234567890abcdef"
    env = {"TINY_API_KEY": key, "TINY_EMBEDDER": "hashing"}
    for args in ((), ("--json",), ("--explain",), ("--explain", "--json")):
        result = tiny("route", f"find the vault key {key}", *args, env=env)
        assert result.exit_code == 0 and "[redacted]" in result.output
        assert key not in result.output


def test_a_bench_report_never_lands_on_the_one_card_file_named(tiny, tmp_path: Path) -> None:
    card = tmp_path / "docs-finder.yaml"
    shutil.copy(SEED_CARDS / "docs-finder.yaml", card)
    tasks = tmp_path / "tasks.yaml"
    tasks.write_text("- id: a\n  task: how does onboarding work\n  expected_agent: x\n", "utf-8")
    before = card.read_bytes()
    result = tiny("bench", "--tasks", str(tasks), "-q", "--out", str(card), "--cards", str(card))
    assert f"{card}: used as input and output" in _one_error_line(result)
    assert card.read_bytes() == before


@pytest.mark.parametrize(
    ("text", "twice"),
    [
        ("- {1: a, '1': b}\n", None),  # an int and a string: two keys, both kept
        ("- {true: a, 'true': b}\n", None),
        ("b: &b {task: x}\nc: &c {card: y}\nl:\n- <<: *b\n  <<: *c\n", None),  # two merges
        ("- {~: a, null: b}\n", "null"),  # both None: the first would be lost
        ("- {1: a, true: b}\n", "true"),  # 1 == True in Python: one key
    ],
)
def test_a_yaml_key_twice_is_a_key_python_reads_twice(text: str, twice: str | None) -> None:
    if twice is None:
        assert userfiles.load_yaml(text, unique=True)[1] == userfiles.load_yaml(text)[1]
    else:
        with pytest.raises(yaml.YAMLError, match=f"key '{twice}' appears twice"):
            userfiles.load_yaml(text, unique=True)
