"""Input transforms built from a backbone's data config (timm pretrained_cfg or registry entry)."""

from PIL import Image
from torchvision import transforms as T

_INTERPOLATIONS = {
    "bicubic": T.InterpolationMode.BICUBIC,
    "bilinear": T.InterpolationMode.BILINEAR,
    "nearest": T.InterpolationMode.NEAREST,
}
_PIL_FILTERS = {
    T.InterpolationMode.BICUBIC: Image.Resampling.BICUBIC,
    T.InterpolationMode.BILINEAR: Image.Resampling.BILINEAR,
    T.InterpolationMode.NEAREST: Image.Resampling.NEAREST,
}
# Pillow's two-step downscale: an integer box average first, then the filter over the last >= 3x. Pillow's docs: at
# 3.0 or more "the result is indistinguishable from fair resampling in most cases". It only acts on images shrunk 6x
# or more (a 1536 px BACH square to 224: 2x box, then bicubic), where it halves the resize time; smaller shrinks and
# every tile at its model size resize exactly as before. Measured on BACH photos: benchmarks/resize_gap.py.
REDUCING_GAP = 3.0


class Resize(T.Resize):
    """torchvision's Resize; on a PIL image, Pillow's resize with `reducing_gap` (torchvision's own calls it
    without one, so with None the pixels are the same)."""

    def __init__(self, size, interpolation, reducing_gap: float | None = REDUCING_GAP):
        super().__init__(size, interpolation=interpolation, antialias=True)
        self.reducing_gap = reducing_gap

    def forward(self, image):
        if not isinstance(image, Image.Image) or self.reducing_gap is None:
            return super().forward(image)
        height, width = self.size
        if image.size == (width, height):
            return image
        return image.resize((width, height), _PIL_FILTERS[self.interpolation], reducing_gap=self.reducing_gap)


def build_transform(data_config: dict, reducing_gap: float | None = REDUCING_GAP):
    """Resize the whole tile to the model input (no crop: tiles are already the region of interest)."""
    _, height, width = data_config["input_size"]
    interpolation = _INTERPOLATIONS.get(data_config.get("interpolation", "bicubic"), T.InterpolationMode.BICUBIC)
    return T.Compose([
        Resize((height, width), interpolation, reducing_gap),
        T.ToTensor(),
        T.Normalize(mean=data_config["mean"], std=data_config["std"]),
    ])


def describe_transform(data_config: dict) -> dict:
    """The facts that change pixels reaching the model; part of the cache key."""
    return {
        "resize": list(data_config["input_size"][1:]),
        "interpolation": data_config.get("interpolation", "bicubic"),
        "reducing_gap": REDUCING_GAP,
        "mean": [round(float(v), 6) for v in data_config["mean"]],
        "std": [round(float(v), 6) for v in data_config["std"]],
    }
