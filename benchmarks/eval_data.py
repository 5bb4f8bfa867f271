"""Regenerate the training parts of the public routing sets in benchmarks/data.

Writes `hwu64/train.jsonl` and `metatool/train.jsonl` from the upstream repositories, read
as git directories (bare or not) at pinned commits with `git show`, so the output depends on
those commits and the files already in benchmarks/data only:

- HWU64 (xliuhw/NLU-Evaluation-Data): the training part of cross-validation fold 1, whose
  test part is `hwu64/tasks.jsonl`. A line expects its scenario's card, or null (abstain)
  where `hwu64/cards` has no card for the scenario.
- MetaTool (HowieHwong/MetaTool): every labelled query of `all_clean_data.csv` whose tool is
  in `plugin_des.json`, less the test tasks and the card examples, at most `--per-tool-cap`
  per tool (those with the smallest sha256 of their text).

Either way a training line never equals (case and whitespace aside) a test task or a card
example. Run: `python benchmarks/eval_data.py --hwu64-repo PATH --metatool-repo PATH`.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

DATA = Path(__file__).resolve().parent / "data"
HWU64_COMMIT = "f6071b496b17d71e6eb43f543af0707f4ff30557"
METATOOL_COMMIT = "35e81bb7576826e980c80fed8f8c0a2b4a1e6fbb"
FOLD = (
    "CrossValidation/autoGeneFromRealAnno/autoGene_2018_03_22-13_01_25_169/CrossValidation/KFold_1"
)
METATOOL_QUERIES = "dataset/data/all_clean_data.csv"
DEFAULT_CAP = 60

Record = dict[str, Any]


def git_show(repo: Path, commit: str, path: str) -> str:
    """The text of `path` at `commit` in the git directory `repo`."""
    done = subprocess.run(
        ["git", "--git-dir", str(repo), "show", f"{commit}:{path}"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{repo}: git show {commit}:{path}: {done.stderr.decode().strip()}")
    return done.stdout.decode("utf-8")


def git_names(repo: Path, commit: str, folder: str) -> list[str]:
    """The names of the entries of `folder` at `commit`, sorted."""
    done = subprocess.run(
        ["git", "--git-dir", str(repo), "ls-tree", "--name-only", f"{commit}:{folder}"],
        capture_output=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"{repo}: git ls-tree {commit}:{folder}: {done.stderr.decode().strip()}")
    return sorted(done.stdout.decode("utf-8").split("\n")[:-1])


def norm(text: str) -> str:
    """Text as compared for overlap: lower case, runs of whitespace as one space, stripped."""
    return " ".join(text.lower().split())


def sha(text: str) -> str:
    """The sha256 of the text (UTF-8), in hex: a stable, arbitrary order."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def read_jsonl(path: Path) -> list[Record]:
    """The JSON objects of a JSON-lines file, one a line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def write_jsonl(path: Path, records: Iterable[Record]) -> int:
    """Write one JSON object a line (UTF-8, not ASCII-escaped); return the line count."""
    lines = [json.dumps(record, ensure_ascii=False) + "\n" for record in records]
    path.write_text("".join(lines), encoding="utf-8", newline="\n")
    return len(lines)


def hwu64_rows(repo: Path, part: str) -> list[dict[str, str]]:
    """The rows of fold 1's `trainset` or `testset/csv` files, file by file (sorted)."""
    folder = f"{FOLD}/{part}"
    rows: list[dict[str, str]] = []
    for name in git_names(repo, HWU64_COMMIT, folder):
        if name.endswith(".csv"):
            text = git_show(repo, HWU64_COMMIT, f"{folder}/{name}")
            rows.extend(csv.DictReader(io.StringIO(text), delimiter=";"))
    return rows


def hwu64_cards(cards: Path) -> tuple[set[str], set[str]]:
    """The card ids in `cards` and their examples (normalised)."""
    ids: set[str] = set()
    examples: set[str] = set()
    for path in sorted(cards.glob("*.yaml")):
        card = yaml.safe_load(path.read_text(encoding="utf-8"))
        ids.add(str(card["id"]))
        examples.update(norm(str(example)) for example in card.get("examples") or ())
    return ids, examples


def hwu64_record(row: dict[str, str], card_ids: set[str]) -> Record:
    """A line of the set: the request, its card or null, its intent."""
    scenario = row["scenario"]
    return {
        "task": row["answer_from_anno"],
        "expected": scenario if scenario in card_ids else None,
        "intent": f"{scenario}_{row['intent']}",
    }


