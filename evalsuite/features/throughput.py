"""Throughput of feature extraction: images/s of the whole pipeline and of the forward alone, and the hours a task
costs on the device that measured it (`device_hours_est`, named `gpu_hours_est` before issue 41: a CPU measures it
too). These are measurements: they move with the device and with whatever else the host runs, so each split records
the host's load average beside them, and the report compares models on their FLOPs (models/flops.py) instead.

Two clocks, both on rank 0 (other ranks extract their shards at the same time, so rank 0's rate times the world
size is the job's rate):
- extraction: wall time from the first batch request to the last chunk written, per split, so it includes decoding
  in the DataLoader workers, host-to-device copies, the float16 cast and the durable chunk writes;
- forward: the time inside the backbone call alone: on a GPU between CUDA events recorded around each call (a
  CUDA call returns before its kernels finish, and synchronising to read a host clock would stall the pipeline).
A split that was already cached costs nothing now: its figures are the ones recorded beside the cache when it was
extracted (`throughput.json`), so a fully cached run still reports what extraction costs on the machine that did
it. Caches made before this file existed have none, and the run records null.
"""

import collections
import json
import os
import platform
import time
from pathlib import Path

import torch

THROUGHPUT_FILE = "throughput.json"
SECONDS_PER_HOUR = 3600.0


class ForwardClock:
    """Wraps a backbone's feature function and adds up the images and the seconds it spends.

    On a GPU each forward is bracketed by two CUDA events recorded on the stream, never by a synchronisation: a
    forward's kernels are still running when the call returns, and waiting for them would stop the host from
    queueing the next batch (extraction waits once per chunk: host_rows.py). Finished events are folded into the
    total as they complete; `seconds` waits for the last one, after the split. On the CPU the call is synchronous
    and the host clock times it."""

    def __init__(self, features_of, device: torch.device):
        self.features_of, self.device = features_of, device
        self.images, self._done_s, self._pending = 0, 0.0, collections.deque()

    def __call__(self, images, *args, **kwargs):
        if self.device.type != "cuda":
            started = time.perf_counter()
            output = self.features_of(images, *args, **kwargs)
            self._done_s += time.perf_counter() - started
        else:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            output = self.features_of(images, *args, **kwargs)
            end.record()
            self._pending.append((start, end))
            self._fold(wait=False)
        self.images += len(images)
        return output

    @property
    def seconds(self) -> float:
        """Forward seconds so far; on a GPU this waits for the last forward's end event."""
        self._fold(wait=True)
        return self._done_s

    def _fold(self, wait: bool) -> None:
        while self._pending and (wait or self._pending[0][1].query()):  # query(): has the event happened, no wait
            start, end = self._pending.popleft()
            end.synchronize()
            self._done_s += start.elapsed_time(end) / 1000.0  # milliseconds


def device_name(device: torch.device) -> str:
    """The hardware behind `device`, e.g. 'NVIDIA A100-SXM4-80GB' or the CPU's model name."""
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return _cpu_model_name() or platform.processor() or platform.machine() or "cpu"


def _cpu_model_name() -> str | None:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def split_record(images: int, extract_s: float, forward_s: float, device: str, world_size: int) -> dict:
    """What one split's extraction measured (rank 0's shard), and the host's load as it finished: a rate measured
    beside other jobs is not the device's rate."""
    return {"images": images, "extract_s": round(extract_s, 4), "forward_s": round(forward_s, 4),
            "device_name": device, "world_size": world_size, **host_load()}


def host_load() -> dict:
    """{host_load_1m: the 1-minute load average, host_cpus: logical CPUs}; load None where the OS has none."""
    try:
        load_1m = round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):  # Windows has no load average
        load_1m = None
    return {"host_load_1m": load_1m, "host_cpus": os.cpu_count()}


def save_split_record(folder: Path, record: dict) -> bool:
    """Store the figures beside the finished cache; False when the file system refuses (the cache is complete and
    valid without them, so a full disk here must not fail the run; the run then records null)."""
    from evalsuite.features.cache import write_json_atomic

    try:
        write_json_atomic(Path(folder) / THROUGHPUT_FILE, record)
    except OSError:
        return False
    return True


def load_split_record(folder: Path) -> dict | None:
    """The figures stored beside a cache; None for caches made before they were recorded or a damaged file (the
    figures are informative, so a damaged file must not stop a run)."""
    try:
        record = json.loads((Path(folder) / THROUGHPUT_FILE).read_text())
    except (OSError, ValueError):
        return None
    return record if isinstance(record, dict) and {"images", "extract_s", "forward_s"} <= set(record) else None


def summarise(per_split: dict, total_images: int) -> dict:
    """The run's throughput block from {split: split record or None}: rates over the splits that have figures,
    and the device-hours an extraction of the task's `total_images` costs at that rate."""
    measured = [r for r in per_split.values() if r and r["images"] > 0 and r["extract_s"] > 0]
    summary = {"splits": per_split, "throughput_img_s": None, "forward_img_s": None, "device_hours_est": None,
               "device_name": measured[0]["device_name"] if measured else None,
               "host_load_1m": _highest_load(measured), "host_cpus": measured[0].get("host_cpus") if measured else None}
    if not measured:
        return summary
    images = sum(r["images"] for r in measured)
    world_size = max(r.get("world_size", 1) for r in measured)
    extract_img_s = images / sum(r["extract_s"] for r in measured) * world_size
    forward_s = sum(r["forward_s"] for r in measured)
    summary["throughput_img_s"] = round(extract_img_s, 3)
    summary["forward_img_s"] = round(images / forward_s * world_size, 3) if forward_s > 0 else None
    summary["device_hours_est"] = round(total_images / extract_img_s / SECONDS_PER_HOUR * world_size, 6)
    return summary


def _highest_load(measured: list):
    """The highest load any split was measured under (a rate is as doubtful as its busiest split); None when no
    split recorded one (caches made before issue 41)."""
    loads = [r["host_load_1m"] for r in measured if r.get("host_load_1m") is not None]
    return max(loads) if loads else None
