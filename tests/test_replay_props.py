"""The recording reader on completions of the wrong types (issue 21): a defined outcome, always.

A recording edited by hand may hold any JSON where a completion's fields go: tool calls as lists
of lists, strings or numbers, token counts as strings, floats or negatives, content that is no
string, nested junk, lone surrogates. `Replayer.load` then loads the file or raises a TinyError
naming it, never another exception; and what it loaded replays as a well-typed Completion.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from tiny_cli.errors import ConfigError, ReplayError, TinyError
from tiny_cli.provider.client import ChatRequest, Completion, ToolCall
from tiny_cli.provider.replay import NO_VOLATILE, Replayer, request_key

from .test_properties import QUICK

RUN = "invoke"
REQUEST = ChatRequest("m", [{"role": "user", "content": "hi"}], [], 64)
KEY = request_key(REQUEST, NO_VOLATILE)
HEADER = json.dumps({"tiny_recording": 1, "model": "m", "base_url": "h"})
SQLITE_MAX_INT = 2**63 - 1  # what the run log can store of a count

odd_text = st.text(max_size=12) | st.sampled_from(["\ud800", "\udfff x", "\x00", "\u202e", ""])
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)
    | st.floats(allow_nan=True, allow_infinity=True)
    | odd_text
)
junk = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(odd_text, inner, max_size=3),
)
a_call = st.lists(odd_text, min_size=3, max_size=3)  # the one right shape: [id, name, arguments]
tool_calls = st.one_of(
    st.lists(a_call, max_size=2),
    st.lists(st.lists(junk, max_size=4), max_size=3),  # lists of lists of anything
    st.lists(odd_text | st.integers() | st.floats(), max_size=3),  # of strings or numbers
    junk,
)
tokens = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),  # "abc", "12"
    junk,
)
completion = st.fixed_dictionaries(
    {},
    optional={
        "content": odd_text | junk,
        "tool_calls": tool_calls,
        "tokens_in": tokens,
        "tokens_out": tokens,
        "finish_reason": odd_text | junk,
        "raw": junk,
    },
)
entry = st.fixed_dictionaries(
    {"run": st.just(RUN) | junk, "key": st.just(KEY) | junk},
    optional={"completion": completion | junk, "error": junk},
)


def _recording(folder: Path, entries: list[Any]) -> Path:
    """Write a header and `entries` as a recording (lone surrogates kept as JSON escapes)."""
    path = folder / "rec.jsonl"
    lines = [HEADER, *(json.dumps(e, allow_nan=True) for e in entries)]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _well_typed(answer: Completion) -> bool:
    """Tell whether a replayed answer has the types the runner reads."""
    counts = (answer.tokens_in, answer.tokens_out)
    return (
        (answer.content is None or isinstance(answer.content, str))
        and all(isinstance(c, ToolCall) for c in answer.tool_calls)
        and all(isinstance(x, str) for c in answer.tool_calls for x in vars(c).values())
        and all(type(n) is int and 0 <= n <= SQLITE_MAX_INT for n in counts)
        and isinstance(answer.raw, dict)
    )


@QUICK
@given(st.lists(entry, min_size=1, max_size=3))
@example([{"run": RUN, "key": KEY, "completion": {"tool_calls": [["a", "b"]]}}])
@example([{"run": RUN, "key": KEY, "completion": {"tool_calls": "abc"}}])
@example([{"run": RUN, "key": KEY, "completion": {"tokens_in": "abc"}}])
@example([{"run": RUN, "key": KEY, "completion": {"tokens_in": 1.5}}])
@example([{"run": RUN, "key": KEY, "completion": {"tokens_in": -3}}])
@example([{"run": RUN, "key": KEY, "completion": {"tokens_out": 2**64}}])
@example([{"run": RUN, "key": KEY, "completion": {"content": ["not", "text"]}}])
@example([{"run": RUN, "key": KEY, "completion": {"content": "\ud800", "tool_calls": [[1, 2, 3]]}}])
@example([{"run": RUN, "key": KEY, "completion": {}, "error": None}])
@example([{"run": RUN, "key": KEY, "error": {"message": ["junk"], "kind": 5}}])
def test_a_recording_of_any_completion_types_loads_or_names_the_file(
    tmp_path_factory, entries: list[Any]
) -> None:
    path = _recording(tmp_path_factory.mktemp("rec"), entries)
    try:
        replayer = Replayer.load(path)
    except (ConfigError, ReplayError) as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)  # one line, naming the file
        return
    provider = replayer.for_run(RUN)
    for _ in range(replayer.unused()):  # each exchange recorded for this request, in turn
        try:
            answer = provider.complete(REQUEST)
        except TinyError:  # a recorded error (ProviderError), or a miss (ReplayError)
            continue
        assert _well_typed(answer), answer


@QUICK
@given(st.binary(max_size=300))
@example(b'{"run": "invoke", "key": "k", "completion": {"content": "\xed\xa0\x80"}}')
@example(b'{"run": "invoke", "key": "k", "completion": {"tokens_in": ' + b"9" * 5000 + b"}}")
def test_a_recording_of_any_bytes_loads_or_names_the_file(tmp_path_factory, data: bytes) -> None:
    path = tmp_path_factory.mktemp("rec") / "rec.jsonl"
    path.write_bytes(HEADER.encode() + b"\n" + data)
    try:
        Replayer.load(path)
    except (ConfigError, ReplayError) as exc:
        assert str(path) in str(exc) and "\n" not in str(exc)
