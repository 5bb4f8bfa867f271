"""A bench's making, kept in its recording: options, digests, and every routing decision.

A recording's header holds what made it: `bench` (the command's options, paths relative to the
recording, so `tiny bench --replay FILE` alone can replay it), `digests` (sha256 of the task file
and each card's file, so a replay can say what changed) and `routes` (each routing decision).

On replay the routing decisions come from the recording, never from the embedder: an
embedding's last digits differ between CPUs, and two cards in a near-tie would swap. A recording
without routes routes live; what its recorded requests offered wins over the live order.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Literal, get_args

from tiny_cli.cards.load import Card
from tiny_cli.errors import ConfigError
from tiny_cli.provider.replay import ExchangeSource
from tiny_cli.routing.examples_file import LEARNED_FILENAME
from tiny_cli.routing.factory import learned_file
from tiny_cli.session import RouteBook, RouteEntry
from tiny_cli.text import kind_of, printable
from tiny_cli.workspace import Workspace

__all__ = [
    "Place",
    "Prompt",
    "arm_flag",
    "as_offered",
    "cards_offering",
    "changed_since",
    "digests",
    "note_making",
    "offered_tools",
    "portable",
    "recorded_options",
]

Place = Literal["first", "last"]  # where --expected-tools puts the expected card's tools
Prompt = Literal["same", "card"]  # --prompt: every arm asks alike, or with the card's own

PATH_OPTIONS = ("tasks", "cards")  # options holding paths: kept relative to the recording
# every option a recording keeps, by the kinds its value may take: a header is a file, so
# nothing else in it (an output path, --record) ever becomes a command's default
RECORDED_OPTIONS: dict[str, tuple[type, ...]] = {
    **dict.fromkeys(("tasks", "cards", "arm", "all_tools_sizes", "prompt"), (str,)),
    **dict.fromkeys(("repeat", "sample", "irrelevance", "seed", "top_k", "context_tokens"), (int,)),
    **dict.fromkeys(("temperature", "hybrid_margin"), (int, float)),
    "expected_tools": (str,),
}
# an option whose value is one of a few words: a header's other word is the header's error
RECORDED_CHOICES: dict[str, tuple[str, ...]] = {
    "expected_tools": get_args(Place),
    "prompt": get_args(Prompt),
}
SHOWN_CHANGES = 3  # cards named in the one line that says what changed; the rest counted
TOOLS_LINE = re.compile(r"Tools you can call: (.*?)\. No other tool exists")


def offered_tools(exchange: Mapping[str, Any]) -> list[str]:
    """The tool names a recorded request offered, in order (native tools or the json prompt)."""
    body = exchange.get("body") or exchange.get("request") or {}
    names = [t.get("function", {}).get("name") for t in body.get("tools") or []]
    if names:
        return [str(n) for n in names]
    messages: list[dict[str, Any]] = body.get("messages") or []
    system = next((m for m in messages if m.get("role") == "system"), {})
    found = TOOLS_LINE.search(str(system.get("content") or ""))
    return [n.strip() for n in found.group(1).split(",")] if found else []


def cards_offering(tools: Sequence[str], cards: Mapping[str, Card]) -> list[str]:
    """The cards whose tools make up `tools`, in the order their tools come."""
    owner: dict[str, str] = {}
    for card in cards.values():
        for tool in card.tools:
            owner.setdefault(tool, card.id)
    return list(dict.fromkeys(owner[t] for t in tools if t in owner))


def as_offered(
    entry: RouteEntry, runs: Mapping[str, str], book: RouteBook, cards: Mapping[str, Card]
) -> RouteEntry:
    """Make a live decision agree with what the replayed recording's runs (`runs`, by arm:
    tiny, top-k, hybrid) offered."""
    ids = [card for card, _ in entry.candidates]
    one = _offered(book, runs.get("tiny"), cards)
    hybrid = _offered(book, runs.get("hybrid"), cards)
    if len(hybrid) == 1:  # a run offered one card: routing chose it (and hybrid was clear)
        one, entry = hybrid, replace(entry, clear=True)
    if len(one) == 1:
        entry = replace(entry, agent=one[0])
        ids = [one[0], *(i for i in ids if i != one[0])]
    ranked = _offered(book, runs.get("top-k"), cards)
    if len(hybrid) > 1:  # hybrid ran, so routing chose a card; not clearly: the top ones
        ranked = ranked or hybrid
        entry = replace(entry, agent=entry.agent or ranked[0], clear=False)
    ids = [*ranked, *(i for i in ids if i not in ranked)] if ranked else ids
    return replace(entry, candidates=_reordered(entry.candidates, ids))


def _offered(book: RouteBook, run: str | None, cards: Mapping[str, Card]) -> list[str]:
    exchange = book.first_exchange(run) if run is not None else None
    return cards_offering(offered_tools(exchange), cards) if exchange is not None else []


def _reordered(
    candidates: Sequence[tuple[str, float]], ids: Sequence[str]
) -> tuple[tuple[str, float], ...]:
    """The candidates in the order of `ids`; a card not scored gets the lowest score."""
    score = dict(candidates)
    lowest = min(score.values(), default=0.0)
    return tuple((i, score.get(i, lowest)) for i in ids)


def digests(tasks: Path, ws: Workspace) -> dict[str, Any]:
    """sha256 of the task file, each card's file and the learned examples (None: no file)."""
    learned = learned_file(ws.settings)
    return {
        "tasks": _sha(tasks),
        "cards": {c.id: _sha(c.path) for c in ws.cards.values() if c.path is not None},
        "learned": _sha(learned) if learned.is_file() else None,
    }


