"""One module per CLI command; each adds its sub-parser and sets `handler`."""

from evalsuite.commands import budget, cache, download, leaderboard, listing, report, robustness, run, show, sweep

COMMAND_MODULES = [run, budget, cache, listing, leaderboard, report, show, robustness, sweep, download]
