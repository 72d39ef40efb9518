"""What one run is asked to do (RunConfig) and the defaults the CLI and the API share.

Kept free of torch and timm so the CLI checks its flags before the heavy imports.
"""

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from evalsuite.runtime.cpus import default_num_workers

DEFAULT_MODEL = "efficientnet_lite0_imagenet"
DEFAULT_OUT = "evalsuite_out"
# The largest probe seed: scikit-learn takes a random_state up to 2**32 - 1 (the ridge_hest probe), and
# probes/batches.py's seed * 1_000_003 + epoch stays within torch's 64-bit seeds below it. Larger seeds failed
# after extraction with "Overflow when unpacking long long".
MAX_SEED = 2**32 - 1


@dataclass
class RunConfig:
    task: str
    model: str = DEFAULT_MODEL
    weights: str | None = None
    random_init: bool = False
    pooling: str | None = None  # --pooling: classification embedding rule for token models (None: card's, model's)
    probes: list = field(default_factory=list)  # empty: the card's default probes
    out_dir: Path = Path(DEFAULT_OUT)
    seeds: list = field(default_factory=lambda: [0])  # probes are trained and scored once per seed
    device: str = "auto"
    batch_size: int | None = None  # extraction batch; None: default_batch_size for the run's device
    num_workers: int | None = None  # DataLoader workers; None: default_num_workers for the run's device
    precision: str = "auto"  # auto | bf16 | fp16 | fp32 (evalsuite.runtime.precision)
    threads: int = 0  # torch intra-op threads; 0: every usable CPU (evalsuite.runtime.cpus)
    data_root: str | None = None
    check_counts: bool = True
    cache: str = "auto"  # ram | memmap | auto (the budget planner decides)
    mem: str | None = None  # memory limit to plan for, e.g. "85G"; None: Slurm, cgroup, MemAvailable
    chunk_rows: int | None = None  # extraction chunk; None: sized by bytes
    skip_bad_slides: bool = False  # slide tasks: leave out (and record) slides that cannot be tiled
    plots: bool = False  # also save a reliability diagram PNG per probe and seed beside the run JSON
    label: str | None = None  # the leaderboard's model column; None: the backbone's own label (a sweep names its own)

    def for_device(self, device_type: str) -> "RunConfig":
        """This config with the defaults that depend on the device filled in (batch size, DataLoader workers)."""
        workers = default_num_workers(device_type) if self.num_workers is None else self.num_workers
        batch_size = default_batch_size(device_type) if self.batch_size is None else self.batch_size
        return dataclasses.replace(self, num_workers=workers, batch_size=batch_size)


def default_batch_size(device_type: str) -> int:
    """64 images on a GPU; 16 on the CPU, where, with freed memory reused (runtime/allocator.py), every size from 8
    to 64 ran within 6 % a tile on 2 AVX-512 cores, and the smaller batch holds a quarter of the activations and
    pads fewer images at the end of a split (benchmarks/forward_batch.py, docs/compute.md)."""
    return 64 if device_type == "cuda" else 16
