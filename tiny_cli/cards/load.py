"""Cards: load agent cards, validate them against the shipped schema, report every problem.

A card is a YAML file, or a Markdown file (`*.md`, a Claude Code subagent among them), whose
fields `markdown` reads; every card is then checked alike here. jsonschema is imported only
for a card the compiled check (`index.is_valid`) fails, to word each problem in the card's
terms ("missing required field 'tools'", "0 is impossible: must be >= 1").
"""

from __future__ import annotations

import math
import re
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tiny_cli import userfiles
from tiny_cli.cards.card import (
    RESERVED_FIELDS,
    Budget,
    Card,
    Problem,
    field_schema,
    shown_path,
    yaml_type,
)
from tiny_cli.cards.index import (
    CardIndex,
    card_salt,
    card_schema,
    cards_by_folder,
    is_valid,
    list_cards,
    longest,
)
from tiny_cli.cards.markdown import (
    INSTRUCTIONS,
    Fields,
    Frontmatter,
    declared_functions,
    is_subagent,
    markdown_fields,
    split_markdown,
)
from tiny_cli.errors import CardError
from tiny_cli.settings import did_you_mean
from tiny_cli.tools.args_check import schema_problem
from tiny_cli.tools.mcp_config import McpConfig, offered, original, qualified

# card.schema.json's name patterns in words, by where each is (a list's index left out): what
# the name is, the characters it may have, and what may come first; its length is the pattern's
NAME = ("letters, digits, '_' and '-'", "a letter or '_'")  # a tool's or a function's
FIELD_NAME = ("a field name", "letters, digits and '_', no digit first")
NAMES = {
    ("id",): ("a slug", "lowercase letters, digits, '-' and '_'", "a letter or digit"),
    ("returns_required",): FIELD_NAME,
    ("returns",): FIELD_NAME,
    ("functions", "name"): ("a function name", *NAME),
}


def missing(err: Any) -> list[str]:
    """Name the fields a `required` (or an anyOf of `required`s) error finds missing."""
    if err.validator == "required":  # "'tools' is a required property"
        return [err.message.split("'")[1]]
    if err.validator == "anyOf" and all(set(s) == {"required"} for s in err.validator_value):
        return [name for s in err.validator_value for name in s["required"]]
    return []


def message(err: Any) -> str:
    """Say what a jsonschema error finds wrong, in the card's terms."""
    names = missing(err)
    if names:
        return "missing required field " + " or ".join(repr(m) for m in names)
    if err.validator == "pattern":
        return _unmatched(err)
    if err.validator == "uniqueItems":  # the first item an earlier one equals
        twice = next((x for i, x in enumerate(err.instance) if x in err.instance[:i]), None)
        return f"lists {twice!r} twice; keep one"
    if err.validator == "maxLength":  # not the whole text: it may be pages long
        return f"is too long: {len(err.instance)} characters, at most {err.validator_value}"
    if err.validator == "type":
        return f"must be {article(err.validator_value)}, got {yaml_type(err.instance)}"
    if err.validator in ("minimum", "exclusiveMinimum", "maximum"):
        op = {"minimum": ">=", "exclusiveMinimum": ">", "maximum": "<="}[err.validator]
        return f"{err.instance!r} is impossible: must be {op} {err.validator_value}"
    if err.validator == "enum":
        options = " or ".join(repr(v) for v in err.validator_value)
        return f"{err.instance!r} is not allowed; use {options}"
    return err.message


def _unmatched(err: Any) -> str:
    """A value its schema pattern refuses, in words."""
    where = tuple(part for part in err.absolute_path if isinstance(part, str))
    if where == ("model",):
        return "is blank: name a model, or leave the key out for the default"
    if where == ("tools",):
        return _not_a_tool(err.instance, longest(err.validator_value))
    rule = NAMES.get(where)  # a pattern the schema gains later: jsonschema's own words
    return _unlike(err, *rule) if rule is not None else err.message


def _unlike(err: Any, noun: str, chars: str, first: str = "") -> str:
    """A name its pattern refuses: too long (its length, not the name), or not `noun`."""
    most = longest(err.validator_value)
    what = f"{noun} ({chars}"
    if len(err.instance) > most:
        return f"is too long for {what}): {len(err.instance)} characters, at most {most}"
    return f"{err.instance!r} is not {what}{first and f', the first {first}'}; at most {most})"


