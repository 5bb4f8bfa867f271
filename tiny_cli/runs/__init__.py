"""Wing: the run log — every invocation recorded in SQLite under the data directory.

Rule: the run log knows runs only through their events; it never imports the agent or routing.
"""

from tiny_cli.runs.log import RunLog

__all__ = ["RunLog"]
