"""Build the real-MCP routing dev set in benchmarks/data/mcpbench from MCP-Bench's repository.

MCP-Bench (Accenture/mcp-bench, Apache-2.0) ships 28 real MCP servers' sources and the tasks
its authors wrote for them. This script reads the repository as a git directory at a pinned
commit (`git archive`), extracts every server's tool list from its source without running
anything (Python: functions decorated `@<x>.tool`, and `types.Tool(...)` literals; JS/TS:
`<x>.tool("name", "description", {...})`, `{name, description, inputSchema}` objects and
`NAME` / `DESCRIPTION` constants), and writes one card per server (`functions:` with name,
description and the parameters' names) plus `tasks.jsonl`. Five servers have no card: their
tasks must abstain (the convention of HWU64's cardless scenarios). A task that needs several
servers counts as right on any of them (`acceptable`), like BFCL's shared functions.
Run: `python benchmarks/mcpbench_data.py --repo PATH` (a clone of Accenture/mcp-bench).
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).resolve().parent / "data" / "mcpbench"
COMMIT = "09e52332b22428bf891be59047e01cb9adc063b4"
TASK_FILES = ("single", "multi_2server", "multi_3server")
# Servers whose cards are left out: their tasks are the set's out-of-scope tasks. Chosen as
# the servers no other server overlaps (no second car, fruit, film, game or divination card).
NO_CARD = ("Bibliomantic", "Car Price Evaluator", "FruityVice", "Game Trends", "Movie Recommender")
# server → (folder under mcp_servers, the source files or folders that declare its tools)
SOURCES: dict[str, tuple[str, tuple[str, ...]]] = {
    "OpenAPI Explorer": ("openapi-mcp-server", ("index.js",)),
    "Unit Converter": ("unit-converter-mcp", ("src/unit_converter_mcp/server.py",)),
    "Wikipedia": ("wikipedia-mcp", ("wikipedia_mcp/server.py",)),
    "Google Maps": ("mcp-google-map", ("src/tools/maps",)),
    "Bibliomantic": ("bibliomantic-mcp-server", ("enhanced_bibliomantic_server.py",)),
    "BioMCP": (
        "biomcp",
        ("src/biomcp/individual_tools.py", "src/biomcp/router.py", "src/biomcp/thinking_tool.py"),
    ),
    "Call for Papers": ("call-for-papers-mcp", ("call-for-papers-mcp-main/server.py",)),
    "Car Price Evaluator": ("car-price-mcp-main", ("server.py",)),
    "Context7": ("context7-mcp", ("src/index.ts",)),
    "DEX Paprika": ("dexpaprika-mcp", ("src/index.js",)),
    "FruityVice": ("fruityvice-mcp", ("server.py",)),
    "Game Trends": ("game-trends-mcp", ("server.py",)),
    "Huge Icons": ("hugeicons-mcp-server", ("src/index.ts",)),
    "Hugging Face": ("huggingface-mcp-server", ("src/huggingface/server.py",)),
    "Math MCP": ("math-mcp", ("src/index.ts",)),
    "NixOS": ("mcp-nixos", ("mcp_nixos/server.py",)),
    "OSINT Intelligence": ("mcp-osint-server", ("mcp_osint_server/mcp_osint_server/main.py",)),
    "Reddit": ("mcp-reddit", ("src/mcp_reddit/reddit_fetcher.py",)),
    "National Parks": ("mcp-server-nationalparks", ("src/server.ts",)),
    "Medical Calculator": ("medcalc", ("medcalc/__main__.py",)),
    "Metropolitan Museum": ("metmuseum-mcp", ("src/tools",)),
    "Movie Recommender": ("movie-recommender-mcp", ("movie-reccomender-mcp/server.py",)),
    "NASA Data": ("nasa-mcp", ("src/nasa_mcp/server.py",)),
    "OKX Exchange": ("okx-mcp", ("src/index.ts",)),
    "Paper Search": ("paper-search-mcp", ("paper_search_mcp/server.py",)),
    "Scientific Computing": ("scientific_computation_mcp", ("src",)),
    "Weather Data": ("weather_mcp", ("server.py",)),
}
# Time MCP's source is a submodule MCP-Bench does not hold: modelcontextprotocol/servers'
# `src/time` (MIT), whose two tools are written out here as that server declares them.
TIME_TOOLS = [
    {"name": "get_current_time",
     "description": "Get current time in a specific timezones",
     "parameters": {"type": "object", "properties": {"timezone": {"type": "string"}},
                    "required": ["timezone"]}},
    {"name": "convert_time",
     "description": "Convert time between timezones",
     "parameters": {"type": "object", "properties": {"source_timezone": {"type": "string"},
                    "time": {"type": "string"}, "target_timezone": {"type": "string"}},
                    "required": ["source_timezone", "time", "target_timezone"]}},
]  # fmt: skip
# MCP-Bench's generator ends 66 of the 104 user-facing tasks with this same text; it is the
# generator's, not the user's, and says nothing about which server a task needs
BOILERPLATE = (
    "Please ensure all findings are supported by concrete data and verifiable sources. "
    "I need specific numbers and evidence, not generalizations."
)
MAX_DESCRIPTION = 600  # characters of a tool's description kept: its first paragraphs
SCHEMA_TYPES = {"str": "string", "int": "integer", "float": "number", "bool": "boolean",
                "list": "array", "dict": "object"}  # fmt: skip


def archive(repo: Path, paths: list[str]) -> dict[str, str]:
    """The text of every file under `paths` at COMMIT, by path."""
    done = subprocess.run(
        ["git", "--git-dir", str(repo), "archive", COMMIT, *paths], capture_output=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"{repo}: git archive {COMMIT}: {done.stderr.decode().strip()}")
    files = {}
    with tarfile.open(fileobj=io.BytesIO(done.stdout)) as tar:
        for member in tar.getmembers():
            handle = tar.extractfile(member) if member.isfile() else None
            if handle is not None:
                files[member.name] = handle.read().decode("utf-8", "replace")
    return files


def clean(text: str) -> str:
    """A description as one line: its paragraphs before an Args/Returns section, trimmed."""
    text = re.split(r"\n\s*(?:Args|Arguments|Parameters|Returns|Example)s?:", text)[0]
    text = " ".join(text.split())
    return text if len(text) <= MAX_DESCRIPTION else text[:MAX_DESCRIPTION].rsplit(" ", 1)[0]


def python_tools(source: str) -> Iterator[dict[str, Any]]:
    """Tools a Python MCP server declares: decorated functions and `Tool(...)` literals."""
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            decorator = next((d for d in node.decorator_list if _is_tool(d)), None)
            if decorator is not None:
                yield _decorated(node, decorator)
        elif isinstance(node, ast.Call) and _name(node.func) == "Tool":
            found = {k.arg: k.value for k in node.keywords if k.arg}
            if "name" in found and "description" in found:
                yield _literal_tool(found)


def _is_tool(decorator: ast.expr) -> bool:
    func = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(func, ast.Attribute) and func.attr == "tool"


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _decorated(node: ast.FunctionDef | ast.AsyncFunctionDef, decorator: ast.expr) -> dict[str, Any]:
    given = {}
    if isinstance(decorator, ast.Call):
        given = {k.arg: _constant(k.value) for k in decorator.keywords if k.arg}
    properties = {
        arg.arg: {"type": _type(arg.annotation)}
        for arg in node.args.args + node.args.kwonlyargs
        if arg.arg not in ("self", "ctx", "context")
    }
    description = given.get("description") or ast.get_docstring(node) or ""
    return {
        "name": given.get("name") or node.name,
        "description": clean(str(description)),
        "parameters": {"type": "object", "properties": properties},
    }


def _literal_tool(found: dict[str, ast.expr]) -> dict[str, Any]:
    try:
        schema = ast.literal_eval(found["inputSchema"]) if "inputSchema" in found else {}
    except ValueError:
        schema = {}
    properties = schema.get("properties", {}) if isinstance(schema, dict) else {}
    return {
        "name": str(_constant(found["name"])),
        "description": clean(str(_constant(found["description"]) or "")),
        "parameters": {"type": "object", "properties": {
            k: {"type": v.get("type", "string")} for k, v in properties.items()}},
    }  # fmt: skip


def _constant(node: ast.expr) -> Any:
    try:
        return ast.literal_eval(node)
    except ValueError:
        return None


def _type(annotation: ast.expr | None) -> str:
    text = ast.unparse(annotation) if annotation is not None else "str"
    base = re.sub(r"^(?:Annotated|Optional)\[", "", text).split("[")[0].split("|")[0].strip()
    return SCHEMA_TYPES.get(base, "string")


# --- JavaScript / TypeScript --------------------------------------------------------------

_STRING = r"(?:'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"|`[^`]*`)"
_JOINED = rf"{_STRING}(?:\s*\+\s*{_STRING})*"
_TS_PATTERNS = (
    # server.tool("name", "description", { params }, ...)
    re.compile(rf"\.tool\(\s*(?P<name>{_STRING})\s*,\s*(?P<description>{_JOINED})\s*,\s*(?P<rest>\{{)"),
    # { name: "x", description: "y", inputSchema: ... }
    re.compile(rf"\bname\s*:\s*(?P<name>{_STRING})\s*,\s*description\s*:\s*(?P<description>{_JOINED})(?P<rest>)"),
    # class fields: name: string = 'x'; description: string = '...'
    re.compile(rf"\bname\s*:\s*string\s*=\s*(?P<name>{_STRING});\s*(?:public\s+readonly\s+)?"
               rf"description\s*:\s*string\s*=\s*(?P<description>{_JOINED})(?P<rest>)"),
    # const NAME = "x"; const DESCRIPTION = "y"; const SCHEMA = { params }
    re.compile(rf"const NAME\s*=\s*(?P<name>{_STRING});\s*"
               rf"const DESCRIPTION\s*=\s*(?P<description>{_JOINED})(?P<rest>)"),
)  # fmt: skip


def script_tools(source: str) -> Iterator[dict[str, Any]]:
    """Tools a JS/TS MCP server declares, with the parameters' names where they are literal."""
    for pattern in _TS_PATTERNS:
        for match in pattern.finditer(source):
            after = source[match.end() - (1 if match["rest"] else 0) :]
            yield {
                "name": _js_string(match["name"]),
                "description": clean(_js_string(match["description"])),
                "parameters": {"type": "object",
                               "properties": {k: {"type": "string"} for k in _params(after)}},
            }  # fmt: skip


