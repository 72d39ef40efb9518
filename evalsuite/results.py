"""One results JSON per run, written atomically under <out>/runs/, and the library versions it records."""

import json
import os
import platform
from pathlib import Path


def library_versions() -> dict:
    import numpy
    import sklearn
    import timm
    import torch

    import evalsuite

    return {"evalsuite": evalsuite.__version__, "python": platform.python_version(), "torch": torch.__version__,
            "timm": timm.__version__, "numpy": numpy.__version__, "scikit-learn": sklearn.__version__}


def write_run_json(out_dir: Path, record: dict) -> Path:
    folder = Path(out_dir) / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{record['run_id']}.json"
    staging = path.with_suffix(".json.tmp")
    staging.write_text(json.dumps(record, indent=2, sort_keys=True))
    os.replace(staging, path)
    return path
