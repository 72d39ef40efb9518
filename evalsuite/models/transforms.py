"""Input transforms built from a backbone's data config (timm pretrained_cfg or registry entry)."""

from torchvision import transforms as T

_INTERPOLATIONS = {
    "bicubic": T.InterpolationMode.BICUBIC,
    "bilinear": T.InterpolationMode.BILINEAR,
    "nearest": T.InterpolationMode.NEAREST,
}


def build_transform(data_config: dict):
    """Resize the whole tile to the model input (no crop: tiles are already the region of interest)."""
    _, height, width = data_config["input_size"]
    interpolation = _INTERPOLATIONS.get(data_config.get("interpolation", "bicubic"), T.InterpolationMode.BICUBIC)
    return T.Compose([
        T.Resize((height, width), interpolation=interpolation, antialias=True),
        T.ToTensor(),
        T.Normalize(mean=data_config["mean"], std=data_config["std"]),
    ])


def describe_transform(data_config: dict) -> dict:
    """The facts that change pixels reaching the model; part of the cache key."""
    return {
        "resize": list(data_config["input_size"][1:]),
        "interpolation": data_config.get("interpolation", "bicubic"),
        "mean": [round(float(v), 6) for v in data_config["mean"]],
        "std": [round(float(v), 6) for v in data_config["std"]],
    }
