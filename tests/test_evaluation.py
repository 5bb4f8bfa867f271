"""Routing quality reports: eval files, ranking vs the abstain rule, each card, the sweep."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import yaml
from typer.testing import Result

from tiny_cli.errors import ConfigError
from tiny_cli.routing.evaluation import (
    ABSTAIN_TARGET,
    SWEEP_STEPS_EACH_SIDE,
    AlsoRight,
    evaluate,
    load_eval_file,
)
from tiny_cli.routing.router import DEFAULT_THRESHOLD, Router

from .conftest import REPO, SEED_TASKS

BENCH_TASKS = REPO / "examples" / "bench" / "tasks.yaml"
BFCL = REPO / "examples" / "bfcl"
MCPBENCH = REPO / "benchmarks" / "data" / "mcpbench"

# --- eval files ---------------------------------------------------------------------------


def write_lines(path: Path, lines: Sequence[str]) -> Path:
    path.write_text("\n".join(lines) + "\n", "utf-8")
    return path


def test_load_eval_file_reads_tasks_and_nulls(tmp_path: Path) -> None:
    path = write_lines(
        tmp_path / "e.jsonl",
        ['{"task": "add acme", "expected": "crm-writer"}', "", '{"task": "hi", "expected": null}'],
    )
    assert load_eval_file(path) == [("add acme", "crm-writer"), ("hi", None)]


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"task": "a", "expected": null', r"e\.jsonl:2: invalid JSON"),
        ('["a", null]', r"e\.jsonl:2: expected an object"),
        ('{"task": "", "expected": null}', r"e\.jsonl:2: task: must be a non-empty string"),
        ('{"task": "a"}', r":2: expected \(or expected_agent\): missing; the entry has 'task' \("),
        (
            '{"task": "a", "expected_agnet": "x"}',
            r":2: expected \(or expected_agent\): missing; the entry has 'task', 'expected_agnet'",
        ),
        ('{"task": "a", "expected": 3}', r"e\.jsonl:2: expected: must be a card id or null"),
        ('{"task": "a", "expected": "x", "acceptable": "y"}', r":2: acceptable: must be a list"),
        (
            '{"task": "a", "expected": null, "acceptable": ["y"]}',
            r":2: acceptable: names cards, bu",
        ),
        (
            '{"task": "a", "expected": "x", "expected_tool": 3}',
            r":2: expected_tool: must be a tool",
        ),
        ("[" * 100_000 + "]" * 100_000, r"e\.jsonl:2: invalid JSON: nested too deeply"),
    ],
)
def test_bad_eval_lines_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = write_lines(tmp_path / "e.jsonl", ['{"task": "ok", "expected": null}', line])
    with pytest.raises(ConfigError, match=message):
        load_eval_file(path)


def test_missing_or_empty_eval_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"nope\.jsonl: cannot read eval file"):
        load_eval_file(tmp_path / "nope.jsonl")
    with pytest.raises(ConfigError, match=r"empty\.jsonl: no tasks"):
        load_eval_file(write_lines(tmp_path / "empty.jsonl", ["", "  "]))


def test_evaluate_on_the_seed_tasks_is_perfect(router: Router) -> None:
    report = evaluate(router, SEED_TASKS)
    assert (report.n, report.top1_in_scope, report.accuracy) == (8, 1.0, 1.0)
    assert (report.abstain_precision, report.abstain_recall) == (1.0, 1.0)
    assert report.confusions == ()
    thresholds = [p.threshold for p in report.sweep]
    assert len(thresholds) == 2 * SWEEP_STEPS_EACH_SIDE + 1 and thresholds == sorted(thresholds)
    assert DEFAULT_THRESHOLD in thresholds
    recalls = [p.abstain_recall for p in report.sweep]
    accuracies = [p.in_scope_accuracy for p in report.sweep]
    assert recalls == sorted(recalls) and accuracies == sorted(accuracies, reverse=True)


def test_evaluate_counts_a_wrong_label_as_a_confusion(router: Router) -> None:
    labelled = [*SEED_TASKS[:3], ("make me a sandwich", "web-reader"), *SEED_TASKS[4:]]
    report = evaluate(router, labelled)
    assert report.top1_in_scope == pytest.approx(6 / 7)
    assert report.accuracy == pytest.approx(7 / 8)
    assert report.abstain_precision == pytest.approx(1 / 2)
    assert report.abstain_recall == 1.0
    assert report.confusions == (("web-reader", "abstain", 1),)
    data = report.to_json()
    assert list(data) == [
        "n", "several_right", "top1_in_scope", "top1_never_abstain", "top3_never_abstain",
        "top5_never_abstain", "accuracy",
        "abstain_precision", "abstain_recall", "threshold", "best_at_target", "sweep",
        "per_card", "confusions",
    ]  # fmt: skip
    assert data["confusions"] == [{"expected": "web-reader", "got": "abstain", "count": 1}]
    assert list(data["sweep"][0]) == ["threshold", "in_scope_accuracy", "abstain_recall"]


def test_never_abstaining_separates_ranking_from_the_abstain_rule(router: Router) -> None:
    # the sandwich's best card is web-reader, under the threshold: ranked right, abstained
    labelled = [*SEED_TASKS[:3], ("make me a sandwich", "web-reader"), *SEED_TASKS[4:]]
    report = evaluate(router, labelled)
    assert report.top1_never_abstain == 1.0
    assert report.top1_in_scope == pytest.approx(6 / 7)
    best = report.best_at_target
    assert best is not None  # a lower threshold keeps the butterbrot out and the sandwich in
    assert (best.in_scope_accuracy, best.abstain_recall) == (1.0, 1.0)
    assert best.threshold < DEFAULT_THRESHOLD
    assert best.abstain_recall >= ABSTAIN_TARGET


def test_per_card_rows_count_recall_precision_and_losses(router: Router) -> None:
    labelled = [*SEED_TASKS[:3], ("make me a sandwich", "web-reader"), *SEED_TASKS[4:]]
    rows = {row.agent_id: row for row in evaluate(router, labelled).per_card}
    assert set(rows) == {"web-reader", "docs-finder", "crm-writer"}
    web = rows["web-reader"]
    assert (web.tasks, web.routed, web.lost_to_abstain) == (3, 2, 1)
    assert (web.recall, web.precision) == (pytest.approx(2 / 3), 1.0)
    crm = rows["crm-writer"]
    assert (crm.tasks, crm.routed, crm.recall, crm.precision, crm.lost_to_abstain) == (
        2, 2, 1.0, 1.0, 0,
    )  # fmt: skip


def test_acceptable_cards_and_an_expected_tool_count_as_right(router: Router) -> None:
    vacation = next(t for t, want in SEED_TASKS if want == "docs-finder")
    labelled = [(vacation, "web-reader"), *SEED_TASKS]
    assert evaluate(router, labelled).confusions == (("web-reader", "docs-finder", 1),)
    for also in (AlsoRight(cards=frozenset({"docs-finder"})), AlsoRight(tool="docs_search")):
        report = evaluate(router, labelled, [also, *[AlsoRight()] * len(SEED_TASKS)])
        assert (report.several_right, report.confusions) == (1, ())
        assert (report.top1_in_scope, report.top1_never_abstain, report.accuracy) == (1, 1, 1)
        rows = {row.agent_id: row for row in report.per_card}
        assert (rows["web-reader"].tasks, rows["web-reader"].recall) == (3, 1.0)
        assert rows["docs-finder"].precision == 1.0  # the extra task fits it too
    nobody = AlsoRight(tool="no_such_tool")  # a tool no card allows adds no card
    report = evaluate(router, labelled, [nobody, *[AlsoRight()] * len(SEED_TASKS)])
    assert report.several_right == 0 and report.top1_in_scope < 1
    with pytest.raises(ConfigError, match="expects cards that are not loaded: web-writer"):
        evaluate(router, labelled, [AlsoRight(frozenset({"web-writer"})), *[AlsoRight()] * 8])


def test_best_at_target_is_none_without_tasks_that_must_abstain(router: Router) -> None:
    report = evaluate(router, [t for t in SEED_TASKS if t[1] is not None])
    assert report.best_at_target is None
    assert report.to_json()["best_at_target"] is None


def test_a_rate_with_no_task_to_measure_it_on_is_none_not_zero(router: Router) -> None:
    """0.000 reads as a failure: a set with no abstain task has no abstain recall at all."""
    routed = evaluate(router, [t for t in SEED_TASKS if t[1] is not None])
    assert (routed.abstain_recall, routed.top1_in_scope) == (None, 1.0)
    assert {p.abstain_recall for p in routed.sweep} == {None}
    document = routed.to_json()
    assert document["abstain_recall"] is None and document["sweep"][0]["abstain_recall"] is None
    outside = evaluate(router, [t for t in SEED_TASKS if t[1] is None])
    assert outside.abstain_recall == 1.0
    empty = (
        outside.top1_in_scope,
        outside.top1_never_abstain,
        *dict(outside.topk_never_abstain).values(),
    )
    assert set(empty) == {None} and {p.in_scope_accuracy for p in outside.sweep} == {None}
    assert outside.to_json()["top1_in_scope"] is None


def test_eval_shows_a_dash_for_a_rate_with_nothing_to_measure(tiny, tmp_path: Path) -> None:
    tasks = write_lines(tmp_path / "eval.jsonl", ['{"task": "tell me a joke", "expected": null}'])
    out = tiny("route", "--eval", str(tasks), env={"TINY_EMBEDDER": "hashing"}).stdout
    assert re.search(r"top-1 in scope, at the threshold\s+│\s+—", out), out
    assert re.search(r"abstain recall\s+│\s+1\.000", out), out


def test_eval_lines_expecting_unknown_cards_are_their_own_errors(tiny, tmp_path: Path) -> None:
    """One unknown id stopped the whole eval, naming neither the file nor the line."""
    tasks = write_lines(tmp_path / "eval.jsonl", [
        '{"task": "how do I request vacation", "expected": "docs-finder"}',
        '{"task": "hello", "expected": "no-such-card"}',
        '{"task": "hi", "expected": "docs-finder", "acceptable": ["nope"]}',
    ])  # fmt: skip
    result = tiny("route", "--eval", str(tasks), "--json", env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 1
    errors = [
        f"{tasks}:2: expected: no card 'no-such-card' is loaded",
        f"{tasks}:3: acceptable: no card 'nope' is loaded",
    ]
    assert result.stderr.splitlines() == [f"tiny: error: {e}" for e in errors]
    document = json.loads(result.stdout)
    assert (document["n"], document["errors"]) == (1, errors)


def test_cli_eval_shows_ranking_rule_and_cards(tiny: Callable[..., Result], tmp_path: Path) -> None:
    lines = [json.dumps({"task": t, "expected": w}) for t, w in SEED_TASKS]
    path = write_lines(tmp_path / "seed.jsonl", lines)
    data = json.loads(tiny("route", "--eval", str(path), "--json").stdout)
    assert (data["top1_never_abstain"], data["top1_in_scope"]) == (1.0, 1.0)
    assert {row["agent_id"] for row in data["per_card"]} == {
        "web-reader", "docs-finder", "crm-writer",
    }  # fmt: skip
    human = tiny("route", "--eval", str(path)).stdout
    for label in ("never abstaining", "abstain recall ≥ 0.80", "per card", "lost to abstain"):
        assert label in human


def test_cli_eval_reports_a_bad_line_and_scores_the_rest(
    tiny: Callable[..., Result], tmp_path: Path
) -> None:
    lines = [json.dumps({"task": t, "expected": w}) for t, w in SEED_TASKS]
    lines[1:1] = [
        json.dumps({"task": "x" * 10_000, "expected": None}),
        json.dumps({"task": "", "expected": None}),
    ]
    path = write_lines(tmp_path / "seed.jsonl", lines)
    result = tiny("route", "--eval", str(path), "--json")
    assert result.exit_code == 1, result.stderr  # two lines failed; the rest were scored
    data = json.loads(result.stdout)
    assert data["n"] == len(SEED_TASKS)
    assert [e.split(": ", 1)[0] for e in data["errors"]] == [f"{path}:2", f"{path}:3"]
    assert "10,000 characters" in data["errors"][0] and "non-empty" in data["errors"][1]
    assert f"tiny: error: {path}:2: task: the task is 10,000" in result.stderr


@pytest.mark.slow
def test_cli_eval_reads_the_bench_task_files_as_they_are(
    tiny: Callable[..., Result], tmp_path: Path
) -> None:
    bench = json.loads(tiny("route", "--eval", str(BENCH_TASKS), "--json").stdout)
    entries = yaml.safe_load(BENCH_TASKS.read_text("utf-8"))
    assert bench["n"] == len(entries) and not bench["errors"]
    per_card = Counter(e["expected_agent"] for e in entries if e["expected_agent"])
    assert {r["agent_id"]: r["tasks"] for r in bench["per_card"]} == per_card
    selection = BFCL / "tasks.jsonl"  # the BFCL selection's tasks, with their expect_call
    rows = [json.loads(line) for line in selection.read_text("utf-8").splitlines()[:2]]
    for row in rows:
        shutil.copy(BFCL / "cards" / f"{row['expected_agent']}.yaml", tmp_path)
    path = write_lines(tmp_path / "tasks.jsonl", [json.dumps(row) for row in rows])
    result = tiny("route", "--eval", str(path), "--cards", str(tmp_path), "--json")
    assert result.exit_code == 0, result.stderr
    scored = {r["agent_id"]: r["tasks"] for r in json.loads(result.stdout)["per_card"]}
    assert scored == {row["expected_agent"]: 1 for row in rows}


def test_cli_eval_reads_acceptable_cards_and_a_bench_tasks_expected_call(
    tiny: Callable[..., Result], tmp_path: Path
) -> None:
    vacation = next(t for t, want in SEED_TASKS if want == "docs-finder")
    lines = [json.dumps({"task": t, "expected": w}) for t, w in SEED_TASKS]
    path = write_lines(
        tmp_path / "e.jsonl", [*lines, json.dumps({"task": vacation, "expected": "web-reader"})]
    )
    wrong = json.loads(tiny("route", "--eval", str(path), "--json").stdout)
    assert wrong["several_right"] == 0 and wrong["top1_in_scope"] == pytest.approx(6 / 7, abs=1e-4)
    assert wrong["confusions"] == [{"expected": "web-reader", "got": "docs-finder", "count": 1}]
    # web-reader is second or third for it: among the first 3 (of 3 cards), never first
    assert wrong["top1_never_abstain"] == pytest.approx(6 / 7, abs=1e-4)
    assert (wrong["top3_never_abstain"], wrong["top5_never_abstain"]) == (1, 1)
    for extra in ({"acceptable": ["docs-finder"]}, {"expect_call": {"name": "docs_search"}}):
        task = {"task": vacation, "expected_agent": "web-reader", **extra}
        path = write_lines(tmp_path / "e.jsonl", [*lines, json.dumps(task)])
        data = json.loads(tiny("route", "--eval", str(path), "--json").stdout)
        assert (data["several_right"], data["top1_in_scope"], data["confusions"]) == (1, 1, [])
    human = tiny("route", "--eval", str(path)).stdout
    assert "1 in-scope task(s) have more than one right card" in human


@pytest.mark.slow  # embeds 23 servers' 241 tools and 104 long requests
def test_cli_eval_counts_every_acceptable_server_of_the_mcp_dev_set(
    tiny: Callable[..., Result], tmp_path: Path
) -> None:
    tasks = MCPBENCH / "tasks.jsonl"
    rows = [json.loads(line) for line in tasks.read_text("utf-8").splitlines()]
    cards = ("--cards", str(MCPBENCH / "cards"))
    data = json.loads(tiny("route", "--eval", str(tasks), *cards, "--json").stdout)
    assert data["several_right"] == sum(len(set(r["acceptable"])) > 1 for r in rows) > 0
    first_only = [{"task": r["task"], "expected": r["expected_agent"]} for r in rows]
    path = write_lines(tmp_path / "first.jsonl", [json.dumps(r) for r in first_only])
    exact = json.loads(tiny("route", "--eval", str(path), *cards, "--json").stdout)
    assert exact["several_right"] == 0
    # the same routes: a task right by its first server is right by any; others gain
    assert data["top1_never_abstain"] > exact["top1_never_abstain"]
    assert data["abstain_recall"] == exact["abstain_recall"]
    ranks = [data[f"top{k}_never_abstain"] for k in (1, 3, 5)]
    assert ranks == sorted(ranks) and ranks[0] < ranks[2]


def test_evaluate_refuses_labels_for_cards_that_are_not_loaded(router: Router) -> None:
    with pytest.raises(ConfigError, match="expects cards that are not loaded: web-writer"):
        evaluate(router, [("x", "web-writer"), ("y", None)])


@pytest.mark.parametrize("flag", [("--explain",), ("--top", "2")])
def test_eval_refuses_the_flags_it_would_ignore(
    tiny, tmp_path: Path, flag: tuple[str, ...]
) -> None:
    tasks = write_lines(tmp_path / "eval.jsonl", ['{"task": "tell me a joke", "expected": null}'])
    result = tiny("route", "--eval", str(tasks), *flag, env={"TINY_EMBEDDER": "hashing"})
    assert result.exit_code == 2
    assert "Invalid value for --eval: --explain and --top are for a TASK" in result.stderr
