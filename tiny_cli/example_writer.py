"""Examples before anyone teaches: a model writes typical requests for each card.

`tiny learn --generate` asks the configured model, one request per card, for N varied
requests a user might send that card, from its summary and its tools. The answers go into
learned.jsonl marked as generated, keyed by a hash of what they were written from: a card
whose key is there is skipped, so an interrupted run resumes. An example already taught,
the card's own or generated twice is dropped; so is one closer to another card than to its
own (as `tiny validate` checks), and the threshold is derived again. A key stays marked
unchecked until that check has run, so a resumed run finishes it. A bad answer is asked again
once, then reported; a provider error fails the card. A server no card could use stops the
run at once (nothing listens, or HTTP 401, 403, 404), as does a learned file it cannot
write, found before any request is paid for. The cost counts card requests, one per
`complete()`: a transport that counted retries would turn off httpx's environment proxies.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import httpx

from tiny_cli.agent.reply import without_reasoning
from tiny_cli.cards.card import Card
from tiny_cli.errors import ConfigError, ProviderError
from tiny_cli.provider.client import (
    CONFIG_STATUSES,
    ChatRequest,
    OpenAIProvider,
    Provider,
    checked_complete,
)
from tiny_cli.routing.examples_file import (
    LEARNED_FILENAME,
    MAX_GENERATED_CHARS,
    UNCHECKED,
    Learned,
    Lesson,
    carry_generated,
    load_learned,
    usable_generated,
    write_learned,
)
from tiny_cli.routing.factory import build_router, learned_folder
from tiny_cli.routing.tooltexts import card_tools, gathered
from tiny_cli.secrets import scrubber
from tiny_cli.settings import Settings, model_for
from tiny_cli.teach import LearnReport, learn
from tiny_cli.userfiles import check_writable, locked
from tiny_cli.workspace import open_workspace

__all__ = ["CardGeneration", "Generated", "generate", "prune_generated"]

DEFAULT_PER_CARD = 8  # the prototype's count on the MCP dev set
# greedy unless --temperature says otherwise: asked again, the same model writes the same
# file (a reviewable diff in git); sampled files for the same cards moved BFCL @1 by points
GENERATE_TEMPERATURE = 0.0
MAX_PER_CARD = 20
TOKENS_PER_EXAMPLE = 48  # a request of a sentence or two, with its JSON quoting
TOKENS_SLACK = 64  # the list's brackets, and a model that writes a word too many
TRIES = 2  # a bad answer is asked again once
GENERATE_TIMEOUT = 120.0  # seconds for one card's answer
MAX_DESCRIPTION_CHARS = 300  # of one tool's description in the prompt
# prose before the list may hold a `[` of its own; each is decoded from, so a few, not all
MAX_LIST_STARTS = 16
NOT_A_LIST = "the answer was not a JSON list of strings"
_DECODER = json.JSONDecoder()
_SEPARATORS = re.compile(r"[ \t\r\n,]*")  # JSON's whitespace, and the commas between values
SYSTEM_PROMPT = (
    "You write test data for a router that sends user requests to the right assistant. "
    "Answer with a JSON list of strings and nothing else."
)


@dataclass(frozen=True)
class CardGeneration:
    """What generating one card's examples did."""

    card: str
    status: Literal["generated", "skipped", "failed"]
    written: int = 0
    duplicates: int = 0
    problem: str = ""
    # then dropped by the overlap check (closer to another card): `written - dropped` stay
    dropped: int = 0


@dataclass(frozen=True)
class Generated:
    """What `tiny learn --generate` did, and what it cost."""

    path: Path
    status: Literal["generated", "unchanged", "failed"]
    cards: tuple[CardGeneration, ...]
    overlapping: int  # generated examples dropped: closer to another card than to their own
    card_requests: int  # complete() calls: the provider's retries of one are not counted
    tokens_in: int
    tokens_out: int
    seconds: float
    model: str
    report: LearnReport | None = None  # the threshold derived again afterwards
    failed: tuple[str, ...] = field(default=())
    temperature: float = GENERATE_TEMPERATURE  # what the model was asked at

    def to_json(self) -> dict[str, Any]:
        """Return the outcome as plain JSON types (`--json`)."""
        report = self.report.to_json() if self.report is not None else None
        return {**asdict(self), "path": str(self.path), "report": report}