def _not_a_tool(name: str, most: int) -> str:
    """A tools entry that is no tool's name (of at most `most` characters), in words."""
    if "." not in name and len(name) > most:  # not SERVER.TOOL, whose rule differs
        return f"is too long for a tool name: {len(name)} characters, at most {most}"
    rule = f"{NAME[0]}, the first {NAME[1]}, at most {most}; or SERVER.TOOL for a "
    rule += "tool of an MCP server"
    words = name.split()  # `[http_get html_to_text]`: two names, the comma left out
    listed = len(words) > 1 and all(re.fullmatch(r"[\w.-]+", w) for w in words)
    tip = "; a list separates its names with commas: [a, b]" if listed else ""
    return f"{name!r} is not a tool name ({rule}){tip}"


def article(kind: Any) -> str:
    """Name a JSON Schema type as a card's reader says it: 'a list', 'an integer'."""
    if isinstance(kind, list):
        return " or ".join(article(k) for k in kind)
    names = {
        "array": "a list",
        "object": "a mapping",
        "integer": "an integer",
        "number": "a number",
        "string": "a string",
        "boolean": "true or false",
    }
    return names.get(kind, str(kind))


# said of a card's MCP tool when no servers file was read (validate drops it for a broken one)
NO_MCP_FILE = "but there is no mcp.yaml"
# where tools come from, said with every unknown tool: the one thing a new user must find
TOOLS_HINT = 'tools = "my_tools.py" in tiny.toml (or --tools FILE, or TINY_TOOLS)'


def load_cards(
    paths: Sequence[Path],
    known_tools: Mapping[str, bool],
    mcp: McpConfig | None = None,
    cache_dir: Path | None = None,
    clock: Callable[[], int] = time.time_ns,
) -> list[Card]:
    """Load every card under `paths`; raise CardError listing all problems if any."""
    cards, problems = check_cards(paths, known_tools, mcp, cache_dir, clock)
    if problems:
        raise CardError(problems, tuple(cards))
    return cards


def check_cards(
    paths: Sequence[Path],
    known_tools: Mapping[str, bool],
    mcp: McpConfig | None = None,
    cache_dir: Path | None = None,
    clock: Callable[[], int] = time.time_ns,
    skip: Sequence[Path] = (),
) -> tuple[list[Card], list[Problem]]:
    """Validate card files (but the `skip` files); return the good cards and every problem."""
    # known_tools: name -> writes; a card file unchanged since accepted comes from the index
    cards, problems, _ = check_ids(paths, known_tools, mcp, cache_dir, clock, skip)
    return cards, problems


@dataclass(frozen=True)
class WrittenId:
    """A card file's id as written, good card or broken, with its file, line and key."""

    name: str
    path: Path
    line: int | None
    key: str | None  # `id`, or a subagent's `name`; None: not known (taken from the index)


def check_ids(
    paths: Sequence[Path],
    known_tools: Mapping[str, bool],
    mcp: McpConfig | None = None,
    cache_dir: Path | None = None,
    clock: Callable[[], int] = time.time_ns,
    skip: Sequence[Path] = (),
) -> tuple[list[Card], list[Problem], list[WrittenId]]:
    """`check_cards`, with the id every card file (good or broken) writes, in load order."""
    cards: list[Card] = []
    listing = list_cards(paths, (*skip, mcp.path) if mcp is not None else skip)
    problems, ids = list(listing.problems), []
    # (folder, id) -> where it was first: each folder is a set of cards of its own, as a route
    # reads one; two folders checked at once may hold the same card
    seen: dict[tuple[Path, str], WrittenId] = {}
    index = CardIndex.open(cache_dir, paths, card_salt(known_tools, mcp), clock)
    for path, stamp in listing.files:
        card, found, written = _indexed(path, stamp, known_tools, mcp, index)
        problems.extend(found)
        # a card with problems still holds its id: a clash is told with the rest at once
        if written is None:
            continue
        ids.append(written)
        first = seen.setdefault((path.parent, written.name), written)
        if first is not written:
            problems.append(duplicate_id(written, first))
        elif card is not None:
            cards.append(card)
    index.save(listing.paths)
    for group in cards_by_folder(cards).values():
        problems += _declared_twice(group) + _wire_clashes(group, known_tools)
    return cards, problems, ids


