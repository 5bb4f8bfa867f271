"""`tiny invoke` and `tiny delegate`: run a card on a task, print its Digest, exit by its status.

Also what every command that runs cards shares: `RunOptions` and `run_session` (the session
with the live view on stderr). After a human `tiny delegate` (`--ask-route` or TINY_ASK_ROUTE=1,
a terminal, no --json, a logged run), one key may say whether the card was right: an answer
other than Enter is recorded as a correction, which `tiny learn --from-runs` teaches.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from tiny_cli.agent.loop import Approve, approve_writes, decline_writes
from tiny_cli.cards.card import Card
from tiny_cli.cli import EXIT_BY_STATUS
from tiny_cli.cli.common import (
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
    TemperatureOpt,
    ToolModeOpt,
    ToolsOpt,
    WallScaleOpt,
    YesOpt,
    confirm,
    emit,
    settings_from,
    stdin_is_terminal,
    wants_live,
    warn,
)
from tiny_cli.cli.live import (
    LiveView,
    console,
    correction_line,
    digest_panel,
    pause_current,
    write_request,
)
from tiny_cli.delegation import LazyRouter, run_card
from tiny_cli.delegation import delegate as run_delegate
from tiny_cli.digest import Brief, Digest, Routing, make_brief
from tiny_cli.provider.factory import replay_settings
from tiny_cli.runs.log import Correction, RunLog
from tiny_cli.secrets import scrubber
from tiny_cli.session import RouteBook, RouteEntry, Session, open_session
from tiny_cli.settings import Settings
from tiny_cli.text import printable
from tiny_cli.workspace import Workspace, open_workspace

Ask = Callable[[str], str]  # show a question, return the key pressed ('' for Enter)
Say = Callable[[str], None]  # print one line for the person (stderr)

ROUTED = "Right card? [enter] yes · [c] choose another · [a] should have abstained"
ABSTAINED = "No card took it. Right? [enter] yes · [c] choose a card"
MAX_CHOICES = 9  # one key each
# what an invoke or delegate replay that left recorded answers unasked ran differently
RUN_UNUSED = (
    "another card, task or routing than when it was recorded, or a shorter run (a turn this "
    "tiny no longer takes, such as a repair)"
)

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
    inputs: Sequence[str] | None = None  # each key=value
    hint: str | None = None
    max_output_tokens: int | None = None
    yes: bool = False
    quiet: bool = False
    json_out: bool = False

    def brief(self) -> Brief:
        """Build the Brief: the --brief file, with the task and the other options on top."""
        pairs = _pairs(self.inputs or ())
        must = (self.must_return or "").split(",")
        return make_brief(
            self.task, must, pairs, self.hint, self.max_output_tokens, file=self.brief_file
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
    brief_file: BriefOpt = None,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    record: RecordOpt = None,
    replay: ReplayOpt = None,
    allow_hosts: AllowHostOpt = None,
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
                         allow_hosts=allow_hosts, tool_mode=tool_mode, wall_scale=wall_scale,
                         temperature=temperature, record=record, replay=replay, no_log=no_log,
                         log=log)  # fmt: skip
    flags = RunFlags(options, task=task, brief_file=brief_file, must_return=must_return,
                     inputs=inputs, hint=hint, max_output_tokens=max_output_tokens,
                     yes=yes, quiet=quiet, json_out=json_out)  # fmt: skip
    with running("invoke", flags, handles=artifact or (), wanted=card_id) as run:
        digest = run_card(
            run.ws,
            card_id,
            run.brief,
            provider=run.session.provider("invoke"),
            approve=run.approve,
            observer=run.session.observe("invoke", run.brief.goal),
            artifacts=run.session.artifacts,
            handles=artifact or (),
        )
    show_digest(json_out, run.session.for_caller(digest))


def delegate(
    task: TaskArg = None,
    cards: CardsOpt = None,
    tools: ToolsOpt = None,
    yes: YesOpt = False,
    must_return: MustReturnOpt = None,
    inputs: InputOpt = None,
    hint: HintOpt = None,
    max_output_tokens: MaxTokensOpt = None,
    brief_file: BriefOpt = None,
    base_url: BaseUrlOpt = None,
    model: ModelOpt = None,
    record: RecordOpt = None,
    replay: ReplayOpt = None,
    allow_hosts: AllowHostOpt = None,
    tool_mode: ToolModeOpt = None,
    wall_scale: WallScaleOpt = None,
    temperature: TemperatureOpt = None,
    ask: AskRouteOpt = None,  # not `ask_route`: that is the question's function
    quiet: QuietOpt = False,
    no_log: NoLogOpt = False,
    log: LogOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Route a task to the right card and run it; abstain, or ask before each write call."""
    options = RunOptions(cards=cards, tools=tools, base_url=base_url, model=model,
                         allow_hosts=allow_hosts, tool_mode=tool_mode, wall_scale=wall_scale,
                         temperature=temperature, record=record, replay=replay, no_log=no_log,
                         log=log)  # fmt: skip
    flags = RunFlags(options, task=task, brief_file=brief_file, must_return=must_return,
                     inputs=inputs, hint=hint, max_output_tokens=max_output_tokens,
                     yes=yes, quiet=quiet, json_out=json_out)  # fmt: skip
    with running("delegate", flags) as run:
        book = RouteBook(run.session.exchanges)
        # built on the first task routed live: a replay routes as recorded, its embedder unasked
        router = LazyRouter(run.ws.settings, run.ws.cards.values())
        digest = run_delegate(run.ws, router, run.brief,
                              provider=run.session.provider("delegate"),
                              approve=run.approve, artifacts=run.session.artifacts, routes=book,
                              observer=run.session.observe("delegate", run.brief.goal))  # fmt: skip
        digest = run.session.for_caller(digest)
        settings = run.ws.settings.with_flags(ask_route=ask)
        asked = run.session.recorded() if wants_answer(settings, json_out, digest) else []
    # the decision the run took (recorded, or made live) offers the other cards
    show_digest(json_out, digest, _asking(settings, asked, digest, book.used(run.brief.goal)))


