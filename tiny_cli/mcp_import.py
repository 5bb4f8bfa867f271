"""`tiny cards import` and `tiny cards sync`: cards from MCP servers, kept in step with them.

Import reads the servers (mcp.yaml, or a host's config carried into it), lists each one's
tools, groups them into cards (tiny_cli.cards.grouping) and writes them with a manifest
(tiny_cli.cards.generated). Again later, it rewrites only the cards nobody edited: an edited
card is kept, and its tools stay out of the new groups. Sync refreshes the tool lists routing
reads with `connect_problems`, the check `tiny validate --connect` runs.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from tiny_cli.cards.card import Card, Problem
from tiny_cli.cards.generated import Generated, card_text, read_generated
from tiny_cli.cards.grouping import CARD_TOOLS, CardPlan, plan_cards
from tiny_cli.cards.index import list_cards
from tiny_cli.cards.load import card_id, field_line
from tiny_cli.errors import ConfigError
from tiny_cli.routing.tooltexts import mcp_definitions, mcp_tool_lists, save_mcp_tools
from tiny_cli.secrets import MIN_SERVER_SECRET_CHARS, Scrubber
from tiny_cli.settings import Settings
from tiny_cli.tools.mcp_config import (
    MCP_FILENAMES,
    McpConfig,
    McpServer,
    load_mcp_config,
    mcp_path,
    mcp_settings,
    original,
    qualified,
)
from tiny_cli.tools.mcp_hosts import HostServers, Lifted, merge_mcp_yaml, read_host_config
from tiny_cli.tools.mcp_listing import LIST_SECONDS, ListedTool, Listing, list_servers
from tiny_cli.tools.mcp_tools import McpTools
from tiny_cli.userfiles import write_text
from tiny_cli.workspace import open_cards

__all__ = [
    "CardChange",
    "ImportReport",
    "ServerAge",
    "ServerResult",
    "SyncReport",
    "connect_problems",
    "import_cards",
    "sync_tool_lists",
]

CONNECT_SECONDS = 30.0  # `tiny validate --connect`: how long a server may take to start
Status = Literal["ok", "behind", "unreachable"]
Action = Literal["added", "updated", "unchanged", "removed", "kept"]
CHANGES: tuple[Action, ...] = ("added", "updated", "removed")


@dataclass(frozen=True)
class CardChange:
    """What import did (or, with `check`, would do) to one card file."""

    card_id: str
    server: str
    file: Path
    action: Action  # `kept`: edited by someone, left as it is
    tools: tuple[str, ...]  # qualified names
    writes: bool
    note: str = ""
    missing: tuple[str, ...] = ()  # `kept`: tools it lists that the server no longer has
    text: str = field(default="", repr=False)  # the card file to write (added, updated)


@dataclass(frozen=True)
class ServerResult:
    """One server: its tools, or why it could not be read."""

    server: str
    status: Literal["ok", "unreachable", "skipped", "new"]  # new: not in mcp.yaml yet (check)
    tools: int = 0
    writers: int = 0
    why: str = ""


@dataclass(frozen=True)
class ImportReport:
    """What `tiny cards import` found and did."""

    status: Status
    mcp_file: Path
    servers: tuple[ServerResult, ...]
    cards: tuple[CardChange, ...]
    lifted: tuple[Lifted, ...] = ()
    carried: tuple[str, ...] = ()  # servers added to mcp.yaml
    checked: bool = False  # `check`: nothing was written
    card_tools: int = CARD_TOOLS

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON document (`--json`)."""
        return {
            "status": self.status,
            "checked": self.checked,
            "mcp_file": str(self.mcp_file),
            "card_tools": self.card_tools,
            "servers": [vars(s) for s in self.servers],
            "cards": [_card_json(c) for c in self.cards],
            "set": [vars(v) for v in self.lifted],
            "carried": list(self.carried),
        }


def _card_json(change: CardChange) -> dict[str, Any]:
    fields = {k: v for k, v in vars(change).items() if k != "text"}
    return {**fields, "file": str(change.file), "tools": list(change.tools),
            "missing": list(change.missing)}  # fmt: skip