def duplicate_id(this: WrittenId, first: WrittenId) -> Problem:
    """The problem of a card file whose id the card file `first` has: a route refuses."""
    message = f"duplicate id {this.name!r} (already used in {shown_path(str(first.path))}:"
    found = written_id(this.path) if this.key is None else this  # the index keeps no key
    key = (found.key if found is not None else None) or "id"
    return Problem(str(this.path), this.line, key, f"{message}{first.line})")


def _indexed(
    path: Path,
    stamp: tuple[int, int],
    known_tools: Mapping[str, bool],
    mcp: McpConfig | None,
    index: CardIndex,
) -> tuple[Card | None, list[Problem], WrittenId | None]:
    """The card the index holds for the unchanged file, else the file checked (and indexed)."""
    hit = index.get(path, stamp)
    if hit is not None:
        card = _from_index(hit[0], path)
        if card is not None:
            return card, [], WrittenId(card.id, path, hit[1], None)
        index.forget(path)  # damaged: not what a check accepted; the file is checked again
    card, found, written, data = check_file(path, known_tools, mcp)
    if card is not None and data is not None and written is not None:
        index.put(path, stamp, data, written.line)
    return card, found, written


# --- one file -----------------------------------------------------------------------------


def check_file(
    path: Path, known_tools: Mapping[str, bool], mcp: McpConfig | None = None
) -> tuple[Card | None, list[Problem], WrittenId | None, dict[str, Any] | None]:
    """Check one card file: its card or every problem, the id it writes, the data accepted."""
    name, parsed = str(path), read_card(path)
    if isinstance(parsed, Problem):
        return None, [parsed], None, None
    front, node, data = parsed
    fields = _fields(path, front, node, data, known_tools)
    written = _id_of(path, data, fields)
    problems = _duplicate_keys(name, node) + [Problem(name, *i) for i in fields.issues]
    if fields.data is None:
        return None, problems, written, None
    data, lines = fields.data, fields.lines
    schema = _schema_problems(name, data, lines, fields.shown)
    rejected = {p.field for p in schema}  # one fault, one line: the schema's
    semantic = _semantic_problems(name, data, lines, known_tools, mcp)
    problems += schema + [p for p in semantic if p.field not in rejected]
    if problems:  # in a subagent's names: its `name` is the card's id
        problems = [replace(p, field=fields.shown.get(p.field, p.field)) for p in problems]
        return None, problems, written, None
    return _build(data, path), [], written, data


def card_id(path: Path) -> str | None:
    """A card file's id as written (a subagent's `name`); None where it cannot be read."""
    parsed = read_card(path)
    return _id_in(parsed[2]) if not isinstance(parsed, Problem) else None


def written_id(path: Path) -> WrittenId | None:
    """A card file's id as written, read once; None where there is none (`card_id`)."""
    parsed = read_card(path)
    if isinstance(parsed, Problem):
        return None
    return _id_of(path, parsed[2], _fields(path, *parsed, {}))


def _id_in(data: Mapping[str, Any]) -> str | None:
    """The id a card's mapping writes (a subagent's `name`), if it is a string."""
    found = data.get("name" if is_subagent(data) else "id")
    return found if isinstance(found, str) else None


def _id_of(path: Path, data: Mapping[str, Any], fields: Fields) -> WrittenId | None:
    """The id a card file writes, with its line and its key as the file names it."""
    name = _id_in(data)
    if name is None:
        return None
    return WrittenId(name, path, _line_of(fields.lines, ("id",)), fields.shown.get("id", "id"))


def read_card(path: Path) -> tuple[Frontmatter, yaml.MappingNode, dict[str, Any]] | Problem:
    """Read a card file into its frontmatter, YAML tree and mapping; or the one Problem why not."""
    name = str(path)
    try:
        text = userfiles.read_yaml_text(path)
    except (OSError, UnicodeDecodeError) as exc:
        return Problem(name, None, "file", userfiles.unreadable(exc, "a card"))
    front = split_markdown(text) if path.suffix == ".md" else Frontmatter(text, "", 0)
    if not isinstance(front, Frontmatter):
        return Problem(name, *front)
    try:
        node, data = userfiles.load_yaml(front.yaml)
    except yaml.YAMLError as exc:
        return Problem(
            name, userfiles.yaml_error_line(exc), "yaml", userfiles.yaml_error_message(exc)
        )
    if not isinstance(data, dict) or not isinstance(node, yaml.MappingNode):
        kind = "empty" if data is None else f"a {type(data).__name__}"
        line = node.start_mark.line + 1 if node is not None else 1
        return Problem(name, line, "card", f"must be a mapping of fields, got {kind}")
    return front, node, data


