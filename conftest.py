"""Collect the shell examples of README.md, docs/*.md and examples/*/README.md as tests.

Sybil parses them; tests/docs_examples.py says how a block is run and checked.
"""

from tests.docs_examples import (
    pytest_collect_file,
    pytest_collection_modifyitems,
    pytest_runtest_makereport,
)

__all__ = ["pytest_collect_file", "pytest_collection_modifyitems", "pytest_runtest_makereport"]
