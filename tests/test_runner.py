"""The runner through the real CLI against the scripted server: Digest and wire both checked."""

from __future__ import annotations

import json
import shutil
import sqlite3
import time
from pathlib import Path

import pytest

from tiny_cli.bench.pages import PageServer
from tiny_cli.testing import http_error, reply, tool_call, tool_calls

from .conftest import SEED_CARDS

PAGE = (
    "<html><head><title>Tool - Wikipedia</title><script>var x=1;</script></head>"
    "<body><h1>Tool</h1><p>A tool is an object that can extend an individual's ability "
    "to modify features of the surrounding environment.</p></body></html>"
)
GOOD = {
    "status": "ok",
    "summary": "A tool extends what a person can do.",
    "url": "PAGE",
    "title": "Tool - Wikipedia",
}


@pytest.fixture
def site(tmp_path: Path):
    pages = tmp_path / "site"
    pages.mkdir()
    (pages / "tool.html").write_text(PAGE)
    with PageServer(pages) as server:
        yield server.url


@pytest.fixture
def run(tiny, scripted_server, plain_cards):
    """Run `tiny ARGS --json` against the scripted server; return (exit code, Digest).

    The cards are the seed cards without their "never answer from memory" rules, so a
    scripted answer with no tool call can be `ok` (tests/test_evidence.py covers the rules).
    """

    def go(*args: str, env: dict[str, str] | None = None):
        base = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards)}
        result = tiny(*args, "--json", env={**base, **(env or {})})
        assert "Traceback" not in result.output
        return result.exit_code, json.loads(result.stdout)

    return go


def _seed_cards_with_wall_budget(tmp_path: Path, seconds: int) -> Path:
    """Copy the seed cards, giving web-reader a short max_wall_seconds."""
    cards = tmp_path / "cards"
    shutil.copytree(SEED_CARDS, cards)
    path = cards / "web-reader.yaml"
    path.write_text(
        path.read_text().replace("max_wall_seconds: 60", f"max_wall_seconds: {seconds}")
    )
    return cards


def _tool_names(request: dict) -> list[str]:
    return [t["function"]["name"] for t in request.get("tools", [])]


def _contents(request: dict, role: str) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == role]


def test_seed_flow_ghost_call_then_repair(run, scripted_server, site) -> None:
    url = f"{site}/tool.html"
    good = {**GOOD, "url": url}
    scripted_server.add(
        tool_call("web_search", {"query": "Tool wikipedia"}),
        tool_call("http_get", {"url": url}, tokens_in=40, tokens_out=7),
        reply(
            f"Here you go!\n```json\n{json.dumps({'status': 'ok', 'summary': 'x', 'url': url})}"
            "\n```\nHope that helps."
        ),
        reply(f"Sure: {json.dumps(good)}", tokens_in=55, tokens_out=20),
    )
    code, digest = run(
        "invoke",
        "web-reader",
        f"read {url} and tell me in two sentences what it is about",
        "--allow-host",
        site.split("://", 1)[1],  # the test's own loopback page server, as a user would allow it
    )
    scripted_server.assert_done()
    assert code == 0 and digest["status"] == "ok"
    assert digest["fields"] == {"url": url, "title": "Tool - Wikipedia"}
    cost = digest["cost"]
    assert cost["ghost_calls"] == 1 and cost["ghost_names"] == ["web_search"]
    assert cost["tool_calls"] == 2
    assert cost["tokens_in"] == 10 + 40 + 10 + 55 and cost["tokens_out"] == 5 + 7 + 5 + 20
    first, second, third, last = scripted_server.requests
    assert [m["role"] for m in first["messages"]] == ["system", "user"]
    assert _tool_names(first) == ["http_get", "html_to_text"]
    assert first["max_tokens"] == 400
    ghost_answer = second["messages"][-1]
    assert ghost_answer["role"] == "tool" and "unknown tool 'web_search'" in ghost_answer["content"]
    assert "http_get, html_to_text" in ghost_answer["content"]
    assert "A tool is an object" in third["messages"][-1]["content"]  # the real page came back
    repairs = [c for c in _contents(last, "user") if c.startswith("Your answer cannot be used")]
    assert len(repairs) == 1 and "missing required field 'title'" in repairs[0]