def field_line(path: Path, where: tuple, tools: Sequence[str] = ()) -> int | None:
    """The line of field `where` (`("tools", 2)`) in a card file whose tools are `tools`."""
    parsed = read_card(path)
    if isinstance(parsed, Problem):
        return None
    # a subagent's tools are read into tiny's (Read, Grep: one docs_search): as its check does
    return _line_of(_fields(path, *parsed, dict.fromkeys(tools, False)).lines, where)


def _fields(
    path: Path, front: Frontmatter, node: yaml.Node, data: dict[str, Any], known: Mapping[str, bool]
) -> Fields:
    """A card file's fields with the line of each; a Markdown card's read as a YAML card's."""
    lines = _line_index(node)
    if path.suffix == ".md":
        return markdown_fields(data, lines, front, known)
    return Fields(data, lines)


def _schema_problems(
    name: str, data: dict, lines: dict[tuple, int], shown: Mapping[str, str]
) -> list[Problem]:
    """What the schema refuses, worded; `shown`: a subagent's names for tiny's fields."""
    if is_valid(data):  # the compiled check: most cards stop here
        return []
    import jsonschema  # only to word what is wrong

    validator = jsonschema.Draft202012Validator(card_schema())
    errors = sorted(  # unknown keys first, so a misspelling explains its "missing" field
        validator.iter_errors(data),
        key=lambda e: (list(map(str, e.absolute_path)), e.validator != "additionalProperties"),
    )
    problems = []
    for err in errors:
        path = tuple(err.absolute_path)
        if "propertyNames" in err.relative_schema_path:  # point at the bad key, not its mapping
            path = (*path, _written(err.instance, path, lines))
        if err.validator == "additionalProperties":
            problems += _unknown_keys(name, err, path, lines, shown)
        elif not _explained(err, problems):
            problems.append(_problem(name, lines, path, message(err)))
    return problems


def _explained(err: Any, problems: list[Problem]) -> bool:
    """A required field reported missing is already explained by its misspelling."""
    hints = [f"did you mean {name!r}" for name in missing(err)]
    return any(hint in p.message for hint in hints for p in problems)


def _unknown_keys(
    name: str, err: Any, path: tuple, lines: dict[tuple, int], shown: Mapping[str, str]
) -> list[Problem]:
    """A problem for each key the schema does not know, with the keys the file may use."""
    known = list(err.schema.get("properties", {}))
    subagent = bool(shown) and not path
    allowed = [shown.get(k, k) for k in known if not (subagent and k == INSTRUCTIONS)]
    out = []
    for parsed in sorted(set(err.instance) - set(known), key=str):
        key = _written(parsed, path, lines)
        tip = did_you_mean(key, allowed, f"; allowed: {', '.join(allowed)}")
        out.append(_problem(name, lines, (*path, key), f"unknown key{tip}"))
    return out


def _written(key: Any, path: tuple, lines: Mapping[tuple, int]) -> str:
    """A mapping's key as the card writes it (`yes`, `0x1F`), not as YAML reads it (True, 31)."""
    texts = [k[-1] for k in lines if len(k) == len(path) + 1 and k[:-1] == path]
    read = (t for t in texts if not isinstance(key, str) and _read(t) == (type(key), key))
    return next(read, str(key))


def _read(text: Any) -> tuple[type, Any] | None:
    """A key's text as a card's YAML reads it, with its type (True is not 1)."""
    try:
        value = userfiles.load_yaml(str(text))[1]
    except yaml.YAMLError:
        return None
    return type(value), value


