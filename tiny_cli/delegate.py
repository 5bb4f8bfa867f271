"""Delegate: route a task, stop on abstain or an unconfirmed writer, else invoke the card."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace

from tiny_cli.budget import Clock
from tiny_cli.cards import Card
from tiny_cli.digest import Brief, Digest, Routing, with_caller_tokens
from tiny_cli.provider import Provider
from tiny_cli.routing import Router
from tiny_cli.runner import invoke
from tiny_cli.settings import model_for
from tiny_cli.workspace import Workspace

Confirm = Callable[[Card], bool]


def delegate(
    ws: Workspace,
    router: Router,
    brief: Brief,
    *,
    provider: Provider,
    confirm: Confirm,
    clock: Clock = time.monotonic,
) -> Digest:
    """Route the Brief's goal; abstain or ask before a writer runs; otherwise invoke the card."""
    decision = router.route(brief.goal)
    routing = Routing(decision.decision, decision.agent_id, round(decision.score, 4))
    if decision.agent_id is None:
        reason = (
            f"no card fits: best score {decision.score:.3f} < threshold {decision.threshold:.3f}"
        )
        return with_caller_tokens(Digest(None, "abstain", reason=reason, routing=routing))
    card = ws.card(decision.agent_id)
    if card.writes and not confirm(card):
        note = f"{card.id} writes ({', '.join(card.tools)}); run again with --yes to allow it"
        digest = Digest(
            card.id,
            "needs_confirmation",
            reason="write_not_confirmed",
            notes_for_caller=(note,),
            routing=routing,
        )
        return with_caller_tokens(digest)
    digest = run_card(ws, card.id, brief, provider=provider, clock=clock)
    return with_caller_tokens(replace(digest, routing=routing))


def run_card(
    ws: Workspace, card_id: str, brief: Brief, *, provider: Provider, clock: Clock = time.monotonic
) -> Digest:
    """Invoke the card named `card_id` with the workspace's tools and model settings."""
    card = ws.card(card_id)
    model = model_for(ws.settings, card.model)
    return invoke(card, brief, registry=ws.registry, provider=provider, model=model, clock=clock)
