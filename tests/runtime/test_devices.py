"""Device logic, checked for CPU and CUDA with torch.device parameters (no GPU needed)."""

import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.runtime.devices import loader_kwargs, resolve_device


@pytest.mark.parametrize("device, pinned", [(torch.device("cpu"), False), (torch.device("cuda", 0), True)])
def test_pinned_memory_only_for_cuda(device, pinned):
    assert loader_kwargs(device, num_workers=2)["pin_memory"] is pinned


def test_persistent_workers_only_when_reused_and_only_with_workers():
    assert loader_kwargs(torch.device("cpu"), 2, reused=True)["persistent_workers"] is True
    assert loader_kwargs(torch.device("cpu"), 2)["persistent_workers"] is False
    assert "persistent_workers" not in loader_kwargs(torch.device("cpu"), 0, reused=True)


def test_auto_device_follows_cuda_availability(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")


def test_cuda_requested_without_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(EvalsuiteError, match="CUDA is not available"):
        resolve_device("cuda:1")
