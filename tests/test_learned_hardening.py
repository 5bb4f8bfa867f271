"""learned.jsonl and the caches under hostile input: bounded, escaped, locked, scrubbed, stale.

Issue 31's findings 2, 3, 7, 8, 10, 11 and 13: a pipe or device read without end, a
hand-edited header or a damaged cache entry that crashed every command, secrets kept in a
committed file, a lock under TINY_HOME that let two writers lose lessons, a U+2028 that
split a line, and thinning that grew with the cube of the examples.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import Result

from tiny_cli.cards.index import CACHE_DIR
from tiny_cli.cards.load import load_cards
from tiny_cli.errors import ConfigError
from tiny_cli.routing.embed import HashingEmbedder, fingerprint
from tiny_cli.routing.evaluation import load_eval_file
from tiny_cli.routing.examples_file import (
    LEARNED_FILENAME,
    DerivedThreshold,
    Learned,
    load_learned,
    write_learned,
)
from tiny_cli.routing.router import Router
from tiny_cli.routing.state import STATE_DIR, TEXTS_FILE
from tiny_cli.routing.thinning import least_redundant
from tiny_cli.userfiles import locked

from .conftest import SEED_CARDS, SEED_TASKS

REPO = Path(__file__).resolve().parent.parent
TOOLS = {"docs_search": False, "http_get": False, "html_to_text": False,
         "crm_find_company": False, "crm_add_company": True}  # fmt: skip
API_KEY = "sk-test-0123456789abcdefghij"
BEARER = "Authorization: Bearer zq9Xv7Lm2Pk4Rt8Wy"
TOKEN = "zq9Xv7Lm2Pk4Rt8Wy"
ONBOARDING = "how did the onboarding process work again"


@pytest.fixture
def cards(tmp_path: Path) -> Path:
    """The seed cards copied: learned.jsonl is written beside the copy."""
    return Path(shutil.copytree(SEED_CARDS, tmp_path / "cards"))


@pytest.fixture
def go(tiny: Callable[..., Result], cards: Path) -> Callable[..., Result]:
    """Run `tiny ARGS` on the copied cards with the hashing embedder; no traceback allowed."""

    def run(*args: str, env: dict[str, str] | None = None) -> Result:
        extra = {"TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing", **(env or {})}
        result = tiny(*args, env=extra)
        assert "Traceback" not in result.output
        return result

    return run


def _lesson(path: Path, rows: Sequence[tuple[str, str | None]]) -> Path:
    path.write_text("".join(json.dumps({"task": t, "card": c}) + "\n" for t, c in rows), "utf-8")
    return path


# --- finding 2: a pipe or a device is read with a bound -----------------------------------


def test_tiny_learn_reads_a_pipe_with_a_bound(go: Callable[..., Result], tmp_path: Path) -> None:
    read_end, write_end = os.pipe()  # as `tiny learn <(yes …)` gets it: the writer is there
    fifo = Path(f"/proc/self/fd/{read_end}")
    endless = b'{"task": "x", "card": null}\n' * (1 << 16)  # 1.8 MB a write, without end

    def write() -> None:
        try:
            with open(write_end, "wb") as pipe:
                for _ in range(40):  # 72 MB: past the 16 MiB bound, finite if it is not kept
                    pipe.write(endless)
        except BrokenPipeError:
            pass  # the reader stopped at the bound: what should happen

    writer = threading.Thread(target=write, daemon=True)
    writer.start()
    try:
        result = go("learn", str(fifo))
    finally:
        os.close(read_end)  # the writer's next write fails: it stops
    writer.join(timeout=60)
    assert result.exit_code != 0  # a ConfigError's exit code
    assert result.stderr.strip() == f"tiny: error: {fifo}: larger than 16 MiB; not read"


def test_tiny_learn_on_a_device_stops_at_the_bound(go: Callable[..., Result]) -> None:
    result = go("learn", "/dev/zero")
    assert result.exit_code != 0 and "/dev/zero: larger than 16 MiB" in result.stderr


@pytest.mark.parametrize("line", ["[" * 100_000, '{"task": ' + "1" * 5000 + "}"])
def test_a_line_too_deep_or_too_long_a_number_is_one_config_error(
    go: Callable[..., Result], cards: Path, line: str
) -> None:
    (cards / LEARNED_FILENAME).write_text(f'{{"task": "fine", "card": null}}\n{line}\n')
    with pytest.raises(ConfigError, match=r"learned\.jsonl:2: not JSON tiny can read"):
        load_learned(cards)
    result = go("route", ONBOARDING)
    assert result.exit_code != 0 and "learned.jsonl:2: not JSON" in result.stderr


# --- finding 3: a hand-edited header is stale, never a crash ------------------------------


def _header(cards: Path, **edit: object) -> Learned:
    """Write learned.jsonl with 20 out-of-scope examples and a derived threshold, edited."""
    learned = Learned(
        cards / LEARNED_FILENAME,
        {"docs-finder": (ONBOARDING,)},
        tuple(f"out of scope number {n}" for n in range(20)),
    )
    threshold = DerivedThreshold(
        value=1.5, target_recall=0.8, examples=1, out_of_scope=20, folds=5, cv_top1=0.9,
        cv_recall=0.8, generic_recall=0.7, embedder=fingerprint(HashingEmbedder()),
        sha=learned.sha(),
    )  # fmt: skip
    head = {"kind": "tiny learned routing examples", "version": 1,
            "threshold": {**asdict(threshold), **edit}}  # fmt: skip
    text = learned._lines(header=False)
    (cards / LEARNED_FILENAME).write_text(json.dumps(head) + "\n" + text, "utf-8")
    return learned


def test_the_unedited_header_is_used(go: Callable[..., Result], cards: Path) -> None:
    _header(cards)
    explained = json.loads(go("route", ONBOARDING, "--explain", "--json").stdout)
    assert explained["threshold_source"].startswith("derived by tiny learn from 1 examples")


@pytest.mark.parametrize(
    "edit",
    [{"cv_top1": "high"}, {"value": "1.5"}, {"examples": True}, {"extra": 1}],
)  # fmt: skip
@pytest.mark.slow
def test_a_hand_edited_header_is_stale_for_route_explain_and_validate(
    go: Callable[..., Result], cards: Path, edit: dict[str, object]
) -> None:
    _header(cards, **edit)
    route = go("route", ONBOARDING, "--json")
    assert route.exit_code == 0, route.output
    explained = json.loads(go("route", ONBOARDING, "--explain", "--json").stdout)
    assert "stale; run `tiny learn`" in explained["threshold_source"]
    assert "stale" in go("route", ONBOARDING, "--explain").stdout
    assert go("validate").exit_code == 0
    learn = go("learn")  # derived again: the header is rewritten as tiny learn writes it
    assert learn.exit_code == 0, learn.output
    assert not load_learned(cards).damaged_header


# --- finding 8: secrets never reach the file, the router's cache or the terminal ----------


def _files_holding(root: Path, secret: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_a_taught_secret_is_scrubbed_from_the_file_the_cache_and_explain(
    go: Callable[..., Result], cards: Path, home: Path, tmp_path: Path
) -> None:
    task = f"call the crm with {API_KEY} and {BEARER} please"
    lesson = _lesson(tmp_path / "lesson.jsonl", [(task, "docs-finder")])
    learned = go("learn", str(lesson), env={"TINY_API_KEY": API_KEY})
    assert learned.exit_code == 0, learned.output
    text = (cards / LEARNED_FILENAME).read_text("utf-8")
    assert "call the crm with [redacted] and Authorization: [redacted] please" in text
    query = "call the crm with the key and authorization please"
    explained = go("route", query, "--explain", "--json", env={"TINY_API_KEY": API_KEY})
    assert "call the crm with [redacted]" in explained.stdout  # the nearest example, scrubbed
    assert API_KEY not in explained.output and TOKEN not in explained.output
    for secret in (API_KEY, TOKEN):
        assert _files_holding(cards, secret) == [] and _files_holding(home, secret) == []
    assert list((home / "cache" / STATE_DIR).glob(f"*/{TEXTS_FILE}"))  # the cache was written


def test_a_hand_added_secret_is_scrubbed_before_routing(
    go: Callable[..., Result], cards: Path, home: Path
) -> None:
    task = f"look up the onboarding docs with {BEARER}"
    _lesson(cards / LEARNED_FILENAME, [(task, "docs-finder")])
    explained = go("route", "look up the onboarding docs with authorization", "--explain", "--json")
    assert explained.exit_code == 0, explained.output
    assert "Authorization: [redacted]" in explained.stdout  # the nearest example, scrubbed
    assert TOKEN not in explained.stdout
    assert _files_holding(home, TOKEN) == []
    assert go("learn").exit_code == 0  # and the next `tiny learn` scrubs the file itself
    assert TOKEN not in (cards / LEARNED_FILENAME).read_text("utf-8")


# --- finding 10: the lock lives beside the file -------------------------------------------


def _waiting_on(lock: Path, pid: int) -> bool:
    """Tell whether process `pid` waits for the flock on `lock` (Linux's /proc/locks)."""
    inode = f":{os.stat(lock).st_ino} "
    lines = Path("/proc/locks").read_text().splitlines()
    return any("->" in line and f" {pid} " in line and inode in line for line in lines)


def _tiny_process(cards: Path, home: Path, *args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "TINY_HOME": str(home),
           "TINY_CARDS": str(cards), "TINY_EMBEDDER": "hashing", "TINY_API_KEY": "",
           "OPENAI_API_KEY": "", "TINY_THRESHOLD": ""}  # fmt: skip
    command = [sys.executable, "-m", "tiny_cli", *args]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=cards.parent)  # fmt: skip


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs Linux's /proc/locks")
def test_two_writers_with_other_homes_take_turns_and_keep_every_lesson(
    cards: Path, tmp_path: Path
) -> None:
    ours = [(f"lesson {n} of the first writer about onboarding", "docs-finder") for n in range(30)]
    theirs = [(f"lesson {n} of the second writer about weather", None) for n in range(30)]
    lesson = _lesson(tmp_path / "theirs.jsonl", theirs)
    path = cards / LEARNED_FILENAME
    with locked(path):  # the first writer, mid-write: the second must wait for it
        (tmp_path / "home-2").mkdir()
        process = _tiny_process(cards, tmp_path / "home-2", "learn", str(lesson))
        deadline = time.monotonic() + 120
        while not _waiting_on(path.with_name(f".{path.name}.lock"), process.pid):
            assert process.poll() is None, f"it did not wait for the lock: {process.stderr}"
            assert time.monotonic() < deadline, "it never reached the lock"
            time.sleep(0.05)
        write_learned(Learned(path, {"docs-finder": tuple(t for t, _ in ours)}))
    out, err = process.communicate(timeout=120)
    assert process.returncode == 0, err
    assert "30 added" in out
    kept = load_learned(cards)
    assert set(kept.examples["docs-finder"]) == {t for t, _ in ours}
    assert set(kept.out_of_scope) == {t for t, _ in theirs}


