"""evalsuite: frozen-backbone probe evaluation for pathology foundation models.

Flow: task card -> dataset reader -> frozen backbone -> float16 feature cache -> probe
-> metrics -> results JSON + leaderboard CSV.
"""

__version__ = "0.1.0"
