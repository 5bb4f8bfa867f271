"""`python -m tiny_cli`: the `tiny` command."""

from tiny_cli.cli import main

main()