def _semantic_problems(
    name: str,
    data: dict,
    lines: dict[tuple, int],
    known_tools: Mapping[str, bool],
    mcp: McpConfig | None = None,
) -> list[Problem]:
    declared = declared_functions(data)
    problems = _text_problems(name, data, lines) + _first_problems(name, data, lines)
    problems += _function_problems(name, data, lines)
    problems += _tool_problems(name, data, lines, declared, known_tools, mcp)
    problems += _writer_problems(name, data, lines, declared, known_tools)
    budget = data.get("budget")
    for key, value in budget.items() if isinstance(budget, dict) else []:
        if isinstance(value, float) and not math.isfinite(value):
            msg = f"{value!r} is not a number a budget can use"
            problems.append(_problem(name, lines, ("budget", key), msg))
    for i, fld in enumerate(_list(data, "returns_required")):
        if fld in RESERVED_FIELDS:
            problems.append(_problem(name, lines, ("returns_required", i), _reserved(fld)))
    return problems + _returns_problems(name, data, lines)


def _tool_problems(
    name: str,
    data: dict,
    lines: dict[tuple, int],
    declared: set[str],
    known: Mapping[str, bool],
    mcp: McpConfig | None,
) -> list[Problem]:
    """Each tool is declared, registered or a declared server's, and writes only if allowed."""
    problems: list[Problem] = []
    misnamed = not all(map(_function_name, declared))  # which tool it meant is anyone's guess
    for i, tool in enumerate(_list(data, "tools")):
        if not isinstance(tool, str) or tool in declared:
            continue
        if qualified(tool) is not None:
            msg = _server_problem(tool, mcp)
        elif tool not in known and misnamed:
            msg = None  # the schema has said the function's name is wrong
        elif tool not in known:
            msg = (
                f"unknown tool {tool!r}{did_you_mean(tool, known)}; "
                f"known tools: {', '.join(sorted(known))}. "
                f"A @tool of your own? name its module once: {TOOLS_HINT}"
            )
        elif known[tool] and data.get("side_effects", "none") != "write":
            msg = f"tool {tool!r} writes, so the card needs 'side_effects: write'"
        else:
            msg = None
        if msg:
            problems.append(_problem(name, lines, ("tools", i), msg))
    return problems


def _writer_problems(
    name: str, data: dict, lines: dict[tuple, int], declared: set[str], known: Mapping[str, bool]
) -> list[Problem]:
    """`side_effects: write` with no tool that writes: no run could be ok. Judged only where
    every tool is known here (not an MCP tool, whose server alone tells if it writes)."""
    tools = data.get("tools")
    if data.get("side_effects") != "write" or not isinstance(tools, list):
        return []  # not a writer, or the schema says what is wrong with its tools
    if not all(isinstance(t, str) and (t in declared or t in known) for t in tools):
        return []
    if any(known[t] for t in tools if t not in declared):  # a declared function never runs
        return []
    which = f"none of its tools ({', '.join(tools)}) does" if tools else "tools is empty"
    msg = (
        f"'write' needs a tool that writes, and {which}: no run could end ok (a writer's ok "
        "needs a write that ran); mark the tool that writes @tool(writes=True), or write "
        "side_effects: none"
    )
    return [_problem(name, lines, ("side_effects",), msg)]


def _text_problems(name: str, data: dict, lines: dict[tuple, int]) -> list[Problem]:
    """Each prompt text, its spaces folded, is as long as the schema asks (no blank line)."""
    props = card_schema()["properties"]
    texts: list[tuple[tuple, Any, int]] = [
        (("summary",), data.get("summary"), props["summary"]["minLength"])
    ]
    for key in ("examples", "does_not"):
        least = props[key]["items"]["minLength"]
        texts += [((key, i), text, least) for i, text in enumerate(_list(data, key))]
    problems = []
    for where, text, least in texts:
        if isinstance(text, str) and len(folded := " ".join(text.split())) < least:
            msg = f"is too short: {len(folded)} characters once its spaces are folded, at "
            msg += f"least {least}"
            problems.append(_problem(name, lines, where, msg))
    return problems


def _first_problems(name: str, data: dict, lines: dict[tuple, int]) -> list[Problem]:
    """`first: tool` with no tool to call: every run would end partial, with no evidence."""
    if data.get("first") != "tool" or data.get("tools") != []:
        return []
    msg = "'tool' needs a tool to call, and tools is empty; list one, or write first: any"
    return [_problem(name, lines, ("first",), msg)]


