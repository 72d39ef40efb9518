"""Defaults shared by several commands."""

DEFAULT_OUT = "evalsuite_out"