# --- finding 11: line separators are escaped in every JSONL file tiny writes --------------


@pytest.mark.parametrize("separator", ["\u2028", "\u2029", "\u0085"])
def test_a_line_separator_in_a_task_keeps_the_file_readable(
    go: Callable[..., Result], cards: Path, tmp_path: Path, separator: str
) -> None:
    task = f"onboarding{separator}docs for the new team"
    lesson = tmp_path / "lesson.jsonl"
    lesson.write_text(json.dumps({"task": task, "card": "docs-finder"}, ensure_ascii=False) + "\n")
    assert go("learn", str(lesson)).exit_code == 0
    raw = (cards / LEARNED_FILENAME).read_text("utf-8")
    assert separator not in raw and len(raw.splitlines()) == 2  # header and one example
    assert load_learned(cards).examples == {"docs-finder": (task,)}
    again = go("learn", str(_lesson(tmp_path / "more.jsonl", [("more onboarding", None)])))
    assert again.exit_code == 0, again.output
    assert go("validate").exit_code == 0
    assert go("route", task, "--json").exit_code == 0


def test_validate_names_the_line_of_a_learned_example_as_the_file_holds_it(
    go: Callable[..., Result], cards: Path, tmp_path: Path
) -> None:
    task = "please add müstermann gmbh\u2028as a new customer today"  # crm-writer's, nearly
    lesson = tmp_path / "lesson.jsonl"
    rows = [{"task": task, "card": "docs-finder"}, {"task": "a b", "card": "docs-finder"}]
    lesson.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")
    assert go("learn", str(lesson)).exit_code == 0
    result = go("validate")
    assert result.exit_code == 0, result.output
    shown = "please add müstermann gmbh\\u2028as a new customer today"
    assert f"{cards / LEARNED_FILENAME}:3: routing: learned example '{shown}'" in result.output