def _function_name(name: Any) -> bool:
    """True for a name the schema takes for a declared function."""
    rule = card_schema()["properties"]["functions"]["items"]["properties"]["name"]["pattern"]
    return isinstance(name, str) and re.search(rule, name) is not None


def _function_problems(name: str, data: dict, lines: dict[tuple, int]) -> list[Problem]:
    """Each declared function is allowlisted and has a valid schema (one with a registered
    tool's name means, in this card, the declared function)."""
    problems, tools = [], {t for t in _list(data, "tools") if isinstance(t, str)}
    for i, spec in enumerate(_list(data, "functions")):
        if not isinstance(spec, dict) or not _function_name(spec.get("name")):
            continue  # the schema check has said what is wrong
        fn, params = spec["name"], spec.get("parameters")
        where: tuple = ("functions", i)
        if fn not in tools:
            msg = f"function {fn!r} is declared but not in tools: list it to offer it"
        elif not isinstance(params, dict):  # missing or no mapping: the schema check has said so
            continue
        elif (trouble := schema_problem(params)) is not None:
            msg = f"function {fn!r}: parameters are not a valid JSON Schema: {trouble}"
        elif params.get("type") != "object":
            where, msg = _not_an_object(fn, params, where)
        else:
            continue
        problems.append(_problem(name, lines, where, msg))
    return problems


def _not_an_object(fn: str, params: dict, where: tuple) -> tuple[tuple, str]:
    """Where parameters not of `type: object` are, and why (a call's arguments are a mapping)."""
    msg = f"function {fn!r} takes a mapping of arguments: its parameters need type: object"
    if "type" not in params:
        return (*where, "parameters"), f"{msg} (they name no type)"
    return (*where, "parameters", "type"), f"{msg}, not {params['type']!r}"


def _declared_twice(cards: Sequence[Card]) -> list[Problem]:
    """A function name two cards declare differently would be two tools under one name."""
    first: dict[str, tuple[Card, Mapping[str, Any]]] = {}
    problems = []
    for card in cards:
        for i, spec in enumerate(card.functions):
            seen = first.setdefault(spec["name"], (card, spec))
            if seen[1] != spec:
                other = seen[0].path or seen[0].id
                msg = f"function {spec['name']!r} is declared differently in {other}"
                problems.append(_across(card, ("functions", i), msg))
    return problems


def _across(card: Card, where: tuple, msg: str) -> Problem:
    """A problem found across cards, on the line of `where` in `card`'s file."""
    tools = [original(t) for t in card.tools]  # a subagent's, as its check reads them
    line = field_line(card.path, where, tools) if card.path is not None else None
    return Problem(str(card.path or card.id), line, _dotted(where), msg)


def _wire_clashes(cards: Sequence[Card], known_tools: Iterable[str]) -> list[Problem]:
    """Two MCP tools, or one and a registered or declared tool, the model would call by one
    name (`a.b__c`, `a__b.c`: `a__b__c`)."""
    first = {name: (name, "a registered tool") for name in known_tools}
    for card in cards:
        first.update(
            (f["name"], (f["name"], f"declared by card {card.id}")) for f in card.functions
        )
    problems = []
    for card in cards:
        for i, tool in enumerate(card.tools):
            name = original(tool)
            seen = first.setdefault(tool, (name, f"card {card.id}")) if name != tool else None
            if seen is not None and seen[0] != name:
                msg = (
                    f"MCP tool {name!r} of card {card.id} and {seen[0]!r} ({seen[1]}) both reach "
                    f"the model as {str(tool)!r}: it could not tell them apart; rename a server"
                )
                problems.append(_across(card, ("tools", i), msg))
    return problems


def _server_problem(tool: str, mcp: McpConfig | None) -> str | None:
    """Check offline that `server.tool` names a server of mcp.yaml (its tools need --connect)."""
    server = tool.split(".", 1)[0]
    if mcp is None:
        return (
            f"{tool!r} is a tool of MCP server {server!r}, {NO_MCP_FILE} "
            "(put one in the cards folder or set TINY_MCP)"
        )
    if server in mcp.servers:
        return None
    tip = did_you_mean(server, mcp.servers)
    declared = ", ".join(sorted(mcp.servers)) or "none"
    return f"unknown MCP server {server!r} in {tool!r}{tip}; {mcp.path} declares: {declared}"


