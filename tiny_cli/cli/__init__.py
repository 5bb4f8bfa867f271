"""Face: the `tiny` command line — a thin shell that parses options, calls the library, renders.

Only the faces (this package and `tiny_cli.serve`) import typer and rich and turn errors into
exit codes.
"""

from tiny_cli.cli.commands import app, main

__all__ = ["app", "main"]
