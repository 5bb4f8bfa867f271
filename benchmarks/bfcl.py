"""BFCL function-calling bench: regenerate examples/bfcl (cards and tasks) from BFCL's raw files.

Reads the three shipped files of the Berkeley Function Calling Leaderboard (the `multiple`
entries, their possible answers and the `irrelevance` entries) and writes one card per
`multiple` entry, holding that entry's functions as JSON Schema, plus tasks.jsonl: every
`multiple` question with the call it expects, then every `irrelevance` question, which
expects no call. The output depends on the raw files only; run `python benchmarks/bfcl.py`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml
from jsonschema import Draft202012Validator

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_RAW = ROOT / "examples" / "bfcl" / "raw"
DEFAULT_OUT = ROOT / "examples" / "bfcl"
MULTIPLE = "BFCL_v4_multiple.json"
ANSWERS = "possible_answer/BFCL_v4_multiple.json"
IRRELEVANCE = "BFCL_v4_irrelevance.json"

WIRE_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
CARD_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,62}$")
ID_MAX = 40  # a card id is cut to this many characters before it is made unique
SUMMARY_MAX = 600  # the card schema's maxLength
# BFCL type -> JSON Schema type; `any` maps to no type constraint at all
TYPES = {
    "dict": "object",
    "float": "number",
    "tuple": "array",
    "integer": "integer",
    "string": "string",
    "boolean": "boolean",
    "array": "array",
    "any": None,
}
# the Python type BFCL's checker expects of a value of each BFCL type (`any` is read as str)
VALUE_TYPES: dict[str, tuple[type, ...]] = {
    "dict": (dict,),
    "float": (float,),
    "tuple": (list,),
    "integer": (int,),
    "string": (str,),
    "boolean": (bool,),
    "array": (list,),
    "any": (str,),
}
# standard JSON Schema keywords BFCL uses, copied as they are
KEPT = ("description", "enum", "default", "format", "maximum")
# left out of card ids: generic verbs and small words, unless a name has nothing else
VERBS = ("get", "calculate", "calc", "compute", "find", "fetch", "check", "retrieve")
STOP_WORDS = frozenset((*VERBS, "a", "an", "the", "of", "by", "for", "from", "to", "in", "on"))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines file, one a line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def question_text(entry: Mapping[str, Any]) -> str:
    """The entry's single user message; BFCL's single-turn categories hold exactly one."""
    turns = entry["question"]
    if len(turns) != 1 or len(turns[0]) != 1 or turns[0][0]["role"] != "user":
        raise ValueError(f"{entry['id']}: expected one user message, got {turns!r}")
    return str(turns[0][0]["content"])


def entry_number(entry_id: str) -> int:
    """The N of `multiple_N`."""
    return int(entry_id.rsplit("_", 1)[1])


def sanitize(name: str) -> str:
    """A BFCL function name as an OpenAI tool name: every invalid character becomes `_`."""
    return re.sub(r"[^a-zA-Z0-9_-]", "_", name)


def wire_names(entries: Sequence[Mapping[str, Any]]) -> dict[tuple[str, str], str]:
    """(entry id, BFCL name) -> a tool name unique across the whole catalogue."""
    users: dict[str, list[str]] = {}
    for entry in entries:
        names = [sanitize(f["name"]) for f in entry["function"]]
        if len(set(names)) != len(names):
            raise ValueError(f"{entry['id']}: two functions share a name: {names}")
        for name in names:
            users.setdefault(name, []).append(entry["id"])
    out: dict[tuple[str, str], str] = {}
    for entry in entries:
        for function in entry["function"]:
            name = sanitize(function["name"])
            if len(users[name]) > 1:
                name = f"{name}_m{entry_number(entry['id'])}"
            out[(entry["id"], function["name"])] = name
    wires = list(out.values())
    if len(set(wires)) != len(wires) or not all(WIRE_NAME.match(w) for w in wires):
        raise ValueError("tool names are not unique, or not valid OpenAI tool names")
    return out


def map_schema(node: Mapping[str, Any], where: str) -> dict[str, Any]:
    """One BFCL parameter schema as JSON Schema 2020-12; `optional` is checked, then dropped."""
    bfcl_type = node.get("type")
    if bfcl_type not in TYPES:
        raise ValueError(f"{where}: unknown BFCL type {bfcl_type!r}")
    unknown = set(node) - {"type", "properties", "required", "items", "optional", *KEPT}
    if unknown:
        raise ValueError(f"{where}: unmapped keys {sorted(unknown)}")
    out: dict[str, Any] = {}
    if TYPES[bfcl_type] is not None:
        out["type"] = TYPES[bfcl_type]
    for key in KEPT:
        if key in node:
            out[key] = node[key]
    if "items" in node:
        out["items"] = map_schema(node["items"], f"{where}[]")
    if "properties" in node:
        props = node["properties"]
        out["properties"] = {k: map_schema(v, f"{where}.{k}") for k, v in props.items()}
        required = list(node.get("required", []))
        _check_optional(node, required, where)
        if required or "required" in node:
            out["required"] = required
    return out


def _check_optional(node: Mapping[str, Any], required: list[str], where: str) -> None:
    """BFCL's `optional` (per property, or a list on the object) must agree with `required`."""
    props = node["properties"]
    missing = [r for r in required if r not in props]
    optional = set(node.get("optional", []))
    optional |= {k for k, v in props.items() if v.get("optional") is True}
    clash = optional & set(required)
    if missing or clash:
        raise ValueError(f"{where}: required {missing} undeclared or {sorted(clash)} optional")


