"""`tiny validate`: check card files, and warn where cards overlap for routing."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from tiny_cli.cards.card import Card, Problem, shown_path
from tiny_cli.cards.index import NOT_CARDS, cards_by_folder, list_cards
from tiny_cli.cards.load import (
    NO_MCP_FILE,
    WrittenId,
    check_cards,
    check_ids,
    duplicate_id,
    read_card,
    written_id,
)
from tiny_cli.errors import ConfigError, EmbedderError
from tiny_cli.routing.examples_file import LEARNED_FILENAME, check_learned, line_of_example
from tiny_cli.routing.factory import build_router, learned_file, learned_folder, stale_threshold
from tiny_cli.routing.router import Overlap, Router
from tiny_cli.secrets import scrubber
from tiny_cli.settings import Settings
from tiny_cli.tools.mcp_config import McpConfig, load_mcp_config, mcp_path, original
from tiny_cli.userfiles import load_yaml, read_yaml_text, yaml_error_line, yaml_error_message
from tiny_cli.workspace import known_tools

__all__ = ["Connect", "Validation", "routing_warnings", "text_line", "validate"]

Connect = Callable[[Sequence[Card], McpConfig], list[Problem]]
"""Start the MCP servers cards name and check their tools (`tiny validate --connect`)."""
NAMED_CARDS = 3  # a card's grouped overlap warning names this many of the other cards


@dataclass(frozen=True)
class Validation:
    """What `tiny validate` found: good cards, problems (fail), and routing warnings (don't)."""

    cards: list[Card]
    problems: list[Problem]
    warnings: list[Problem]

    def to_json(self) -> dict[str, Any]:
        """Return the result as one JSON document (`tiny validate --json`)."""
        return {
            "ok": not self.problems,
            "cards": [
                {
                    "id": c.id,
                    "file": str(c.path) if c.path else None,
                    "tools": [original(t) for t in c.tools],  # as the card writes them
                    "side_effects": c.side_effects,
                }
                for c in self.cards
            ],
            "problems": [asdict(p) for p in self.problems],  # file, line, field, message
            "warnings": [asdict(p) for p in self.warnings],
        }


def validate(
    settings: Settings,
    paths: Sequence[Path],
    connect: Connect | None = None,
    detail: bool = True,
) -> Validation:
    """Check card files (default: the cards directory); warn where cards overlap for routing."""
    # `connect` (--connect) checks the cards' MCP tools against their servers, started
    # a learned.jsonl named is checked against its folder's cards: the folder is checked whole
    named = [p for p in paths if p.name == LEARNED_FILENAME and p.is_file()]  # else: no such
    taught = list(dict.fromkeys(p.parent for p in named))
    # a card file named in a subfolder of the cards folder: no route reads it, so none checks it
    nested = [p for p in paths if p not in named and _nested(settings.cards_dir, p, paths)]
    unread = [_unread(settings.cards_dir, p) for p in nested]
    folders = [p for p in paths if p not in named + nested] + taught
    if unread and not folders:  # nothing else named: not the cards folder (a default) either
        return Validation([], unread, [])
    folders = folders or [settings.cards_dir]
    mcp, broken = _mcp(_checked_folder(settings, folders))
    known = known_tools(settings)
    cards, problems = check_cards(folders, known, mcp, settings.cache_dir)
    problems = unread + problems
    # a file named is one of its folder's cards, which `tiny route` reads whole (pre-commit)
    files = [p for p in folders if p.is_file() and p.parent not in folders]
    problems += _folder_clashes(settings, files, known, mcp)
    if broken:  # its servers are unknown, not missing: the cards' MCP tools wait for the fix
        problems = broken + [p for p in problems if NO_MCP_FILE not in p.message]
    elif not cards and not problems:  # `tiny route` refuses a folder with no card
        problems = [_no_cards(folders)]
    if connect is not None and mcp is not None:
        problems += connect(cards, mcp)
    # each folder checked whole with its own learned examples (a named file's folder is not:
    # its other cards are not checked, and its examples of them would read as unknown)
    whole = [f for f in folders if f.is_dir()] if paths else [learned_folder(settings)]
    for folder in dict.fromkeys(whole):
        problems += check_learned(folder, cards_by_folder(cards).get(folder, []))
    if problems:
        return Validation(cards, problems, [])
    warnings = [
        warning
        for folder, group in cards_by_folder(cards).items()
        if folder is not None
        and len(group) > 1  # routing, and its learned examples, are one folder's
        for warning in routing_warnings(replace(settings, cards_dir=folder), group, detail)
    ]
    return Validation(cards, problems, warnings)


def _nested(cards_dir: Path, path: Path, named: Sequence[Path]) -> bool:
    """A card file named in a subfolder of the cards folder (not named itself as a folder)."""
    if path.name in NOT_CARDS or path.parent in named or not path.is_file():
        return False
    folder, parent = cards_dir.resolve(), path.parent.resolve()
    return parent != folder and parent.is_relative_to(folder)


def _unread(cards_dir: Path, path: Path) -> Problem:
    """The problem of a file in a subfolder of the cards folder: no route ever reads it."""
    folder = shown_path(str(cards_dir))
    message = (
        f"in a subfolder of the cards folder {folder}, which reads only its own files (not its "
        f"subfolders'): never read, so never routed; move it into {folder}"
    )
    return Problem(str(path), None, "file", message)


def _folder_clashes(
    settings: Settings, files: Sequence[Path], known: Mapping[str, bool], mcp: McpConfig | None
) -> list[Problem]:
    """The named files whose id another card file of their folder has, good or broken."""
    servers = [mcp.path] if mcp is not None else []
    mine = list_cards(files, servers).paths  # those of them the folder would read
    skip = [*files, *servers]
    problems: list[Problem] = []
    for folder in dict.fromkeys(f.parent for f in files):
        first = _sibling_ids(settings, folder, skip, known, mcp)
        for path in (p for p in mine if p.parent == folder):
            written = written_id(path)
            if written is not None and written.name in first:
                problems.append(duplicate_id(written, first[written.name]))
    return problems


def _sibling_ids(
    settings: Settings,
    folder: Path,
    skip: Sequence[Path],
    known: Mapping[str, bool],
    mcp: McpConfig | None,
) -> dict[str, WrittenId]:
    """Each id the folder's card files but `skip` hold, good or broken, where it is first."""
    # the folder's own index, as `tiny validate FOLDER` keeps it: a file it holds is not read
    _, _, ids = check_ids([folder], known, mcp, settings.cache_dir, skip=skip)
    return {written.name: written for written in reversed(ids)}  # the first one wins


def _mcp(settings: Settings) -> tuple[McpConfig | None, list[Problem]]:
    """The MCP servers file (TINY_MCP, or the cards folder's mcp.yaml), if any; or its problem."""
    path = mcp_path(settings.cards_dir, settings.mcp_file, settings.origin("mcp_file"))
    if path is None:
        return None, []
    try:
        return load_mcp_config(path), []
    except ConfigError as exc:
        return None, [_mcp_problem(path, str(exc))]


def _mcp_problem(path: Path, said: str) -> Problem:
    """A servers file's fault as a card's would be: a YAML error on its line, else the key."""
    try:
        load_yaml(read_yaml_text(path), unique=True)
    except yaml.YAMLError as exc:
        return Problem(str(path), yaml_error_line(exc), "yaml", yaml_error_message(exc))
    except (OSError, UnicodeDecodeError):
        pass  # said already: "cannot read"
    where, _, why = said.removeprefix(f"{path}: ").partition(": ")
    if where.startswith("servers") and why:
        return Problem(str(path), None, where, why)
    return Problem(str(path), None, "file", said.removeprefix(f"{path}: "))


def _no_cards(folders: Sequence[Path]) -> Problem:
    """The problem of paths that hold no card: nothing to route to."""
    message = "no card files here (*.yaml, *.yml, *.md): tiny route needs one"
    return Problem(", ".join(str(f) for f in folders), None, "cards", message)


def _checked_folder(settings: Settings, folders: Sequence[Path]) -> Settings:
    """The MCP servers of the one folder named (its mcp.yaml), unless TINY_MCP names a file."""
    named = {p if p.is_dir() else p.parent for p in folders}
    if settings.mcp_file or len(named) != 1:
        return settings
    return replace(settings, cards_dir=named.pop())


def routing_warnings(
    settings: Settings,
    cards: Sequence[Card],
    detail: bool = True,
) -> list[Problem]:
    """Name every card text that sits closer to another card than to its own card."""
    # without `detail`, one warning per card: the first such text's place, and the count
    try:
        router = build_router(settings, cards)
    except EmbedderError as exc:
        return [Problem(str(settings.cards_dir), None, "routing", f"overlap check skipped: {exc}")]

    by_id = {card.id: card for card in cards}
    learned = learned_file(settings)
    overlaps = router.overlaps()
    scrub = scrubber(settings.api_key).text  # the router read the file scrubbed of secrets
    problems = [_overlap_problem(by_id[o.agent_id], o, learned, scrub) for o in overlaps]
    stale = _stale(settings, cards, router, learned)
    return stale + (problems if detail else _grouped(by_id, overlaps, problems))


def _stale(
    settings: Settings, cards: Sequence[Card], router: Router, learned: Path
) -> list[Problem]:
    """A warning when the folder's derived threshold no longer fits what it was derived on."""
    why = stale_threshold(settings, cards, router)
    if why is None:
        return []
    message = (
        f"the derived threshold is stale: {why}; routes use {router.threshold} until `tiny learn`"
    )
    return [Problem(str(learned), 1, "threshold", message)]


def _grouped(
    cards: dict[str, Card], overlaps: Sequence[Overlap], problems: Sequence[Problem]
) -> list[Problem]:
    """One warning per card: a single overlap as it is, several counted in one line."""
    firsts: dict[str, Problem] = {}
    mine: dict[str, list[Overlap]] = {}
    for overlap, problem in zip(overlaps, problems, strict=True):
        firsts.setdefault(overlap.agent_id, problem)
        mine.setdefault(overlap.agent_id, []).append(overlap)
    return [
        replace(first, message=_count(cards[card], mine[card])) if len(mine[card]) > 1 else first
        for card, first in firsts.items()
    ]


def _count(card: Card, overlaps: Sequence[Overlap]) -> str:
    """Say how many texts of a card sit closer to other cards, and which cards."""
    kinds = Counter(_kind(card, o) for o in overlaps)
    others = Counter(o.other_id for o in overlaps).most_common()
    nearest = ", ".join(f"{other!r} {n}" for other, n in others[:NAMED_CARDS])
    more = f", {len(others) - NAMED_CARDS} more" if len(others) > NAMED_CARDS else ""
    what = ", ".join(f"{n} {_plural(kind, n)}" for kind, n in kinds.items())
    return (
        f"{len(overlaps)} texts of {card.id!r} ({what}) sit closer to other cards than to "
        f"the rest of it ({nearest}{more}); --verbose names each"
    )


def _kind(card: Card, overlap: Overlap) -> str:
    """The kind of text as a warning names it: a taught example is a learned one."""
    if overlap.kind == "generated":
        return "generated example"
    taught = overlap.kind == "example" and overlap.text not in card.examples
    return "learned example" if taught else overlap.kind


def _plural(kind: str, n: int) -> str:
    if n == 1:
        return kind
    return kind[:-1] + "ies" if kind.endswith("y") else kind + "s"


def _overlap_problem(
    card: Card, overlap: Overlap, learned: Path, scrub: Callable[[str], str]
) -> Problem:
    kind = _kind(card, overlap)
    taught = kind in ("learned example", "generated example")  # a line of learned.jsonl
    message = (
        f"{kind} {overlap.text!r} sits closer to card {overlap.other_id!r} "
        f"({overlap.other:.2f}) than to the rest of {card.id!r} ({overlap.own:.2f}); "
        + ("teach it to the right card with tiny learn, or delete its line" if taught
           else "reword it, or move it there")
    )  # fmt: skip
    if taught:  # the line of learned.jsonl that holds it
        line = line_of_example(learned, card.id, overlap.text, scrub)
        return Problem(str(learned), line, "routing", message)
    file = str(card.path) if card.path else card.id
    return Problem(file, text_line(card.path, overlap.kind, overlap.text), "routing", message)


def text_line(path: Path | None, kind: str, text: str) -> int | None:
    """Return the line of a card file holding its routing text `text` of `kind`, or None."""
    # from the YAML's nodes, not the raw text: a quoted or escaped example is found, and a
    # capability is looked for in the summary alone, never in an example that shares it
    parsed = read_card(path) if path is not None else None
    if not isinstance(parsed, tuple):
        return None
    front, node, _ = parsed
    if kind == "example":
        return _example_line(_value(node, "examples"), text)
    summary = _value(node, "summary") or _value(node, "description")  # a subagent's summary
    if not isinstance(summary, yaml.ScalarNode):
        return None
    # a block scalar (`>-`, `|`) starts at its indicator; its text, on the next line
    start = summary.start_mark.line + 1 + (summary.style in ("|", ">"))
    if kind != "capability":
        return start
    return _line_within(front.yaml, summary, text) or start


def _value(mapping: yaml.MappingNode, key: str) -> yaml.Node | None:
    """The node of `key`'s value in `mapping` (the last one, as YAML keeps), if any."""
    found = [value for name, value in mapping.value if getattr(name, "value", None) == key]
    return found[-1] if found else None


def _example_line(examples: yaml.Node | None, text: str) -> int | None:
    """The line of the example whose value (quotes and escapes read) is `text`."""
    if not isinstance(examples, yaml.SequenceNode):
        return None
    items = (i for i in examples.value if isinstance(i, yaml.ScalarNode) and i.value == text)
    return next((item.start_mark.line + 1 for item in items), None)


def _line_within(source: str, node: yaml.Node, text: str) -> int | None:
    """The first line of `node`'s span in `source` that holds `text` whole, if one does."""
    lines = source.split("\n")
    span = range(node.start_mark.line, min(node.end_mark.line + 1, len(lines)))
    return next((n + 1 for n in span if text and text in lines[n]), None)
