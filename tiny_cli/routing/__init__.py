"""Wing: routing — the concierge that ranks cards for a task, routes or abstains.

`router` scores cards, `embed` turns text into vectors (offline by default), `evaluation`
measures a router on a labelled set. Rule: routing never imports the agent or the run log.
"""

from tiny_cli.threads import import_numpy

import_numpy()  # first, before any routing module: OpenBLAS on one thread (tiny_cli.threads)

from tiny_cli.routing.router import Decision, Router  # noqa: E402

__all__ = ["Decision", "Router"]
