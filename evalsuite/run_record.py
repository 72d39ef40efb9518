"""What a run's JSON holds (`run_record`): what was asked, what ran (model, device, precision, library versions) and
every probe's scores. Assembled here, where the run's config, card and backbone are at hand, and handed to the
results package (results/run_json.py), which writes it and imports nothing of the stages that made it."""

import datetime as dt
import sys
import uuid
from dataclasses import asdict
from pathlib import Path

from evalsuite.runtime.versions import library_versions


def run_record(config, card, backbone, probe_results, extracted, timings, device, precision: str) -> dict:
    """The run JSON's content: what was asked, what ran (model, device, precision, versions) and every probe's
    scores."""
    import torch  # here, not at the top: `evalsuite show` reads run JSONs without loading torch and timm

    from evalsuite.models.flops import forward_cost
    from evalsuite.models.transforms import describe_transform

    now = dt.datetime.now(dt.timezone.utc)
    return {
        "run_id": f"{now:%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:8]}",
        "timestamp_utc": now.isoformat(timespec="seconds"),
        "command": sys.argv,
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
        "task": {"name": card.name, "path": str(card.path), "sha256": card.sha256,
                 "selection_metric": card.selection_metric, "classes": card.classes},
        "model": {"name": config.label or backbone.label, "architecture_name": backbone.name, "weights_id": backbone.weights_id,
                  "embed_dim": backbone.embed_dim, "pooling": backbone.pooling,
                  # what probes read of a vision-language model: its joint embedding or the features before the
                  # projection (models/vision_language/entries.py); null for image-only models
                  "probe_features": backbone.probe_features,
                  "data_config": describe_transform(backbone.data_config),
                  **_slide_encoder_fields(config, backbone)},
        # What the backbone costs whatever the host's load: the report's cost axis (models/flops.py).
        "cost": forward_cost(backbone),
        "device": str(device),
        "precision": precision,  # what the forward passes computed in
        "threads": torch.get_num_threads(),
        "seeds": config.seeds,
        "samples_extracted": extracted,
        "probes": probe_results,
        "timings_s": timings,
        "versions": library_versions(),
    }


def _slide_encoder_fields(config, backbone) -> dict:
    """A slide-encoder run: the model is the slide encoder; the tile encoder that fed it is named beside it."""
    encoder = backbone.slide_encoder
    if encoder is None:
        return {}
    return {"name": config.label or encoder.label, "architecture_name": encoder.spec.name, "kind": encoder.spec.kind,
            "weights_id": encoder.weights_id, "embed_dim": encoder.embed_dim, "tiling": encoder.spec.tiling,
            "tile_encoder": {"name": backbone.name, "label": backbone.label, "weights_id": backbone.weights_id,
                             "embed_dim": backbone.embed_dim, "pooling": backbone.pooling}}