def test_validate_names_a_generated_example_and_its_line(
    go: Callable[..., Result], cards: Path
) -> None:
    task = "please add mustermann gmbh as a new customer today"  # crm-writer's, written for docs
    header = {"kind": "tiny learned routing examples", "version": 1}
    made = {"task": task, "card": "docs-finder", "source": "generated", "key": "k"}
    lines = [json.dumps(header), json.dumps(made)]
    (cards / LEARNED_FILENAME).write_text("\n".join(lines) + "\n", "utf-8")
    result = go("validate")
    assert result.exit_code == 0, result.output
    assert f"{cards / LEARNED_FILENAME}:2: routing: generated example '{task}'" in result.output


def test_an_eval_file_splits_on_newlines_only(tmp_path: Path) -> None:
    path = tmp_path / "eval.jsonl"
    path.write_text(json.dumps({"task": "a\u2028b", "expected": None}, ensure_ascii=False))
    assert load_eval_file(path) == [("a\u2028b", None)]


# --- finding 13: thinning, quadratic and in bounded memory --------------------------------


def _cubic(tasks: list[str], vectors: np.ndarray, keep: int) -> tuple[str, ...]:
    """The rule as it was first written: the whole matrix, rescanned after every drop."""
    cosines = vectors @ vectors.T
    np.fill_diagonal(cosines, -np.inf)
    alive = list(range(len(tasks)))
    while len(alive) > keep:
        sub = cosines[np.ix_(alive, alive)]
        i, j = np.unravel_index(int(np.argmax(sub)), sub.shape)
        alive.pop(max(int(i), int(j)))
    return tuple(tasks[k] for k in alive)