def test_summary_over_budget_is_cut_and_partial(run, scripted_server) -> None:
    long = "word " * 1000
    scripted_server.add(reply(json.dumps({**GOOD, "summary": long})))
    code, digest = run("invoke", "web-reader", "summarise https://example.org")
    assert digest["status"] == "partial" and code == 3
    assert digest["reason"] == "summary_cut"
    assert len(digest["summary"]) <= 400 * 4
    assert digest["summary"].endswith("[… cut by tiny: over the 400-token budget]")


def test_two_bad_answers_fail_with_schema_and_no_third_call(run, scripted_server) -> None:
    scripted_server.add(reply("I think the page is about tools."), reply('{"summary": "tools"}'))
    code, digest = run("invoke", "web-reader", "summarise https://example.org")
    assert digest["status"] == "failed" and digest["reason"] == "schema" and code == 5
    assert len(scripted_server.requests) == 2


def test_endless_tool_calls_stop_at_budget(run, scripted_server, site) -> None:
    for _ in range(12):
        scripted_server.add(tool_call("html_to_text", {"html": "<p>again</p>"}))
    _code, digest = run("invoke", "web-reader", "summarise https://example.org")
    assert digest["status"] == "partial" and digest["reason"] == "max_tool_calls"
    # the card's max_tool_calls, and the wrap-up turn's call: a ghost, offered no tool
    assert digest["cost"]["tool_calls"] == 7
    assert digest["cost"]["ghost_calls"] == 1 and digest["cost"]["ghost_names"] == ["html_to_text"]
    assert len(scripted_server.requests) == 7  # six tool turns and one wrap-up, nothing more
    assert "tools" not in scripted_server.requests[-1]  # the wrap-up cannot call tools


def test_wrap_up_answer_is_used_after_tool_budget(run, scripted_server) -> None:
    for _ in range(6):
        scripted_server.add(tool_call("html_to_text", {"html": "<p>x</p>"}))
    scripted_server.add(reply(json.dumps({**GOOD, "status": "partial"})))
    _code, digest = run("invoke", "web-reader", "summarise https://example.org")
    assert digest["status"] == "partial" and digest["summary"] == GOOD["summary"]
    scripted_server.assert_done()


def test_slow_server_is_cut_at_the_wall_budget(tiny, scripted_server, tmp_path: Path) -> None:
    cards = _seed_cards_with_wall_budget(tmp_path, seconds=1)
    scripted_server.add(reply(json.dumps(GOOD), delay=8))
    start = time.monotonic()
    result = tiny(
        "invoke",
        "web-reader",
        "summarise https://example.org",
        "--json",
        "--cards",
        str(cards),
        env={"TINY_BASE_URL": scripted_server.url},
    )
    elapsed = time.monotonic() - start
    digest = json.loads(result.stdout)
    assert digest["status"] == "failed" and digest["reason"] == "max_wall_seconds"
    assert elapsed < 4, elapsed  # 1 s budget plus margin; the server would take 8 s


@pytest.mark.slow
def test_a_writers_draft_claiming_a_write_no_tool_made_is_not_shown(tiny, scripted_server) -> None:
    claim = {"status": "ok", "summary": "Successfully added Acme, company_id 12345."}
    answer = reply(json.dumps(claim))  # sent back (call a tool first), then repaired, then late
    scripted_server.add(answer, answer, reply(json.dumps(claim), delay=3))
    task = ("invoke", "crm-writer", "add Acme in Berlin to the CRM", "--json", "--yes")
    short = ("--wall-scale", "0.05")  # crm-writer's 30 s: 1.5 s
    result = tiny(*task, *short, env={"TINY_BASE_URL": scripted_server.url})
    digest = json.loads(result.stdout)
    assert len(scripted_server.requests) == 3  # the last answer came after the wall budget
    assert (digest["status"], digest["reason"]) == ("failed", "max_wall_seconds")
    assert "12345" not in result.stdout and digest["summary"] == ""


