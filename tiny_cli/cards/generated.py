"""Cards `tiny cards import` wrote: their text, and what each was made from.

A generated card starts with two comment lines; the second holds its manifest as JSON (the
server, its tools, and a hash of the text below the header). A card whose text no longer has
that hash, or whose first line is not import's note, was edited: a later import keeps it.
Line ends are read as "\n" before the hash is taken: a card checked out with CRLF line ends
(git's autocrlf) is not an edited one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tiny_cli import userfiles
from tiny_cli.cards.grouping import CardPlan
from tiny_cli.errors import ConfigError
from tiny_cli.userfiles import read_text

__all__ = ["MARK", "Generated", "card_text", "read_generated"]

MARK = "# tiny-import: "
NOTE = (
    "# Made by `tiny cards import` from the MCP server {server}; edit freely: "
    "a card you edit is kept, never overwritten.\n"
)


@dataclass(frozen=True)
class Generated:
    """A card file `tiny cards import` wrote, read back."""

    path: Path
    card_id: str
    server: str
    tools: tuple[str, ...]  # as the manifest records them: names on the server
    edited: bool
    listed: tuple[str, ...]  # the qualified names the card allows now (an edit may change them)
    writes: bool | None = None  # `side_effects: write`, as the file says now; None: unreadable


def card_text(plan: CardPlan) -> str:
    """The card file for `plan`: the note, the manifest, the card."""
    card: dict[str, Any] = {
        "id": plan.id,
        "summary": plan.summary,
        "tools": plan.qualified,
        "returns_required": [],
        "side_effects": "write" if plan.writes else "none",
    }
    body = yaml.safe_dump(card, sort_keys=False, allow_unicode=True, width=100)
    manifest = {"server": plan.server, "tools": list(plan.tools), "sha256": _hash(body)}
    return NOTE.format(server=plan.server) + MARK + json.dumps(manifest) + "\n" + body


def read_generated(path: Path) -> Generated | None:
    """Read a card file's manifest; None for a card `tiny cards import` did not write."""
    try:
        text = read_text(path)
    except ConfigError:
        return None
    # "\n" line ends, as the hash was taken (the module's docstring says why)
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n", 2)
    if len(lines) < 3 or not lines[1].startswith(MARK):
        return None
    try:
        manifest = json.loads(lines[1][len(MARK) :])
        server, tools, digest = manifest["server"], manifest["tools"], manifest["sha256"]
    except (ValueError, KeyError, TypeError):
        return None
    body = lines[2]
    data = _card(body)
    card_id, listed = data.get("id"), data.get("tools")
    if not isinstance(listed, list):  # unreadable: the tools the manifest records
        listed = [f"{server}.{t}" for t in tools]
    return Generated(
        path,
        card_id if isinstance(card_id, str) and card_id else path.stem,
        str(server),
        tuple(map(str, tools)),
        edited=_hash(body) != digest or lines[0] + "\n" != NOTE.format(server=server),
        listed=tuple(map(str, listed)),
        writes=data.get("side_effects") == "write" if data else None,
    )


def _card(body: str) -> dict[str, Any]:
    """The card as the file says now; {} where it cannot be read as a mapping."""
    try:
        _, data = userfiles.load_yaml(body)
    except yaml.YAMLError:
        return {}
    return data if isinstance(data, dict) else {}


def _hash(body: str) -> str:
    return hashlib.sha256(body.encode("utf-8")).hexdigest()
