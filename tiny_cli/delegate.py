"""Delegate: route a task, stop on abstain or an unapprovable writer, else invoke the card."""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from tiny_cli.agent.budget import Clock
from tiny_cli.agent.calls import Approve
from tiny_cli.agent.loop import decline_writes, invoke
from tiny_cli.cards.load import Card
from tiny_cli.digest import Brief, Digest, Routing, with_caller_tokens
from tiny_cli.errors import ConfigError
from tiny_cli.events import Finished, Observer, ignore
from tiny_cli.provider.client import Provider
from tiny_cli.settings import model_for
from tiny_cli.tools.artifacts import Artifact, ArtifactStore
from tiny_cli.workspace import Workspace

if TYPE_CHECKING:  # numpy comes with the router; `invoke` never routes
    from tiny_cli.routing.router import Router

WRITE_NOT_CONFIRMED = "write_not_confirmed"


def delegate(
    ws: Workspace,
    router: Router,
    brief: Brief,
    *,
    provider: Provider,
    approve: Approve = decline_writes,
    clock: Clock = time.monotonic,
    observer: Observer = ignore,
    artifacts: ArtifactStore | None = None,
) -> Digest:
    """Route the Brief's goal; abstain, or run the card with every write call put to `approve`.

    A writer card with `approve=decline_writes` (nobody can approve) stops before any model
    call with `needs_confirmation`, as `run_card` does. `observer` sees the run's events;
    its `Finished` Digest carries the routing decision, an abstain included. Long tool
    results are kept in `artifacts` (see `run_card`).
    """
    decision = router.route(brief.goal)
    routing = Routing(decision.decision, decision.agent_id, round(decision.score, 4))
    if decision.agent_id is None:
        reason = (
            f"no card fits: best score {decision.score:.3f} < threshold {decision.threshold:.3f}"
        )
        digest = with_caller_tokens(Digest(None, "abstain", reason=reason, routing=routing))
        observer(Finished(digest))
        return digest
    return run_card(
        ws,
        decision.agent_id,
        brief,
        provider=provider,
        approve=approve,
        clock=clock,
        observer=observer,
        artifacts=artifacts,
        routing=routing,
    )


def run_card(
    ws: Workspace,
    card_id: str,
    brief: Brief,
    *,
    provider: Provider,
    approve: Approve = decline_writes,
    clock: Clock = time.monotonic,
    observer: Observer = ignore,
    artifacts: ArtifactStore | None = None,
    handles: Sequence[str] = (),
    routing: Routing | None = None,
) -> Digest:
    """Invoke the card named `card_id` with the workspace's tools and model settings.

    Each write call is put to `approve`. When that is `decline_writes` and the card writes,
    no call could ever be approved: stop with `needs_confirmation` before any model call.
    A tool result over the limit is stored in `artifacts` (cut without a store); `handles`
    name earlier artifacts the agent may read (an unknown one is a ConfigError). `routing`
    (the decision that chose the card) goes into the Digest, and into `Finished`'s.
    """
    held = _held(artifacts, handles)
    card = ws.card(card_id)
    if card.writes and approve is decline_writes:
        digest = _not_confirmed(ws, card, routing)
        observer(Finished(digest))
        return digest
    model = model_for(ws.settings, card.model)
    return invoke(
        card,
        brief,
        registry=ws.registry,
        provider=provider,
        model=model,
        approve=approve,
        clock=clock,
        tool_mode=ws.settings.tool_mode,
        wall_scale=ws.settings.wall_scale,
        observer=observer,
        artifacts=artifacts,
        held=held,
        routing=routing,
    )


def _held(store: ArtifactStore | None, handles: Sequence[str]) -> tuple[Artifact, ...]:
    """Look up each handle before any model call; one that is not stored is a usage error."""
    if handles and store is None:
        raise ConfigError("artifacts were named but there is no artifact store to read them from")
    return tuple(store.get(h) for h in dict.fromkeys(handles)) if store is not None else ()


def _not_confirmed(ws: Workspace, card: Card, routing: Routing | None) -> Digest:
    """A writer with nobody to approve its writes: `needs_confirmation`, before any model call."""
    writers = [t for t in card.tools if t in ws.registry and ws.registry[t].writes]
    note = (
        f"{card.id} writes ({', '.join(writers or card.tools)}) and nobody can approve a write "
        "here: run it at a terminal to approve each call, or pass --yes to approve every write"
    )
    digest = Digest(
        card.id,
        "needs_confirmation",
        reason=WRITE_NOT_CONFIRMED,
        notes_for_caller=(note,),
        routing=routing,
    )
    return with_caller_tokens(digest)