def _js_string(expr: str) -> str:
    return "".join(
        bytes(s[1:-1], "utf-8").decode("unicode_escape", "replace") if s[0] != "`" else s[1:-1]
        for s in re.findall(_STRING, expr)
    )


def _params(after: str) -> list[str]:
    """The top-level keys of the parameters object that follows a tool's description."""
    head = re.match(r"\s*\{|[\s\S]{0,400}?(?:properties\s*:|z\.object\(|SCHEMA\s*=)\s*\{", after)
    if head is None:
        return []
    depth, keys, start = 1, [], head.end()
    for match in re.finditer(r"[{}]|(?:^|[,{])\s*(\w+)\s*:", after[start:], re.M):
        if match.group(0) == "{":
            depth += 1
        elif match.group(0) == "}":
            depth -= 1
            if depth == 0:
                break
        elif depth == 1 and match.group(1):
            keys.append(match.group(1))
    return keys


# --- cards and tasks ----------------------------------------------------------------------


def server_tools(files: dict[str, str], server: str) -> list[dict[str, Any]]:
    """Every tool a server's sources declare, each name once (its first declaration)."""
    if server == "Time MCP":
        return TIME_TOOLS
    folder, parts = SOURCES[server]
    tools: dict[str, dict[str, Any]] = {}
    for path, text in sorted(files.items()):
        if not any(path.startswith(f"mcp_servers/{folder}/{p}") for p in parts):
            continue
        found = python_tools(text) if path.endswith(".py") else script_tools(text)
        for tool in found:
            if tool["name"] and not tool["name"].endswith(("-mcp", "-server", "mcp-server")):
                tools.setdefault(tool["name"], tool)
    return list(tools.values())


