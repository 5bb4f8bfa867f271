"""Values that change from run to run (the page server's URL, the scratch home, artifact
handles), written as stable placeholders in a recording and filled in with this run's values
on replay.

A value is replaced in a structure's strings, never in its JSON text, where a value JSON
escapes (a Windows path's backslashes) would not be found. In a string that is JSON itself (a
tool call's `arguments`) the escaped forms are masked and filled in escaped, so a call recorded
in `/tmp/…` replays in `C:\\Users\\…` as valid JSON; the `\\u` form has a placeholder of its
own, `{home:ascii}`, so it comes back as it was written (a request's key counts it as `{home}`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

ASCII_TAG = ":ascii"  # `{home:ascii}`: the value as a JSON text wrote it with \u escapes


@dataclass(frozen=True)
class Volatile:
    """Values that differ from run to run, each with the stable placeholder that stands for it."""

    pairs: tuple[tuple[str, str], ...] = ()

    @classmethod
    def of(cls, values: Mapping[str, str | None]) -> Volatile:
        """Build from placeholder → value; empty values are skipped, longest values first."""
        pairs = [(v, k) for k, v in values.items() if v]
        return cls(tuple(sorted(pairs, key=lambda p: -len(p[0]))))

    def plus(self, values: Mapping[str, str | None]) -> Volatile:
        """Return a copy with more placeholders."""
        return Volatile.of({**{p: v for v, p in self.pairs}, **values})

    def mask(self, text: str) -> str:
        """Replace every volatile value in `text` with its placeholder (see `_forms`)."""
        if self._escaped and _is_json_text(text):
            masked = _swapped(text, self._masks_in_json)
            if self.unmask(masked) == text:  # else a placeholder was there already: as before
                return masked
        return _swapped(text, self.pairs)

    def unmask(self, text: str) -> str:
        """Replace every placeholder in `text` with this run's value, JSON-escaped in JSON."""
        in_json = self._escaped and _is_json_text(text)
        fills = [(p, u if in_json else v) for v, p, u, _ in self._forms]
        return _swapped(text, [*fills, *self._ascii_forms])

    def key_mask(self, text: str) -> str:
        """`mask` with one placeholder for both escaped forms of a value: a request's key is the
        same whether this run's values hold characters JSON escapes or not."""
        text = self.mask(text)
        for _, placeholder in self.pairs if self._escaped else ():
            text = text.replace(_ascii_tagged(placeholder), placeholder)
        return text

    @cached_property
    def _forms(self) -> tuple[tuple[str, str, str, str], ...]:
        """Each value and placeholder, and the value as a JSON text holds it (a tool call's
        `arguments`, a JSON tool result): escaped without ensure_ascii, then with it."""
        return tuple(
            (v, p, json.dumps(v, ensure_ascii=False)[1:-1], json.dumps(v)[1:-1])
            for v, p in self.pairs
        )

    @cached_property
    def _escaped(self) -> bool:
        """Whether a value reads differently in JSON (a POSIX path does not: no JSON parse)."""
        return any(not v == u == a for v, _, u, a in self._forms)

    @cached_property
    def _masks_in_json(self) -> tuple[tuple[str, str], ...]:
        """Each escaped form and its placeholder; the \\u form's tagged (`{home:ascii}`) where it
        differs, so that unmasking writes back the same escapes."""
        masks: list[tuple[str, str]] = []
        for _, placeholder, unicode, ascii_form in self._forms:
            if ascii_form != unicode:
                masks.append((ascii_form, _ascii_tagged(placeholder)))
            masks.append((unicode, placeholder))
        return tuple(masks)

    @cached_property
    def _ascii_forms(self) -> tuple[tuple[str, str], ...]:
        """Each tagged placeholder and the \\u form it stands for, whatever the values are."""
        return tuple((_ascii_tagged(p), a) for _, p, _, a in self._forms)


def _ascii_tagged(placeholder: str) -> str:
    """`{home}` as `{home:ascii}`: where a JSON text wrote the value with \\u escapes."""
    return f"{placeholder[:-1]}{ASCII_TAG}{placeholder[-1:]}"


def _swapped(text: str, pairs: Iterable[tuple[str, str]]) -> str:
    """`text` with each pair's first string replaced by its second, in order."""
    for old, new in pairs:
        text = text.replace(old, new)
    return text


def _is_json_text(text: str) -> bool:
    """Whether `text` is a JSON object or array, whose strings hold values JSON-escaped."""
    if not text.lstrip().startswith(("{", "[")):
        return False
    try:
        json.loads(text)
    except (ValueError, RecursionError):  # not JSON, or nested past what Python parses
        return False
    return True


NO_VOLATILE = Volatile()


def each_string(data: Any, change: Callable[[str], str]) -> Any:
    """JSON-ready `data` with `change` made to every string in it, keys too."""
    if isinstance(data, dict):
        return {each_string(k, change): each_string(v, change) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [each_string(item, change) for item in data]
    return change(data) if isinstance(data, str) else data
