"""Selection scoring: judge an agent's first tool call against BFCL-style accepted values.

A task expects one call, `{"name": ..., "arguments": {param: [accepted values...]}}`, or
none at all (an irrelevance task, `expected` None). The rule follows the AST checker of the
Berkeley Function Calling Leaderboard: the right function; every argument whose accepted list
lacks "" present; no argument outside the expected ones; each given value equal to one
accepted value after BFCL's normalisations (strings without spaces and `,./-_*^`, lowercase,
' read as "; an int where a float is accepted; lists element by element, in order; objects key
by key). Only the first call is judged: the bench asks which tool an agent picks, and with
which arguments, not what it does after.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from tiny_cli.bench.tasks import check_finite
from tiny_cli.errors import ConfigError
from tiny_cli.text import printable

__all__ = ["STATUSES", "CallVerdict", "Status", "expected_call", "judge_call"]

# right: the call matches (or, on an irrelevance task, no call was made)
# right_tool: the expected function, but the arguments miss, add or get a value wrong
# wrong_tool: a different function was called
# no_call: a call was expected and none was made
# bad_arguments: the expected function, but its arguments are not a JSON object
# unwanted_call: an irrelevance task, and a function was called anyway
# failed: the run ended before the model chose (the server failed or timed out): never right
Status = Literal[
    "right", "right_tool", "wrong_tool", "no_call", "bad_arguments", "unwanted_call", "failed"
]
STATUSES: tuple[Status, ...] = get_args(Status)
CALL_FIELDS = ("name", "arguments")  # what an `expect_call` holds
OPTIONAL = ""  # in an accepted list: the argument may be left out
_PUNCTUATION = re.compile(r"[ ,./\-_*^]")


@dataclass(frozen=True)
class CallVerdict:
    """How one first call compares with the expected one; `reason` says why, in words."""

    status: Status
    reason: str

    @property
    def right(self) -> bool:
        """Whether the call (or its absence) is what the task wants."""
        return self.status == "right"


def expected_call(entry: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """A task's `expect_call` (None for an irrelevance task), checked for shape."""
    if "expect_call" not in entry:
        raise ConfigError(f"task {entry.get('id')!r} has no expect_call")
    call = entry["expect_call"]
    if call is None:
        return None
    if not isinstance(call, Mapping):
        raise ConfigError(f"task {entry.get('id')!r}: expect_call is not an object")
    unknown = sorted(str(key) for key in set(call) - set(CALL_FIELDS))
    if unknown:  # a typo ("argumnets") would leave a call that cannot be checked as meant
        raise ConfigError(
            f"task {entry.get('id')!r}: expect_call.{printable(unknown[0])}: unknown field "
            f"(fields: {', '.join(CALL_FIELDS)})"
        )
    name, arguments = call.get("name"), call.get("arguments")
    if not isinstance(name, str) or not name or not isinstance(arguments, Mapping):
        raise ConfigError(f"task {entry.get('id')!r}: expect_call needs a name and arguments")
    for param, accepted in arguments.items():
        if not isinstance(accepted, list) or not accepted:
            raise ConfigError(f"task {entry.get('id')!r}: {param!r} needs a list of values")
        _finite(
            f"task {entry.get('id')!r}: expect_call.arguments.{printable(str(param))}", accepted
        )
    return call


def _finite(where: str, value: Any) -> None:
    """Refuse nan or infinity anywhere in accepted values, as the plain bench's `expect` does:
    no call's arguments could ever match it."""
    if isinstance(value, list):
        for item in value:
            _finite(where, item)
    elif isinstance(value, Mapping):
        for item in value.values():
            _finite(where, item)
    else:
        check_finite(where, value)


def judge_call(
    expected: Mapping[str, Any] | None,
    name: str | None,
    arguments: Mapping[str, Any] | None,
) -> CallVerdict:
    """Judge the first call (`name` None: no call was made) against the expected one."""
    if expected is None:
        if name is None:
            return CallVerdict("right", "no call, and none was wanted")
        return CallVerdict("unwanted_call", f"called {name!r}, but no function fits the task")
    want = expected["name"]
    if name is None:
        return CallVerdict("no_call", f"expected a call to {want!r}, got none")
    if name != want:
        return CallVerdict("wrong_tool", f"called {name!r}, expected {want!r}")
    if not isinstance(arguments, Mapping):
        return CallVerdict("bad_arguments", f"the arguments of {name!r} are not an object")
    problem = _argument_problem(expected["arguments"], arguments)
    if problem:
        return CallVerdict("right_tool", problem)
    return CallVerdict("right", f"{name!r} with accepted arguments")


def _argument_problem(accepted: Mapping[str, Sequence[Any]], given: Mapping[str, Any]) -> str:
    """What is wrong with the given arguments, or "" when every one is accepted."""
    for param, values in accepted.items():
        if param not in given and OPTIONAL not in values:
            return f"missing required argument {param!r}"
    for param, value in given.items():
        if param not in accepted:
            return f"unexpected argument {param!r}"
        if not _accepted(value, accepted[param], strict=True):
            return f"{param}={value!r} is not one of {list(accepted[param])!r}"
    return ""


def _accepted(value: Any, values: Sequence[Any], *, strict: bool) -> bool:
    """Whether `value` equals one of `values`; "" also matches an empty string, as in BFCL."""
    # only where the accepted values are strings: elsewhere BFCL's type check rejects a string
    typed = [v for v in values if v != OPTIONAL]
    if typed and not isinstance(typed[0], str):
        values = typed
    return any(_matches(value, candidate, strict=strict) for candidate in values)


def _matches(value: Any, candidate: Any, *, strict: bool) -> bool:
    """BFCL's equality: normalised strings, int for float, lists in order, objects by key."""
    # strict: an integer is wanted where the candidate is one (BFCL's type check covers
    # arguments and list items); inside objects BFCL compares numbers by value only
    if isinstance(candidate, str):
        return isinstance(value, str) and _standard(value) == _standard(candidate)
    if isinstance(candidate, bool) or isinstance(value, bool):
        return isinstance(value, bool) and isinstance(candidate, bool) and value == candidate
    if isinstance(candidate, int) and strict:
        return isinstance(value, int) and value == candidate
    if isinstance(candidate, int | float):
        return isinstance(value, int | float) and value == candidate
    if isinstance(candidate, list):
        return (
            isinstance(value, list)
            and len(value) == len(candidate)
            and all(_matches(v, c, strict=strict) for v, c in zip(value, candidate, strict=True))
        )
    if isinstance(candidate, Mapping):
        return isinstance(value, Mapping) and _object_matches(value, candidate)
    return value == candidate


def _object_matches(value: Mapping[str, Any], candidate: Mapping[str, Any]) -> bool:
    """An object against {key: [accepted values...]}: no other keys, required ones present."""
    if any(key not in candidate for key in value):
        return False
    if any(key not in value and OPTIONAL not in values for key, values in candidate.items()):
        return False
    return all(_accepted(v, candidate[key], strict=False) for key, v in value.items())


def _standard(text: str) -> str:
    """BFCL's string normalisation: no spaces or `,./-_*^`, lowercase, ' as "."""
    return _PUNCTUATION.sub("", text).lower().replace("'", '"')