def _reserved(fld: str) -> str:
    return f"{fld!r} is always returned; list only the card's own fields"


def _returns_problems(name: str, data: dict, lines: dict[tuple, int]) -> list[Problem]:
    """Check each typed field: not a reserved name, a known shorthand or a valid JSON Schema."""
    returns = data.get("returns")
    problems = []
    for fld, spec in returns.items() if isinstance(returns, dict) else []:
        if not isinstance(fld, str) or not isinstance(spec, str | list | dict):
            continue  # the card schema already names these
        trouble = ((), _reserved(fld)) if fld in RESERVED_FIELDS else field_schema(spec)[1]
        if trouble:
            problems.append(_problem(name, lines, ("returns", fld, *trouble[0]), trouble[1]))
    return problems


def _list(data: dict, key: str) -> list[Any]:
    value = data.get(key)
    return value if isinstance(value, list) else []


def _from_index(data: dict, path: Path) -> Card | None:
    """The card an index entry holds; None when it cannot be built (a sealed entry holds what
    a check accepted, under the same tools and servers: its types are all left to check)."""
    try:
        card = _build(data, path)
    except (KeyError, TypeError, ValueError, AttributeError):
        return None
    texts = (card.id, card.summary, *card.tools, *card.examples, *card.does_not)
    budget = (card.budget.max_tool_calls, card.budget.max_output_tokens)
    built = (
        all(type(t) is str for t in (*texts, *card.returns_required, card.instructions))
        and all(type(b) is int for b in budget)
        and card.side_effects in ("none", "write")
        and all(isinstance(f, dict) and type(f.get("name")) is str for f in card.functions)
    )
    return card if built else None


def _build(data: dict, path: Path) -> Card:
    returns = {fld: field_schema(spec)[0] for fld, spec in (data.get("returns") or {}).items()}
    required = data.get("returns_required", ())
    given = Budget(**data.get("budget", {}))
    # JSON Schema's integer takes YAML's 3.0 too: a count goes to the prompt and wire as 3
    calls, tokens = int(given.max_tool_calls), int(given.max_output_tokens)
    return Card(
        id=data["id"],
        summary=" ".join(data["summary"].split()),
        tools=tuple(offered(t) for t in data["tools"]),  # the model sees wire names
        returns_required=tuple(dict.fromkeys((*required, *returns))),
        examples=tuple(data.get("examples", ())),
        does_not=tuple(data.get("does_not", ())),
        side_effects=data.get("side_effects", "none"),
        budget=Budget(calls, tokens, float(given.max_wall_seconds)),
        model=data.get("model"),
        path=path,
        tool_mode=data.get("tool_mode"),
        first=data.get("first", "any"),
        returns=returns,
        functions=tuple(data.get("functions", ())),
        instructions=data.get("instructions", "").strip(),
    )


# --- line numbers ----------------------------------------------------------------------


def _line_index(node: yaml.Node, path: tuple = ()) -> dict[tuple, int]:
    """Map every key path in the YAML tree to its 1-based line."""
    index = {path: node.start_mark.line + 1}
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            child = (*path, key.value)
            index.update(_line_index(value, child))
            index[child] = key.start_mark.line + 1
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            index.update(_line_index(item, (*path, i)))
    return index


def _duplicate_keys(name: str, node: yaml.Node, path: tuple = ()) -> list[Problem]:
    problems: list[Problem] = []
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            where = (*path, key.value)
            if key.value in seen:
                line = key.start_mark.line + 1
                msg = "key appears twice; YAML would silently keep only the last one"
                problems.append(Problem(name, line, _dotted(where), msg))
            seen.add(key.value)
            problems += _duplicate_keys(name, value, where)
    return problems


def _problem(name: str, lines: dict[tuple, int], where: tuple, msg: str) -> Problem:
    """A problem with the field at `where`, on the line of it (or of what holds it)."""
    return Problem(name, _line_of(lines, where), _dotted(where), msg)


def _line_of(lines: dict[tuple, int], path: tuple) -> int | None:
    while path not in lines and path:
        path = path[:-1]
    return lines.get(path)


def _dotted(path: Iterable) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "card"