def import_cards(
    settings: Settings,
    source: Path | None = None,
    check: bool = False,
    environ: Mapping[str, str] | None = None,
    seconds: float = LIST_SECONDS,
) -> ImportReport:
    """Make or refresh the cards of the MCP servers (of `source`, a host config, or mcp.yaml)."""
    # with `check`, write nothing and say whether the cards are behind
    cards_dir = settings.own_cards_dir()
    mcp_file = (
        mcp_path(cards_dir, settings.mcp_file, settings.origin("mcp_file"))
        or cards_dir / MCP_FILENAMES[0]
    )
    host = read_host_config(source, mcp_file) if source is not None else None
    carried: list[str] = []
    if host is not None and not check:
        _make_folder(mcp_file.parent)
        carried = merge_mcp_yaml(mcp_file, host.servers)
    config = load_mcp_config(mcp_file) if mcp_file.is_file() else None
    declared = dict(config.servers) if config is not None else {}
    wanted = list(host.servers) if host is not None else list(declared)
    results = [ServerResult(n, "skipped", why=w) for n, w in (host.skipped if host else ())]
    results += [
        ServerResult(n, "new", why=f"not in {mcp_file} yet (import without --check)")
        for n in wanted
        if n not in declared
    ]
    environ = {**(os.environ if environ is None else environ), **(host.values if host else {})}
    listings = list_servers([declared[n] for n in wanted if n in declared], environ, seconds)
    changes = _changes(cards_dir, listings)
    results += [_result(listing) for listing in listings]
    if not check:
        _apply(changes)
        _save_descriptions(settings.cache_dir, listings, host, declared)
    # a secret of a server mcp.yaml already declared was not written: there is nothing to set
    lifted = tuple(x for x in (host.lifted if host else ()) if x.server in carried)
    return ImportReport(
        _status(results, changes, check), mcp_file, tuple(results), tuple(changes),
        lifted, tuple(carried), check,
    )  # fmt: skip


def _make_folder(folder: Path) -> None:
    """Make the cards folder mcp.yaml goes in; ConfigError naming it where it cannot be one."""
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{folder}: the cards folder is a file, not a folder", path=folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{folder}: cannot make the cards folder ({exc.strerror})") from None


def _status(results: Sequence[ServerResult], changes: Sequence[CardChange], check: bool) -> Status:
    """`unreachable` when a server could not be read; with `check`, `behind` when a card
    would change, an edited card names a tool that is gone, or a server is not carried yet."""
    if any(r.status == "unreachable" for r in results):
        return "unreachable"
    new = any(r.status == "new" for r in results)
    behind = new or any(c.action in CHANGES or c.missing for c in changes)
    return "behind" if check and behind else "ok"


def _result(listing: Listing) -> ServerResult:
    if listing.status != "ok":
        return ServerResult(listing.server, "unreachable", why=listing.why)
    usable = [t for t in listing.tools if _usable(listing.server, t)]
    writers = sum(t.writes for t in usable)
    return ServerResult(listing.server, "ok", len(usable), writers, _left_out(listing))


def _usable(server: str, tool: ListedTool) -> bool:
    """Tell whether a tool can be in a card: a name a card can write, a schema calls can run."""
    return _named(server, tool) and not tool.problem


def _named(server: str, tool: ListedTool) -> bool:
    return qualified(f"{server}.{tool.name}") is not None


def _left_out(listing: Listing) -> str:
    """Say which tools are left out of the cards and why; '' for none."""
    unnamed = sum(not _named(listing.server, t) for t in listing.tools)
    broken = [t for t in listing.tools if _named(listing.server, t) and t.problem]
    why = [f"{unnamed} tool name(s) cannot be a card's SERVER.TOOL"] if unnamed else []
    if broken:
        more = f" (and {len(broken) - 1} tool(s) more)" if len(broken) > 1 else ""
        why.append(f"tool {broken[0].name}: {broken[0].problem}{more}")
    return "; ".join(why) + "; left out" if why else ""


def _changes(cards_dir: Path, listings: Sequence[Listing]) -> list[CardChange]:
    """Plan every card file's change, server by server; unreachable servers keep theirs."""
    existing = _generated(cards_dir)
    names = _card_names(cards_dir)
    taken = set().union(*names.values())  # file names and ids no plan may take...
    changes: list[CardChange] = []
    for listing in listings:
        if listing.status == "ok":
            mine = [g for g in existing if g.server == listing.server]
            taken -= _only(names, {g.path for g in mine if not g.edited})  # ...but its own
            changes += _server_changes(cards_dir, listing, mine, taken)
    return changes


