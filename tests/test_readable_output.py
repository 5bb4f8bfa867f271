"""Terminal output a person can read at 80 columns, or piped: no blank lines, nothing cut silently.

Runs come from the scripted server, as in test_runlog.py; the bench from a shipped recording.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from rich.cells import cell_len
from rich.console import Console

from tiny_cli.bench.scale_report import ScaleReport, ScaleRow
from tiny_cli.cli import live, render_bench
from tiny_cli.digest import Cost, Digest
from tiny_cli.testing import reply, tool_call

from .conftest import REPO

NARROW = {"COLUMNS": "80"}
LONG_CARD = "handbook-finder-for-every-team-in-the-whole-company"
LONG_MODEL = "hf.co/bartowski/Qwen2.5-Coder-1.5B-Instruct-GGUF:Q4_K_M"
LONG_TASK = (
    "how did the onboarding process work again, for a new colleague who starts on "
    "https://intranet.example.com/onboarding/first-week-checklist-for-engineers next week"
)
LONG_CARD_YAML = f"""\
id: {LONG_CARD}
summary: Looks up meeting rooms, their seats and their equipment in the facilities pages.
examples:
  - which meeting room on the third floor has a projector
tools: [docs_search]
returns_required: [source]
side_effects: none
budget: {{max_tool_calls: 4, max_output_tokens: 400, max_wall_seconds: 45}}
"""
ANSWER = {"status": "ok", "summary": "Day one: laptop.", "source": "onboarding.md"}
RECORDING = REPO / "examples" / "bench" / "recordings" / "qwen2.5-coder-1.5b-json.jsonl"


def _fits(text: str, width: int = 80) -> None:
    """Every line fits `width` cells and none is blank."""
    lines = text.rstrip("\n").split("\n")
    assert all(line.strip() for line in lines), text  # no blank line anywhere
    assert max(cell_len(line) for line in lines) <= width, text


def _console(width: int = 80) -> Console:
    return Console(file=io.StringIO(), width=width, color_system=None)


def _text(console: Console) -> str:
    out = console.file
    assert isinstance(out, io.StringIO)
    return out.getvalue()


@pytest.fixture
def cards(plain_cards: Path) -> Path:
    """The seed cards (answers need no tool), plus a docs card whose id is long."""
    (plain_cards / "long-id.yaml").write_text(LONG_CARD_YAML, encoding="utf-8")
    return plain_cards


@pytest.fixture
def run(tiny, scripted_server, cards):
    """Run `tiny ARGS` against the scripted server with the cards above and a long model name."""

    def go(*args: str, env: dict[str, str] | None = None):
        extra = {"TINY_BASE_URL": scripted_server.url, "TINY_CARDS": str(cards)}
        result = tiny(*args, env={**extra, "TINY_MODEL": LONG_MODEL, **(env or {})})
        assert "Traceback" not in result.output
        return result

    return go


@pytest.fixture
def logged(run, scripted_server):
    """Three runs in the log: two with a ghost call and a long task, one failed."""
    for card in ("docs-finder", LONG_CARD):
        scripted_server.add(
            tool_call("web_search", {"q": "x"}),
            tool_call("docs_search", {"query": "onboarding"}),
            reply(json.dumps(ANSWER)),
        )
        done = run("invoke", card, LONG_TASK, "--tool-mode", "native", "--json")
        assert json.loads(done.stdout)["status"] == "ok"
    scripted_server.add(reply("not json"), reply("still not json"))
    failed = run("invoke", "docs-finder", "a task", "--tool-mode", "native", "--json")
    assert json.loads(failed.stdout)["status"] == "failed"
    return run


# --- tiny runs ----------------------------------------------------------------------------


def test_runs_fit_80_columns_without_blank_lines_and_say_what_was_cut(logged) -> None:
    text = logged("runs", env=NARROW).stdout
    _fits(text)
    assert "3 run(s), newest first" in text
    assert LONG_CARD not in text and "handbook-fin" in text  # cut to fit, and it says so
    assert "--wide prints the table whole" in text
    lines = text.splitlines()
    rows = lines[next(i for i, line in enumerate(lines) if line.startswith("───")) + 1 :]
    assert rows[1].startswith(" 2 ") and rows[1].rstrip().endswith("how did the")
    assert rows[2].strip() == "onboarding" and rows[3].strip().endswith("…")  # folds, 3 lines
    assert rows[4].startswith(" 1 ")


def test_runs_wide_shows_every_column_and_every_name_whole(logged) -> None:
    text = logged("runs", "--wide", env=NARROW).stdout
    assert LONG_CARD in text and LONG_MODEL in text and "invoke" in text
    assert "--wide" not in text  # nothing was cut
    header = text.splitlines()[1].split()
    assert header[:4] == ["id", "started", "command", "card"] and "model" in header
    assert all(line.strip() for line in text.rstrip("\n").split("\n"))
    rows = text.splitlines()[3:]
    assert len(rows) == 3  # one line per run
    found = logged("runs", "search", "onboarding", "--wide", env=NARROW).stdout
    assert LONG_CARD in found and "2 run(s)" in found


def test_runs_piped_without_columns_fit_80_too(logged) -> None:
    text = logged("runs", env={"COLUMNS": ""}).stdout  # not a terminal: rich's 80 columns
    _fits(text)


def test_runs_stats_show_whole_headers_and_a_legend_of_the_shown_columns(logged) -> None:
    text = logged("runs", "stats", env=NARROW).stdout
    _fits(text)
    [header] = [line for line in text.splitlines() if line.startswith("model ")]
    shown = ("model", "runs", "ok", "ghost", "repair", "tok in", "caller", "compr", "p95 s")
    assert header.split() == " ".join(shown).split()  # each header whole, on one line
    assert "…" not in header
    legend = text.split("ok: share of runs ok")[1].split("runs per card")[0]
    assert "p95 s:" in legend and "compr:" in legend
    assert "tok out" not in text and "p50 s" not in text  # not shown: not in the legend either
    assert LONG_MODEL not in text and "--wide prints the table whole" in text


def test_runs_stats_wide_shows_every_column_and_name(logged) -> None:
    text = logged("runs", "stats", "--wide", env=NARROW).stdout
    assert LONG_MODEL in text and LONG_CARD in text
    assert "tok out:" in text and "p50 s:" in text  # shown, so explained
    assert "median" not in text and "nearest rank" in text  # p50 is a rank, not a middle mean
    assert "--wide prints" not in text


# --- tiny validate ------------------------------------------------------------------------


def test_validate_folds_tool_names_and_cuts_only_a_long_id(run) -> None:
    text = run("validate", env=NARROW).stdout
    _fits(text)
    words = set(re.findall(r"[\w-]+", text))
    for tool in ("crm_find_company", "crm_add_company", "docs_search", "http_get", "html_to_text"):
        assert tool in words, tool  # whole, on one line
    assert LONG_CARD not in words and "--wide prints the table whole" in text
    wide = run("validate", "--wide", env=NARROW).stdout
    assert LONG_CARD in wide and "--wide prints" not in wide
    assert "crm_find_company, crm_add_company" in wide  # one line per card


# --- the bench ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def replayed(tmp_path_factory) -> tuple[str, str]:
    """The shipped json-mode recording replayed at 80 columns, and as Markdown."""
    from typer.testing import CliRunner

    from tiny_cli.cli import app

    home = tmp_path_factory.mktemp("home")
    env = {"TINY_HOME": str(home), "TINY_BASE_URL": "http://127.0.0.1:9/v1", **NARROW}
    env |= {"TINY_CARDS": str(REPO / "cards"), "TINY_DOCS": str(REPO / "examples" / "handbook")}
    args = ["bench", "--tasks", str(REPO / "examples" / "bench" / "tasks.yaml")]
    args += ["--replay", str(RECORDING)]
    shown = CliRunner().invoke(app, args, env=env)
    markdown = CliRunner().invoke(app, [*args, "--markdown"], env=env)
    assert shown.exit_code == 0 and markdown.exit_code == 0, shown.output
    return shown.stdout, markdown.stdout


def _terminal_rows(text: str) -> dict[str, list[str]]:
    """The comparison table's rows (the table above its legend), by label."""
    rows = {}
    for line in text.split("better: the arm")[0].splitlines():
        cells = [c.strip() for c in re.split("[│┃]", line)[1:-1]]  # a row, or the header
        if len(cells) == 4:
            rows[cells[0]] = cells[1:]
    return rows


