"""call_within: a blocking call is waited for at most its seconds, and a worker it gave up on
is told, so a long walk stops instead of holding the interpreter for the rest of the run."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tiny_cli.errors import DeadlineExceeded
from tiny_cli.threads import abandoned, call_within, stop_if_abandoned
from tiny_cli.tools.handbook import Handbook

GENEROUS_SECONDS = 10.0  # a loaded 2-core machine: bounds that only a hang can pass


def test_a_call_that_never_returns_is_given_up_and_told() -> None:
    stopped = threading.Event()

    def waits_until_given_up() -> None:
        while not abandoned():
            stopped.wait(0.01)
        stopped.set()

    with pytest.raises(DeadlineExceeded):
        call_within(0.05, waits_until_given_up)
    assert stopped.wait(GENEROUS_SECONDS)  # the worker saw it and ended


def test_a_call_that_returns_in_time_is_not_abandoned() -> None:
    assert call_within(GENEROUS_SECONDS, abandoned) is False
    assert abandoned() is False  # not a worker: nobody gave up on this thread
    stop_if_abandoned()  # and so it raises nothing


def test_a_docs_search_whose_run_gave_up_stops_walking(tmp_path: Path) -> None:
    """The issue's `TINY_DOCS=/`: the walk, once its run's time is up, ends at the next folder."""
    for i in range(20):
        (tmp_path / f"part{i}").mkdir()
        (tmp_path / f"part{i}" / "page.md").write_text(f"# Page {i}\n\nvacation days {i}\n")
    outcome: list[object] = []
    done = threading.Event()

    def search_after_the_deadline() -> None:
        while not abandoned():  # the caller gives up first: the walk starts late
            done.wait(0.01)
        try:
            outcome.append(Handbook(tmp_path).search("vacation"))
        except DeadlineExceeded as exc:
            outcome.append(exc)
        done.set()

    with pytest.raises(DeadlineExceeded):
        call_within(0.05, search_after_the_deadline)
    assert done.wait(GENEROUS_SECONDS)
    assert isinstance(outcome[0], DeadlineExceeded)  # not a full walk and index
