"""What a backbone costs, independent of the machine and its load: forward GFLOPs per image and parameter count.

Measured rates (features/throughput.py) move with the host's load and the device: the same EfficientNet ran at 4.6
and 8.1 img/s on one loaded host (issue 41), and a cost axis built on them called one of two identical architectures
cheaper. A FLOP count depends only on the architecture and the input size, so it is the cost the report compares.

The count is torch's FlopCounterMode over one forward of one image at the model's input size (every tile is
resized to it: models/transforms.py). It runs on meta tensors (shapes without data) swapped in for the weights:
no arithmetic, no memory, the same figure on a laptop and a GPU node, and equal for pretrained and random-init
weights. A model with an op that has no meta kernel is counted on one real zero image on its own device instead.
FlopCounterMode counts the matrix products and convolutions (a multiply-add is 2 FLOPs), which are nearly all of a
backbone's work; element-wise ops, norms and pooling are left out, the same way for every model.
"""

import math

import torch
from torch.utils.flop_counter import FlopCounterMode

FLOPS_PER_GFLOP = 1e9


def forward_cost(backbone) -> dict:
    """{gflops_per_image, params, input_size_px, counted_on} of `backbone`'s classification forward."""
    _, height, width = backbone.data_config["input_size"]
    flops, counted_on = _meta_flops(backbone, height, width), "meta"
    if flops is None:
        flops, counted_on = _real_flops(backbone, height, width), "device"
    params = image_parameter_count(backbone) if getattr(backbone.model, "has_text_tower", False) else None
    return {"gflops_per_image": float(f"{flops / FLOPS_PER_GFLOP:.6g}"),
            "params": params or parameter_count(backbone.model),
            "input_size_px": [int(height), int(width)], "counted_on": counted_on}


def parameter_count(model: torch.nn.Module) -> int:
    """Parameters of `model`, a tensor shared by two layers counted once (parameters() yields it once)."""
    return int(sum(math.prod(p.shape) for p in model.parameters()))


def image_parameter_count(backbone) -> int | None:
    """Parameters the image forward uses, for a vision-language model whose module also holds its text tower (the
    text tower costs nothing per image): those that get a gradient from one image forward, run on meta tensors.
    None where that cannot run on meta (the caller counts every parameter)."""
    forward = _Forward(backbone)
    params = dict(forward.named_parameters())
    meta = {name: torch.empty_like(t, device="meta").requires_grad_(t.is_floating_point())
            for name, t in params.items()}
    meta.update({name: torch.empty_like(t, device="meta") for name, t in forward.named_buffers()})
    _, height, width = backbone.data_config["input_size"]
    image = torch.zeros(1, 3, height, width, dtype=_float_dtype(params.values()), device="meta")
    try:
        with torch.enable_grad():
            torch.func.functional_call(forward, meta, (image,)).float().sum().backward()
    except (NotImplementedError, RuntimeError, TypeError, ValueError):
        return None
    return int(sum(math.prod(meta[name].shape) for name in params if meta[name].grad is not None))


class _Forward(torch.nn.Module):
    """The backbone's feature call as a module, so functional_call can swap the weights for meta tensors while the
    backbone's own code (pooling, prefix tokens) runs unchanged."""

    def __init__(self, backbone):
        super().__init__()
        self.model, self.backbone = backbone.model, backbone

    def forward(self, images):
        return self.backbone.pooled_features(images)


def _meta_flops(backbone, height: int, width: int) -> int | None:
    forward = _Forward(backbone)
    tensors = {**dict(forward.named_parameters()), **dict(forward.named_buffers())}
    meta = {name: torch.empty_like(t, device="meta") for name, t in tensors.items()}
    image = torch.zeros(1, 3, height, width, dtype=_float_dtype(tensors.values()), device="meta")
    try:
        with torch.no_grad(), FlopCounterMode(display=False) as counter:
            torch.func.functional_call(forward, meta, (image,))
    except (NotImplementedError, RuntimeError, TypeError, ValueError):
        return None  # an op without a meta kernel, or one that reads values (.item()): count on real tensors
    return counter.get_total_flops()


def _real_flops(backbone, height: int, width: int) -> int:
    tensors = list(backbone.model.parameters()) + list(backbone.model.buffers())
    device = tensors[0].device if tensors else torch.device("cpu")
    image = torch.zeros(1, 3, height, width, dtype=_float_dtype(tensors), device=device)
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        backbone.pooled_features(image)
    return counter.get_total_flops()


def _float_dtype(tensors) -> torch.dtype:
    """The weights' floating dtype (an input of another dtype fails the first layer)."""
    return next((t.dtype for t in tensors if t.is_floating_point()), torch.float32)