def _markdown_rows(text: str) -> dict[str, list[str]]:
    """The Markdown table's rows, by label."""
    rows = {}
    for line in text.splitlines():
        if line.startswith("| ") and not line.startswith("| ---"):
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0]] = cells[1:]
    return rows


def test_every_bench_ratio_names_the_better_arm(replayed) -> None:
    shown, _ = replayed
    rows = _terminal_rows(shown)
    assert rows["metric"] == ["tiny", "all-tools", "better"]
    assert rows["wrong-tool calls"] == ["5", "12", "tiny 2.40x"]  # fewer is better
    assert rows["completion tokens"] == ["2499", "1920", "all-tools 1.30x"]
    assert rows["right outcome (on evidence)"] == ["4", "2", "tiny 2.00x"]  # more is better
    assert rows["unwanted writes"] == ["1", "0", "all-tools"]  # no factor against a zero
    assert rows["ghost calls"] == ["0", "0", "same"]
    assert rows["status partial"][2] == "" and rows["tool calls"][2] == ""  # neither way
    assert rows["routing accuracy"] == ["0.867", "—", "—"]
    assert "better: the arm with the better figure" in shown.replace("\n", " ")
    ratios = [cells[2] for cells in rows.values()]
    assert not any(re.fullmatch(r"[\d.]+x", r) for r in ratios)  # no bare, unoriented ratio


