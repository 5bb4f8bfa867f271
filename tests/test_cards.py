"""Card loading and `tiny validate`: every fault is one line naming file, line and field."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tiny_cli.cards.load import Budget, card_schema, check_cards

BROKEN = Path(__file__).parent / "broken_cards"
KNOWN = {
    "http_get": False,
    "html_to_text": False,
    "crm_find_company": False,
    "crm_add_company": True,
    "docs_search": False,
}


def _expectation(path: Path) -> tuple[str, str, str]:
    header = path.read_bytes().split(b"\n", 1)[0].decode()
    line, field, text = header.removeprefix("# expect: ").split("|", 2)
    return line, field, text


@pytest.mark.parametrize("path", sorted(BROKEN.glob("*.yaml")), ids=lambda p: p.stem)
def test_each_broken_card_gets_one_line_and_exit_1(tiny, path: Path) -> None:
    line, field, text = _expectation(path)
    result = tiny("validate", str(path))
    assert result.exit_code == 1, result.output
    problems = [ln for ln in result.stdout.splitlines() if ln.startswith(str(path))]
    assert len(problems) == 1, result.stdout
    where = str(path) if line == "-" else f"{path}:{line}"
    assert problems[0].startswith(f"{where}: {field}: "), problems[0]
    assert text in problems[0]
    assert "Traceback" not in result.output


def test_broken_corpus_has_at_least_15_distinct_faults() -> None:
    fields = {_expectation(p)[1:] for p in BROKEN.glob("*.yaml")}
    assert len(fields) >= 15


def test_all_problems_reported_at_once(tiny) -> None:
    result = tiny("validate", str(BROKEN))
    assert result.exit_code == 1
    files = {ln.split(":", 1)[0] for ln in result.stdout.splitlines() if ln.startswith(str(BROKEN))}
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


def test_github_format_prints_annotations(tiny) -> None:
    path = BROKEN / "07_unknown_tool.yaml"
    result = tiny("validate", "--format", "github", str(path))
    assert result.exit_code == 1
    assert re.search(
        rf"^::error file={re.escape(str(path))},line=4,title=tiny validate::tools\[0\]: "
        r"unknown tool 'web_serch'",
        result.stdout,
        re.M,
    )


def test_missing_path_is_a_problem_not_a_crash(tiny, tmp_path: Path) -> None:
    result = tiny("validate", str(tmp_path / "nope.yaml"))
    assert result.exit_code == 1
    assert "nope.yaml: path: no such file or directory" in result.stdout


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
    assert "more than the 262144 allowed" in result.stdout


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
