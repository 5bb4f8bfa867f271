"""`tiny serve`: the cards as an MCP server (the SDK loads only when this command runs)."""

from __future__ import annotations

from dataclasses import replace
from typing import Annotated

import typer

from tiny_cli.cli.common import (
    AllowHostOpt,
    BaseUrlOpt,
    CardsOpt,
    ModelOpt,
    NoLogOpt,
    ToolModeOpt,
    ToolsOpt,
    WallScaleOpt,
)
from tiny_cli.cli.run import RunOptions


def serve(
    http: Annotated[
        int | None,
        typer.Option("--http", metavar="PORT", help="Serve streamable HTTP on 127.0.0.1:PORT."),
    ] = None,
    allow_writes: Annotated[
        bool,
        typer.Option(
            "--allow-writes",
            help="Approve every write call. Without it a host that supports elicitation is "
            "asked per call; otherwise a writer card returns needs_confirmation.",
        ),
    ] = False,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    allow_hosts: AllowHostOpt = None,
    tool_mode: ToolModeOpt = None,
    wall_scale: WallScaleOpt = None,
    no_log: NoLogOpt = False,
) -> None:
    """Serve the cards to MCP hosts: delegate, invoke and route tools; cards as resources."""
    options = RunOptions(cards=cards, tools=tools, base_url=base_url, model=model,
                         allow_hosts=allow_hosts, tool_mode=tool_mode,
                         wall_scale=wall_scale)  # fmt: skip
    settings = options.settings()
    from tiny_cli.serve import serve as run_server  # the mcp SDK loads only here

    logged = replace(settings, log_runs=settings.log_runs and not no_log)
    run_server(logged, http_port=http, allow_writes=allow_writes)
