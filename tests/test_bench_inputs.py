"""`tiny bench`'s inputs and outputs: task files that are bad in every way, and options a bench
uses only at its end (bars, files to write), all refused in one line before any model request."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from html.parser import HTMLParser
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tiny_cli.bench.scale import is_selection_file, load_selection_tasks
from tiny_cli.bench.tasks import load_tasks
from tiny_cli.cards.card import Card
from tiny_cli.cli import EXIT_USAGE
from tiny_cli.errors import ConfigError
from tiny_cli.routing.evaluation import read_eval_file

from .conftest import REPO

RECORDING = REPO / "examples" / "bench" / "recordings" / "qwen2.5-coder-1.5b-json.jsonl"
BFCL_CARDS = REPO / "examples" / "bfcl" / "cards"
DECLARED = ({"name": "f", "parameters": {"type": "object", "properties": {"x": {}}}},)
CARDS = {"c1": Card("c1", "a card", ("f", "g"), (), functions=DECLARED)}
GOOD = {"id": "t1", "task": "do f", "expected_agent": "c1",
        "expect_call": {"name": "f", "arguments": {"x": [1]}}}  # fmt: skip
NONE = {"id": "t2", "task": "make me a sandwich", "expected_agent": None, "expect_call": None}


def _selection(folder: Path, *lines: str | bytes, first: dict = GOOD) -> Path:
    """A selection task file: a good first line, then `lines` as given."""
    path = folder / "selection.jsonl"
    raw = [line if isinstance(line, bytes) else line.encode() for line in lines]
    path.write_bytes(b"\n".join([json.dumps(first).encode(), *raw]) + b"\n")
    return path


def _one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == EXIT_USAGE and len(lines) == 1, result.output
    assert lines[0].startswith("tiny: error: ") and "Traceback" not in result.output
    return lines[0].removeprefix("tiny: error: ")


# --- finding 4: a bad --tasks path ------------------------------------------------------------


@pytest.mark.parametrize("name", ["missing.jsonl", "missing.yaml", "folder.jsonl", "folder.yaml"])
def test_a_missing_or_folder_task_file_is_one_line(tiny, tmp_path, name) -> None:
    path = tmp_path / name
    if name.startswith("folder"):
        path.mkdir()
    words = "is a folder, not a file" if name.startswith("folder") else "no such file"
    assert _one_error_line(tiny("bench", "--tasks", str(path))) == f"{path}: {words}"


def test_a_fifo_task_file_never_hangs(tmp_path) -> None:
    fifo = tmp_path / "tasks.jsonl"
    os.mkfifo(fifo)  # nobody writes: a plain open() would wait forever
    env = {
        **os.environ,
        "TINY_HOME": str(tmp_path / "home"),
        "TINY_BASE_URL": "http://127.0.0.1:9/v1",
    }
    done = subprocess.run(
        [sys.executable, "-m", "tiny_cli", "bench", "--tasks", str(fifo)],
        capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == EXIT_USAGE, done.stderr
    assert done.stderr.strip().splitlines()[-1] == f"tiny: error: {fifo}: no tasks in the file"


# --- finding 5: bad lines in a selection task file ---------------------------------------------


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("[1,2]", "a task must be a JSON object, got a list"),
        ("42", "a task must be a JSON object, got a number"),
        ('"s"', "a task must be a JSON object, got a string"),
        ("null", "a task must be a JSON object, got null"),
        ("true", "a task must be a JSON object, got a boolean"),
        ("[" * 100_000, "nested too deeply to read"),
        ('{"id": "t3", "task": "x", "expected_agent": ["c1"], "expect_call": '
         '{"name": "f", "arguments": {}}}', "expected_agent must be a card id or null"),
        ('{"id": ["t3"], "task": "x", "expected_agent": null, "expect_call": null}',
         "id and task must be strings"),
        ('{"id": "t3", "task": "x"', "not JSON"),
        # found by the bench review: the message named a card that was there, and typos passed
        ('{"id": "t3", "task": "x", "expected_agent": "c1", "expect_call": null}',
         "expected_agent and expect_call go together"),
        ('{"id": "t3", "task": "x", "expected_agent": null, "expect_call": '
         '{"name": "f", "arguments": {}}}', "expected_agent and expect_call go together"),
        ('{"id": "t3", "task": "x", "expected_agnet": null, "expect_call": null}',
         "expected_agnet: unknown field (fields: id, task, expected_agent, expect_call)"),
        ('{"id": "t3", "task": " ", "expected_agent": null, "expect_call": null}',
         "task: the task is empty"),
        ('{"id": "t3", "task": "x", "expected_agent": "c1", "expect_call": '
         '{"name": "f", "arguments": {"y": [1]}}}',
         "expect_call: 'f' has no parameter 'y' (it has: x)"),
    ],
)  # fmt: skip
def test_a_bad_selection_line_names_file_and_line(tmp_path, line, words) -> None:
    path = _selection(tmp_path, json.dumps(NONE), line)
    with pytest.raises(ConfigError) as caught:
        load_selection_tasks(path, CARDS)
    message = str(caught.value)
    assert message.startswith(f"{path}:3: ") and words in message and "\n" not in message


def _alias_bomb() -> str:
    """Nine levels of nine aliases: under 400 bytes, a billion values once expanded."""
    levels = (f"&x{i} [{','.join(['1' if i == 0 else f'*x{i - 1}'] * 9)}]" for i in range(9))
    return ", ".join(levels)


def test_an_alias_bomb_in_a_yaml_task_file_is_one_error_not_a_hang(tmp_path) -> None:
    bench = tmp_path / "tasks.yaml"
    bench.write_text(f"- {{id: t1, task: hi, expected_agent: a, writes: [{_alias_bomb()}]}}\n")
    with pytest.raises(ConfigError, match=rf"^{bench}: invalid YAML: expands to more than 20000"):
        load_tasks(bench)
    evals = tmp_path / "eval.yaml"
    evals.write_text(f"- {{task: hi, expected: [{_alias_bomb()}]}}\n")
    with pytest.raises(ConfigError, match=rf"^{evals}: invalid YAML: expands to more than 20000"):
        read_eval_file(evals)


@pytest.mark.slow
def test_a_long_yaml_task_file_without_aliases_is_read_whole(tmp_path) -> None:
    path = tmp_path / "tasks.yaml"  # 30,000 values: past the bound a card has, not a task file's
    rows = (f"- {{id: t{n}, task: task {n}, expected_agent: null}}" for n in range(10_000))
    path.write_text("\n".join(rows) + "\n")
    assert len(load_tasks(path)) == 10_000


def test_a_task_files_wrong_value_is_named_by_its_kind_not_echoed(tmp_path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text("- {id: t1, task: hi, expected_agent: null, writes: {secret: sk-1}}\n")
    with pytest.raises(ConfigError) as caught:
        load_tasks(path)
    assert str(caught.value).endswith("writes: must be true or false, got a mapping")


def test_non_utf8_bytes_in_a_selection_file_name_their_line(tmp_path) -> None:
    path = _selection(tmp_path, json.dumps(NONE), b'{"id": "t\xff"}')
    with pytest.raises(ConfigError, match=rf"^{path}:3: not UTF-8 \(byte \d+\)$"):
        load_selection_tasks(path, CARDS)


@pytest.mark.slow
def test_a_bad_selection_line_through_the_cli_is_one_line(tiny, tmp_path) -> None:
    path = _selection(tmp_path, "[1,2]", first=NONE)  # an irrelevance task: no card named
    args = ("bench", "--scale", "--tasks", str(path), "--cards", str(BFCL_CARDS))
    line = _one_error_line(tiny(*args))
    assert line == f"{path}:2: a task must be a JSON object, got a list"


@pytest.mark.slow
def test_the_old_spelling_still_runs_at_scale_with_a_one_line_note(tiny, tmp_path) -> None:
    """A selection file given to plain `tiny bench`: read at scale, and one note says --scale."""
    path = _selection(tmp_path, "[1,2]", first=NONE)
    result = tiny("bench", "--tasks", str(path), "--cards", str(BFCL_CARDS))
    note, *rest = result.stderr.strip().splitlines()
    assert note == (
        f"tiny: warning: {path} runs at scale: spell it `tiny bench --scale --tasks {path}` "
        "(a selection task file without --scale is the old spelling, to be dropped)"
    )
    assert rest == [f"tiny: error: {path}:2: a task must be a JSON object, got a list"]


def test_the_bench_at_scale_without_a_task_file_is_a_usage_error(tiny) -> None:
    result = tiny("bench", "--scale", "--cards", str(BFCL_CARDS))
    assert result.exit_code == 2 and "Traceback" not in result.output
    assert "needs a selection task file: --tasks FILE" in result.stderr


def test_a_u2028_inside_a_task_stays_in_its_line(tmp_path) -> None:
    path = _selection(tmp_path, json.dumps({**NONE, "task": "a\u2028b\u0085c"}, ensure_ascii=False))
    assert [t.task for t in load_selection_tasks(path, CARDS)] == ["do f", "a\u2028b\u0085c"]


# --- finding 15: duplicate ids ----------------------------------------------------------------


def test_duplicate_task_ids_in_a_selection_file_are_refused(tmp_path) -> None:
    path = _selection(tmp_path, json.dumps(NONE), json.dumps({**GOOD, "task": "again"}))
    with pytest.raises(ConfigError) as caught:
        load_selection_tasks(path, CARDS)
    assert str(caught.value) == f"{path}:3: duplicate task id 't1' (first on line 1)"


# --- property: any line is a clean load or one ConfigError line -------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)
_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "id": st.sampled_from(["t1", "t9", ""]) | _JSON,
        "task": st.text(max_size=10) | _JSON,
        "expected_agent": st.sampled_from(["c1", "c2", None]) | _JSON,
        "expect_call": st.none() | st.fixed_dictionaries(
            {}, optional={"name": st.sampled_from(["f", "h"]) | _JSON,
                          "arguments": st.dictionaries(st.text(max_size=3), _JSON, max_size=2)
                          | _JSON},
        ) | _JSON,
    },
)  # fmt: skip
_LINE = (
    _FIELDS.map(lambda d: json.dumps(d).encode())
    | _JSON.map(lambda v: json.dumps(v).encode())
    | st.binary(max_size=40)
    | st.text(max_size=40).map(lambda t: t.encode("utf-8", "surrogatepass"))
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_LINE, max_size=5))
def test_any_selection_file_loads_or_is_one_config_error_line(lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tasks.jsonl"
        path.write_bytes(b"\n".join(lines))
        for read in (lambda: is_selection_file(path), lambda: load_selection_tasks(path, CARDS)):
            try:
                read()
            except ConfigError as err:
                assert str(err).startswith(str(path)) and "\n" not in str(err)


@settings(max_examples=150, deadline=None)
@given(st.lists(_LINE, max_size=4))
@example([b'{"\\n": 0}'])  # a field name with a newline: found by this test, kept
@example([b'{"id": "a\\nb", "spam": 1}'])  # an id with one
def test_any_example_jsonl_task_file_loads_or_is_one_config_error_line(lines: list[bytes]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tasks.jsonl"
        path.write_bytes(b"\n".join(lines))
        try:
            load_tasks(path)
        except ConfigError as err:
            assert str(err).startswith(str(path)) and "\n" not in str(err)


def test_a_deeply_nested_yaml_task_file_is_one_line(tmp_path) -> None:
    path = tmp_path / "tasks.yaml"
    path.write_text("[" * 50_000)
    with pytest.raises(ConfigError, match=rf"^{path}: "):
        load_tasks(path)


# --- findings 6 and 16: options used at the end are checked before the first request ----------


def _no_request(result, scripted_server) -> str:
    assert scripted_server.requests == []
    return _one_error_line(result)


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("tinyy.right=0.5", "'tinyy' is not an arm of this bench (tiny, all-tools)"),
        ("all-tools.right=0.5", "'all-tools' is not an arm of this bench (tiny)"),
        ("all-tools.routing=0.5",
         "arm 'all-tools' has no routing figure, so no run could meet it (arms with one: tiny)"),
    ],
)  # fmt: skip
def test_a_bar_the_example_bench_cannot_read_stops_it_at_once(
    tiny, scripted_server, spec, words
) -> None:
    env = {"TINY_BASE_URL": scripted_server.url}
    arm = "tiny" if spec.startswith("all-tools.right") else "both"
    result = tiny("bench", "--arm", arm, "--fail-under", spec, env=env)
    assert _no_request(result, scripted_server) == f"--fail-under {spec}: {words}"


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("tinyy.right_call=0.5",
         "'tinyy' is not an arm of this bench (oracle, tiny, top-k, hybrid, all-tools)"),
        ("oracle.irrelevance=0.5", "arm 'oracle' has no irrelevance figure, so no run could "
         "meet it (arms with one: tiny, top-k, hybrid, all-tools)"),
        ("top-k.routing=0.5", "arm 'top-k' has no routing figure, so no run could meet it "
         "(arms with one: tiny, hybrid)"),
    ],
)  # fmt: skip
def test_a_bar_the_bench_at_scale_cannot_read_stops_it_at_once(
    tiny, scripted_server, tmp_path, spec, words
) -> None:
    tasks = _selection(tmp_path)
    env = {"TINY_BASE_URL": scripted_server.url}
    args = ["--cards", str(BFCL_CARDS), "--fail-under", spec]
    result = tiny("bench", "--scale", "--tasks", str(tasks), *args, env=env)
    assert _no_request(result, scripted_server) == f"--fail-under {spec}: {words}"


@pytest.mark.parametrize("flag", ["--html", "--out", "--record"])
@pytest.mark.parametrize("scale", [False, True])
def test_an_output_that_cannot_be_written_stops_before_the_run(
    tiny, scripted_server, tmp_path, flag, scale
) -> None:
    tasks = ["--scale", "--tasks", str(_selection(tmp_path)), "--cards", str(BFCL_CARDS)]
    tasks = tasks if scale else []
    env = {"TINY_BASE_URL": scripted_server.url}
    folder = tmp_path / "reports"
    folder.mkdir()
    result = tiny("bench", *tasks, flag, str(folder), env=env)
    assert _no_request(result, scripted_server) == f"{folder}: is a folder; name a file to write"
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    result = tiny("bench", *tasks, flag, str(fifo), env=env)
    assert (
        _no_request(result, scripted_server)
        == f"{fifo}: exists and is not a regular file; not replaced"
    )
    plain = tmp_path / "plain"
    plain.write_text("")
    result = tiny("bench", *tasks, flag, str(plain / "page.html"), env=env)
    assert (
        _no_request(result, scripted_server)
        == f"{plain / 'page.html'}: {plain} is not a folder; cannot write there"
    )


# --- issue 30: --html on the example bench writes its page -------------------------------------


class _Cells(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.cells: list[str] = []
        self.tags: set[str] = set()

    def handle_starttag(self, tag: str, attrs) -> None:
        self.tags.add(tag)
        if tag in ("td", "th"):
            self.cells.append("")

    def handle_data(self, data: str) -> None:
        if self.cells:
            self.cells[-1] += data.strip()


def test_html_on_the_example_bench_writes_its_page(tiny, tmp_path) -> None:
    page = tmp_path / "out" / "page.html"
    result = tiny("bench", "--replay", str(RECORDING), "--html", str(page), "--json", "--no-log")
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    parsed = _Cells()
    parsed.feed(page.read_text("utf-8"))
    assert not {"script", "img", "link", "iframe"} & parsed.tags
    arms = report["arms"]
    assert parsed.cells[: 1 + len(arms)] == ["figure", *arms]
    runs = parsed.cells.index("runs")
    assert parsed.cells[runs + 1 : runs + 1 + len(arms)] == [str(a["runs"]) for a in arms.values()]
    right = parsed.cells.index("right (on evidence)")
    assert parsed.cells[right + 1 : right + 3] == [str(a["right"]) for a in arms.values()]
    for task in report["tasks"]:
        assert task["id"] in parsed.cells
    assert [p.name for p in page.parent.iterdir()] == ["page.html"]  # no temp file beside it


def test_the_example_page_escapes_every_value(tmp_path) -> None:
    from tiny_cli.bench.bench_html import write_bench_html  # a module of its own: issue 30

    doc = {
        "model": "<script>alert(1)</script>",
        "arms": {"<i>tiny</i>": {"runs": 1, "right": "<b>", "outcomes": {"ok": 1}}},
        "tasks": [{"id": "<img src=x>", "expected_agent": "a&b",
                   "runs": {"<i>tiny</i>": [{"status": "<u>ok</u>", "right": True}]}}],
    }  # fmt: skip
    path = tmp_path / "page.html"
    write_bench_html(doc, path)
    text = path.read_text("utf-8")
    assert "<script" not in text and "<img" not in text and "<i>" not in text and "<u>" not in text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text and "a&amp;b" in text


BOTH = "must_return and expect:"
BRIEF_LIMITS = [  # what a run's Brief refuses, refused when the file loads: before any request
    ({"expect": {"f" * 70: "x"}}, f"{BOTH} a field name of 70 characters; at most 64"),
    ({"must_return": [f"f{i}" for i in range(40)]}, f"{BOTH} 40 field names; at most 32"),
    ({"task": "onboarding " + "x " * 5000}, "task: the task is 10,011 characters; at most 8,000"),
    ({"expect": {"status": "ok"}}, f"{BOTH} 'status' is part of every answer"),
    ({"must_return": ["summary"]}, f"{BOTH} 'summary' is part of every answer"),
    ({"expect": {" ": "x"}}, "expect: a field name must not be blank, got ' '"),
    ({"expect": {"source": float("nan")}}, "expect.source: nan is no number an answer holds"),
    ({"expect": {"source": float("inf")}}, "expect.source: inf is no number an answer holds"),
]  # fmt: skip


@pytest.mark.parametrize(("change", "words"), BRIEF_LIMITS)
def test_a_task_the_run_would_refuse_is_refused_when_the_file_loads(
    tmp_path, change, words
) -> None:
    good = {"id": "t1", "task": "how did onboarding work", "expected_agent": "docs-finder"}
    path = tmp_path / "tasks.jsonl"
    path.write_text(json.dumps(good) + "\n" + json.dumps({**good, "id": "t2", **change}) + "\n")
    with pytest.raises(ConfigError) as caught:
        load_tasks(path)
    assert str(caught.value).startswith(f"{path}: line 2 (t2): {words}")
