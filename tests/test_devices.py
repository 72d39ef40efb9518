"""Device logic, checked for CPU and CUDA with torch.device parameters (no GPU needed)."""

import warnings

import pytest
import torch

from evalsuite.devices import autocast_context, loader_kwargs, resolve_device
from evalsuite.errors import EvalsuiteError


@pytest.mark.parametrize("device, pinned", [(torch.device("cpu"), False), (torch.device("cuda", 0), True)])
def test_pinned_memory_only_for_cuda(device, pinned):
    assert loader_kwargs(device, num_workers=2)["pin_memory"] is pinned


def test_persistent_workers_only_when_reused_and_only_with_workers():
    assert loader_kwargs(torch.device("cpu"), 2, reused=True)["persistent_workers"] is True
    assert loader_kwargs(torch.device("cpu"), 2)["persistent_workers"] is False
    assert "persistent_workers" not in loader_kwargs(torch.device("cpu"), 0, reused=True)


@pytest.mark.parametrize("device", [torch.device("cpu"), torch.device("cuda", 0)])
def test_autocast_is_bf16_on_the_device_type(device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns that CUDA autocast is disabled without a GPU
        context = autocast_context(device)
    assert context.device == device.type
    assert context.fast_dtype == torch.bfloat16


def test_autocast_runs_bf16_on_cpu_and_can_be_disabled():
    layer = torch.nn.Linear(4, 4)
    x = torch.randn(2, 4)
    with torch.inference_mode(), autocast_context(torch.device("cpu")):
        assert layer(x).dtype == torch.bfloat16
    with torch.inference_mode(), autocast_context(torch.device("cpu"), enabled=False):
        assert layer(x).dtype == torch.float32


def test_auto_device_follows_cuda_availability(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert resolve_device("auto") == torch.device("cuda")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert resolve_device("auto") == torch.device("cpu")


def test_cuda_requested_without_cuda_is_a_clear_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(EvalsuiteError, match="CUDA is not available"):
        resolve_device("cuda:1")