@dataclass
class _Cost:
    """What asking cost so far, and whether the server was probed yet."""

    card_requests: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    probed: bool = False


@dataclass(frozen=True)
class _Job:
    """What every card's generation shares: where, how many, whom to ask, what is taken."""

    settings: Settings
    folder: Path
    per_card: int
    model: str
    temperature: float
    ask: Provider
    force: bool
    cards: Sequence[Card]  # every card: a copy of one's own example is dropped
    cost: _Cost = field(default_factory=_Cost)


def generate(
    settings: Settings,
    per_card: int = DEFAULT_PER_CARD,
    only: Sequence[str] = (),
    force: bool = False,
    *,
    provider: Provider | None = None,
    transport: httpx.BaseTransport | None = None,
    progress: Callable[[str], None] = lambda line: None,
    clock: Callable[[], float] = time.monotonic,
) -> Generated:
    """Write `per_card` generated examples for each card (of `only`, if given) not done yet."""
    if not 1 <= per_card <= MAX_PER_CARD:
        raise ConfigError(f"--per-card {per_card}: expected 1 to {MAX_PER_CARD}")
    started = clock()
    every = list(open_workspace(settings, transport).cards.values())
    _refuse_unknown(only, {card.id for card in every})
    cards = [card for card in every if not only or card.id in only]
    model = model_for(settings, None)
    ask = provider or OpenAIProvider(settings.base_url, settings.api_key, transport=transport)
    descriptions = gathered(settings).descriptions
    folder, done = learned_folder(settings, writing=True), []
    temperature = GENERATE_TEMPERATURE if settings.temperature is None else settings.temperature
    job = _Job(settings, folder, per_card, model, temperature, ask, force, every)
    for number, card in enumerate(cards, 1):
        tools = card_tools(card, descriptions)
        key = generation_key(card, tools, per_card, model, temperature)
        outcome = _one(job, card, tools, key)
        done.append(outcome)
        progress(f"[{number}/{len(cards)}] {card.id}: {_said(outcome)}")
    wrote = any(c.status == "generated" for c in done)
    dropped, report = _finish(settings, folder, transport, wrote)
    done = [replace(c, dropped=dropped[c.card]) for c in done]
    overlapping = sum(dropped.values())
    failed = tuple(c.card for c in done if c.status == "failed")
    status: Literal["generated", "unchanged", "failed"] = (
        "generated" if wrote or report is not None else ("failed" if failed else "unchanged")
    )
    return Generated(
        folder / LEARNED_FILENAME, status, tuple(done), overlapping, job.cost.card_requests,
        job.cost.tokens_in, job.cost.tokens_out, round(clock() - started, 3), model, report, failed,
        temperature,
    )  # fmt: skip


def prune_generated(settings: Settings, only: Sequence[str] = ()) -> tuple[int, LearnReport]:
    """Remove the generated examples (of `only`, if given); taught ones stay. Return how many."""
    # a card of `only` may be gone from the folder: its generated lines are still there
    cards = open_workspace(settings).cards
    folder = learned_folder(settings, writing=True)
    with locked(folder / LEARNED_FILENAME):
        # a generated line today's checks refuse (an older tiny wrote it) is removed, not read
        learned = load_learned(folder, check_generated=False)
        _refuse_unknown(only, {*cards, *learned.generated})
        gone = [c for c in learned.generated if not only or c in only]
        removed = sum(len(learned.generated[c]) for c in gone)
        if removed:
            kept = {c: ts for c, ts in learned.generated.items() if c not in gone}
            write_learned(learned.keeping_generated(kept))
    return removed, learn(settings, [])


def generation_key(
    card: Card,
    tools: Sequence[tuple[str, str]],
    per_card: int,
    model: str,
    temperature: float = GENERATE_TEMPERATURE,
) -> str:
    """Hash what a card's examples are written from: summary, tools, count, model, temperature."""
    inputs = json.dumps([card.summary, [list(t) for t in tools], per_card, model, temperature])
    return hashlib.sha256(inputs.encode()).hexdigest()[:16]


