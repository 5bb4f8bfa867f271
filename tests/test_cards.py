"""Card loading and `tiny validate`: every fault is one line naming file, line and field."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tiny_cli import userfiles
from tiny_cli.cards import index as schema_check
from tiny_cli.cards.card import Budget
from tiny_cli.cards.index import card_schema
from tiny_cli.cards.load import check_cards

from .conftest import run_at_once

BROKEN = Path(__file__).parent / "broken_cards"
KNOWN = {
    "http_get": False,
    "html_to_text": False,
    "crm_find_company": False,
    "crm_add_company": True,
    "docs_search": False,
}


def _shown(path: Path) -> str:
    """A file as tiny prints it: relative to the working folder (the repository) when under it."""
    return str(path.relative_to(Path.cwd())) if path.is_relative_to(Path.cwd()) else str(path)


def _expectation(path: Path) -> tuple[str, str, str]:
    header = path.read_bytes().split(b"\n", 1)[0].decode()
    line, field, text = header.removeprefix("# expect: ").split("|", 2)
    return line, field, text


@pytest.mark.parametrize("path", sorted(BROKEN.glob("*.yaml")), ids=lambda p: p.stem)
def test_each_broken_card_gets_one_line_and_exit_1(tiny, path: Path) -> None:
    line, field, text = _expectation(path)
    result = tiny("validate", str(path))
    assert result.exit_code == 1, result.output
    problems = [ln for ln in result.stdout.splitlines() if ln.startswith(_shown(path))]
    assert len(problems) == 1, result.stdout
    where = _shown(path) if line == "-" else f"{_shown(path)}:{line}"
    assert problems[0].startswith(f"{where}: {field}: "), problems[0]
    assert text in problems[0]
    assert "Traceback" not in result.output


def test_broken_corpus_has_at_least_15_distinct_faults() -> None:
    fields = {_expectation(p)[1:] for p in BROKEN.glob("*.yaml")}
    assert len(fields) >= 15


def test_all_problems_reported_at_once(tiny) -> None:
    result = tiny("validate", str(BROKEN))
    assert result.exit_code == 1
    shown = _shown(BROKEN)
    files = {ln.split(":", 1)[0] for ln in result.stdout.splitlines() if ln.startswith(shown)}
    assert len(files) == len(list(BROKEN.glob("*.yaml")))


def test_seed_cards_validate_clean(tiny) -> None:
    result = tiny("validate")
    assert result.exit_code == 0, result.stdout
    for card_id in ("web-reader", "docs-finder", "crm-writer"):
        assert card_id in result.stdout


def test_duplicate_ids_across_files(tiny, tmp_path: Path) -> None:
    body = "id: twin\nsummary: Reads one web page and answers.\ntools: [http_get]\n"
    (tmp_path / "a.yaml").write_text(body + "returns_required: [url]\n")
    (tmp_path / "b.yaml").write_text(body + "returns_required: [title]\n")
    result = tiny("validate", str(tmp_path))
    assert result.exit_code == 1
    assert f"{tmp_path / 'b.yaml'}:1: id: duplicate id 'twin' (already used in" in result.stdout


def test_github_format_escapes_a_file_name_as_a_terminal_needs(tiny, tmp_path) -> None:
    path = tmp_path / "e\x1b[31mvil.yaml"
    path.write_text("id: y\n", "utf-8")
    result = tiny("validate", "--format", "github", str(tmp_path))
    assert result.exit_code == 1
    assert "\x1b" not in result.stdout
    assert f"::error file={tmp_path}/e\\u001b[31mvil.yaml,line=1," in result.stdout


def test_github_format_prints_annotations(tiny) -> None:
    path = BROKEN / "07_unknown_tool.yaml"
    result = tiny("validate", "--format", "github", str(path))
    assert result.exit_code == 1
    assert re.search(
        rf"^::error file={re.escape(_shown(path))},line=4,title=tiny validate::tools\[0\]: "
        r"unknown tool 'web_serch'",
        result.stdout,
        re.M,
    )


@pytest.mark.parametrize("flag", [[], ["--cards"]])
def test_a_missing_path_is_a_problem_found_exit_1_as_every_other(tiny, tmp_path, flag) -> None:
    """`tiny validate nope.yaml` and `--cards nope` exit 1, as the problem count says."""
    result = tiny("validate", *flag, str(tmp_path / "nope.yaml"))
    assert result.exit_code == 1  # README's exit codes: 1, validate found problems
    assert "nope.yaml: path: no such file or directory" in result.stdout
    assert "1 problem(s) found" in result.stdout and "Traceback" not in result.output
    (tmp_path / "bad.yaml").write_text("id: [\n")
    assert tiny("validate", str(tmp_path / "bad.yaml")).exit_code == 1  # a card's problem


def test_loaded_card_has_defaults_and_budget(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "id: c\nsummary: Reads one web page and answers.\ntools: [http_get]\n"
        "returns_required: [url]\nbudget: {max_tool_calls: 3}\n"
    )
    cards, problems = check_cards([tmp_path], KNOWN)
    assert problems == []
    assert cards[0].budget == Budget(max_tool_calls=3)
    assert cards[0].side_effects == "none" and cards[0].examples == ()


def test_schema_ships_in_package_and_forbids_unknown_keys() -> None:
    schema = card_schema()
    assert schema["additionalProperties"] is False
    assert set(schema["required"]) == {"id", "summary", "tools"}
    # and one of the two ways to name the answer's fields (both may be given)
    assert schema["anyOf"] == [{"required": ["returns_required"]}, {"required": ["returns"]}]


def test_validate_as_a_real_process_never_prints_a_traceback(cli_env, tmp_path: Path) -> None:
    env = {"PATH": "/usr/bin:/bin", **cli_env}
    out = subprocess.run(
        [sys.executable, "-m", "tiny_cli", "validate", str(BROKEN)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stderr + out.stdout


def test_mixed_unknown_keys_are_all_reported(tmp_path: Path) -> None:
    (tmp_path / "c.yaml").write_text(
        "id: c\nsummary: Reads one web page and answers.\ntools: [http_get]\n"
        "returns_required: [url]\n1: x\nfoo: y\n"
    )
    _, problems = check_cards([tmp_path], KNOWN)
    assert [(p.line, p.field) for p in problems] == [(5, "1"), (6, "foo")]


def test_a_fifo_in_the_cards_folder_is_refused_not_read(tiny, tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text(
        "id: ok\nsummary: Reads one web page and answers questions about it.\n"
        "tools: [http_get]\nreturns_required: [url]\n",
        "utf-8",
    )
    os.mkfifo(tmp_path / "pipe.yaml")  # reading it would block forever
    result = tiny("validate", "--cards", str(tmp_path))
    assert result.exit_code == 1
    assert f"{tmp_path / 'pipe.yaml'}: file: not a regular file; not read" in result.stdout


def test_a_symlink_out_of_the_cards_folder_is_not_followed(tiny, tmp_path: Path) -> None:
    secret = tmp_path / "secret.yaml"
    secret.write_text("leaked_secret_line: x:0:0\n", "utf-8")
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "evil.yaml").symlink_to(secret)
    result = tiny("validate", "--cards", str(cards))
    assert result.exit_code == 1
    assert "a symlink to outside the cards folder; not read" in result.stdout
    assert "leaked_secret_line" not in result.stdout  # nothing of the target is echoed


def test_an_oversized_card_is_refused_quickly(tiny, tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    path.write_text("id: big\nsummary: " + "a" * 300_000 + "\n", "utf-8")
    result = tiny("validate", str(path))
    assert result.exit_code == 1
    assert "file: more than 262144 bytes (the bound for a card)" in result.stdout


def test_card_text_cannot_steer_the_terminal_or_the_ci_log(tiny, tmp_path: Path) -> None:
    folder = tmp_path / "a,b:c"
    folder.mkdir()
    path = folder / "evil.yaml"
    path.write_text(
        "id: evil\nsummary: Reads one web page and answers questions about it.\n"
        "tools: [http_get]\nreturns_required: [url]\n"
        '"x\\n::error file=ci.yaml::owned\\u001b]0;pwned\\u0007": 1\n',
        "utf-8",
    )
    text = tiny("validate", str(path)).stdout
    assert "\x1b" not in text and "\x07" not in text
    assert "\\u001b]0;pwned\\u0007" in text  # shown, not obeyed
    assert not any(line.startswith("::") for line in text.splitlines())
    github = tiny("validate", "--format", "github", str(path)).stdout.splitlines()
    annotations = [line for line in github if line.startswith("::")]
    assert len(annotations) == 1  # the newline in the key did not start a second command
    assert annotations[0].startswith("::error file=") and "a%2Cb%3Ac" in annotations[0]
    assert "%0A::error file=ci.yaml::owned" in annotations[0]


# --- the compiled schema check -------------------------------------------------------------------

GOOD = {
    "id": "docs-finder",
    "summary": "Finds answers in the handbook and says which page.",
    "examples": ["how did onboarding work"],
    "does_not": ["browse the web"],
    "tools": ["docs_search"],
    "returns_required": ["source"],
    "returns": {"pages": "number"},
    "side_effects": "none",
    "budget": {"max_tool_calls": 4, "max_output_tokens": 400, "max_wall_seconds": 45},
    "model": "qwen",
    "tool_mode": "auto",
    "first": "tool",
    "functions": [{"name": "f", "description": "d", "parameters": {"type": "object"}}],
}
yaml_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 300_000)
    | st.floats(allow_nan=True, allow_infinity=True)
    | st.sampled_from([4.0, 0, 16, 86400, 86400.5, "none", "write", "json", "any", "tool"])
    | st.text(max_size=12)
    | st.sampled_from(["docs_search", "srv.tool", "a\n", "Bad Id", "ok_id", "9x", "x" * 70]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(st.text(max_size=6) | st.sampled_from(list(GOOD)) | st.integers(), inner)
    ),
    max_leaves=8,
)
near_cards = st.builds(
    lambda changes, dropped: {
        **{k: v for k, v in GOOD.items() if k not in dropped},
        **changes,
    },
    st.dictionaries(st.sampled_from([*GOOD, "extra", "budget"]), yaml_values, max_size=2),
    st.sets(st.sampled_from(list(GOOD)), max_size=2),
)


def _jsonschema_valid(data: object) -> bool:
    return jsonschema.Draft202012Validator(card_schema()).is_valid(data)


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@pytest.mark.slow
@given(near_cards)
def test_the_compiled_card_check_agrees_with_jsonschema(card: dict) -> None:
    assert schema_check.is_valid(card) == _jsonschema_valid(card)


def test_the_compiled_card_check_agrees_on_the_broken_corpus() -> None:
    import yaml

    compared = []
    for path in sorted(BROKEN.glob("*.yaml")):
        try:
            _, data = userfiles.load_yaml(path.read_text("utf-8"))  # bounded, as the loader reads
        except (UnicodeDecodeError, yaml.YAMLError):
            continue  # not a YAML document: never reaches the schema check
        assert schema_check.is_valid(data) == _jsonschema_valid(data), path.name
        compared.append(path)
    assert len(compared) >= 20


def test_good_cards_are_checked_without_importing_jsonschema(tmp_path: Path) -> None:
    """jsonschema is imported only to word what is wrong with a card that fails."""
    (tmp_path / "bad.yaml").write_text("id: bad\nsummary: too short\ntool: [http_get]\n", "utf-8")
    code = (
        "import sys\n"
        "from pathlib import Path\n"
        "from tiny_cli.cards.load import check_cards\n"
        "known = {'http_get': False, 'html_to_text': False, 'docs_search': False,\n"
        "         'crm_find_company': False, 'crm_add_company': True}\n"
        "for folder in sys.argv[1:]:\n"
        "    cards, problems = check_cards([Path(folder)], known)\n"
        "    print(len(cards), len(problems), 'jsonschema' in sys.modules)\n"
    )
    seed = Path(__file__).resolve().parent.parent / "cards"
    done = subprocess.run(
        [sys.executable, "-c", code, str(seed), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.stdout.splitlines() == ["3 0 False", "0 3 True"], done.stderr


def test_a_symlink_loop_in_the_cards_folder_is_a_problem_not_a_traceback(tiny, tmp_path) -> None:
    (tmp_path / "loop.yaml").symlink_to("loop.yaml")
    result = tiny("validate", str(tmp_path))
    assert result.exit_code == 1
    assert "loop.yaml: file: a symlink that leads nowhere" in result.stdout


@pytest.mark.parametrize(
    ("text", "line", "noticed"),
    [
        ("id: x\nsummary: s\ntools: [http_get\nreturns_required: [url]\n", 3, 4),  # next key
        ("id: x\nsummary: s\ntools: [http_get\n\n# a note\nreturns_required: [url]\n", 3, 6),
        ("id: x\nbudget: {max_tool_calls: 3\nreturns_required: [url]\n", 2, 3),
        ("id: x\ntools: [http_get\n", 2, 3),  # at the end of the file
        ('id: x\ntools: ["a" "b"]\n', 2, None),  # wrong on the line itself: that line
    ],
)
def test_a_yaml_error_names_the_line_that_opened_the_bracket(tmp_path, text, line, noticed) -> None:
    """PyYAML notices an unclosed [ on a later line; the line to fix is the one with the [."""
    (tmp_path / "c.yaml").write_text(text)
    _, problems = check_cards([tmp_path], KNOWN)
    assert [(p.line, p.field) for p in problems] == [(line, "yaml")]
    if noticed is not None:
        assert problems[0].message.endswith(f"opened on this line; noticed on line {noticed})")
    else:
        assert "noticed" not in problems[0].message


def test_a_card_with_two_problems_stops_route_with_one_line_and_a_count(tiny, tmp_path) -> None:
    """The brief's rule for bad input: one clear line; `tiny validate` lists them all."""
    (tmp_path / "c.yaml").write_text(
        "id: c\nsummary: Reads one web page and answers.\ntools: [web_serch]\n"
        "returns_required: [url]\nbudget: {max_tool_calls: 0}\n"
    )
    result = tiny("route", "read a page", "--cards", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr  # one line
    assert result.stderr.startswith(
        "tiny: error: 2 problems in the cards (tiny validate lists them all); "
        f"the first: {tmp_path / 'c.yaml'}:5: budget.max_tool_calls: 0 is impossible"
    )


def test_many_threads_parse_yaml_at_once() -> None:
    """bench and serve threads load cards too: parses in many threads all succeed alike."""
    results: list[object] = []
    errors: list[str] = []

    def parse() -> None:
        try:
            results.append(userfiles.load_yaml("id: a\nexamples: [x, y]\n")[1])
        except Exception as exc:  # recorded, so the assertion names it
            errors.append(repr(exc))

    run_at_once(parse, 16)
    assert errors == []
    assert results == [{"id": "a", "examples": ["x", "y"]}] * 16
