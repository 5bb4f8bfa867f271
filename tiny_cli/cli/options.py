"""The options several commands share, as Annotated aliases: one name, one help text."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

CardsOpt = Annotated[
    Path | None,
    typer.Option("--cards", help="Cards directory [env TINY_CARDS; default ./cards]."),
]
ToolsOpt = Annotated[
    str | None,
    typer.Option("--tools", help="Your tool module: a .py path or dotted name [env TINY_TOOLS]."),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print one JSON document, nothing else.")]
BaseUrlOpt = Annotated[
    str | None,
    typer.Option(
        "--base-url",
        help="OpenAI-compatible endpoint [env TINY_BASE_URL; default "
        "http://127.0.0.1:11434/v1, Ollama].",
    ),
]
ModelOpt = Annotated[
    str | None, typer.Option("--model", help="Model name [env TINY_MODEL > card > default].")
]
MustReturnOpt = Annotated[
    str | None, typer.Option("--must-return", help="Extra fields to return, comma-separated.")
]
InputOpt = Annotated[
    list[str] | None, typer.Option("--input", help="An input as key=value; repeatable.")
]
HintOpt = Annotated[str | None, typer.Option("--hint", help="Context hint, cut to 800 characters.")]
MaxTokensOpt = Annotated[
    int | None,
    typer.Option(
        "--max-output-tokens", min=16, help="Lower the card's token budget (never raise)."
    ),
]
RecordOpt = Annotated[
    Path | None,
    typer.Option("--record", help="Store every model exchange in FILE (JSONL) for --replay."),
]
ReplayOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--replay",
        help="Answer from a --record FILE instead of the model server; repeatable "
        "(recordings of one model, answered from together).",
    ),
]
ResumeOpt = Annotated[
    list[Path] | None,
    typer.Option(
        "--resume",
        help="With --record: reuse the answers an earlier recording (or its .partial) holds "
        "for the same runs and ask the model only the rest; repeatable.",
    ),
]
AllowHostOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--allow-host",
        metavar="HOST[:PORT]",
        help="A host or host:port the web tools may fetch besides public addresses "
        "(loopback, private network); repeatable [env TINY_ALLOW_HOSTS, comma-separated].",
    ),
]
ToolModeOpt = Annotated[
    str | None,
    typer.Option(
        "--tool-mode",
        metavar="native|json|auto",
        help="How the model calls tools: OpenAI tool_calls, a json_schema-constrained reply, "
        "or native switching to json on calls written as text [env TINY_TOOL_MODE; "
        "else the card's tool_mode; default auto].",
    ),
]
WallScaleOpt = Annotated[
    float | None,
    typer.Option(
        "--wall-scale",
        metavar="FACTOR",
        help="Multiply every card's max_wall_seconds, e.g. 3 for a slow CPU server "
        "[env TINY_WALL_SCALE; default 1].",
    ),
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="Show no live view of the run on stderr.")
]
NoLogOpt = Annotated[
    bool,
    typer.Option("--no-log", help="Keep this command out of the run log [env TINY_NO_LOG=1]."),
]
ArtifactOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--artifact",
        metavar="HANDLE",
        help="An earlier stored tool result the agent may read (read_artifact); repeatable.",
    ),
]
BriefOpt = Annotated[
    Path | None, typer.Option("--brief", help="Read the Brief from a YAML or JSON file.")
]
YesOpt = Annotated[
    bool,
    typer.Option(
        "--yes",
        "-y",
        help="Approve every write call of this command (each is listed in the Digest). "
        "Without it each write is asked at the terminal; with no terminal or --json, "
        "a writer card stops with needs_confirmation.",
    ),
]
WideOpt = Annotated[
    bool,
    typer.Option("--wide", help="Print tables whole, names uncut, however wide the terminal."),
]
