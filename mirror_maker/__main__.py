"""``python -m mirror_maker`` runs the command line tool."""

from .cli import main

main()
