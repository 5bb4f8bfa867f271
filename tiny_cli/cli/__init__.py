"""Face: the `tiny` command line — a thin shell that parses options, calls the library, renders.

Only the faces (this package and `tiny_cli.serve`) import typer and rich and turn errors into
exit codes. `root` builds the app from one module per command group (`route`, `run`, `serve`,
`bench`, `runs`); `options` and `common` hold what they share, `process` the exit codes and
signals (`root` holds `main`); `render` (Digest, cards, routes), `render_bench`,
`render_runs` and `live` draw the results.
"""

from tiny_cli.cli.root import app, main

__all__ = ["app", "main"]
