"""One module per CLI command; each adds its sub-parser and sets `handler`."""

from evalsuite.commands import budget, cache, leaderboard, listing, robustness, run, show, sweep

COMMAND_MODULES = [run, budget, cache, listing, leaderboard, show, robustness, sweep]