def test_refusal(run, scripted_server) -> None:
    scripted_server.add(reply('{"status": "refused", "summary": "I only read pages."}'))
    code, digest = run("invoke", "web-reader", "book me a flight to Rome")
    assert digest["status"] == "refused" and code == 4
    assert digest["fields"] == {}


def test_429_then_success_retries(run, scripted_server) -> None:
    scripted_server.add(
        http_error(429, "slow down", headers={"Retry-After": "0"}), reply(json.dumps(GOOD))
    )
    code, digest = run("invoke", "web-reader", "summarise https://example.org")
    assert code == 0 and digest["status"] == "ok"
    assert len(scripted_server.requests) == 2


@pytest.mark.slow
def test_persistent_500_fails_with_reason(run, scripted_server) -> None:
    for _ in range(4):
        scripted_server.add(http_error(500, "boom"))
    code, digest = run("invoke", "web-reader", "summarise https://example.org")
    assert digest["status"] == "failed" and code == 5
    assert "HTTP 500" in digest["reason"]
    assert len(scripted_server.requests) == 4


@pytest.mark.slow
def test_nothing_listening_says_cannot_reach(tiny) -> None:
    result = tiny(
        "invoke",
        "web-reader",
        "summarise https://example.org",
        "--json",
        env={"TINY_BASE_URL": "http://127.0.0.1:9/v1"},
    )
    digest = json.loads(result.stdout)
    assert digest["status"] == "failed" and result.exit_code == 5
    assert "cannot reach http://127.0.0.1:9/v1" in digest["reason"]
    assert "Traceback" not in result.output


def test_broken_and_invalid_arguments_go_back_to_the_model(run, scripted_server) -> None:
    scripted_server.add(
        tool_call("http_get", '{"url": "https://exa'),
        tool_call("http_get", {"link": "https://example.org"}),
        tool_calls(("html_to_text", {"html": 42})),
        reply(json.dumps(GOOD)),
    )
    code, digest = run("invoke", "web-reader", "summarise https://example.org")
    assert code == 0 and digest["status"] == "ok"
    _, second, third, fourth = scripted_server.requests
    assert "arguments are not valid JSON" in second["messages"][-1]["content"]
    assert "'url' is a required property" in third["messages"][-1]["content"]
    assert "42 is not of type 'string'" in fourth["messages"][-1]["content"]
    assert digest["cost"]["tool_calls"] == 3 and digest["cost"]["ghost_calls"] == 0


def test_too_many_ghost_calls_fail(run, scripted_server) -> None:
    for name in ("web_search", "browser", "shell", "python"):
        scripted_server.add(tool_call(name, {}))
    _code, digest = run("invoke", "web-reader", "summarise https://example.org")
    assert digest["status"] == "failed" and digest["reason"] == "ghost_calls"
    assert digest["cost"]["ghost_names"] == ["web_search", "browser", "shell", "python"]


def test_max_output_tokens_only_lowers_and_hint_is_capped(run, scripted_server) -> None:
    scripted_server.add(reply(json.dumps(GOOD)), reply(json.dumps(GOOD)))
    run(
        "invoke",
        "web-reader",
        "summarise https://example.org",
        "--max-output-tokens",
        "5000",
        "--hint",
        "h" * 5000,
    )
    _code, _digest = run(
        "invoke", "web-reader", "summarise https://example.org", "--max-output-tokens", "100"
    )
    high, low = scripted_server.requests
    assert high["max_tokens"] == 400 and low["max_tokens"] == 100
    user = _contents(high, "user")[0]
    assert "h" * 800 in user and "h" * 801 not in user


def test_brief_file_and_must_return(run, scripted_server, tmp_path: Path) -> None:
    brief = tmp_path / "brief.yaml"
    brief.write_text(
        "goal: summarise the page\nmust_return: [language]\ninputs: {url: https://example.org}\n"
    )
    scripted_server.add(reply(json.dumps({**GOOD, "language": "en"})))
    code, digest = run("invoke", "web-reader", "--brief", str(brief))
    assert code == 0 and digest["fields"]["language"] == "en"
    system, user = (m["content"] for m in scripted_server.requests[0]["messages"])
    assert '"language"' in system and "- url: https://example.org" in user


