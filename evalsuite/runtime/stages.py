"""Where a run is: one `progress:` line on stderr as it enters a stage that can take seconds with nothing else on
the screen.

A cached run used to say nothing for its first 7-27 s (importing torch, building the backbone, loading the caches,
fitting the probes), then print everything at once. Loops that take long draw their own progress
(runtime/progress.py); these lines name the stages between them. Only the main process speaks (torchrun rank 0),
so a log of K ranks has each line once.
"""

import os
import sys

PREFIX = "progress: "  # as the loops' lines (runtime/progress.py): one prefix to grep a log for


def say(text: str) -> None:
    if os.environ.get("RANK", "0") in ("", "0"):
        print(PREFIX + text, file=sys.stderr, flush=True)


def features_line(plan) -> str:
    """What the feature stage will do, from the budget plan: which splits are cached and which are extracted."""
    cached = [s.split for s in plan.splits if s.cached]
    todo = [f"{s.split} ({s.samples:,} items)" for s in plan.splits if not s.cached]
    parts = ([f"extracting {', '.join(todo)}"] if todo else []) + ([f"cached: {', '.join(cached)}"] if cached else [])
    return f"features ({plan.decision}): {'; '.join(parts)}"


def probes_line(fits: list) -> str:
    """The probe fits a run makes: recipes and seeds."""
    recipes = list(dict.fromkeys(recipe.name for recipe, _ in fits))
    seeds = list(dict.fromkeys(seed for _, seed in fits))
    return (f"probes: {len(fits)} fit(s): {', '.join(recipes)} x {len(seeds)} seed(s); "
            "then the test intervals (bootstrap)")
