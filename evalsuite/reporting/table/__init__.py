"""The models x tasks table built from leaderboard rows: a cell per (model, task), the probe val chose, ranks."""