def test_the_bench_markdown_says_what_the_terminal_table_says(replayed) -> None:
    shown, markdown = replayed
    terminal, md = _terminal_rows(shown), _markdown_rows(markdown)
    assert md.pop("metric") == terminal.pop("metric")
    assert md == {label.strip(): cells for label, cells in terminal.items()}
    assert render_bench.BETTER_LEGEND in markdown


def test_the_bench_fits_80_columns_and_leaves_out_a_chart_of_zeros(replayed) -> None:
    shown, _ = replayed
    table = shown.split("better: the arm")[0]
    _fits(table.split("\n", 3)[3])  # below the title, which wraps as a sentence
    assert "ghost calls per task: 0 in every task and arm, chart left out" in shown
    tokens = shown.split("tokens per task (prompt + completion)")[1]
    assert "█" in tokens  # a chart with values is still drawn


@pytest.mark.slow  # a few seconds on 2 cores: in `make test-slow`
def test_a_one_arm_bench_names_no_better_arm(tmp_path) -> None:
    from typer.testing import CliRunner

    from tiny_cli.cli import app

    env = {"TINY_HOME": str(tmp_path), "TINY_BASE_URL": "http://127.0.0.1:9/v1", **NARROW}
    env |= {"TINY_CARDS": str(REPO / "cards"), "TINY_DOCS": str(REPO / "examples" / "handbook")}
    args = ["bench", "--tasks", str(REPO / "examples" / "bench" / "tasks.yaml")]
    args += ["--replay", str(RECORDING), "--arm", "tiny"]
    markdown = CliRunner().invoke(app, [*args, "--markdown"], env=env)
    shown = CliRunner().invoke(app, args, env=env)
    assert markdown.exit_code == 0 and shown.exit_code == 0, shown.output
    assert markdown.stdout.startswith("| metric | tiny |\n") and "better" not in markdown.stdout
    assert "| right outcome (on evidence) | 4 |" in markdown.stdout
    assert "better" not in shown.stdout and "right outcome (on evidence)" in shown.stdout


def _scale_row(arm: str, right: int) -> ScaleRow:
    return ScaleRow(
        size=5, label="5", tools=5.0, arm=arm, fits=True, tasks=4,
        right_tool=right, right_call=right, right_tool_ci=None, right_call_ci=None,
        irrelevance_tasks=0, irrelevance_right=None, routing_right=None, topk_recall=None,
        prompt_tokens=900.0, schema_tokens=600.0, completion_tokens=20.0,
        wall_p50=None, wall_p95=None, ghost_calls=0, failed=0,
    )  # fmt: skip