def test_digest_json_has_exactly_the_design_keys(run, scripted_server) -> None:
    scripted_server.add(reply(json.dumps(GOOD)))
    _, digest = run("invoke", "web-reader", "summarise https://example.org")
    assert set(digest) == {
        "agent_id",
        "status",
        "summary",
        "fields",
        "artifacts",
        "notes_for_caller",
        "cost",
        "reason",
        "field_sources",  # tiny's addition: where each field's value was found
    }
    assert set(digest["cost"]) >= {
        "tokens_in",
        "tokens_out",
        "tool_calls",
        "ghost_calls",
        "ghost_names",
        "wall_seconds",
        "caller_tokens",
    }


def test_a_refused_key_is_one_error_line_that_never_prints_it(tiny, scripted_server) -> None:
    scripted_server.add(http_error(401, "bad key"))
    env = {"TINY_BASE_URL": scripted_server.url, "TINY_API_KEY": "sk-secret-123"}
    result = tiny("invoke", "web-reader", "x y z", "--json", env=env)
    assert scripted_server.headers[0]["authorization"] == "Bearer sk-secret-123"
    assert result.exit_code == 2 and result.stdout == ""  # the key is config: it raises
    (line,) = result.stderr.strip().splitlines()
    assert "HTTP 401" in line and "TINY_API_KEY" in line and "sk-secret-123" not in line
    listed = json.loads(tiny("runs", "--json").stdout)[0]
    assert listed["status"] == "failed" and "HTTP 401" in listed["reason"]


def test_a_refused_key_after_a_tool_ran_ends_failed_keeping_what_ran(run, scripted_server):
    scripted_server.add(tool_call("docs_search", {"query": "onboarding"}), http_error(403))
    code, digest = run("invoke", "docs-finder", "how does onboarding work")
    assert (code, digest["status"]) == (5, "failed") and "HTTP 403" in digest["reason"]
    assert digest["cost"]["tool_calls"] == 1  # the Digest says what the tools did before


def test_unknown_card_is_a_usage_error(tiny) -> None:
    result = tiny("invoke", "nobody", "do something")
    assert result.exit_code == 2
    assert "no card 'nobody'" in result.stderr and "web-reader" in result.stderr


# --- delegate ------------------------------------------------------------------------------


def test_delegate_abstains_without_a_model_call(run, scripted_server) -> None:
    code, digest = run("delegate", "make me a sandwich")
    assert digest["status"] == "abstain" and code == 6
    assert digest["routing"]["decision"] == "abstain" and digest["agent_id"] is None
    assert scripted_server.requests == []


def test_delegate_writer_needs_confirmation(run, scripted_server) -> None:
    code, digest = run("delegate", "please add mustermann gmbh as a new customer")
    assert digest["status"] == "needs_confirmation" and code == 7
    assert digest["routing"]["agent_id"] == "crm-writer"
    assert scripted_server.requests == []


def test_delegate_yes_writes_the_row(run, scripted_server, home: Path) -> None:
    scripted_server.add(
        tool_call("crm_find_company", {"name": "Mustermann GmbH"}),
        tool_call("crm_add_company", {"name": "Mustermann GmbH", "city": "Berlin"}),
        reply(
            json.dumps(
                {
                    "status": "ok",
                    "summary": "Added Mustermann GmbH.",
                    "company_id": 1,
                    "name": "Mustermann GmbH",
                }
            )
        ),
    )
    code, digest = run("delegate", "please add mustermann gmbh as a new customer", "--yes")
    assert code == 0 and digest["status"] == "ok"
    assert digest["routing"] == {
        "decision": "route",
        "agent_id": "crm-writer",
        "score": digest["routing"]["score"],
    }
    assert _tool_names(scripted_server.requests[0]) == ["crm_find_company", "crm_add_company"]
    rows = sqlite3.connect(home / "crm.sqlite3").execute("select name, city from companies")
    assert rows.fetchall() == [("Mustermann GmbH", "Berlin")]


