"""Backbones built once for several runs: a sweep running one model's cells in a row loads its weights once."""

from evalsuite.models.backbones import Backbone, build_backbone


class ReusedBuilds:
    """`build_backbone`'s plain build (no pooling rule applied), handing back the last backbone when asked for the
    same (name, weights, random_init) again. One model is held at a time: a sweep orders its cells model by model."""

    def __init__(self):
        self._last = None  # ((name, weights, random_init), Backbone)
        self.builds = 0  # how many models were built, for tests and the sweep's log

    def __call__(self, name: str, weights: str | None, random_init: bool) -> Backbone:
        wanted = (name, weights, random_init)
        if self._last is None or self._last[0] != wanted:
            self._last = None  # the previous model is freed before the next one is built
            self._last = (wanted, build_backbone(name, weights, random_init))
            self.builds += 1
        return self._last[1]
