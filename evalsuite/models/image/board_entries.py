"""The encoders leading today's public boards (THUNDER's rank-sum, nanopath, Histoboard), one ModelSpec each, with
the same kinds of facts and sources as entries.py."""

BOARD_SPECS: list = []
