"""`python -m tiny_cli` and the `tiny` script: a Ctrl-C while the command line loads (typer,
the command's modules) ends it as any other does, one line and exit 130."""

import sys

EXIT_INTERRUPTED = 130  # as tiny_cli.cli says it; that module is what may not have loaded


def main() -> None:
    """Run `tiny`."""
    try:
        from tiny_cli.cli import main as run
    except KeyboardInterrupt:
        sys.stderr.write("tiny: interrupted\n")
        raise SystemExit(EXIT_INTERRUPTED) from None
    run()


if __name__ == "__main__":
    main()