def check_hwu64_test(repo: Path, tasks: list[Record], card_ids: set[str]) -> None:
    """Stop unless tasks.jsonl is exactly fold 1's test part, in its files' order."""
    test = [hwu64_record(row, card_ids) for row in hwu64_rows(repo, "testset/csv")]
    if test != tasks:
        raise SystemExit("hwu64/tasks.jsonl is not fold 1's test part at the pinned commit")


def answer_order(row: dict[str, str]) -> tuple[str, int, str]:
    """Sort key: intent, then answer id (a missing id, `null`, first), then the text."""
    answer_id = row["answerid"]
    number = int(answer_id) if answer_id.isdigit() else -1
    return (f"{row['scenario']}_{row['intent']}", number, row["answer_from_anno"])


def hwu64_train(repo: Path, folder: Path) -> tuple[list[Record], dict[str, int]]:
    """Fold 1's training part less the test tasks, the card examples and repeats."""
    card_ids, examples = hwu64_cards(folder / "cards")
    tasks = read_jsonl(folder / "tasks.jsonl")
    check_hwu64_test(repo, tasks, card_ids)
    test = {norm(task["task"]) for task in tasks}
    rows = sorted(hwu64_rows(repo, "trainset"), key=answer_order)
    dropped = {"rows": len(rows), "test": 0, "examples": 0, "repeats": 0}
    seen: set[str] = set()
    kept: list[Record] = []
    for row in rows:
        key = norm(row["answer_from_anno"])
        reason = "test" if key in test else "examples" if key in examples else None
        reason = reason or ("repeats" if key in seen else None)
        if reason:
            dropped[reason] += 1
            continue
        seen.add(key)
        kept.append(hwu64_record(row, card_ids))
    return kept, dropped


def metatool_held(folder: Path) -> set[str]:
    """The test tasks and the card examples of the MetaTool set, normalised."""
    held = {norm(task["task"]) for task in read_jsonl(folder / "tasks.jsonl")}
    examples = json.loads((folder / "examples.json").read_text(encoding="utf-8"))
    held.update(norm(query) for queries in examples.values() for query in queries)
    return held


def metatool_labels(repo: Path, tools: set[str]) -> dict[str, tuple[str, set[str]]]:
    """Normalised query -> (its first spelling, its tools), for queries of known tools."""
    text = git_show(repo, METATOOL_COMMIT, METATOOL_QUERIES)
    labels: dict[str, tuple[str, set[str]]] = {}
    for row in csv.DictReader(io.StringIO(text)):
        if row["Tool"] in tools:
            labels.setdefault(norm(row["Query"]), (row["Query"], set()))[1].add(row["Tool"])
    return labels


def metatool_train(repo: Path, folder: Path, cap: int) -> tuple[list[Record], dict[str, int]]:
    """The labelled queries not held out, one tool each, at most `cap` a tool (0: all)."""
    tools = set(json.loads((folder / "plugin_des.json").read_text(encoding="utf-8")))
    held = metatool_held(folder)
    labels = metatool_labels(repo, tools)
    counts = {"queries": len(labels), "held out": 0, "several tools": 0, "over cap": 0}
    by_tool: dict[str, list[str]] = defaultdict(list)
    for key, (spelling, names) in labels.items():
        if key in held:
            counts["held out"] += 1
        elif len(names) > 1:
            counts["several tools"] += 1
        else:
            by_tool[next(iter(names))].append(spelling)
    kept: list[Record] = []
    for tool in sorted(by_tool):
        queries = sorted(by_tool[tool], key=sha)
        chosen = queries[:cap] if cap else queries
        counts["over cap"] += len(queries) - len(chosen)
        kept.extend({"task": query, "expected": tool} for query in chosen)
    return kept, counts


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--hwu64-repo", type=Path, required=True, help="git dir of xliuhw/NLU-Evaluation-Data"
    )
    parser.add_argument(
        "--metatool-repo", type=Path, required=True, help="git dir of HowieHwong/MetaTool"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DATA,
        help="the folder holding hwu64/ and metatool/ (default: %(default)s)",
    )
    parser.add_argument(
        "--per-tool-cap",
        type=int,
        default=DEFAULT_CAP,
        help="MetaTool queries kept per tool, 0 for all (default: %(default)s)",
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Write both training files and print what was kept and dropped."""
    args = _parser().parse_args(argv)
    hwu64, dropped = hwu64_train(args.hwu64_repo, args.data / "hwu64")
    lines = write_jsonl(args.data / "hwu64" / "train.jsonl", hwu64)
    print(f"hwu64/train.jsonl: {lines} lines; of the fold's training rows {dropped}")
    metatool, counts = metatool_train(args.metatool_repo, args.data / "metatool", args.per_tool_cap)
    lines = write_jsonl(args.data / "metatool" / "train.jsonl", metatool)
    print(f"metatool/train.jsonl: {lines} lines; of the distinct queries {counts}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