def map_function(function: Mapping[str, Any], wire: str) -> dict[str, Any]:
    """A BFCL function doc as a card function: wire name, description, JSON Schema object."""
    params = map_schema(function["parameters"], function["name"])
    if params.get("type") != "object":
        raise ValueError(f"{function['name']}: parameters are not an object")
    params.setdefault("properties", {})
    Draft202012Validator.check_schema(params)
    return {"name": wire, "description": function["description"], "parameters": params}


def _words(name: str) -> list[list[str]]:
    """A BFCL name's dotted segments, each as lowercase words (snake_case and camelCase split)."""
    segments = []
    for segment in name.split("."):
        spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", segment)
        segments.append([w for w in re.split(r"[^a-zA-Z0-9]+", spaced.lower()) if w])
    return segments


def card_id(names: Sequence[str], taken: set[str]) -> str:
    """A kebab-case id from an entry's function names, shortened to ID_MAX, unique in `taken`."""
    parts: list[list[str]] = []
    seen: set[str] = set()
    for name in names:
        words = [w for segment in _words(name) for w in segment]
        words = [w for w in words if w not in STOP_WORDS] or words
        fresh = [w for w in words if w not in seen]
        seen.update(words)
        if fresh:
            parts.append(fresh)
    while len("-".join(w for p in parts for w in p)) > ID_MAX and max(map(len, parts)) > 1:
        longest = max(range(len(parts)), key=lambda i: (len(parts[i]), i))
        parts[longest] = parts[longest][:-1]
    words = [w for p in parts for w in p]
    while len("-".join(words)) > ID_MAX and len(words) > 1:
        words.pop()  # cut whole words, never in the middle of one
    base = "-".join(words)[:ID_MAX]
    candidate, n = base, 1
    while candidate in taken:
        n += 1
        candidate = f"{base}-{n}"
    if not CARD_ID.match(candidate):
        raise ValueError(f"card id {candidate!r} does not match the card schema")
    taken.add(candidate)
    return candidate


def summary(functions: Iterable[Mapping[str, Any]]) -> str:
    """The card summary: the function descriptions, first sentences only where too long."""
    descriptions = [" ".join(str(f["description"]).split()) for f in functions]
    text = " ".join(d if d.endswith(".") else d + "." for d in descriptions)
    if len(text) > SUMMARY_MAX:
        firsts = [re.split(r"(?<=\.)\s", d, maxsplit=1)[0] for d in descriptions]
        text = " ".join(d if d.endswith(".") else d + "." for d in firsts)
    if len(text) > SUMMARY_MAX:
        text = text[: SUMMARY_MAX - 3].rsplit(" ", 1)[0] + "..."
    if len(text) < 10:
        raise ValueError(f"summary {text!r} is shorter than the card schema allows")
    return text


