"""Markdown cards: a `---` line, the card's YAML fields, a `---` line, then Markdown text that
becomes the card's `instructions`; and Claude Code's subagent files (`.claude/agents/*.md`),
whose `name`, `description` and tools are read into a card's fields by the table
`index.CLAUDE_TOOLS`, then checked like any card (`load`).

What is wrong here is an `Issue`, (line, field, message), its line counted in the file itself.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tiny_cli.cards.card import yaml_type
from tiny_cli.cards.index import CLAUDE_TOOLS, card_schema, mapping_text
from tiny_cli.settings import did_you_mean
from tiny_cli.tools.mcp_config import qualified

__all__ = [
    "CLAUDE_KEYS",
    "INSTRUCTIONS",
    "Fields",
    "Frontmatter",
    "Issue",
    "declared_functions",
    "is_subagent",
    "markdown_fields",
    "split_markdown",
    "subagent_keys",
]

Issue = tuple[int | None, str, str]  # line, field, message

# `model` is Claude's alias (sonnet, opus, haiku, inherit), no tiny model; `color` its UI's
IGNORED = ("model", "color")
CLAUDE_KEYS = ("name", "description", "tools", *IGNORED)
SHOWN = {"id": "name", "summary": "description"}  # a Claude file's names for tiny's fields
INSTRUCTIONS = "instructions"
FENCE = "---"
BODY = " (a subagent's instructions are the text after its frontmatter)"
_MCP_NAME = re.compile(r"^mcp__([A-Za-z0-9][A-Za-z0-9_-]*?)__(.+)$")  # Claude's MCP tool names
NO_FRONTMATTER = (
    "a Markdown card starts with a '---' line, then its YAML fields, then a '---' line; "
    "this file has no frontmatter"
)
UNCLOSED = "the frontmatter opened by the '---' on line 1 is never closed by a '---' line"
NO_TOOLS = (
    "missing: a Claude Code subagent without tools may use every tool, a tiny card only the "
    "tools it lists; list them (tools: Read, WebFetch), or write tools: [] for none"
)


@dataclass(frozen=True)
class Frontmatter:
    """A Markdown card split in two: its YAML, line for line as in the file, and its body."""

    yaml: str
    body: str
    body_line: int


@dataclass
class Fields:
    """A Markdown card's fields as a YAML card writes them, with the file line of each."""

    data: dict[str, Any] | None  # None: too broken to check any further
    lines: dict[tuple, int]
    issues: list[Issue] = field(default_factory=list)
    shown: Mapping[str, str] = field(default_factory=dict)  # field -> its name in the file


def split_markdown(text: str) -> Frontmatter | Issue:
    """Split a Markdown card (read within its bound) into frontmatter and body, or say why not."""
    lines = text.removeprefix("\ufeff").split("\n")
    if lines[0].rstrip() != FENCE:
        return 1, "frontmatter", NO_FRONTMATTER
    end = next((i for i, line in enumerate(lines[1:], 1) if line.rstrip() == FENCE), None)
    if end is None:
        return 1, "frontmatter", UNCLOSED
    # the opening line kept as an empty one: YAML's line n is the file's line n
    yaml = "\n" + "\n".join(lines[1:end])
    rest = "\n".join(lines[end + 1 :])
    skipped = rest[: len(rest) - len(rest.lstrip())].count("\n")
    return Frontmatter(yaml, rest.strip().replace("\r\n", "\n"), end + 2 + skipped)


def markdown_fields(
    data: dict[str, Any], lines: dict[tuple, int], front: Frontmatter, known: Mapping[str, bool]
) -> Fields:
    """Read a Markdown card's frontmatter and body into a card's fields (a subagent's too)."""
    fields = _claude(data, lines, known) if is_subagent(data) else Fields(dict(data), dict(lines))
    if fields.data is not None and front.body:
        _add_body(fields, fields.data, front)
    return fields


def is_subagent(data: Mapping[str, Any]) -> bool:
    """A subagent names itself and says when to use it, where a tiny card has id and summary."""
    return ("name" in data or "description" in data) and not ("id" in data or "summary" in data)


def subagent_keys() -> list[str]:
    """The keys a subagent's frontmatter may hold, as it names them (its body: instructions)."""
    return [SHOWN.get(k, k) for k in card_schema()["properties"] if k != INSTRUCTIONS]


def _add_body(fields: Fields, data: dict[str, Any], front: Frontmatter) -> None:
    if INSTRUCTIONS in data:
        key = fields.lines.get((INSTRUCTIONS,))
        msg = f"given twice, as a key on line {key} and as the text after the frontmatter"
        fields.issues.append((front.body_line, INSTRUCTIONS, f"{msg}; keep one"))
        return
    data[INSTRUCTIONS] = front.body
    fields.lines[(INSTRUCTIONS,)] = front.body_line


