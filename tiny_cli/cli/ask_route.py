"""The one-key question after a human `tiny delegate`: was it the right card?

Off by default (`--ask-route` or TINY_ASK_ROUTE=1 turn it on); asked only when stdin and
stdout are a terminal, never with --json, and only when the run log recorded the run. An
answer other than Enter is recorded in the run log as a correction, which `tiny learn
--from-runs` teaches. The key reader is a parameter: tests answer without a terminal.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import typer

from tiny_cli.digest import Digest, Routing
from tiny_cli.runs.log import Correction, RunLog
from tiny_cli.settings import Settings
from tiny_cli.text import printable

if TYPE_CHECKING:  # teach loads the router (numpy): a run never teaches
    from tiny_cli.teach import LearnReport

Ask = Callable[[str], str]
"""Show a question, return the key pressed ('' for Enter)."""
Say = Callable[[str], None]
"""Print one line for the person (stderr)."""

ROUTED = "Right card? [enter] yes · [c] choose another · [a] should have abstained"
ABSTAINED = "No card took it. Right? [enter] yes · [c] choose a card"
MAX_CHOICES = 9  # one key each
TASK_CHARS = 60  # of a task in a correction's line


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
    """Ask whether run `run_id` went to the right card; record the correction if it did not.

    `candidates` are the cards offered on [c], best first (the routing's top five).
    """
    ask, say = ask or read_key, say or _say
    answer = choose(routing, candidates, ask, say)
    if answer is None:
        return None

    with RunLog.open(settings.home) as log:
        correction = log.correct(run_id, answer.card)
    say(correction_line(correction, None))
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


def _say(line: str) -> None:
    typer.echo(line, err=True)


def correction_line(correction: Correction, report: LearnReport | None) -> str:
    """Say in one line what a correction said and whether it was taught."""
    c = correction
    task = c.task if len(c.task) <= TASK_CHARS else c.task[: TASK_CHARS - 1].rstrip() + "…"
    to, was = c.card or "abstain", c.routed or "abstain"
    line = f'run {c.run_id}: "{printable(task)}" → {printable(to)} (was: {printable(was)})'
    if report is None:
        return f"{line}; recorded: `tiny learn --from-runs` teaches it"
    where = "learned into" if report.status == "learned" else "already known in"
    note = printable(report.threshold_note)
    return f"{line}; {where} {printable(str(report.path))} (threshold: {note})"
