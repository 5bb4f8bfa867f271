from tiny_cli.cli import main

main()
