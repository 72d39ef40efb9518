"""The host-RAM budget planner: can this run hold its feature caches in RAM, on disk, or not at all?

Planned bytes per split = samples x row elements x 2 (float16), where the row shape comes
from one real forward pass (or, without the weights, one pass on the meta device); plus labels (8 bytes per class
id, or the masks' own bytes), the backbone's parameters, the probe working set and the extraction working set. The
limit is --mem as given (capped only by the Slurm allocation and the cgroup limit), or without --mem the smallest of
the Slurm allocation, the cgroup limit and MemAvailable (features/memory_limits.py), less a safety margin of 10 % (at
least 256 MiB) for the interpreter, CUDA context and allocator slack.

- `ram`: everything, all splits' caches included, fits under the limit;
- `memmap`: it does not, but the working sets without the caches do;
- `refuse`: not even that, or the disk holding the cache has no room for the splits still to extract (a RAM
  cache is written there too). `evalsuite budget` exits with EXIT_REFUSE so job scripts can gate.
"""

import math
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from evalsuite.errors import EXIT_REFUSE, EvalsuiteError

SAFETY_MARGIN_FRACTION = 0.10
SAFETY_MARGIN_MIN_BYTES = 256 * 1024**2
# Rows a probe upcasts at once (kNN query x bank blocks, linear eval batch), times the
# float32 copies alive together (batch, normalised batch, similarities/logits, gradients).
PROBE_BATCH_ROWS = 1024
# Segmentation heads upcast token grids a small batch at a time (the seg recipes' eval batch),
# and their logits are upsampled to the label resolution for every class.
DENSE_PROBE_BATCH_ROWS = 32
PROBE_FLOAT32_COPIES = 4
CLASS_ID_BYTES = 8  # a classification label: one int64 class id
LOADER_BATCHES_IN_FLIGHT_PER_WORKER = 2  # torch DataLoader prefetch_factor default


class BudgetRefused(EvalsuiteError):
    exit_code = EXIT_REFUSE


@dataclass
class SplitPlan:
    split: str
    samples: int
    row_shape: list
    cache_bytes: int
    cached: bool
    label_bytes: int | None = None  # None: one int64 class id per sample; masks give their own size

    def labels_in_memory_bytes(self) -> int:
        return self.samples * CLASS_ID_BYTES if self.label_bytes is None else self.label_bytes


@dataclass
class Plan:
    decision: str
    requested: str
    limit_bytes: int
    limit_source: str
    sources: dict
    margin_bytes: int
    usable_bytes: int
    splits: list
    model_bytes: int
    probe_working_bytes: int
    extraction_working_bytes: int
    ram_needed_bytes: int
    memmap_needed_bytes: int
    disk_needed_bytes: int
    disk_free_bytes: int
    cache_dir: str
    reason: str = ""
    notes: list = field(default_factory=list)
    limit_rule: str = ""  # how the limit was chosen (--mem as given, or this host's smallest)
    set_aside: dict = field(default_factory=dict)  # {source: bytes} found here but not consulted (--mem given)

    def to_dict(self) -> dict:
        return asdict(self)


def cache_bytes(samples: int, row_shape) -> int:
    return samples * int(np.prod(row_shape, dtype=np.int64)) * 2


def model_bytes(model) -> int:
    tensors = list(model.parameters()) + list(model.buffers())
    return sum(t.numel() * t.element_size() for t in tensors)


def probe_working_bytes(row_shape, label_shape=(), num_classes: int = 0) -> int:
    """Float32 bytes a probe holds at once: vector rows in large batches; token grids in small
    batches, with their logits at the label resolution (`label_shape` of one mask)."""
    row_elements = int(np.prod(row_shape, dtype=np.int64))
    if len(row_shape) == 1:
        return PROBE_BATCH_ROWS * row_elements * 4 * PROBE_FLOAT32_COPIES
    logit_elements = num_classes * int(np.prod(label_shape, dtype=np.int64))
    return DENSE_PROBE_BATCH_ROWS * (row_elements + logit_elements) * 4 * PROBE_FLOAT32_COPIES


def extraction_working_bytes(input_shape, batch_size: int, num_workers: int, chunk_rows: int, row_shape) -> int:
    batches_in_flight = 2 + num_workers * LOADER_BATCHES_IN_FLIGHT_PER_WORKER
    images = batches_in_flight * batch_size * int(np.prod(input_shape)) * 4
    return images + chunk_rows * int(np.prod(row_shape, dtype=np.int64)) * 2


def _free_disk_bytes(folder: Path) -> int:
    probe = Path(folder).resolve()
    while not probe.exists():
        probe = probe.parent
    return shutil.disk_usage(probe).free