def _server_changes(
    cards_dir: Path, listing: Listing, mine: list[Generated], taken: set[str]
) -> list[CardChange]:
    """One server's cards: edited ones kept, the rest made again from its tools now."""
    scrub = Scrubber(listing.secrets, min_chars=MIN_SERVER_SECRET_CHARS)
    tools = [
        replace(t, description=scrub.text(t.description))
        for t in listing.tools
        if _usable(listing.server, t)
    ]
    have = {t.name for t in tools}
    edited = [g for g in mine if g.edited]
    claimed = {
        q.split(".", 1)[1] for g in edited for q in g.listed if q.startswith(f"{listing.server}.")
    }
    writers = {t.name for t in tools if t.writes}
    changes = [_kept(g, listing.server, have, writers) for g in edited]
    fresh = {g.path.stem: g for g in mine if not g.edited}
    kept = {stem: g.tools for stem, g in fresh.items()}
    planned = plan_cards(listing.server, [t for t in tools if t.name not in claimed], kept)
    for plan in _free_ids(planned, taken):
        changes.append(_change(cards_dir, plan, fresh.pop(plan.id, None)))
    for gone in fresh.values():
        qualified_tools = tuple(f"{gone.server}.{t}" for t in gone.tools)
        changes.append(
            CardChange(gone.card_id, gone.server, gone.path, "removed", qualified_tools, False)
        )
    return changes


def _kept(card: Generated, server: str, have: set[str], writers: set[str]) -> CardChange:
    """An edited card, kept: writing if it says so (or, where it cannot be read, if a tool it
    lists writes on the server)."""
    names = [q.split(".", 1)[1] for q in card.listed if q.startswith(f"{server}.")]
    missing = tuple(f"{server}.{n}" for n in names if n not in have)
    gone = f"; it lists {', '.join(missing)}, which the server no longer has" if missing else ""
    writes = card.writes if card.writes is not None else any(n in writers for n in names)
    return CardChange(
        card.card_id, server, card.path, "kept", card.listed, writes,
        f"edited, so kept{gone}", missing,
    )  # fmt: skip


def _free_ids(plans: list[CardPlan], taken: set[str]) -> list[CardPlan]:
    """Give a plan whose file name is someone else's card the next free id (`taken`: casefolded)."""
    free = []
    for plan in plans:
        card_id, n = plan.id, 2
        while card_id.casefold() in taken:
            card_id, n = f"{plan.id}-{n}", n + 1
        taken.add(card_id.casefold())
        free.append(replace(plan, id=card_id))
    return free


def _change(cards_dir: Path, plan: CardPlan, before: Generated | None) -> CardChange:
    """A plan's card: in the file it was in before (renamed `.yml` by someone too), else new."""
    path = before.path if before is not None else cards_dir / f"{plan.id}.yaml"
    text = card_text(plan)
    same = before is not None and path.is_file() and path.read_text(encoding="utf-8") == text
    action: Action = "unchanged" if same else "updated" if before is not None else "added"
    qualified_tools = tuple(plan.qualified)
    return CardChange(plan.id, plan.server, path, action, qualified_tools, plan.writes, text=text)


def _apply(changes: Sequence[CardChange]) -> None:
    """Write the added and updated cards, delete the removed ones."""
    for change in changes:
        if change.action in ("added", "updated"):
            change.file.parent.mkdir(parents=True, exist_ok=True)
            write_text(change.file, change.text)
        elif change.action == "removed":
            change.file.unlink(missing_ok=True)


def _generated(cards_dir: Path) -> list[Generated]:
    if not cards_dir.is_dir():
        return []
    paths = sorted(p for p in cards_dir.glob("*.y*ml") if p.name not in MCP_FILENAMES)
    found = (read_generated(p) for p in paths)
    return [g for g in found if g is not None]


