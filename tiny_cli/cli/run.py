"""`tiny invoke` and `tiny delegate`: run a card on a task, print its Digest, exit by its status."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from tiny_cli.agent.loop import Approve, approve_writes, decline_writes
from tiny_cli.cards.card import Card
from tiny_cli.cli.ask_route import ask_route, wants_answer
from tiny_cli.cli.common import (
    confirm,
    console,
    emit,
    run_session,
    stdin_is_terminal,
    wants_live,
)
from tiny_cli.cli.options import (
    AllowHostOpt,
    ArtifactOpt,
    BaseUrlOpt,
    BriefOpt,
    CardsOpt,
    HintOpt,
    InputOpt,
    JsonOpt,
    LogOpt,
    MaxTokensOpt,
    ModelOpt,
    MustReturnOpt,
    NoLogOpt,
    QuietOpt,
    RecordOpt,
    ReplayOpt,
    RunOptions,
    TemperatureOpt,
    ToolModeOpt,
    ToolsOpt,
    WallScaleOpt,
    YesOpt,
)
from tiny_cli.cli.process import EXIT_BY_STATUS
from tiny_cli.delegate import delegate as run_delegate
from tiny_cli.delegate import run_card
from tiny_cli.digest import Brief, Digest, make_brief
from tiny_cli.session import Session
from tiny_cli.settings import Settings
from tiny_cli.workspace import Workspace, open_workspace

TaskArg = Annotated[str | None, typer.Argument(help="The task (or the goal in --brief).")]
AskRouteOpt = Annotated[
    bool | None,
    typer.Option(
        "--ask-route/--no-ask-route",
        help="At a terminal, ask after the run whether the card was right, and record the "
        "answer for `tiny learn --from-runs` [env TINY_ASK_ROUTE=1; default off].",
    ),
]


@dataclass(frozen=True)
class RunFlags:
    """What invoke and delegate are given: the run's options, the Brief's parts, the face's."""

    options: RunOptions
    task: str | None = None
    brief_file: Path | None = None
    must_return: str | None = None  # comma-separated
    inputs: Sequence[str] = ()  # each key=value
    hint: str | None = None
    max_output_tokens: int | None = None
    yes: bool = False
    quiet: bool = False
    json_out: bool = False

    def brief(self) -> Brief:
        """Build the Brief: the --brief file, with the task and the other options on top."""
        pairs = dict(_pair(i) for i in self.inputs)
        fields = (self.must_return or "").split(",")
        return make_brief(
            self.task, fields, pairs, self.hint, self.max_output_tokens, file=self.brief_file
        )


@dataclass(frozen=True)
class Running:
    """What a run needs once its set-up is done: the workspace, the Brief, the session."""

    ws: Workspace
    brief: Brief
    session: Session
    approve: Approve