def request_for(
    card: Card,
    tools: Sequence[tuple[str, str]],
    per_card: int,
    model: str,
    temperature: float = GENERATE_TEMPERATURE,
) -> ChatRequest:
    """Return the one request that asks for `per_card` examples of `card`."""
    lines = [f"- {name}: {text[:MAX_DESCRIPTION_CHARS]}" if text else f"- {name}"
             for name, text in tools]  # fmt: skip
    listed = "\n".join(lines) if lines else "(none)"
    user = (
        f"An assistant does this: {card.summary}\nIts tools:\n{listed}\n\n"
        f"Write {per_card} typical, varied requests a user would send this assistant, each "
        "in the user's own words, one or two sentences, with concrete details. Do not name "
        f"the tools. Answer with a JSON list of {per_card} strings."
    )
    schema = {"type": "array", "items": {"type": "string"}, "minItems": 1}
    return ChatRequest(
        model=model,
        messages=[{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": user}],
        tools=[],
        max_tokens=per_card * TOKENS_PER_EXAMPLE + TOKENS_SLACK,
        temperature=temperature,
        response_format={
            "type": "json_schema",
            "json_schema": {"name": "examples", "schema": schema},
        },
    )


def _strings_listed(text: str | None) -> list[str] | None:
    """The strings of the first list in `text` that holds any (prose before it may hold a `[`)."""
    text = text or ""
    start = text.find("[")
    for _ in range(MAX_LIST_STARTS):
        if start < 0:
            break
        strings = [x for x in _list_items(text, start + 1) if isinstance(x, str)]
        if strings:
            return strings
        start = text.find("[", start + 1)
    return None


def _usable(strings: list[str] | None) -> list[str]:
    """The strings that are requests a user types (`usable_generated`), spaces made single."""
    found = [" ".join(x.split()) for x in strings or ()]
    return [x for x in found if usable_generated(x)]


def _unusable(strings: list[str] | None) -> str:
    """Say why an answer gave no request: no list of strings, or none of its strings usable."""
    if strings is None:
        return NOT_A_LIST
    return (
        f"the answer's list held {len(strings)} string(s), each empty or over "
        f"{MAX_GENERATED_CHARS} characters, or holding half of a UTF-16 pair, or with no letter "
        "or digit"
    )


def _list_items(text: str, at: int) -> list[Any]:
    """The JSON values of the list whose `[` is just before `at`, up to its `]` or to the
    first value that does not parse (a model cut off by max_tokens mid-string)."""
    items: list[Any] = []
    while True:
        at = _SEPARATORS.match(text, at).end()  # type: ignore[union-attr]  # `*` always matches
        if at >= len(text) or text[at] == "]":
            return items
        try:
            value, at = _DECODER.raw_decode(text, at)
        except (ValueError, RecursionError):
            return items
        items.append(value)


def _refuse_unknown(only: Sequence[str], known: set[str]) -> None:
    """ConfigError naming the first ID of `only` not in `known`."""
    missing = [c for c in only if c not in known]
    if missing:
        raise ConfigError(f"--card {missing[0]!r}: no such card in the cards folder")


def _one(job: _Job, card: Card, tools: Sequence[tuple[str, str]], key: str) -> CardGeneration:
    """Generate one card's examples and write them, or say why not."""
    stored = load_learned(job.folder).generation.get(card.id, "")
    if not job.force and stored.removesuffix(UNCHECKED) == key:
        return CardGeneration(card.id, "skipped")
    if not job.cost.probed:  # a file it cannot write, or nothing listening, stops the run
        check_writable(job.folder / LEARNED_FILENAME)  # now: before a paid request
        with locked(job.folder / LEARNED_FILENAME):  # and its lock
            pass
        _probe(job.ask)
        job.cost.probed = True
    request = request_for(card, tools, job.per_card, job.model, job.temperature)
    problem = ""
    for _ in range(TRIES):
        job.cost.card_requests += 1  # a request that failed still went out
        try:
            answer = checked_complete(job.ask, request, GENERATE_TIMEOUT)
        except ProviderError as exc:  # the provider retried what it could: not asked again
            _stop_if_no_card_would_pass(job.ask, exc)
            return CardGeneration(card.id, "failed", problem=str(exc))
        job.cost.tokens_in += answer.tokens_in
        job.cost.tokens_out += answer.tokens_out
        strings = _strings_listed(without_reasoning(answer.content))
        found = _usable(strings)
        if found:
            return _store(job, card, key, found[: job.per_card])
        problem = _unusable(strings)
    return CardGeneration(card.id, "failed", problem=problem)


def _stop_if_no_card_would_pass(ask: Provider, exc: ProviderError) -> None:
    """Raise when no other card's request would pass either; any other failure is this card's."""
    if exc.status in CONFIG_STATUSES:  # the key or the URL is wrong: no card would pass
        raise exc
    if exc.status is None:  # no answer, or an unusable one: is the server still there?
        _probe(ask)


def _probe(ask: Provider) -> None:
    """ProviderError now if nothing listens at the provider's endpoint (as the bench checks)."""
    probe = getattr(ask, "probe", None)  # not in the Provider protocol: a replay has none
    if probe is not None:
        probe()


def _store(job: _Job, card: Card, key: str, found: list[str]) -> CardGeneration:
    """Write `found` as `card`'s generated examples, less what is taught, taken or repeated."""
    tasks = tuple(map(scrubber(job.settings.api_key).text, found))
    answer = Lesson((), generated={card.id: tasks}, generation={card.id: key})
    with locked(job.folder / LEARNED_FILENAME):  # read inside the lock: another writer's stay
        learned, kept = carry_generated(load_learned(job.folder), answer, job.cards)
        write_learned(learned)
    return CardGeneration(card.id, "generated", kept, len(found) - kept)


def _finish(
    settings: Settings, folder: Path, transport: httpx.BaseTransport | None, wrote: bool
) -> tuple[Counter[str], LearnReport | None]:
    """Run the overlap check and derive the threshold again when this run or an interrupted one
    left them to do; (examples dropped by card, the threshold's report)."""
    learned = load_learned(folder)
    unchecked = any(k.endswith(UNCHECKED) for k in learned.generation.values())
    stale = learned.threshold is not None and learned.threshold.sha != learned.sha()
    if not (wrote or unchecked or stale):
        return Counter(), None
    dropped = _drop_overlaps(settings, folder, transport) if wrote or unchecked else Counter()
    return dropped, learn(settings, [], transport)


def _drop_overlaps(
    settings: Settings, folder: Path, transport: httpx.BaseTransport | None
) -> Counter[str]:
    """Drop generated examples that `tiny validate` would name (closer to another card), and
    take the unchecked mark off every card's key."""
    cards = list(open_workspace(settings, transport).cards.values())
    dropped: Counter[str] = Counter()
    with locked(folder / LEARNED_FILENAME):
        learned = load_learned(folder)
        keys = {c: k.removesuffix(UNCHECKED) for c, k in learned.generation.items()}
        kept = replace(learned, generation=keys)
        # dropping some moves their card's group: others may sit closer elsewhere now, so
        # again until none does (each round drops one at least: it ends)
        while bad := _overlapping(settings, cards, kept, transport):
            dropped.update(card for card, _ in bad)
            made = {c: [t for t in ts if (c, t) not in bad] for c, ts in kept.generated.items()}
            kept = kept.keeping_generated(made)
        if kept != learned:
            write_learned(kept)
    return dropped


def _overlapping(
    settings: Settings, cards: list[Card], learned: Learned, transport: httpx.BaseTransport | None
) -> set[tuple[str, str]]:
    """The generated examples (card, task) closer to another card than to their own."""
    router = build_router(settings, cards, learned=learned, transport=transport,
                          keep_state=False)  # fmt: skip
    return {
        (o.agent_id, o.text)
        for o in router.overlaps()
        if o.kind == "generated" and o.text in learned.generated.get(o.agent_id, ())
    }


def _said(outcome: CardGeneration) -> str:
    if outcome.status == "skipped":
        return "already generated from the same summary, tools and model; skipped"
    if outcome.status == "failed":
        return f"failed: {outcome.problem}"
    return f"{outcome.written} example(s) written, {outcome.duplicates} duplicate(s) dropped"
