"""models/flops.py: the FLOP count of a known layer, the same on meta tensors and on real ones, and the fallback for
a forward that reads values (no meta kernel can run it)."""

from types import SimpleNamespace

import pytest
import torch

from evalsuite.models.flops import forward_cost


class Linear(torch.nn.Module):
    """Flattens a 3 x 4 x 4 image and maps it to 10 features: 48 x 10 multiply-adds, 960 FLOPs."""

    def __init__(self, reads_values: bool = False):
        super().__init__()
        self.layer, self.reads_values = torch.nn.Linear(48, 10), reads_values

    def forward(self, images):
        if self.reads_values and float(images.sum().item()) > 1e9:  # .item(): meta tensors hold no values
            return images
        return self.layer(images.flatten(1))


def _backbone(model) -> SimpleNamespace:
    return SimpleNamespace(model=model, data_config={"input_size": (3, 4, 4)}, pooled_features=model)


def test_a_linear_layer_costs_two_flops_per_multiply_add_and_its_parameters_are_counted():
    cost = forward_cost(_backbone(Linear()))
    assert cost == {"gflops_per_image": 960 / 1e9, "params": 48 * 10 + 10, "input_size_px": [4, 4],
                    "counted_on": "meta"}


def test_a_forward_that_reads_values_is_counted_on_real_tensors_to_the_same_figure():
    cost = forward_cost(_backbone(Linear(reads_values=True)))
    assert cost["counted_on"] == "device" and cost["gflops_per_image"] == 960 / 1e9


class ImageAndText(torch.nn.Module):
    """A vision-language module: its forward (the image embedding) never touches the text layer."""

    has_text_tower = True

    def __init__(self):
        super().__init__()
        self.image, self.text = torch.nn.Linear(48, 10), torch.nn.Linear(10, 10)

    def forward(self, images):
        return self.image(images.flatten(1))


def test_a_vision_language_model_counts_only_the_parameters_its_image_forward_uses():
    model = ImageAndText()
    assert forward_cost(_backbone(model))["params"] == 48 * 10 + 10
    model.has_text_tower = False  # any other module counts every parameter it holds
    assert forward_cost(_backbone(model))["params"] == 48 * 10 + 10 + 10 * 10 + 10


def test_clips_cost_is_its_image_tower():
    pytest.importorskip("open_clip")
    from evalsuite.models.backbones import build_backbone

    backbone = build_backbone("clip-vit-b-16", random_init=True)
    visual = sum(p.numel() for p in backbone.model.clip.visual.parameters())
    assert forward_cost(backbone)["params"] == visual < sum(p.numel() for p in backbone.model.parameters())