def _card_names(cards_dir: Path) -> dict[Path, set[str]]:
    """Each card file's name and id, YAML and Markdown alike, casefolded: on a filesystem
    that ignores case, `Slack.yaml` is the file `slack.yaml` would replace."""
    if not cards_dir.is_dir():
        return {}
    paths = list_cards([cards_dir]).paths
    return {p: {p.stem.casefold(), (card_id(p) or p.stem).casefold()} for p in paths}


def _only(names: dict[Path, set[str]], own: set[Path]) -> set[str]:
    """The names only the files `own` hold: a plan may take them, but no other card's."""
    others = set().union(*(n for path, n in names.items() if path not in own))
    return set().union(*(names.get(path, set()) for path in own)) - others


def _save_descriptions(
    cache_dir: Path,
    listings: Sequence[Listing],
    host: HostServers | None,
    declared: Mapping[str, McpServer],
) -> None:
    """Keep every listed tool's description where routes read them (the cache dir)."""
    secrets = [
        *(host.values.values() if host else ()),
        *(v for one in listings for v in one.secrets),
    ]
    listed = {
        one.server: {f"{one.server}.{tool.name}": tool.description for tool in one.tools}
        for one in listings
        if one.status == "ok"
    }
    _save_listed(cache_dir, listed, mcp_definitions(declared), secrets)


# --- sync ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerAge:
    """One server of mcp.yaml: how many of its tools routing knows, and how old that list is."""

    server: str
    tools: int
    age_seconds: float | None  # None: never listed


@dataclass(frozen=True)
class SyncReport:
    """What `tiny cards sync` refreshed, and what it found wrong."""

    status: Literal["ok", "problems"]
    servers: tuple[ServerAge, ...] = ()
    problems: tuple[Problem, ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        """The report as one JSON document (`--json`)."""
        return {
            "status": self.status,
            "servers": [vars(s) for s in self.servers],
            "problems": [str(p) for p in self.problems],
        }


def sync_tool_lists(settings: Settings, now: float | None = None) -> SyncReport:
    """Refresh the tool lists routing keeps for the servers cards name; say how old each is."""
    cards = list(open_cards(settings).values())  # a card naming an MCP tool needs mcp.yaml
    mcp = mcp_settings(settings)
    if mcp is None:
        return SyncReport("ok")
    problems = connect_problems(cards, mcp, cache_dir=settings.cache_dir)
    now = time.time() if now is None else now
    tools, ages = mcp_tool_lists(settings.cache_dir, now, mcp_definitions(mcp.servers))
    # a server started now replaced its kept list: its count is of the tools it returned
    servers = tuple(
        ServerAge(name, sum(1 for t in tools if t.startswith(f"{name}.")), ages.get(name))
        for name in mcp.servers
    )
    return SyncReport("problems" if problems else "ok", servers, tuple(problems))


def connect_problems(
    cards: Sequence[Card],
    mcp: McpConfig,
    seconds: float = CONNECT_SECONDS,
    source: McpTools | None = None,
    cache_dir: Path | None = None,
) -> list[Problem]:
    """Start the servers the cards name; a problem for each tool missing or not allowed."""
    # `source` defaults to this process's sessions of `mcp`; routes read the descriptions kept
    source = source or McpTools(mcp)
    problems = []
    for card in cards:
        file = str(card.path) if card.path else card.id
        names = [original(t) for t in card.tools]  # as the card writes them
        for found in source.check(card.tools, card.writes, seconds):
            where = ("tools", found.index)
            line = field_line(card.path, where, names) if card.path else None
            problems.append(Problem(file, line, f"tools[{found.index}]", found.message))
    if cache_dir is not None:  # its sessions redacted their variables
        _save_listed(cache_dir, source.listed(), mcp_definitions(mcp.servers))
    return problems


def _save_listed(
    cache_dir: Path,
    listed: Mapping[str, Mapping[str, str]],
    definitions: Mapping[str, str],
    secrets: Sequence[str] = (),
) -> None:
    """Keep each server's tools (server -> `server.tool` -> description), scrubbed of `secrets`
    and key shapes: a server listed replaces its kept list, one with no tools too."""
    scrub = Scrubber(secrets, min_chars=MIN_SERVER_SECRET_CHARS)
    tools = {name: scrub.text(text) for one in listed.values() for name, text in one.items()}
    if listed:
        save_mcp_tools(cache_dir, tools, servers=list(listed), definitions=definitions)
