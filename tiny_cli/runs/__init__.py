"""Wing: the run log — every invocation recorded in SQLite under the data directory.

It keeps one row per run (its Digest, transcript and tool calls, secrets scrubbed) so that
`tiny runs` can list, search, show, count, delete and export past runs: `log` is the facade
(RunLog: deleting, exporting, corrections, where a routed run's task should have gone),
`query` the reading side (queries, full-text search, stats), `store` the SQLite file, its
tables, the search index and their migrations, and the writing side: the observer and the
writer thread that record runs. Secrets are kept out by tiny_cli.secrets.
Rule: the run log knows runs only through their events; it never imports the agent or routing.
"""

from tiny_cli.runs.log import Correction, Deletion, RunLog
from tiny_cli.runs.query import (
    GroupStats,
    Reroutes,
    RunQuery,
    RunRecord,
    RunStats,
    RunSummary,
    parse_since,
)
from tiny_cli.runs.store import DB_NAME

__all__ = [
    "DB_NAME",
    "Correction",
    "Deletion",
    "GroupStats",
    "Reroutes",
    "RunLog",
    "RunQuery",
    "RunRecord",
    "RunStats",
    "RunSummary",
    "parse_since",
]
