"""Probes on bags of tile features, one per slide or patient: ABMIL, mean pooling, Cox survival, MI-Zero."""
