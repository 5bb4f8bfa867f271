"""Face: the `tiny` command line — a thin shell that parses options, calls the library, renders.

Only the faces (this package and `tiny_cli.serve`) import typer and rich and turn errors into
exit codes. `root` builds the app from one module per command group (`route`, `run`, `serve`,
`bench`, `runs`); `options` and `common` hold what they share, `process` the exit codes,
signals and `main`; `render` (Digest, cards, routes), `render_bench`,
`render_runs` and `live` draw the results.
"""

from tiny_cli.cli.process import main
from tiny_cli.cli.root import app

__all__ = ["app", "main"]
