"""torchrun support: rank discovery, the process group, equal contiguous shards, and small collectives.

`torchrun --nproc_per_node=K -m evalsuite run ...` runs the single-process command in K
processes. Each rank binds `cuda:LOCAL_RANK` (NCCL) when CUDA is visible, else the CPU (gloo).
Ranks share extraction by equal contiguous shards of the pending cache chunks; rank 0 alone
finalises manifests, trains the probes and writes results. Probes are cheap next to
extraction (seconds on cached features), so data-parallel probe training would mostly add
all-reduce traffic; the other ranks leave once the caches are complete.
"""

import os
from dataclasses import dataclass

import torch

from evalsuite.runtime.devices import resolve_device


@dataclass(frozen=True)
class Dist:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def active(self) -> bool:
        return self.world_size > 1

    def barrier(self) -> None:
        if self.active:
            torch.distributed.barrier()

    def broadcast(self, value):
        """Rank 0's value on every rank."""
        if not self.active:
            return value
        box = [value]
        torch.distributed.broadcast_object_list(box, src=0)
        return box[0]

    def all_gather(self, value) -> list:
        if not self.active:
            return [value]
        gathered = [None] * self.world_size
        torch.distributed.all_gather_object(gathered, value)
        return gathered


def dist_from_env(env=None) -> Dist:
    env = os.environ if env is None else env
    return Dist(rank=int(env.get("RANK", 0)), world_size=int(env.get("WORLD_SIZE", 1)),
                local_rank=int(env.get("LOCAL_RANK", 0)))


def backend_for(device: torch.device) -> str:
    return "nccl" if device.type == "cuda" else "gloo"


def rank_device(dist: Dist, requested: str = "auto") -> torch.device:
    """The device this rank computes on: its own GPU under torchrun, else what was asked."""
    device = resolve_device(requested)
    if dist.active and device.type == "cuda":
        return torch.device("cuda", dist.local_rank)
    return device


def start(requested_device: str = "auto") -> tuple[Dist, torch.device]:
    dist = dist_from_env()
    device = rank_device(dist, requested_device)
    if dist.active and not torch.distributed.is_initialized():
        if device.type == "cuda":
            torch.cuda.set_device(device)
        torch.distributed.init_process_group(backend=backend_for(device), rank=dist.rank,
                                             world_size=dist.world_size)
    return dist, device


def stop(dist: Dist) -> None:
    if dist.active and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def shard_bounds(items: int, rank: int, world_size: int) -> tuple[int, int]:
    """[start, stop) of rank's contiguous shard; sizes differ by at most one, first ranks larger."""
    base, extra = divmod(items, world_size)
    start = rank * base + min(rank, extra)
    return start, start + base + (1 if rank < extra else 0)
