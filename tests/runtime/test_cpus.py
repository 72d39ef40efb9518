"""Intra-op threads: small training steps run on one thread, and the caller's setting comes back."""

import numpy as np
import pytest
import torch

from evalsuite.probes.pooled.linear import LinearProbe
from evalsuite.probes.pooled.linear_heads import LinearHeads
from evalsuite.runtime.cpus import SMALL_STEP_FLOPS, threads_for_steps


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("step_flops, inside", [(SMALL_STEP_FLOPS / 10, 1), (SMALL_STEP_FLOPS, 2)])
def test_small_steps_run_on_one_thread_and_the_setting_is_restored(two_threads, step_flops, inside):
    with threads_for_steps(step_flops) as threads:
        assert threads == torch.get_num_threads() == inside
    assert torch.get_num_threads() == 2


def test_the_setting_is_restored_when_the_loop_fails(two_threads):
    with pytest.raises(RuntimeError, match="boom"):
        with threads_for_steps(1.0):
            raise RuntimeError("boom")
    assert torch.get_num_threads() == 2


def test_the_linear_probe_trains_its_heads_on_one_thread(two_threads, monkeypatch):
    seen = []
    step = LinearHeads.step
    monkeypatch.setattr(LinearHeads, "step", lambda self, *a: (seen.append(torch.get_num_threads()), step(self, *a)))
    rng = np.random.default_rng(0)
    features, labels = rng.normal(size=(64, 16)).astype(np.float16), np.arange(64) % 2
    LinearProbe(2, lr=[1e-2, 1e-3], epochs=2, batch_size=16).fit(features, labels, features, labels)
    assert seen and set(seen) == {1}
    assert torch.get_num_threads() == 2
