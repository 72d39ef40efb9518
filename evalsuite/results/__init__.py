"""The write side: the files a run leaves under --out (its run JSON, the long leaderboard CSV with its appends
and commits, the stored test predictions, the files beside a run) and how they are read back. It imports nothing
of the stages that made the run (tests/test_architecture.py)."""