def test_human_output_shows_digest_and_cost(tiny, scripted_server, plain_cards) -> None:
    scripted_server.add(reply(json.dumps(GOOD)))
    result = tiny(
        "invoke",
        "web-reader",
        "summarise https://example.org",
        env={"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards)},
    )
    assert result.exit_code == 0
    for text in ("web-reader", "ok", "A tool extends", "tokens in", "ghost calls", "Tool - Wik"):
        assert text in result.stdout


def test_human_output_says_where_each_field_came_from(tiny, scripted_server, plain_cards) -> None:
    answer = {**GOOD, "url": "https://example.org"}  # the task's URL; no tool saw the title
    scripted_server.add(reply(json.dumps(answer)))
    result = tiny(
        "invoke",
        "web-reader",
        "summarise https://example.org",
        env={
            "TINY_BASE_URL": scripted_server.url,
            "TINY_CARDS": str(plain_cards),
            "COLUMNS": "120",
        },
    )
    rows = {line.split("│")[1].strip(): line for line in result.stdout.splitlines() if "│" in line}
    assert "the task" in rows["url"]
    assert "model only" in rows["title"]


def test_a_hanging_tool_is_cut_at_the_wall_budget(tiny, scripted_server, tmp_path: Path) -> None:
    (tmp_path / "slow_tools.py").write_text(
        "import time\nfrom tiny_cli import tool\n\n@tool\ndef wait_for_it(seconds: float) -> str:\n"
        '    """Wait, then answer."""\n    time.sleep(seconds)\n    return "done"\n'
    )
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "waiter.yaml").write_text(
        "id: waiter\nsummary: Waits for things to finish.\ntools: [wait_for_it]\n"
        "returns_required: []\nbudget: {max_wall_seconds: 1}\n"
    )
    scripted_server.add(tool_call("wait_for_it", {"seconds": 8}))
    start = time.monotonic()
    result = tiny(
        "invoke",
        "waiter",
        "wait",
        "--json",
        "--cards",
        str(cards),
        "--tools",
        str(tmp_path / "slow_tools.py"),
        env={"TINY_BASE_URL": scripted_server.url},
    )
    elapsed = time.monotonic() - start
    digest = json.loads(result.stdout)
    assert digest["status"] == "failed" and digest["reason"] == "max_wall_seconds"
    assert elapsed < 4, elapsed  # the tool would take 8 s
    assert len(scripted_server.requests) == 1


def test_ghost_calls_past_the_tool_budget_are_still_counted(run, scripted_server) -> None:
    calls = [("docs_search", {"query": "onboarding"})] * 4 + [("web_search", {"q": "x"})] * 2
    scripted_server.add(
        tool_calls(*calls), reply('{"status": "ok", "summary": "s", "source": "x"}')
    )
    _, digest = run("invoke", "docs-finder", "how does onboarding work")
    assert digest["cost"]["ghost_names"] == ["web_search", "web_search"]
    assert digest["cost"]["tool_calls"] == 6


def test_hint_cut_from_a_brief_file_is_reported(run, scripted_server, tmp_path: Path) -> None:
    brief = tmp_path / "brief.yaml"
    brief.write_text(f"goal: summarise the page\ncontext_hint: {'h' * 5000}\n")
    scripted_server.add(reply(json.dumps(GOOD)))
    _, digest = run("invoke", "web-reader", "--brief", str(brief))
    assert "context_hint cut from 5000 to 800 characters" in digest["notes_for_caller"]


def test_brief_file_with_a_bad_token_cap_is_one_line(tiny, tmp_path: Path) -> None:
    brief = tmp_path / "brief.yaml"
    brief.write_text('goal: x\nmax_output_tokens: "100"\n')
    result = tiny("invoke", "web-reader", "--brief", str(brief))
    assert result.exit_code == 2
    assert "max_output_tokens: must be an integer, got a string" in result.stderr


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ("context_hint: [a, {b: c}]\n", "context_hint: must be text, got a list"),
        ("inputs: {url: {k: v}}\n", "inputs.url: must be text, got a mapping"),
        ("inputs: [[1, 2]]\n", "inputs.input1: must be text, got a list"),
    ],
)
def test_a_brief_field_the_model_reads_as_text_is_text(tiny, tmp_path, fields, message) -> None:
    brief = tmp_path / "brief.yaml"  # else the model would read Python's spelling of the value
    brief.write_text("goal: x\n" + fields)
    result = tiny("invoke", "web-reader", "--brief", str(brief))
    assert result.exit_code == 2 and result.stdout == ""
    assert result.stderr == f"tiny: error: {brief}: {message}\n"


