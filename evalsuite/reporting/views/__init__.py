"""What a user reads of the table: text, CSV and markdown (`leaderboard`), a run's summary, the pandas API, the heatmap."""