def descriptions(readme: str) -> dict[str, str]:
    """Each server's description as MCP-Bench's README lists it: "- [Name](url) - text"."""
    return {
        m[1]: m[2].strip() for m in re.finditer(r"^- \[([^\]]+)\]\([^)]+\) - (.+)$", readme, re.M)
    }


def card_id(server: str) -> str:
    """A server's card id: its name in lower case, words joined by hyphens."""
    return re.sub(r"[^a-z0-9]+", "-", server.lower()).strip("-")


def write_cards(files: dict[str, str], servers: list[str]) -> dict[str, int]:
    """One card per server with a card; return each card's tool count."""
    about = descriptions(files["README.md"])
    folder = OUT / "cards"
    folder.mkdir(parents=True, exist_ok=True)
    counts: dict[str, int] = {}
    taken: set[str] = set()
    for server in servers:
        if server in NO_CARD:
            continue
        tools = [_unique(tool, taken) for tool in server_tools(files, server)]
        card = {"id": card_id(server), "summary": f"{about[server]}.",
                "tools": [t["name"] for t in tools], "returns_required": [],
                "side_effects": "none", "functions": tools}  # fmt: skip
        text = yaml.safe_dump(card, sort_keys=False, allow_unicode=True, width=100)
        (folder / f"{card_id(server)}.yaml").write_text(text, "utf-8", newline="\n")
        counts[server] = len(tools)
    return counts