def _unit(rows: int, dims: int, seed: int, duplicates: bool = False) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(rows, dims)).astype(np.float32)
    if duplicates:  # exact ties: every pair's cosine appears twice or more
        vectors = np.round(np.concatenate([vectors[: rows // 2]] * 2)[:rows], 1)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


@pytest.mark.parametrize(
    ("rows", "dims", "keep", "duplicates"),
    [(40, 8, 10, False), (300, 32, 100, False), (300, 4, 20, True), (120, 384, 100, False)],
)
def test_thinning_keeps_what_the_cubic_rule_kept(
    rows: int, dims: int, keep: int, duplicates: bool
) -> None:
    vectors = _unit(rows, dims, seed=rows + dims, duplicates=duplicates)
    tasks = [f"task {n}" for n in range(rows)]
    assert least_redundant(tasks, vectors, keep) == _cubic(tasks, vectors, keep)


def test_thinning_never_holds_the_whole_matrix() -> None:
    rows = 2000  # the whole matrix: 16 MB of float32; a block of it is under 2 MB
    vectors = _unit(rows, 16, seed=7)
    tracemalloc.start()
    try:
        kept = least_redundant([str(n) for n in range(rows)], vectors, 100)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(kept) == 100
    assert peak < rows * rows * 4 / 2  # half the matrix: its blocks and each row's neighbours


# --- finding 7: a damaged cache entry is stale ---------------------------------------------


def _cache_file(cache: Path) -> Path:
    [file] = (cache / CACHE_DIR).glob("*[0-9a-f].json")
    return file


@pytest.mark.parametrize("damage", [5, None, "x", [1, 2], {"id": 5}, {"id": "x", "summary": 3}])
def test_a_damaged_card_cache_entry_is_checked_again(
    cards: Path, tmp_path: Path, damage: object
) -> None:
    cache = tmp_path / "cache"
    first = load_cards([cards], TOOLS, None, cache)
    file = _cache_file(cache)
    data = json.loads(file.read_text("utf-8"))
    for entry in data["files"].values():
        entry[2] = damage  # the card's data, the salt and stamp intact
    file.write_text(json.dumps(data), "utf-8")
    assert load_cards([cards], TOOLS, None, cache) == first
    healed = json.loads(file.read_text("utf-8"))["files"]
    assert all(type(entry[2]) is dict and "summary" in entry[2] for entry in healed.values())


def test_tiny_route_rebuilds_a_damaged_card_cache_entry(
    go: Callable[..., Result], home: Path
) -> None:
    assert go("route", ONBOARDING, "--json").exit_code == 0
    file = _cache_file(home / "cache")
    data = json.loads(file.read_text("utf-8"))
    for entry in data["files"].values():
        entry[2] = 5
    file.write_text(json.dumps(data), "utf-8")
    result = go("route", ONBOARDING, "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["agent_id"] == "docs-finder"


@pytest.mark.slow
@pytest.mark.parametrize("texts", [{"texts": 5, "owners": 5}, [], {"texts": [[["a"]]]}])
def test_a_damaged_router_state_is_rebuilt(seed_cards: list, tmp_path: Path, texts: object) -> None:
    tasks = [task for task, _ in SEED_TASKS]
    first = Router(seed_cards, HashingEmbedder(), tmp_path)
    expected = first.explain(tasks[0]).to_json()
    [state] = (tmp_path / STATE_DIR).iterdir()
    (state / TEXTS_FILE).write_text(json.dumps(texts), "utf-8")
    assert Router(seed_cards, HashingEmbedder(), tmp_path).explain(tasks[0]).to_json() == expected


# --- properties: a learned file and the card cache, whatever they hold --------------------

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=12,
)
TEXT = st.text(max_size=20) | st.text(st.sampled_from("ab \u2028\u2029\u0085\r\x00é"), max_size=8)
LINES = st.one_of(
    st.binary(max_size=200),
    st.lists(
        st.one_of(
            JSON.map(json.dumps),
            st.fixed_dictionaries({"task": TEXT, "card": st.none() | TEXT}).map(
                lambda row: json.dumps(row, ensure_ascii=False)
            ),
            st.text(max_size=30),
        ),
        max_size=6,
    ).map(lambda lines: "\n".join(lines).encode("utf-8", "surrogatepass")),
)


FIELDS = {
    "value": 1.5, "target_recall": 0.8, "examples": 3, "out_of_scope": 20, "folds": 5,
    "cv_top1": 0.9, "cv_recall": 0.8, "generic_recall": 0.7, "embedder": "hashing-v1-2048",
    "sha": "0" * 64,
}  # fmt: skip
THRESHOLDS = st.fixed_dictionaries({k: st.just(v) | JSON for k, v in FIELDS.items()})


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@pytest.mark.slow
@given(data=LINES, header=st.none() | JSON | THRESHOLDS)
def test_any_learned_file_loads_clean_or_is_one_config_error(
    tmp_path: Path, data: bytes, header: object
) -> None:
    path = tmp_path / LEARNED_FILENAME
    head = b""
    if header is not None:
        head = (
            json.dumps({"kind": "tiny learned routing examples", "threshold": header}).encode()
            + b"\n"
        )
    path.write_bytes(head + data)
    try:
        learned = load_learned(tmp_path)
    except ConfigError as exc:
        assert "\n" not in str(exc) and str(path) in str(exc)
        return
    if learned.threshold is not None:  # what the header says reads as a sentence
        learned.threshold.describe()
    write_learned(learned)
    again = load_learned(tmp_path)
    assert {k: sorted(v) for k, v in again.examples.items()} == {
        k: sorted(v) for k, v in learned.examples.items()
    }
    assert sorted(again.out_of_scope) == sorted(learned.out_of_scope)


@pytest.fixture(scope="module")
def cached(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list]:
    root = tmp_path_factory.mktemp("cached")
    folder = Path(shutil.copytree(SEED_CARDS, root / "cards"))
    cache = root / "cache"
    return folder, cache, load_cards([folder], TOOLS, None, cache)


@settings(max_examples=100, deadline=None)
@given(entry=JSON, whole=st.booleans())
def test_any_card_cache_entry_is_used_or_rebuilt(
    cached: tuple[Path, Path, list], entry: object, whole: bool
) -> None:
    folder, cache, first = cached
    load_cards([folder], TOOLS, None, cache)  # heal what the last example broke
    file = _cache_file(cache)
    data = json.loads(file.read_text("utf-8"))
    if whole:
        data["files"] = {path: entry for path in data["files"]}
    for stored in data["files"].values() if not whole else ():
        stored[2] = entry
    file.write_text(json.dumps(data), "utf-8")
    assert load_cards([folder], TOOLS, None, cache) == first


@settings(max_examples=100, deadline=None)
@given(field=st.sampled_from(["salt", "files", "other"]), value=JSON)
def test_any_index_field_is_used_or_the_set_loaded_again(
    cached: tuple[Path, Path, list], field: str, value: object
) -> None:
    folder, cache, first = cached
    load_cards([folder], TOOLS, None, cache)  # (re)write the index
    file = _cache_file(cache)
    data = json.loads(file.read_text("utf-8"))
    data[field] = value
    file.write_text(json.dumps(data), "utf-8")
    assert load_cards([folder], TOOLS, None, cache) == first


def test_learning_outside_a_project_never_writes_into_the_seed_cards(tmp_path: Path) -> None:
    """No ./cards, no tiny.toml, no TINY_CARDS: routing reads the seed cards tiny ships, but a
    lesson is the user's and belongs in their git, not in the installed package."""
    from tiny_cli.example_writer import prune_generated
    from tiny_cli.settings import load_settings
    from tiny_cli.teach import learn

    settings = load_settings({"TINY_HOME": str(tmp_path / "home")}, cwd=tmp_path)
    seed = settings.cards_dir
    before = sorted((p.name, p.stat().st_mtime_ns) for p in seed.iterdir())
    assert settings.own_cards_dir() == tmp_path / "cards" != seed
    for write in (
        lambda: learn(settings, [("book a taxi", None)]),
        lambda: prune_generated(settings),
    ):
        with pytest.raises(ConfigError, match=f"^no cards folder here: {tmp_path / 'cards'} does"):
            write()
    assert sorted((p.name, p.stat().st_mtime_ns) for p in seed.iterdir()) == before
    (tmp_path / "cards").mkdir()  # the user's own folder, empty as `tiny init` may leave it
    assert load_settings({"TINY_HOME": str(tmp_path / "home")}, cwd=tmp_path).own_cards_dir() == (
        tmp_path / "cards"
    )


def test_a_task_taught_under_two_labels_is_refused_not_dropped(tiny, seed_copy: Path) -> None:
    """Edited by hand or merged in git: routing took one label and a rewrite kept the other,
    and `tiny learn` deleted the user's other line while it said nothing changed."""
    learned = seed_copy / LEARNED_FILENAME
    text = '{"task": "book a room", "card": null}\n{"task": "Book a  room", "card": "crm-writer"}\n'
    learned.write_text(text, "utf-8")
    env = {"TINY_CARDS": str(seed_copy), "TINY_EMBEDDER": "hashing"}
    for args in (("route", "book a room"), ("learn",)):
        result = tiny(*args, env=env)
        assert result.exit_code == 2, result.output
        assert result.stderr == (
            f"tiny: error: {learned}:2: task: taught twice, to 'crm-writer' here and to out of "
            "scope on line 1; keep the line you mean\n"
        )
    assert learned.read_text("utf-8") == text  # nothing the user wrote is lost


def test_validate_of_a_named_learned_file_checks_it_against_its_folder(
    tiny, seed_copy: Path
) -> None:
    """Named on the command line it was read as a card: `yaml: invalid YAML` for a good file."""
    learned = seed_copy / LEARNED_FILENAME
    env = {"TINY_CARDS": str(seed_copy), "TINY_EMBEDDER": "hashing"}
    learned.write_text('{"task": "book a taxi", "card": null}\n', "utf-8")
    result = tiny("validate", str(learned), env=env)
    assert (result.exit_code, result.stdout.splitlines()[0].split()) == (0, ["3", "card(s)", "OK"])
    learned.write_text('{"task": "book a taxi", "card": "nope"}\n', "utf-8")
    result = tiny("validate", str(learned), "--json", env=env)
    assert result.exit_code == 1
    problems = json.loads(result.stdout)["problems"]
    assert [(p["line"], p["field"], p["message"]) for p in problems] == [
        (1, "card", "no card 'nope' in the folder")
    ]
    learned.unlink()  # named but not there: a problem, never "OK"
    result = tiny("validate", str(learned), "--json", env=env)
    assert result.exit_code == 1
    assert [(p["file"], p["message"]) for p in json.loads(result.stdout)["problems"]] == [
        (str(learned), "no such file or directory")
    ]


def test_a_threshold_derived_without_examples_gives_no_rate_of_them() -> None:
    """It said examples 'pass it 0%' of a folder that held none."""
    fields = {k: v for k, v in FIELDS.items() if k not in ("examples", "value")}
    none = DerivedThreshold(value=1.5, examples=0, **fields)  # type: ignore[arg-type]
    assert "examples route right" not in none.describe()
    assert "out-of-scope ones abstain 80%, generic requests 70%" in none.describe()
    some = DerivedThreshold(value=1.5, examples=3, **fields)  # type: ignore[arg-type]
    assert "examples route right and pass it 90%, out-of-scope ones abstain 80%" in some.describe()


def test_the_line_of_an_example_is_found_as_the_router_reads_its_task(tmp_path: Path) -> None:
    from tiny_cli.routing.examples_file import line_of_example, load_learned

    learned = tmp_path / "learned.jsonl"
    learned.write_text('{"task": "other", "card": "a"}\n{"task": " book a hotel ", "card": "a"}\n')
    assert load_learned(tmp_path).examples["a"] == ("other", "book a hotel")
    assert line_of_example(learned, "a", "book a hotel") == 2
