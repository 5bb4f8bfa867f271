"""The MCP host configurations the docs show: each, as written, serves the project's cards.

Every `mcpServers` JSON block of README.md and docs/mcp.md is taken as a host would take it:
`/path/to/your/project` becomes a project made by `tiny init`, and `tiny serve` is started
with exactly the block's command, args, env and cwd (plus a scratch TINY_HOME), through the
official MCP client. The test process runs in the repository, whose ./cards are the seed
cards: only the project file can have pointed the server at the project's card.
"""

from __future__ import annotations

import json
import re
import shutil
import sys
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters

from .conftest import REPO

PLACEHOLDER = "/path/to/your/project"
JSON_BLOCK = re.compile(r"^```json\n(.*?)^```", re.MULTILINE | re.DOTALL)
CALL_SECONDS = 60


def host_configs() -> list[tuple[str, str]]:
    """Return (where, JSON text) for every mcpServers block of the docs that registers tiny."""
    found = []
    for name in ("README.md", "docs/mcp.md"):
        text = (REPO / name).read_text(encoding="utf-8")
        for match in JSON_BLOCK.finditer(text):
            # a host's config that registers tiny (not one whose servers go behind it)
            if '"mcpServers"' in match.group(1) and '"tiny"' in match.group(1):
                line = text[: match.start()].count("\n") + 1
                found.append((f"{name}:{line}", match.group(1)))
    return found


def test_the_docs_show_both_ways_to_find_the_project() -> None:
    texts = [text for _, text in host_configs()]
    assert any('"cwd"' in t for t in texts) and any('"TINY_PROJECT"' in t for t in texts)


async def _card_ids(params: StdioServerParameters) -> list[str]:
    with anyio.fail_after(CALL_SECONDS):
        async with Client(params) as client:
            index = await client.read_resource("tiny://cards")
    return [card["id"] for card in json.loads(index.contents[0].text)]


@pytest.mark.slow
@pytest.mark.parametrize(("where", "text"), host_configs(), ids=[w for w, _ in host_configs()])
def test_a_documented_host_config_serves_the_projects_cards(
    where: str, text: str, tiny, tmp_path: Path
) -> None:
    project = tmp_path / "your" / "project"
    assert tiny("init", str(project)).exit_code == 0
    server = json.loads(text.replace(PLACEHOLDER, str(project)))["mcpServers"]["tiny"]
    assert "/path/to" not in json.dumps(server), f"{where}: a placeholder the test cannot fill"
    command = shutil.which(server["command"], path=str(Path(sys.executable).parent))
    assert command is not None, f"{where}: {server['command']!r} is not installed here"
    env = {**server.get("env", {}), "TINY_HOME": str(tmp_path / "home")}
    params = StdioServerParameters(
        command=command, args=server["args"], env=env, cwd=server.get("cwd")
    )
    assert anyio.run(_card_ids, params) == ["word-counter"]  # the project's card, not ./cards