def _unique(tool: dict[str, Any], taken: set[str]) -> dict[str, Any]:
    """The tool, renamed `<name>_<n>` if an earlier card declares its name (as BFCL's cards
    do: one catalogue, one definition a name); `taken` gains its name."""
    name, n = tool["name"], 1
    while name in taken:
        n += 1
        name = f"{tool['name']}_{n}"
    taken.add(name)
    return {**tool, "name": name}


def task_rows(files: dict[str, str]) -> list[dict[str, Any]]:
    """Every task, by its user-facing wording, with the cards that may take it."""
    rows = []
    for name in TASK_FILES:
        data = json.loads(files[f"tasks/mcpbench_tasks_{name}_runner_format.json"])
        for group in data["server_tasks"]:
            servers = group.get("servers") or [group["server_name"]]
            right = [card_id(s) for s in servers if s not in NO_CARD]
            for task in group["tasks"]:
                text = task["fuzzy_description"].strip().removesuffix(BOILERPLATE).strip()
                rows.append({"task": text,
                             "expected_agent": right[0] if right else None,
                             "acceptable": right, "servers": servers,
                             "id": task["task_id"]})  # fmt: skip
    return rows


def main(argv: list[str] | None = None) -> int:
    """Write benchmarks/data/mcpbench/{cards/*.yaml,tasks.jsonl} from the pinned commit."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", required=True, type=Path, help="a clone of Accenture/mcp-bench")
    args = parser.parse_args(argv)
    paths = [
        "README.md",
        "tasks",
        *(f"mcp_servers/{f}/{p}" for f, ps in SOURCES.values() for p in ps),
    ]
    files = archive(args.repo, paths)
    servers = [*SOURCES, "Time MCP"]
    counts = write_cards(files, servers)
    rows = task_rows(files)
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    (OUT / "tasks.jsonl").write_text(lines, "utf-8", newline="\n")
    for server, count in counts.items():
        print(f"{server}: {count} tools")
    print(f"{sum(counts.values())} tools, {len(counts)} cards, {len(rows)} tasks "
          f"({sum(r['expected_agent'] is None for r in rows)} out of scope)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