def arm_flag(arms: Sequence[str], every: Sequence[str]) -> str:
    """`--arm`'s value naming `arms` as a recording keeps it: both when they are `every` arm."""
    return "both" if arms == every else ",".join(arms)


def note_making(exchanges: ExchangeSource, tasks: Path, ws: Workspace, **options: Any) -> None:
    """Keep the options and the digests in the recording's header (if this run writes one)."""
    temperature = ws.settings.temperature
    flags = {"tasks": tasks, "cards": ws.settings.cards_dir, **options, "temperature": temperature}
    exchanges.note("bench", portable(flags, exchanges.written_to()))
    exchanges.note("digests", digests(tasks, ws))


def changed_since(recorded: Any, tasks: Path, ws: Workspace) -> str | None:
    """One line saying what changed since the recording (None: nothing, or nothing known)."""
    if not isinstance(recorded, dict):
        return None
    now = digests(tasks, ws)
    was: dict[str, Any] = recorded.get("cards") or {}
    parts = [f"the task file {tasks}"] if recorded.get("tasks") != now["tasks"] else []
    changed = sorted(k for k in {*was, *now["cards"]} if was.get(k) != now["cards"].get(k))
    if changed:
        shown = ", ".join(changed[:SHOWN_CHANGES])
        more = f" and {len(changed) - SHOWN_CHANGES} more" if len(changed) > SHOWN_CHANGES else ""
        parts.append(f"card(s) {shown}{more}")
    said = [f"{'; '.join(parts)}; runs that use them may not replay"] if parts else []
    # a recording made before the digests covered learned.jsonl has no such key: not known
    if "learned" in recorded and recorded["learned"] != now["learned"]:
        said.append(f"the cards folder's {LEARNED_FILENAME} (the replay routes as recorded)")
    return f"changed since the recording: {'; '.join(said)}" if said else None


def portable(options: Mapping[str, Any], recording: Path | None) -> dict[str, Any]:
    """The options with their paths relative to the recording's folder (as given if none)."""
    out = dict(options)
    for name in (n for n in PATH_OPTIONS if out.get(n) is not None):
        given = out[name]
        out[name] = str(given) if recording is None else _relative(Path(given), recording.parent)
    return out


def recorded_options(header: Mapping[str, Any], recording: Path) -> dict[str, Any]:
    """A recording's options as a command's defaults, its paths made absolute again."""
    options = header.get("bench")
    if not isinstance(options, dict):
        return {}
    out = {k: v for k, v in options.items() if v is not None}
    for name, value in out.items():
        _check_recorded(recording, name, value)
    for name in PATH_OPTIONS:
        if isinstance(out.get(name), str):
            out[name] = str((recording.parent / out[name]).resolve())
    return out


def _check_recorded(recording: Path, name: str, value: Any) -> None:
    """ConfigError naming the recording and the header field, unless it is an option of its
    kind (a bool is no number here)."""
    kinds = RECORDED_OPTIONS.get(str(name))
    where = f"{recording}: header bench.{printable(str(name))}"
    if kinds is None:
        raise ConfigError(f"{where}: not an option a recording keeps; remove it from the header")
    if isinstance(value, bool) or not isinstance(value, kinds):
        raise ConfigError(f"{where}: must be {kinds[0].__name__}, got {kind_of(value)}")
    choices = RECORDED_CHOICES.get(str(name))
    if choices is not None and value not in choices:
        raise ConfigError(f"{where}: must be one of {', '.join(choices)}, got {value!r}")


def _relative(path: Path, base: Path) -> str:
    try:
        return os.path.relpath(path.resolve(), base.resolve()).replace(os.sep, "/")
    except ValueError:  # another drive: no relative path exists
        return str(path.resolve())


def _sha(path: Path) -> str:
    """sha256 of a file with its line ends as \\n: a CRLF checkout (Git's autocrlf on Windows)
    changes no card and no task."""
    try:
        return hashlib.sha256(path.read_bytes().replace(b"\r\n", b"\n")).hexdigest()
    except OSError:
        return ""
