"""Review fixes in `tiny bench`, second round: no output written over a file the bench reads,
two outputs on one file said as such, the all-tools prompt sized as the tool mode sends it,
the correct-fields row labelled as counted, an unknown card named by its entry, unknown keys
of `expect_call` refused, and a scale-only flag refused on the plain bench."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO, one_error_line
from tests.test_bench import ACME, write_tasks
from tests.test_scale_bench_fast import SCALE
from tiny_cli.testing import reply, respond

SANDWICH = [{"id": "a", "task": "make me a sandwich", "expected_agent": None}]
TOOLS = (
    "from tiny_cli.tools import tool\n\n\n@tool\ndef echo(text: str) -> str:\n"
    '    """Say it back."""\n    return text\n'
)
PACKAGE_TASKS = REPO / "examples" / "bench" / "tasks.yaml"  # the default's copy by the package


def _one_task(folder: Path, tasks: list[dict] = SANDWICH) -> Path:
    return write_tasks(folder, tasks)


# --- 1: an output written over a file the bench reads -----------------------------------------


@pytest.mark.parametrize("flag", ["--out", "--html"])
def test_an_output_over_the_tools_module_is_refused(
    tiny, scripted_server, tmp_path, monkeypatch, flag
) -> None:
    monkeypatch.chdir(tmp_path)
    module = tmp_path / "my_tools.py"
    module.write_text(TOOLS, "utf-8")
    tasks = _one_task(tmp_path / "bench")
    args = ("--tasks", str(tasks), "--tools", "my_tools.py", flag, str(module), "-q")
    result = tiny("bench", *args, env={"TINY_BASE_URL": scripted_server.url})
    line = one_error_line(result)
    assert f"{module}: used as input and output" in line
    assert module.read_text("utf-8") == TOOLS and scripted_server.requests == []


def test_an_output_over_the_default_task_file_found_by_the_package_is_refused(
    tiny, tmp_path, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # no examples/ here: the bench reads the package's copy
    before = PACKAGE_TASKS.read_bytes()
    line = one_error_line(tiny("bench", "--out", str(PACKAGE_TASKS), "-q"))
    assert f"{PACKAGE_TASKS}: used as input and output" in line
    assert PACKAGE_TASKS.read_bytes() == before


def test_an_output_over_a_page_the_bench_serves_is_refused(tiny, scripted_server, tmp_path) -> None:
    tasks = _one_task(tmp_path / "bench")
    page = tmp_path / "bench" / "pages" / "acme.html"
    result = tiny("bench", "--tasks", str(tasks), "--out", str(page), "-q")
    assert f"{page}: used as input and output" in one_error_line(result)
    assert page.read_text() == ACME


# --- 2: two outputs on one file ----------------------------------------------------------------


def test_two_outputs_on_one_file_are_said_to_be_one_file(tiny, tmp_path) -> None:
    tasks = _one_task(tmp_path / "bench")
    both = tmp_path / "o.json"
    line = one_error_line(
        tiny("bench", "--tasks", str(tasks), "--out", str(both), "--html", str(both))
    )
    assert "input" not in line
    assert f"{both}: --out and --html name the same file" in line


# --- 3: the all-tools prompt sized as the tool mode sends it ----------------------------------


def _all_tools_at_200(tiny, server, mode: str, context: int) -> list[dict]:
    server.add(*[respond(lambda r: reply(json.dumps({"status": "refused", "summary": "no"})))] * 4)
    env = {"TINY_BASE_URL": server.url, "TINY_EMBEDDER": "hashing"}
    args = [*SCALE, "--all-tools-sizes", "200", "--sample", "2", "--irrelevance", "0"]
    args += ["--arm", "all-tools", "--context-tokens", str(context), "--tool-mode", mode]
    result = tiny(*args, "--json", "--no-log", env=env)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["runs"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["native", "auto"])
def test_schemas_sent_natively_that_pass_the_context_do_not_fit(
    tiny, scripted_server, mode
) -> None:
    runs = _all_tools_at_200(tiny, scripted_server, mode, 12_000)
    assert scripted_server.requests == []  # nothing sent that the context cannot hold
    for run in runs:
        assert run["fits"] is False and run["schema_tokens"] > 12_000
        assert run["prompt_tokens"] > run["schema_tokens"]  # the estimate holds the schemas


def test_the_compact_json_listing_of_the_same_tools_fits(tiny, scripted_server) -> None:
    runs = _all_tools_at_200(tiny, scripted_server, "json", 12_000)
    assert all(run["fits"] for run in runs) and len(scripted_server.requests) == 2


# --- 4: the correct-fields row says what it counts -------------------------------------------


def test_the_correct_fields_row_counts_fields_from_the_task_too(
    tiny, scripted_server, tmp_path, plain_cards
) -> None:
    url = {"value": "{site}/acme.html", "from_task": True}
    task = {"id": "a", "task": "read {site}/acme.html and give its title"}
    task |= {"expected_agent": "web-reader", "expect": {"url": url}}
    tasks = write_tasks(tmp_path / "bench", [task])

    def copied(request: dict):
        link = next(w for w in request["messages"][1]["content"].split() if "://" in w)
        return reply(json.dumps({"status": "ok", "summary": "x", "url": link, "title": "t"}))

    scripted_server.add(*[respond(copied)] * 2)
    page = tmp_path / "page.html"
    args = ("--tasks", str(tasks), "--cards", str(plain_cards), "--arm", "all-tools")
    result = tiny("bench", *args, "--html", str(page), env={"TINY_BASE_URL": scripted_server.url})
    assert result.exit_code == 0, result.output
    rows = {cells[0]: cells[1:] for cells in map(_cells, result.stdout.splitlines()) if cells}
    assert rows["tool calls"] == ["0"]  # no tool ran: the field counted came from the task
    assert rows["fields correct (tool or task)"] == ["1"]
    assert "fields correct (tool or task)" in page.read_text("utf-8")


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.split("│") if cell.strip()]


# --- 5: an unknown card named by its entry -----------------------------------------------------


def test_an_unknown_expected_agent_names_the_entry(tiny, tmp_path) -> None:
    tasks = write_tasks(tmp_path, [{"id": "a", "task": "do it", "expected_agent": "nosuch"}])
    line = one_error_line(tiny("bench", "--tasks", str(tasks), "-q"))
    assert f"{tasks}: task 1 (a): expected_agent: no card 'nosuch'" in line


def test_an_unknown_expected_agent_in_jsonl_names_its_line(tiny, tmp_path) -> None:
    tasks = tmp_path / "tasks.jsonl"
    entry = {"id": "b", "task": "do it", "expected_agent": "nosuch"}
    tasks.write_text("\n" + json.dumps(entry) + "\n", "utf-8")
    line = one_error_line(tiny("bench", "--tasks", str(tasks), "-q"))
    assert f"{tasks}: line 2 (b): expected_agent: no card 'nosuch'" in line


# --- 6: unknown keys inside expect_call --------------------------------------------------------


@pytest.mark.slow
def test_an_unknown_key_inside_expect_call_is_refused(tiny, tmp_path) -> None:
    first = json.loads((REPO / "examples" / "bfcl" / "tasks.jsonl").read_text().splitlines()[0])
    first["expect_call"]["argumnets"] = {}
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(json.dumps(first) + "\n", "utf-8")
    cards = str(REPO / "examples" / "bfcl" / "cards")
    line = one_error_line(tiny("bench", "--scale", "--tasks", str(tasks), "--cards", cards))
    assert line.startswith(f"{tasks}:1: ") and "expect_call.argumnets: unknown field" in line


# --- 7: a scale-only flag on the plain bench ---------------------------------------------------


@pytest.mark.parametrize(
    "given", [("--sample", "3"), ("--top-k", "2"), ("--prompt", "card"), ("--seed", "0")]
)
def test_a_scale_only_flag_on_the_plain_bench_is_refused(tiny, tmp_path, given) -> None:
    tasks = _one_task(tmp_path / "bench")
    result = tiny("bench", "--tasks", str(tasks), *given, "-q")
    assert result.exit_code == 2 and "Traceback" not in result.output
    (line,) = result.stderr.strip().splitlines()
    assert given[0] in line and "--scale" in line


@pytest.mark.slow
def test_the_old_spelling_of_the_bench_at_scale_still_takes_its_flags(tiny) -> None:
    # a selection file without --scale still runs at scale (docs/bench.md): its flags count;
    # no model server listens, so it stops at the probe, past the flags
    tasks = REPO / "examples" / "bfcl" / "tasks.jsonl"
    cards = str(REPO / "examples" / "bfcl" / "cards")
    result = tiny(
        "bench", "--tasks", str(tasks), "--cards", cards, "--sample", "2", "--arm", "oracle"
    )
    assert result.exit_code != 0 and "runs at scale" in result.stderr
    assert "--sample" not in result.stderr
