"""A submission's elements grouped into job arrays: one array per memory class, none longer than the cluster allows.

Slurm gives every task of an array the array's `--mem`. Lowering single tasks afterwards (`scontrol update
JobId=ARRAY_TASK MinMemoryNode=MB`) splits each into a job record of its own (job_mgr.c, `job_array_split`), so a
sweep of a thousand cells would queue a thousand records. Instead each element's request is rounded up to its
memory class, and each class is one array submitted with that class's `--mem`. The classes are four to a doubling,
multiples of a quarter of the power of two below the request (4096, 5120, 6144, 7168, 8192, 10240, ... MB), so a
class asks for at most 25 % more than its largest request: the job's own planner spends the extra on caches in RAM.

An array task id must be below MaxArraySize: a class of more elements than one array may hold becomes several
arrays. Every array's task ids start at 0; the elements of one array are consecutive in the plan, and the array
script is given the first one's index, so a task runs element `first + $SLURM_ARRAY_TASK_ID`.
"""

import itertools


def class_mb(request_mb: int, limit_mb: int | None = None) -> int:
    """The memory class (MB) of a request: rounded up to a quarter of the power of two below it, never above
    `limit_mb` (a request at most the limit keeps within it)."""
    octave_mb = 1 << (max(request_mb - 1, 1).bit_length() - 1)
    step_mb = max(octave_mb // 4, 1)
    rounded_mb = -(-request_mb // step_mb) * step_mb
    return min(rounded_mb, limit_mb) if limit_mb else rounded_mb


def arrange(elements: list, tasks_per_array: int) -> tuple:
    """(elements renumbered so that each array's are consecutive, arrays [{first, count, mem_mb, after}]).

    Elements that wait for others (a sharded cell's probe element: `after` its shards) are one-task arrays of their
    own, at the end, because each waits for different tasks."""
    direct = sorted((e for e in elements if not e.get("after")), key=lambda e: e["mem_mb"])  # stable: cell order
    waiting = [e for e in elements if e.get("after")]
    number = {e["index"]: position for position, e in enumerate(direct + waiting)}
    renumbered = [{**e, "index": number[e["index"]], "after": [number[i] for i in e.get("after") or []]}
                  for e in direct + waiting]
    arrays = []
    for mem_mb, group in itertools.groupby(renumbered[:len(direct)], key=lambda e: e["mem_mb"]):
        group = list(group)
        for start in range(0, len(group), tasks_per_array):
            part = group[start:start + tasks_per_array]
            arrays.append({"first": part[0]["index"], "count": len(part), "mem_mb": mem_mb, "after": []})
    arrays += [{"first": e["index"], "count": 1, "mem_mb": e["mem_mb"], "after": e["after"]}
               for e in renumbered[len(direct):]]
    return renumbered, arrays
