"""What tiny prints is the text as written: `:name:` never turns into an emoji, a ghost's name
shows quoted (a trailing space, an empty name), a file name's ESC never reaches the terminal.

Each test runs the real `tiny` against the scripted model server.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tiny_cli.cli import live
from tiny_cli.cli.common import Terminal
from tiny_cli.events import RunStarted, ToolCalled, ToolFinished
from tiny_cli.testing import reply, tool_call, tool_calls

from .conftest import SEED_CARDS

NOTES = "pay to IBAN :one::two::three: :white_check_mark:"
TASK = "add Acme :rocket: in Berlin as a new customer"
EMOJI = re.compile("[\u2600-\u27bf\u20e3\ufe0f\U0001f300-\U0001faff]")  # what rich would print
WIDE = {"COLUMNS": "200"}  # no column narrows: a name shows whole


@pytest.fixture
def run(tiny, scripted_server):
    """Run `tiny ARGS` against the scripted server, stdin a terminal that answers `input`."""

    def go(*args: str, input: str | None = None, env: dict[str, str] | None = None):
        environ = {"TINY_BASE_URL": scripted_server.url, "TINY_EMBEDDER": "hashing", **WIDE}
        result = tiny(*args, input=input, env={**environ, **(env or {})}, obj=Terminal(True))
        assert "Traceback" not in result.output
        return result

    return go


def _no_emoji(text: str) -> None:
    assert EMOJI.search(text) is None, text


def test_the_write_to_approve_and_the_digest_show_emoji_codes_as_written(
    run, scripted_server
) -> None:
    call = {"name": "Acme :warning:", "city": "Berlin", "notes": NOTES}
    claim = {"status": "ok", "summary": "done :white_check_mark:", "company_id": 1}
    scripted_server.add(
        tool_call("crm_add_company", call),
        reply(json.dumps({**claim, "name": "Acme :warning:"})),
    )
    result = run("invoke", "crm-writer", TASK, input="y\n")
    assert result.exit_code == 0, result.output
    question = f"crm-writer wants to write: crm_add_company {json.dumps(call)}"
    assert question in result.stderr  # the exact call the tool receives
    assert "done :white_check_mark:" in result.stdout  # the summary
    assert "Acme :warning:" in result.stdout  # a field's value
    assert f"approved write: crm_add_company {json.dumps(call)}" in result.stdout
    _no_emoji(result.output)
    listed, shown = run("runs"), run("runs", "show", "1")
    assert ":rocket:" in listed.stdout  # the goal column
    assert ":one::two::three:" in shown.stdout  # the → call line and the calls table
    _no_emoji(listed.output + shown.output)


def test_card_text_shows_emoji_codes_as_written(run, tmp_path: Path) -> None:
    cards = Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))
    card = cards / "docs-finder.yaml"
    example = "where is the vacation request process documented"
    text = card.read_text("utf-8").replace("  Finds answers", "  :white_check_mark: Finds answers")
    card.write_text(text.replace(f"- {example}", f'- "{example} :white_check_mark:"'), "utf-8")
    env = {"TINY_CARDS": str(cards)}
    listed = run("cards", "list", env=env)
    shown = run("cards", "show", "docs-finder", env=env)
    explained = run("route", "--explain", example, env=env)  # the summary, the nearest example
    for result in (listed, shown, explained):
        assert result.exit_code == 0, result.output
        assert ":white_check_mark:" in result.stdout
        _no_emoji(result.output)


def test_ghost_names_show_quoted(run, scripted_server) -> None:
    scripted_server.add(
        tool_calls(("docs_search ", {"query": "vacation"}), ("", {})),
        tool_call("docs_search", {"query": "vacation"}),
        reply(json.dumps({"status": "ok", "summary": "s", "source": "vacation.md"})),
    )
    result = run("invoke", "docs-finder", "how do I request vacation")
    assert result.exit_code == 0, result.output
    assert '2 ("docs_search ", "")' in result.stdout  # the cost table's ghost calls
    shown = run("runs", "show", "1").stdout
    assert '→ call "docs_search " {' in shown and '→ call "" {}' in shown
    assert 'result of "docs_search " ·' in shown and 'result of "" ·' in shown
    assert '│ "docs_search " │' in shown and '│ ""             │' in shown  # the calls table


def test_a_ghost_name_with_a_quote_shows_as_its_note_quotes_it(run, scripted_server) -> None:
    scripted_server.add(
        tool_calls(('docs"search\\', {"query": "vacation"}), ("docs\u202e", {})),
        tool_call("docs_search", {"query": "vacation"}),
        reply(json.dumps({"status": "ok", "summary": "s", "source": "vacation.md"})),
    )
    result = run("invoke", "docs-finder", "how do I request vacation")
    assert result.exit_code == 0, result.output
    note = 'does not have: "docs\\"search\\\\", "docs\\u202e"'  # JSON; the bidi made visible
    assert note in result.stdout
    assert '2 ("docs\\"search\\\\", "docs\\u202e")' in result.stdout  # the cost table's
    assert "\u202e" not in result.output


def test_the_live_view_quotes_a_ghost_and_shows_emoji_codes_as_written() -> None:
    console = live.console()  # the console a run's view draws on
    console.width = 160  # the call's row whole
    view = live.LiveView(console)
    see = view.observer("invoke")
    system = {"role": "system", "content": "s"}
    see(RunStarted("docs-finder", "m:rocket:", "native", "find :one:", 4, 45.0, 400, (system,)))
    see(ToolCalled("c1", "docs_search ", '{"q": ":white_check_mark:"}'))
    see(ToolFinished("c1", "docs_search ", "ghost", 0.0, "no"))
    with console.capture() as screen:
        console.print(view._render())
    drawn = screen.get()
    assert "m:rocket:" in drawn and "find :one:" in drawn  # the title, the task
    assert '"docs_search " {"q": ":white_check_mark:"}' in drawn
    _no_emoji(drawn)


def test_runs_export_escapes_the_file_name(run, tmp_path: Path) -> None:
    out = tmp_path / "runs\x1b[31m\u202e.jsonl"
    result = run("runs", "export", "--out", str(out))
    assert result.exit_code == 0, result.output
    assert out.exists()
    assert "\x1b" not in result.stderr and "\u202e" not in result.stderr
    assert "runs\\u001b[31m\\u202e.jsonl" in result.stderr
