"""One module per CLI command; each adds its sub-parser and sets `handler`."""

from evalsuite.commands import leaderboard, listing, run, show

COMMAND_MODULES = [run, listing, leaderboard, show]