def invoke(
    card_id: Annotated[str, typer.Argument(help="The card to run.")],
    task: TaskArg = None,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    must_return: MustReturnOpt = None,
    inputs: InputOpt = None,
    hint: HintOpt = None,
    max_output_tokens: MaxTokensOpt = None,
    brief: BriefOpt = None,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    record: RecordOpt = None,
    replay: ReplayOpt = None,
    allow_host: AllowHostOpt = None,
    tool_mode: ToolModeOpt = None,
    wall_scale: WallScaleOpt = None,
    temperature: TemperatureOpt = None,
    yes: YesOpt = False,
    artifact: ArtifactOpt = None,
    quiet: QuietOpt = False,
    no_log: NoLogOpt = False,
    log: LogOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Run one card on a task in a fresh context under its budget; print the Digest."""
    options = RunOptions(cards=cards, tools=tools, base_url=base_url, model=model,
                         allow_hosts=allow_host, tool_mode=tool_mode, wall_scale=wall_scale,
                         temperature=temperature, record=record, replay=replay, no_log=no_log,
                         log=log)  # fmt: skip
    flags = RunFlags(options, task=task, brief_file=brief, must_return=must_return,
                     inputs=inputs or (), hint=hint, max_output_tokens=max_output_tokens,
                     yes=yes, quiet=quiet, json_out=json_out)  # fmt: skip

    with running("invoke", flags, handles=artifact or (), wanted=card_id) as run:
        digest = run_card(
            run.ws,
            card_id,
            run.brief,
            provider=run.session.provider("invoke", card_id),
            approve=run.approve,
            observer=run.session.observe("invoke"),
            artifacts=run.session.artifacts,
            handles=artifact or (),
        )
    show_digest(json_out, digest)


def delegate(
    task: TaskArg = None,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    yes: YesOpt = False,
    must_return: MustReturnOpt = None,
    inputs: InputOpt = None,
    hint: HintOpt = None,
    max_output_tokens: MaxTokensOpt = None,
    brief: BriefOpt = None,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    record: RecordOpt = None,
    replay: ReplayOpt = None,
    allow_host: AllowHostOpt = None,
    tool_mode: ToolModeOpt = None,
    wall_scale: WallScaleOpt = None,
    temperature: TemperatureOpt = None,
    ask_route: AskRouteOpt = None,
    quiet: QuietOpt = False,
    no_log: NoLogOpt = False,
    log: LogOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Route a task to the right card and run it; abstain, or ask before each write call."""
    options = RunOptions(cards=cards, tools=tools, base_url=base_url, model=model,
                         allow_hosts=allow_host, tool_mode=tool_mode, wall_scale=wall_scale,
                         temperature=temperature, record=record, replay=replay, no_log=no_log,
                         log=log)  # fmt: skip
    flags = RunFlags(options, task=task, brief_file=brief, must_return=must_return,
                     inputs=inputs or (), hint=hint, max_output_tokens=max_output_tokens,
                     yes=yes, quiet=quiet, json_out=json_out)  # fmt: skip

    with running("delegate", flags) as run:
        from tiny_cli.routing.factory import build_router  # only delegate routes (numpy)

        router = build_router(run.ws.settings, run.ws.cards.values())
        provider = run.session.provider("delegate", "routed card")
        digest = run_delegate(run.ws, router, run.brief, provider=provider, approve=run.approve,
                              observer=run.session.observe("delegate", run.brief.goal),
                              artifacts=run.session.artifacts)  # fmt: skip
        settings = run.ws.settings.with_flags(ask_route=ask_route)
        asked = run.session.recorded() if wants_answer(settings, json_out, digest) else []
    if not asked:
        show_digest(json_out, digest)
    candidates = [c.agent_id for c in router.route(run.brief.goal).candidates]
    _show_and_ask(settings, candidates, digest, asked[-1])


@contextmanager
def running(
    command: str, flags: RunFlags, handles: Sequence[str] = (), wanted: str | None = None
) -> Iterator[Running]:
    """Set a run up: settings, workspace (`wanted`: the card it needs), Brief, then the session."""
    settings = flags.options.settings()

    ws = open_workspace(settings, wanted=wanted)
    the_brief = flags.brief()
    with run_session(
        settings,
        command,
        record=flags.options.record,
        replay=flags.options.replay,
        no_log=flags.options.no_log,
        log_replay=flags.options.log,
        live=wants_live(flags.quiet, flags.json_out),
        handles=handles,
    ) as session:
        yield Running(ws, the_brief, session, _approver(flags.yes, flags.json_out))


def show_digest(json_out: bool, digest: Digest) -> NoReturn:
    """Print the Digest (JSON or a panel) and exit with its status's code."""
    emit(json_out, digest.to_json(), lambda: _panel(digest))
    raise typer.Exit(EXIT_BY_STATUS[digest.status])


def _panel(digest: Digest) -> None:
    """Print the Digest as a panel."""
    from tiny_cli.cli import render  # rich: a person's output only

    render.digest(console(), digest)


def _show_and_ask(
    settings: Settings, candidates: Sequence[str], digest: Digest, run_id: int
) -> NoReturn:
    """Print the Digest, ask whether the card was right (recorded), exit by its status."""
    _panel(digest)
    assert digest.routing is not None  # wants_answer checked
    ask_route(settings, run_id, digest.routing, candidates)
    raise typer.Exit(EXIT_BY_STATUS[digest.status])


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise typer.BadParameter(f"{text!r} is not key=value", param_hint="--input")
    return key.strip(), value.strip()


def _approver(yes: bool, json_out: bool) -> Approve:
    """--yes approves every write; a terminal asks per call; otherwise nothing is approved."""
    if yes:
        return approve_writes
    if json_out or not stdin_is_terminal():
        return decline_writes  # run_card then stops a writer card before any model call
    return _ask


def _ask(card: Card, tool: str, arguments: dict[str, Any]) -> bool:
    """Show this write call exactly (escaped) on stderr and ask [y/N]; the default is no."""
    from tiny_cli.cli import render  # rich: a person's output only
    from tiny_cli.cli.live import pause_current

    with pause_current():  # a live view redrawing over the prompt would hide it
        render.write_request(console(stderr=True), card.id, tool, arguments)
        return confirm("Allow this write?")