def _scale_report(*rows: ScaleRow) -> ScaleReport:
    return ScaleReport("qwen", "native", "2026-01-01T00:00:00+00:00", 1, 5, 0.1, 9, rows, ())


def test_a_scale_chart_of_zeros_is_one_line_and_one_with_values_is_drawn() -> None:
    console = _console()
    render_bench.scale(console, _scale_report(_scale_row("tiny", 0), _scale_row("all-tools", 0)))
    text = _text(console)
    assert "no right calls in any arm and size: chart left out" in text
    assert "right calls (first call" not in text and "█" not in text
    console = _console()
    render_bench.scale(console, _scale_report(_scale_row("tiny", 3), _scale_row("all-tools", 0)))
    text = _text(console)
    assert "chart left out" not in text and "right calls (first call" in text and "█" in text


def test_the_scale_table_shows_the_markdown_columns_in_their_order_under_their_names() -> None:
    """The terminal's table is the Markdown one's columns, in order and by name (fewer of them):
    a top-k row's recall is under `top-k recall`, never under a `routing` column."""
    from dataclasses import replace

    from tiny_cli.bench.scale_report import markdown_table

    report = _scale_report(replace(_scale_row("top-k", 3), topk_recall=4))
    console = _console(width=250)
    render_bench.scale(console, report)
    lines = _text(console).replace("┃", "│").splitlines()
    head = next(line for line in lines if "│" in line and "size" in line)
    shown = [cell.strip() for cell in head.strip("│ ").split("│")]
    markdown = [cell.strip() for cell in markdown_table(report).splitlines()[0].split("|")[1:-1]]
    assert [name for name in markdown if name in shown] == shown[: len(shown) - 1]
    assert shown[-1] == "wall p50 s"  # the one terminal column a replayed table cannot have
    row = next(line for line in lines if "│" in line and "recall" not in line and "top-k" in line)
    cells = dict(zip(shown, (cell.strip() for cell in row.strip("│ ").split("│")), strict=True))
    assert cells["routing right"] == "—" and cells["top-k recall"] == "4 / 4"


# --- a Digest -----------------------------------------------------------------------------


def test_a_failed_digest_shows_its_reason_in_the_box_and_no_table_of_zeros() -> None:
    console = _console()
    why = "cannot reach http://127.0.0.1:9/v1 — is the server running? [bold]x[/bold]"
    cost = Cost(wall_seconds=3.52, caller_tokens=98)
    live.digest_panel(console, Digest("docs-finder", "failed", reason=why, cost=cost))
    text = _text(console)
    _fits(text)
    inside = " ".join(line.strip("│ ") for line in text.splitlines() if line.startswith("│"))
    assert "reason: cannot reach" in inside and "[bold]x[/bold]" in inside  # escaped, shown
    assert "(no summary)" not in text
    assert "tokens in" not in text and "┏" not in text  # no cost table of zeros
    assert "cost: no model tokens reported, no tool calls · 3.52 s · 98 caller tokens" in text
    assert text.count("reason:") == 1


def test_a_failed_digest_that_spent_tokens_keeps_its_cost_table() -> None:
    console = _console()
    cost = Cost(tokens_in=20, tokens_out=10, wall_seconds=0.5, caller_tokens=100)
    live.digest_panel(console, Digest("docs-finder", "failed", reason="schema", cost=cost))
    text = _text(console)
    assert "reason: schema" in text and "tokens in" in text and "│        20 │" in text


def test_a_digest_with_a_summary_keeps_it_in_the_box_and_the_reason_below() -> None:
    console = _console()
    d = Digest("docs-finder", "partial", summary="Found one page.", reason="max_tool_calls")
    live.digest_panel(console, d)
    lines = _text(console).splitlines()
    assert "Found one page." in lines[1] and lines[3].startswith("reason: max_tool_calls")