@contextmanager
def running(
    command: str, flags: RunFlags, handles: Sequence[str] = (), wanted: str | None = None
) -> Iterator[Running]:
    """Set a run up: settings, workspace (`wanted`: the card it needs), Brief, then the session;
    after it, say so where a replay left recorded answers unasked."""
    settings = flags.options.settings()
    ws = open_workspace(settings, wanted=wanted)
    brief = flags.brief()
    live = wants_live(flags.quiet, flags.json_out)
    with run_session(settings, command, flags.options, live=live, handles=handles) as session:
        approve = _approver(flags.yes, flags.json_out, session.artifacts.scrub.for_caller().text)
        yield Running(ws, brief, session, approve)
    warn_unused(session.exchanges, RUN_UNUSED)  # once the live view is gone: it reads below


def show_digest(
    json_out: bool, digest: Digest, then: Callable[[], object] | None = None
) -> NoReturn:
    """Print the Digest (JSON or a panel), then do `then()`, and exit with its status's code."""
    emit(json_out, digest.to_json(), lambda: digest_panel(console(), digest))
    if then is not None:  # after a human delegate: ask whether the card was right
        then()
    raise typer.Exit(EXIT_BY_STATUS[digest.status])


def _asking(
    settings: Settings, asked: list[int], digest: Digest, used: RouteEntry | None
) -> Callable[[], object] | None:
    """After a human delegate, the question whether its card was right (None: no question)."""
    routing = digest.routing
    if not asked or routing is None:  # wants_answer asked for a routing: always there
        return None
    candidates = [str(card) for card, _ in used.candidates] if used is not None else []
    return lambda: ask_route(settings, asked[-1], routing, candidates)


def _pairs(given: Sequence[str]) -> dict[str, str]:
    """The --input values by name; a name given twice is refused (the last would win, unsaid)."""
    pairs: dict[str, str] = {}
    for text in given:
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep or not key:
            raise typer.BadParameter(f"{text!r} is not key=value", param_hint="--input")
        if key in pairs:
            raise typer.BadParameter(f"{key!r} is given twice", param_hint="--input")
        pairs[key] = value.strip()
    return pairs


def _approver(yes: bool, json_out: bool, scrub: Callable[[str], str]) -> Approve:
    """--yes approves every write; a terminal asks per call; otherwise nothing is approved."""
    if yes:
        return approve_writes
    if json_out or not stdin_is_terminal():
        return decline_writes  # run_card then stops a writer card before any model call
    return partial(_ask, scrub=scrub)


def _ask(
    card: Card, tool: str, arguments: dict[str, Any], scrub: Callable[[str], str] = str
) -> bool:
    """Show this write call on stderr (escaped, the known keys scrubbed) and ask [y/N]."""
    with pause_current():  # a live view redrawing over the prompt would hide it
        write_request(console(stderr=True), card.id, tool, arguments, scrub)
        return confirm("Allow this write?")


# --- the options and the session of every command that runs cards -----------------------