def _claude(data: dict[str, Any], lines: dict[tuple, int], known: Mapping[str, bool]) -> Fields:
    """A Claude Code subagent's fields as tiny's: name, description and tools translated."""
    root = lines.get(())
    missing = [key for key in ("name", "description") if key not in data]
    if missing:  # a misspelt key says which, not only that its field is missing
        issues, suggested = _unknown(data, lines)
        msg = "missing: a Claude Code subagent has a name (its id) and a description"
        told = [(root, k, msg) for k in missing if k not in suggested]
        return Fields(None, lines, issues + told, SHOWN)
    issues, _ = _unknown(data, lines, (INSTRUCTIONS,))  # the schema says any other
    tools, at = _tools(data, lines, known, issues)
    kept = {k: v for k, v in data.items() if k not in (*CLAUDE_KEYS, INSTRUCTIONS)}
    out = {"id": data["name"], "summary": data["description"], "tools": tools, **kept}
    if "returns_required" not in out and "returns" not in out:
        out["returns_required"] = []  # the summary is the answer, as a subagent's reply is
    if "side_effects" not in out and any(known.get(t) for t in tools):
        out["side_effects"] = "write"
    index = {k: v for k, v in lines.items() if k[:1] != ("tools",) or len(k) == 1}
    index.update({("id",): lines[("name",)], ("summary",): lines[("description",)], **at})
    return Fields(out, index, issues, SHOWN)


def _unknown(
    data: dict[str, Any], lines: dict[tuple, int], only: tuple[str, ...] = ()
) -> tuple[list[Issue], set[str]]:
    """An issue for each key a subagent may not hold (of `only`, if given), and the keys those
    issues suggest instead (a misspelt `nmae`: `name`)."""
    allowed = subagent_keys()
    unknown = [k for k in data if k not in (*allowed, *IGNORED) and (not only or k in only)]
    issues: list[Issue] = []
    suggested: set[str] = set()
    for key in sorted(map(str, unknown)):
        listed = f"; allowed: {', '.join(allowed)}"
        if key == INSTRUCTIONS:
            close, tip = [], f"{listed}{BODY}"
        else:  # the allowed key did_you_mean would pick, kept to say which key it suggests
            close = difflib.get_close_matches(key, allowed, n=1)
            tip = did_you_mean(key, close, listed)
        suggested.update(close)
        issues.append((lines.get((key,), lines.get(())), key, f"unknown key{tip}"))
    return issues, suggested


def _tools(
    data: dict[str, Any], lines: dict[tuple, int], known: Mapping[str, bool], issues: list[Issue]
) -> tuple[list[str], dict[tuple, int]]:
    """Translate the subagent's tools; return tiny's names and the line of each."""
    if data.get("tools") is None:  # omitted: every tool, which a tiny card never has
        issues.append((lines.get(("tools",), lines.get(())), "tools", NO_TOOLS))
        return [], {}
    declared = declared_functions(data)
    tools: list[str] = []
    at: dict[tuple, int] = {}
    for name, line, where in _names(data["tools"], lines, issues):
        for tool in _mapped(name, (line, where), known, declared, issues):
            if tool in tools:  # Read, Grep and Glob are all docs_search
                continue
            if line is not None:
                at[("tools", len(tools))] = line
            tools.append(tool)
    return tools, at


def _names(
    value: Any, lines: dict[tuple, int], issues: list[Issue]
) -> list[tuple[str, int | None, str]]:
    """The tool names a subagent lists (a comma-separated string or a list), each with its place."""
    line = lines.get(("tools",))
    if isinstance(value, str):
        return [(name.strip(), line, "tools") for name in value.split(",") if name.strip()]
    if not isinstance(value, list):
        msg = f"must be a comma-separated string or a list of tool names, got {yaml_type(value)}"
        issues.append((line, "tools", msg))
        return []
    names = []
    for i, name in enumerate(value):
        at = lines.get(("tools", i), line)
        if isinstance(name, str):
            names.append((name.strip(), at, f"tools[{i}]"))
        else:
            issues.append((at, f"tools[{i}]", f"must be a tool name, got {yaml_type(name)}"))
    return names


def _mapped(
    name: str,
    place: tuple[int | None, str],
    known: Mapping[str, bool],
    declared: set[Any],
    issues: list[Issue],
) -> tuple[str, ...]:
    """Tiny's tools for one Claude tool: by the table, an MCP tool, or a tiny name as it is."""
    if name in CLAUDE_TOOLS:
        return CLAUDE_TOOLS[name]
    mcp = _MCP_NAME.match(name)
    if mcp:
        return (f"{mcp[1]}.{mcp[2]}",)
    if name in known or name in declared or qualified(name) is not None:
        return (name,)
    tip = did_you_mean(name, [*CLAUDE_TOOLS, *known])
    msg = (f"Claude Code tool {name!r} has no tiny equivalent{tip}; tiny maps "
           f"{mapping_text()} (a tiny tool's own name is taken as it is)")  # fmt: skip
    issues.append((*place, msg))
    return ()


def declared_functions(data: dict) -> set[str]:
    """Name the functions a card declares itself (a bench's function-calling set)."""
    found = data.get("functions")
    specs = [f for f in found if isinstance(f, dict)] if isinstance(found, list) else []
    return {f["name"] for f in specs if isinstance(f.get("name"), str)}
