"""A raw MCP server over stdio: JSON-RPC lines, no SDK, so it starts fast and can misbehave in
ways the SDK's own servers cannot. Tests start it with `entry(OPTION ...)`.

python raw.py [OPTION ...]      words it does not know (a host config's own flags) are ignored

--name NAME       its name in the handshake, its tools' descriptions and its answers (raw)
--tool TOOL       serve TOOL: read-only, no arguments, described "NAME's TOOL"; repeatable
--tools FILE      serve the tools of the JSON list in FILE, read at each tools/list
--noise N         write N lines that are not JSON-RPC to stdout before the handshake
--deep N          answer each call with a result nested N deep
--leak-json       answer each call with {"token": $MY_API_KEY} as JSON text, as the SDK sends a dict
--hang            answer nothing
--dsn URL         exit 3 at once unless URL is DSN (a host config's URL with a password)
--refuse ARG ...  write "fatal: bad args ARG ..." to stderr and exit 2, as a server refusing them
--stderr-mb N     write N MB to stderr, then "NAME: last words", and exit 3
--leak-line N     write N x's then " token=$MY_API_KEY rest" to stderr and exit 3
--leak-tail N     write $MY_API_KEY to stderr, its middle N bytes from the end, and exit 3
Every call answers "server NAME ran TOOL" unless --leak-json or --deep says otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

DSN = "postgresql://admin:pa55%2Fword@localhost/db"


def entry(*args: str, **spec: Any) -> dict[str, Any]:
    """An mcp.yaml or host-config server entry that starts this server with `args`."""
    return {"command": sys.executable, "args": [str(Path(__file__).resolve()), *args], **spec}


def options(words: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False)
    parser.add_argument("--name", default="raw")
    parser.add_argument("--tool", action="append", default=[])
    parser.add_argument("--tools", type=Path)
    parser.add_argument("--dsn")
    parser.add_argument("--refuse", nargs=argparse.REMAINDER)
    for flag in ("--hang", "--leak-json"):
        parser.add_argument(flag, action="store_true")
    for number in ("--noise", "--deep", "--stderr-mb", "--leak-line", "--leak-tail"):
        parser.add_argument(number, type=int, default=0)
    parser.set_defaults(token=os.environ.get("MY_API_KEY", ""))
    return parser.parse_known_args(words)[0]


def last_words(opts: argparse.Namespace) -> Iterator[str]:
    """What the server writes to stderr before it exits 3."""
    if opts.stderr_mb:
        for _ in range(opts.stderr_mb * 1024):
            yield "x" * 1023 + "\n"
        yield f"{opts.name}: last words\n"
    if opts.leak_line:  # the secret straddles the cut of the line quoted
        yield "x" * opts.leak_line + " token=" + opts.token + " rest\n"
    if opts.leak_tail:  # the secret straddles the cut of the stderr tail kept
        yield "y" * 50 + opts.token + "z" * (opts.leak_tail - len(opts.token) // 2 - 1) + "\n"


def tools(opts: argparse.Namespace) -> list[dict[str, Any]]:
    if opts.tools:
        return json.loads(opts.tools.read_text(encoding="utf-8"))
    schema = {"type": "object", "properties": {}}
    return [
        {"name": t, "description": f"{opts.name}'s {t}", "inputSchema": schema,
         "annotations": {"readOnlyHint": True}}
        for t in opts.tool
    ]  # fmt: skip


def result(opts: argparse.Namespace, method: str, params: dict[str, Any]) -> dict[str, Any]:
    if method == "initialize":
        return {"protocolVersion": params["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": opts.name, "version": "1"}}  # fmt: skip
    if method == "tools/list":
        return {"tools": tools(opts)}
    if method == "tools/call":
        ran = f"server {opts.name} ran {params['name']}"
        text = json.dumps({"token": opts.token}) if opts.leak_json else ran
        return {"content": [{"type": "text", "text": text}]}
    return {}


def answer(opts: argparse.Namespace, request: dict[str, Any]) -> str:
    """The JSON-RPC line that answers `request`."""
    method = request.get("method", "")
    found = result(opts, method, request.get("params") or {})
    line = json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": found})
    if method == "tools/call" and opts.deep:  # nested too deep for json.dumps to write
        nested = "[" * opts.deep + "]" * opts.deep
        line = line[:-2] + ', "structuredContent": {"x": ' + nested + "}}}"
    return line


def main() -> None:
    opts = options(sys.argv[1:])
    if opts.dsn is not None and opts.dsn != DSN:
        sys.exit(3)
    if opts.hang:
        time.sleep(600)
    if opts.refuse is not None:
        sys.stderr.write("fatal: bad args " + " ".join(opts.refuse) + "\n")
        sys.exit(2)
    if opts.stderr_mb or opts.leak_line or opts.leak_tail:
        sys.stderr.writelines(last_words(opts))
        sys.stderr.flush()
        sys.exit(3)
    for i in range(opts.noise):  # lines that are not JSON-RPC, before the handshake
        print(f"noise {i}", flush=True)
    for line in sys.stdin:
        request = json.loads(line)
        if "id" in request:
            sys.stdout.write(answer(opts, request) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
