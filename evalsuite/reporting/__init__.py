"""Stage 7, results others read: the run JSON, the leaderboard CSV, its wide table, views and heatmap."""
