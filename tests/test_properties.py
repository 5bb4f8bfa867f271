"""Any input, a defined outcome: the loaders and parsers that read what users and models wrote.

Each property: whatever the text, the function returns or raises a TinyError — never another
exception — and does so within a time bound (hypothesis's deadline), including inputs built
to be slow (deep nesting, alias bombs, walls of braces).
"""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tiny_cli.agent.calls import _arguments  # the tool-argument validator the run loop uses
from tiny_cli.agent.reply import parse_reply
from tiny_cli.cards.load import check_cards
from tiny_cli.digest import make_brief
from tiny_cli.errors import TinyError
from tiny_cli.provider.replay import Replayer

KNOWN_TOOLS = {"http_get": False, "docs_search": False, "crm_add_company": True}
QUICK = settings(
    max_examples=60,
    deadline=2000,  # ms per example: every input gets a defined outcome quickly
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=20,
)
card_like = st.fixed_dictionaries(
    {"id": st.text(max_size=12), "summary": st.text(max_size=40)},
    optional={
        "tools": st.lists(st.sampled_from([*KNOWN_TOOLS, "nope", ""]), max_size=3) | json_values,
        "returns_required": st.lists(st.text(string.ascii_letters, max_size=8), max_size=3),
        "budget": st.dictionaries(
            st.sampled_from(["max_tool_calls", "max_output_tokens", "max_wall_seconds", "x"]),
            json_values,
            max_size=3,
        ),
        "examples": json_values,
        "side_effects": st.sampled_from(["none", "write", "maybe"]) | json_values,
    },
)
SLOW_TEXTS = [
    "[" * 5000 + "]" * 5000,
    "a: &a [x, x, x, x, x, x, x, x]\n"
    + "".join(
        f"{c}: &{c} [{', '.join([f'*{p}'] * 8)}]\n"
        for p, c in zip("abcdefg", "bcdefgh", strict=True)
    ),
    "{" * 20_000,
    '{"status": "ok", ' * 5_000,
]


def _yaml_or_text(data: object) -> str:
    return yaml.safe_dump(data, allow_unicode=True) if not isinstance(data, str) else data


@QUICK
@given(
    st.one_of(st.text(max_size=300), card_like.map(_yaml_or_text), json_values.map(_yaml_or_text))
)
@example(SLOW_TEXTS[0])
@example(SLOW_TEXTS[1])
@example(SLOW_TEXTS[2])
def test_card_loader_has_an_outcome_for_any_text(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("cards") / "card.yaml"
    path.write_text(text, "utf-8", errors="surrogatepass")
    try:
        cards, problems = check_cards([path], KNOWN_TOOLS)
    except TinyError:
        return
    assert len(cards) + len(problems) >= 1  # a card or a reason, never silence
    assert all(p.file == str(path) for p in problems)


@QUICK
@given(st.one_of(st.text(max_size=300), json_values.map(_yaml_or_text)))
@example(SLOW_TEXTS[0])
@example(SLOW_TEXTS[1])
def test_brief_loader_has_an_outcome_for_any_text(tmp_path_factory, text: str) -> None:
    path = tmp_path_factory.mktemp("brief") / "brief.yaml"
    path.write_text(text, "utf-8", errors="surrogatepass")
    try:
        brief = make_brief(file=path)
    except TinyError as exc:
        assert str(exc).startswith(str(path))  # names the file
        return
    assert isinstance(brief.goal, str) and brief.goal.strip()


@QUICK
@given(st.one_of(st.text(max_size=400), json_values.map(json.dumps)))
@example(SLOW_TEXTS[0])
@example(SLOW_TEXTS[2])
@example(SLOW_TEXTS[3])
@example('```json\n{"status": "ok", "summary": "s", "url": "u"}\n```')
def test_reply_parser_has_an_outcome_for_any_text(text: str) -> None:
    reply = parse_reply(text, ("url",))
    assert isinstance(reply.problems, tuple)
    assert reply.problems or reply.data.get("status") in ("ok", "partial", "refused", "failed")


TOOL_SCHEMA = {
    "type": "object",
    "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1}},
    "required": ["query"],
    "additionalProperties": False,
}


@QUICK
@given(st.one_of(st.text(max_size=300), json_values.map(json.dumps)))
@example(SLOW_TEXTS[0])
@example('{"query": "x", "limit": 5.0}')
def test_tool_argument_validator_has_an_outcome_for_any_text(text: str) -> None:
    args, problem = _arguments(text, TOOL_SCHEMA)
    assert (problem is None) == (isinstance(args.get("query"), str) and args != {})
    assert problem is None or "\n" not in problem  # one line back to the model


@QUICK
@given(st.lists(st.one_of(st.text(max_size=80), json_values.map(json.dumps)), max_size=5))
@example([SLOW_TEXTS[0]])
def test_recording_reader_has_an_outcome_for_any_lines(tmp_path_factory, lines: list[str]) -> None:
    path = tmp_path_factory.mktemp("rec") / "run.jsonl"
    header = json.dumps({"tiny_recording": 1, "model": "m", "base_url": "h"})
    path.write_text("\n".join([header, *lines]) + "\n", "utf-8", errors="surrogatepass")
    try:
        Replayer.load(path)
    except TinyError as exc:
        assert str(path) in str(exc)


@pytest.mark.parametrize("text", SLOW_TEXTS, ids=["deep", "aliases", "braces", "fragments"])
def test_card_loader_refuses_hostile_yaml_with_a_problem(tmp_path: Path, text: str) -> None:
    path = tmp_path / "card.yaml"
    path.write_text(text, "utf-8")
    cards, problems = check_cards([path], KNOWN_TOOLS)
    assert cards == [] and len(problems) == 1


def test_a_megabyte_reply_is_a_problem_for_the_model_not_a_long_parse() -> None:
    reply = parse_reply('{"status": "ok", ' * 300_000, ("url",))
    assert reply.data == {}
    assert reply.problems == (
        "your answer is 5,100,000 characters; answer with one short JSON object",
    )


def test_an_oversized_goal_or_a_hostile_brief_is_a_one_line_error(tiny, tmp_path: Path) -> None:
    result = tiny("invoke", "docs-finder", "x" * 9_000)
    assert result.exit_code == 2
    assert "the task is 9,000 characters; at most 8,000" in result.stderr
    brief = tmp_path / "brief.yaml"
    brief.write_text(SLOW_TEXTS[1] + "goal: hello\n", "utf-8")
    result = tiny("invoke", "docs-finder", "--brief", str(brief))
    assert result.exit_code == 2
    assert result.stderr.startswith(
        f"tiny: error: {brief}: invalid YAML/JSON: expands to more than"
    )