def check_answer(entry: Mapping[str, Any], answer: Mapping[str, Any]) -> tuple[str, dict]:
    """The entry's one expected call; every accepted value must have the declared BFCL type."""
    if answer["id"] != entry["id"] or len(answer["ground_truth"]) != 1:
        raise ValueError(f"{entry['id']}: answer {answer['id']} is not one call")
    ((name, arguments),) = answer["ground_truth"][0].items()
    found = [f for f in entry["function"] if f["name"] == name]
    if not found:
        raise ValueError(f"{entry['id']}: ground truth calls {name!r}, not one of its functions")
    props = found[0]["parameters"]["properties"]
    for param, accepted in arguments.items():
        if param not in props:
            raise ValueError(f"{entry['id']}: ground truth argument {param!r} is undeclared")
        want = VALUE_TYPES[props[param]["type"]]
        for value in accepted:
            bad = not isinstance(value, want) or (want == (int,) and isinstance(value, bool))
            if value != "" and bad:
                raise ValueError(f"{entry['id']}: {param}={value!r} is not {want}")
    return name, arguments


def build_card(entry: Mapping[str, Any], wires: Mapping, taken: set[str]) -> dict[str, Any]:
    """One card (as a dict in file order) for one `multiple` entry."""
    names = [f["name"] for f in entry["function"]]
    functions = [map_function(f, wires[(entry["id"], f["name"])]) for f in entry["function"]]
    return {
        "id": card_id(names, taken),
        "summary": summary(entry["function"]),
        "tools": [f["name"] for f in functions],
        "returns_required": [],
        "side_effects": "none",
        "functions": functions,
    }


def card_text(entry: Mapping[str, Any], card: Mapping[str, Any]) -> str:
    """The card file: a comment naming the BFCL entry, then the YAML."""
    names = ", ".join(f["name"] for f in entry["function"])
    head = f"# BFCL {MULTIPLE} entry {entry['id']} (BFCL names: {names})\n"
    body = yaml.safe_dump(card, sort_keys=False, allow_unicode=True, width=100)
    if yaml.safe_load(body) != card:
        raise ValueError(f"{entry['id']}: the card does not read back as written")
    return head + body


def generate(raw: Path) -> tuple[dict[str, str], list[dict[str, Any]], dict[str, int]]:
    """(card file name -> text, tasks, counts) built from the raw files in `raw`."""
    entries = read_jsonl(raw / MULTIPLE)
    answers = read_jsonl(raw / ANSWERS)
    irrelevant = read_jsonl(raw / IRRELEVANCE)
    if len(entries) != len(answers):
        raise ValueError(f"{len(entries)} entries but {len(answers)} answers")
    wires = wire_names(entries)
    taken: set[str] = set()
    cards: dict[str, str] = {}
    tasks: list[dict[str, Any]] = []
    for entry, answer in zip(entries, answers, strict=True):
        card = build_card(entry, wires, taken)
        cards[f"{card['id']}.yaml"] = card_text(entry, card)
        name, arguments = check_answer(entry, answer)
        call = {"name": wires[(entry["id"], name)], "arguments": arguments}
        task = {"id": entry["id"], "task": question_text(entry)}
        tasks.append({**task, "expected_agent": card["id"], "expect_call": call})
    for entry in irrelevant:
        task = {"id": entry["id"], "task": question_text(entry)}
        tasks.append({**task, "expected_agent": None, "expect_call": None})
    qualified = sum(1 for (_, name), wire in wires.items() if wire != sanitize(name))
    irrelevance = len(irrelevant)
    counts = {"functions": len(wires), "qualified": qualified, "irrelevance": irrelevance}
    return cards, tasks, counts


def write(out: Path, cards: Mapping[str, str], tasks: Sequence[Mapping[str, Any]]) -> None:
    """Write the cards (dropping stale ones in out/cards) and tasks.jsonl under `out`."""
    folder = out / "cards"
    folder.mkdir(parents=True, exist_ok=True)
    for stale in folder.glob("*.yaml"):
        if stale.name not in cards:
            stale.unlink()
    for name, text in cards.items():
        (folder / name).write_text(text, encoding="utf-8", newline="\n")
    lines = [json.dumps(t, ensure_ascii=False) + "\n" for t in tasks]
    (out / "tasks.jsonl").write_text("".join(lines), encoding="utf-8", newline="\n")


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate the BFCL cards and tasks; print a one-line summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raw", type=Path, default=DEFAULT_RAW, help="BFCL's raw files")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="where cards/ go")
    args = parser.parse_args(argv)
    cards, tasks, counts = generate(args.raw)
    write(args.out, cards, tasks)
    print(
        f"bfcl: {len(cards)} cards, {counts['functions']} functions "
        f"({counts['qualified']} with qualified names), {len(tasks)} tasks "
        f"({counts['irrelevance']} irrelevance) -> {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