def test_a_brief_file_with_an_empty_goal_names_the_file(tiny, tmp_path: Path) -> None:
    brief = tmp_path / "brief.yaml"
    brief.write_text('goal: "   "\n')
    result = tiny("invoke", "web-reader", "--brief", str(brief))
    assert result.exit_code == 2
    assert result.stderr.strip() == (
        f"tiny: error: {brief}: goal: the task is empty: say what the agent should do"
    )


def test_one_brief_builder_puts_the_options_on_the_file(tmp_path: Path) -> None:
    """A task and options given beside a brief file: the task wins, fields add, inputs and
    the hint and token cap given win; what a face gives alone is the same Brief."""
    from tiny_cli.digest import Brief, make_brief

    brief = tmp_path / "brief.yaml"
    brief.write_text(
        "goal: from the file\nmust_return: [a]\ninputs: {k: file, j: kept}\n"
        "context_hint: file hint\nmax_output_tokens: 200\n"
    )
    made = make_brief("the task", ["b", " a "], {"k": "flag"}, "", 100, file=brief)
    assert made == Brief("the task", ("a", "b"), {"k": "flag", "j": "kept"}, "", 100)
    from_file = make_brief(file=brief)
    assert (from_file.goal, from_file.context_hint, from_file.max_output_tokens) == (
        "from the file",
        "file hint",
        200,
    )
    assert make_brief(" go ", ["x"]) == Brief("go", ("x",))


def test_wall_timeout_keeps_the_providers_reason(tiny, tmp_path: Path) -> None:
    cards = _seed_cards_with_wall_budget(tmp_path, seconds=2)
    result = tiny(
        "invoke",
        "web-reader",
        "summarise https://example.org",
        "--json",
        "--cards",
        str(cards),
        env={"TINY_BASE_URL": "http://127.0.0.1:9/v1"},
    )
    digest = json.loads(result.stdout)
    # nothing answered before the budget ran out: the server was not reached, not slow
    assert digest["reason"].startswith("cannot reach http://127.0.0.1:9/v1")


def test_terminal_escapes_from_the_model_are_shown_not_obeyed(
    tiny, scripted_server, plain_cards
) -> None:
    hostile = "fine\x1b]0;owned\x07 \x1b[2J\u202eevil"
    scripted_server.add(
        reply(json.dumps({"status": "ok", "summary": hostile, "source": "x\x1b[31my"}))
    )
    result = tiny(
        "invoke", "docs-finder", "how did the onboarding process work again",
        env={"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards)},
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout
    assert "\u202e" not in result.stdout  # no bidi override reorders what the user reads
    assert "\\u001b]0;owned\\u0007" in result.stdout and "\\u202eevil" in result.stdout
    assert "x\\u001b[31my" in result.stdout


def test_a_ghost_tools_name_in_the_cost_table_is_shown_not_obeyed(
    tiny, scripted_server, plain_cards
) -> None:
    scripted_server.add(tool_call("ev\x1b[31mil\u202e", {}))  # no such tool: a ghost call
    scripted_server.add(tool_call("docs_search", {"query": "onboarding"}))
    done = {"status": "ok", "summary": "See onboarding.md.", "source": "onboarding.md"}
    scripted_server.add(reply(json.dumps(done)))
    result = tiny(
        "invoke", "docs-finder", "how did the onboarding process work again",
        env={"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(plain_cards),
             "COLUMNS": "200"},
    )  # fmt: skip
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout
    assert '1 ("ev\\u001b[31mil\\u202e")' in result.stdout  # the cost table's ghost cell
    scripted_server.assert_done()
