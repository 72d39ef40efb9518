"""The one registry of named models: every name `--model` takes, each entry a spec with its `kind`.

The entries live with their kind: image encoders in models/image/entries.py (timm architectures, their
`pretrained_cfg`, pooling), vision-language models in models/vision_language/entries.py (an image tower, a text
tower, a tokenizer), slide encoders in models/slide/ (one module per model, each listing its entries). A new model of an
existing kind is one entry in that kind's file; a new kind is one entries file, one line in ENTRIES below, and its
builder in backbones.py's and meta_build.py's tables.
Everything that looks a name up (building, planning, listing, sweeps) reads REGISTRY, not a kind's table.
"""

from evalsuite.models.image.entries import MODELS as IMAGE_ENTRIES
from evalsuite.models.slide.entries import SLIDE_ENCODERS as SLIDE_ENTRIES
from evalsuite.models.vision_language.entries import VLMS as VISION_LANGUAGE_ENTRIES

IMAGE = "image"
VISION_LANGUAGE = "vision-language"
SLIDE = "slide"  # slide encoders: tile features of a slide -> one slide embedding (models/slide/)
ENTRIES = {IMAGE: IMAGE_ENTRIES, VISION_LANGUAGE: VISION_LANGUAGE_ENTRIES, SLIDE: SLIDE_ENTRIES}  # kind -> its table


def _merged(tables: dict) -> dict:
    """{name: spec} over every kind; a name in two kinds' files would make `--model NAME` ambiguous."""
    registry = {}
    for kind, table in tables.items():
        for name, spec in table.items():
            if spec.kind != kind:
                raise ValueError(f"model entry {name} is in the {kind} entries but says kind {spec.kind}")
            if name in registry:
                raise ValueError(f"model name {name} is registered twice (kinds {registry[name].kind} and {kind})")
            registry[name] = spec
    return registry


REGISTRY = _merged(ENTRIES)


def of_kind(kind: str) -> dict:
    """{name: spec} of one kind, in the registry's order."""
    return {name: spec for name, spec in REGISTRY.items() if spec.kind == kind}


def slide_encoder(name: str):
    """The slide-encoder entry `name` names, or None (a tile encoder, a timm or hub name)."""
    spec = REGISTRY.get(name)
    return spec if spec is not None and spec.kind == SLIDE else None
