"""Stage 1, what to evaluate: task cards (declarative YAML), probe recipes, and where both ship."""