@dataclass(frozen=True)
class RunOptions:
    """Where a command that runs cards finds them, their tools and the model; what it records."""

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
        """The settings with these options on top; a replay's model, tool mode and temperature
        are the recording's unless these name others."""
        settings = settings_from(
            cards=self.cards,
            tools=self.tools,
            base_url=self.base_url,
            model=self.model,
            allow_hosts=self.allow_hosts,
        ).with_flags(
            from_cli=True,
            tool_mode=self.tool_mode,
            wall_scale=self.wall_scale,
            temperature=self.temperature,
        )
        return replay_settings(
            settings, record=self.record, replay=self.replay, model_flag=self.model
        )


@contextmanager
def run_session(
    settings: Settings,
    command: str,
    options: RunOptions,
    *,
    live: bool,
    handles: Sequence[str] = (),
    resume: Sequence[Path] = (),
    upgrade: bool = False,
    resumable: bool = False,
) -> Iterator[Session]:
    """Open the command's session, with the live view on stderr when `live`; `resumable`: the
    command can go on from an interrupted recording. A replay is logged only with `--log`."""
    # built before the session, whose observers it joins: the same keys as the session's
    scrub = scrubber(settings.api_key).for_caller().text
    view = LiveView(console(stderr=True), scrub=scrub) if live else None
    opened: list[Session] = []
    replay = options.replay
    try:
        with (
            open_session(
                settings,
                command,
                record=options.record,
                replay=replay,
                resume=resume,
                log=not (options.no_log or (bool(replay) and not options.log)),
                watchers=[view.observer] if view is not None else [],
                handles=handles,
                upgrade=upgrade,
            ) as session,
            view or nullcontext(),
        ):  # the view ends first: a warning reads below it
            opened.append(session)
            yield session
    except KeyboardInterrupt:
        kept = opened[0].exchanges.kept_on_interrupt() if opened else None
        if kept is not None:
            single = f"the run did not finish, so it does not replay ({command} cannot resume it)"
            use = "pass it to --resume to go on" if resumable else single
            warn(f"the exchanges recorded so far are in {kept}: {use}")
        raise


def warn_unused(exchanges: Any, why: str) -> None:
    """Warn when a replay asked for fewer answers than its recording holds; `why` says how."""
    left = exchanges.unused()
    if left:
        warn(f"the recording holds {left} exchange(s) this replay never asked for: {why}")


# --- after a human delegate: was it the right card? ---------------------------------------


@dataclass(frozen=True)
class Answer:
    """A correction the person gave: the card it should have gone to (None: abstain)."""

    card: str | None


def wants_answer(settings: Settings, json_out: bool, digest: Digest) -> bool:
    """Tell whether to ask: the setting is on, a person at a terminal, a routing decision."""
    return (
        settings.ask_route
        and not json_out
        and digest.routing is not None
        and sys.stdin is not None  # started with stdin closed: nobody to ask
        and sys.stdin.isatty()
        and sys.stdout.isatty()
    )


def ask_route(
    settings: Settings,
    run_id: int,
    routing: Routing,
    candidates: Sequence[str],
    *,
    ask: Ask | None = None,
    say: Say | None = None,
) -> Correction | None:
    """Ask whether run `run_id` went to the right card (`candidates`: those offered on [c],
    best first); record the correction if it did not."""
    ask, say = ask or read_key, say or partial(typer.echo, err=True)
    answer = choose(routing, candidates, ask, say)
    if answer is None:
        return None
    with RunLog.open(settings.home) as log:
        correction = log.correct(run_id, answer.card)
    say(correction_line(correction))
    return correction


def choose(routing: Routing, candidates: Sequence[str], ask: Ask, say: Say) -> Answer | None:
    """Put the question (and on [c] the numbered cards); None when the run stands as it was."""
    routed = routing.agent_id if routing.decision == "route" else None
    key = ask(ROUTED if routed is not None else ABSTAINED).strip().lower()
    if key == "a" and routed is not None:
        return Answer(None)
    if key != "c":
        return None  # Enter, or any other key: nothing to correct
    others = [c for c in candidates if c != routed][:MAX_CHOICES]
    if not others:
        say("no other card to choose: nothing recorded")
        return None
    say("  ".join(f"[{n}] {printable(card)}" for n, card in enumerate(others, 1)))
    key = ask(f"Which card? [1-{len(others)}] · [enter] none").strip()
    if key.isdigit() and 1 <= int(key) <= len(others):
        return Answer(others[int(key) - 1])
    say("nothing recorded")
    return None


def read_key(question: str) -> str:
    """Ask on stderr and read one key at the terminal; Enter (or end of input) reads as ''."""
    typer.echo(f"{question} ", err=True, nl=False)
    try:
        key = typer.getchar()
    except EOFError:
        key = ""
    key = "" if key in ("\r", "\n") else key
    typer.echo(printable(key), err=True)
    return key
