"""Whether a person sits at stdin to answer a prompt: the process's, or what the caller says.

A command that would ask (approve a write, confirm a deletion) asks `stdin_is_terminal()`.
It is the stdin's own answer unless whoever invoked the command passed a `Terminal` as the
click context's object (`CliRunner().invoke(app, args, obj=Terminal(True))`): a parameter of
the invocation, as the provider and the clock are parameters of the library.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

# typer runs its own copy of click: the context is on its stack, not on the click package's
from typer.main import get_current_context


@dataclass(frozen=True)
class Terminal:
    """What the invoker says about stdin: True, a person can answer there."""

    stdin_is_terminal: bool


def stdin_is_terminal() -> bool:
    """Whether a prompt on stdin can be answered: the invoker's Terminal, else stdin's isatty."""
    context = get_current_context(silent=True)
    said = context.find_object(Terminal) if context is not None else None
    return said.stdin_is_terminal if said is not None else sys.stdin.isatty()
