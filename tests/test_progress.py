"""The index build's progress bar: drawn on a terminal only, and only once a batch reports."""

from __future__ import annotations

import io

from tiny_cli.cli.route import index_progress


class _Terminal(io.StringIO):
    """A stream that says it is a terminal, and keeps what was drawn on it."""

    def isatty(self) -> bool:
        return True


def test_off_a_terminal_there_is_no_bar() -> None:
    with index_progress(io.StringIO()) as progress:
        assert progress is None


def test_on_a_terminal_each_batch_moves_the_bar() -> None:
    screen = _Terminal()
    with index_progress(screen) as progress:
        assert progress is not None
        progress(256, 1000)
        progress(1000, 1000)
    assert "embedding card texts" in screen.getvalue()


def test_a_cached_router_draws_nothing() -> None:
    screen = _Terminal()
    with index_progress(screen):
        pass  # no batch reported: the router was loaded, not built
    assert "embedding" not in screen.getvalue()