def make_plan(splits: list[SplitPlan], sources: dict, model_size_bytes: int, probe_bytes: int, extraction_bytes: int,
              cache_dir: Path, requested: str = "auto", disk_free_bytes: int | None = None) -> Plan:
    if not sources:
        raise EvalsuiteError("cannot tell how much memory is available (no --mem, Slurm, cgroup or /proc/meminfo); "
                             "pass --mem, e.g. --mem 85G")
    limit_source, limit = min(sources.items(), key=lambda item: item[1])
    margin = max(math.ceil(limit * SAFETY_MARGIN_FRACTION), SAFETY_MARGIN_MIN_BYTES)
    usable = max(limit - margin, 0)
    all_caches = sum(s.cache_bytes for s in splits)
    labels = sum(s.labels_in_memory_bytes() for s in splits)
    ram_needed = all_caches + labels + model_size_bytes + max(probe_bytes, extraction_bytes)
    memmap_needed = labels + model_size_bytes + max(probe_bytes, extraction_bytes)
    disk_needed = sum(s.cache_bytes for s in splits if not s.cached)
    disk_free = _free_disk_bytes(cache_dir) if disk_free_bytes is None else disk_free_bytes
    plan = Plan(decision="", requested=requested, limit_bytes=limit, limit_source=limit_source, sources=sources,
                margin_bytes=margin, usable_bytes=usable, splits=splits, model_bytes=model_size_bytes,
                probe_working_bytes=probe_bytes, extraction_working_bytes=extraction_bytes,
                ram_needed_bytes=ram_needed, memmap_needed_bytes=memmap_needed, disk_needed_bytes=disk_needed,
                disk_free_bytes=disk_free, cache_dir=str(cache_dir))
    plan.decision, plan.reason = _decide(plan, requested)
    plan.limit_rule = _rule("" if "--mem" in sources else None, {})
    return plan


def with_limits(plan: Plan, sources: dict, set_aside: dict, mem: str | None) -> Plan:
    """The same plan decided against other limits (`budget`'s, which plans a job that may run elsewhere)."""
    replanned = make_plan(plan.splits, sources, plan.model_bytes, plan.probe_working_bytes,
                          plan.extraction_working_bytes, Path(plan.cache_dir), plan.requested, plan.disk_free_bytes)
    replanned.notes, replanned.set_aside = list(plan.notes), dict(set_aside)
    replanned.limit_rule = _rule(mem, set_aside)
    return replanned


def _rule(mem: str | None, set_aside: dict) -> str:
    """How the limit was chosen, for the `limits:` line; `mem` is --mem as typed ('' where only known to be given)."""
    if mem is None:
        return "no --mem: the smallest of this host's limits (Slurm allocation, cgroup limit, MemAvailable)"
    given = f"--mem {mem} is the budget as given" if mem else "--mem is the budget as given"
    if not set_aside:
        return f"{given}; MemAvailable is consulted only without --mem"
    return f"{given}; not consulted: {', '.join(f'{k} {human_bytes(v)}' for k, v in set_aside.items())} on this host"


def _decide(plan: Plan, requested: str) -> tuple[str, str]:
    fits_ram = plan.ram_needed_bytes <= plan.usable_bytes
    fits_memmap = plan.memmap_needed_bytes <= plan.usable_bytes
    fits_disk = plan.disk_needed_bytes <= plan.disk_free_bytes
    usable = f"usable {human_bytes(plan.usable_bytes)} ({plan.limit_source} {human_bytes(plan.limit_bytes)} " \
             f"less {human_bytes(plan.margin_bytes)} margin)"
    if requested == "ram" and not fits_ram:
        return "refuse", (f"--cache ram needs {human_bytes(plan.ram_needed_bytes)} "
                          f"({plan.ram_needed_bytes} bytes) but {usable}; use --cache auto or memmap")
    if not fits_disk:  # a RAM cache is written to disk too (and read back from it): without room, extraction fails
        return "refuse", (f"the caches need {human_bytes(plan.disk_needed_bytes)} ({plan.disk_needed_bytes} bytes) on "
                          f"disk but --out's cache folder {plan.cache_dir} has {human_bytes(plan.disk_free_bytes)} "
                          f"({plan.disk_free_bytes} bytes) free; free space there or pass --out on a disk with room")
    if requested in ("ram", "auto") and fits_ram:
        return "ram", f"caches and working sets need {human_bytes(plan.ram_needed_bytes)}, within {usable}"
    if not fits_memmap:
        return "refuse", (f"even with memory-mapped caches the working set needs "
                          f"{human_bytes(plan.memmap_needed_bytes)} but {usable}; lower --batch-size or ask for more memory")
    why = "requested" if requested == "memmap" else f"RAM would need {human_bytes(plan.ram_needed_bytes)} > {usable}"
    return "memmap", f"memory-mapped caches ({why}); working set {human_bytes(plan.memmap_needed_bytes)}"


def human_bytes(count: int) -> str:
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{count} B"


def format_plan(plan: Plan) -> str:
    lines = [f"decision: {plan.decision} (requested {plan.requested}) - {plan.reason}", "",
             f"{'split':<8}{'samples':>10}  {'row shape':<16}{'cache':>12}  cached"]
    for s in plan.splits:
        lines.append(f"{s.split:<8}{s.samples:>10}  {'x'.join(map(str, s.row_shape)):<16}"
                     f"{human_bytes(s.cache_bytes):>12}  {'yes' if s.cached else 'no'}")
    lines += ["",
              f"labels {human_bytes(sum(s.labels_in_memory_bytes() for s in plan.splits))}, "
              f"model {human_bytes(plan.model_bytes)}, probe working set {human_bytes(plan.probe_working_bytes)}, "
              f"extraction working set {human_bytes(plan.extraction_working_bytes)}",
              f"needed: ram {human_bytes(plan.ram_needed_bytes)}, memmap {human_bytes(plan.memmap_needed_bytes)}; "
              f"disk {human_bytes(plan.disk_needed_bytes)} of {human_bytes(plan.disk_free_bytes)} free",
              "limits: " + ", ".join(f"{k} {human_bytes(v)}" for k, v in plan.sources.items()) +
              f"; margin {human_bytes(plan.margin_bytes)}; usable {human_bytes(plan.usable_bytes)}"
              + (f" ({plan.limit_rule})" if plan.limit_rule else "")]
    return "\n".join(lines + [f"note: {note}" for note in plan.notes])
