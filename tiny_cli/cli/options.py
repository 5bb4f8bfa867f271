"""The options several commands share: Annotated aliases (one name, one help text) and the
`RunOptions` value the commands that run cards (invoke, delegate, serve, bench) build from them.

Typer needs one parameter per option, so each command declares its own; it then builds its
`RunOptions` with keywords, never from `locals()` or a positional list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer

from tiny_cli.cli.common import settings_from
from tiny_cli.settings import Settings

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
TemperatureOpt = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        metavar="T",
        help="Sampling temperature sent with every request, 0 (greedy) to 2 [default: none "
        "sent, the server's own; a replay: the recording's].",
    ),
]
BenchTemperatureOpt = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        metavar="T",
        help="Sampling temperature sent with every request, 0 (greedy) to 2 [default: 0; "
        "a replay: the recording's, none for one made before tiny sent it].",
    ),
]
QuietOpt = Annotated[
    bool, typer.Option("--quiet", "-q", help="Show no live view of the run on stderr.")
]
NoLogOpt = Annotated[
    bool,
    typer.Option("--no-log", help="Keep this command out of the run log [env TINY_NO_LOG=1]."),
]
LogOpt = Annotated[
    bool, typer.Option("--log", help="Keep a replay in the run log too (a replay is not a run).")
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


@dataclass(frozen=True)
class RunOptions:
    """Where a command that runs cards finds them, their tools and the model; what it records.

    One value for invoke, delegate, serve and bench: each builds it, by keyword, from the
    options above (serve has no --record or --replay).
    """

    cards: Path | None = None
    tools: str | None = None
    base_url: str | None = None
    model: str | None = None
    allow_hosts: Sequence[str] | None = None
    tool_mode: str | None = None
    wall_scale: float | None = None
    temperature: float | None = None  # --temperature; None: the recording's, else none sent
    record: Path | None = None
    replay: Sequence[Path] | None = None
    no_log: bool = False
    log: bool = False  # --log: a replay is kept in the run log too (else it is not a run)

    def settings(self) -> Settings:
        """Return the settings (environment, then config) with these options on top.

        A replay runs with the recording's model, tool mode and temperature unless these name
        others.
        """
        from tiny_cli.provider.factory import replay_settings  # httpx: not for a route

        settings = settings_from(
            cards=self.cards,
            tools=self.tools,
            base_url=self.base_url,
            model=self.model,
            allow_hosts=self.allow_hosts,
        ).with_flags(
            tool_mode=self.tool_mode, wall_scale=self.wall_scale, temperature=self.temperature
        )
        return replay_settings(
            settings, record=self.record, replay=self.replay, model_flag=self.model
        )
