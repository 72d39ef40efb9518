"""`evalsuite sweep run --executor slurm` under a real Slurm on localhost: one job array per memory class, each task's
--mem its element's planned class, a failed cell resubmitted alone after the file is fixed, every row exactly once,
and a sharded extraction stopped mid-way by a signal, requeued, and byte-identical to a one-process extraction.

The module starts its own private cluster (in EVALSUITE_SLURM_DIR/sweep when CI sets it, so .ci/run's trap stops
it), so it can run beside tests/e2e/test_slurm.py on the other pytest worker. The cluster's GPUs are fake: the
sweep says `device: cpu`.
"""

import collections
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import REPO, cache_manifests, leaderboard_rows
from slurm_cluster import running_cluster

_missing = [tool for tool in ("slurmctld", "slurmd", "sbatch", "scontrol", "munged")
            if shutil.which(tool) is None and not Path("/usr/sbin", tool).exists()]
pytestmark = [
    pytest.mark.slurm,
    pytest.mark.slow,
    pytest.mark.skipif(bool(_missing) and os.environ.get("EVALSUITE_REQUIRE_SLURM") != "1",
                       reason=f"Slurm not installed (no {', '.join(_missing)}); CI installs it"),
    pytest.mark.skipif(hasattr(os, "geteuid") and os.geteuid() != 0, reason="the localhost cluster needs root"),
]

PRETRAINED = "efficientnet_lite0_imagenet"
WAIT_S = 900


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    base = os.environ.get("EVALSUITE_SLURM_DIR")
    state = Path(base) / "sweep" if base else tmp_path_factory.mktemp("slurm-sweep")
    with running_cluster(state) as conf:
        yield conf


def _env(conf: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SRUN_", "SALLOC_"))}
    env.update(SLURM_CONF=str(conf), PYTHONUNBUFFERED="1", HF_HUB_OFFLINE="1",
               PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}:/usr/sbin:/sbin")
    return env


def _evalsuite(conf: Path, *args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalsuite", *map(str, args)], cwd=cwd, env=_env(conf),
                          capture_output=True, text=True, timeout=600)


def _write_sweep(folder: Path, tasks: str, models: str, extra: str = "") -> Path:
    path = folder / "sweep.yaml"
    path.write_text(f"name: ci\nmodels:\n{models}tasks:\n{tasks}seeds: [0, 1]\ndevice: cpu\nnum_workers: 0\n"
                    f"out: results dir\nslurm:\n  cpus: 1\n  time: '00:30:00'\n  array_parallelism: 2\n{extra}")
    return path


def _wait_for_queue(conf: Path, timeout_s: int = WAIT_S) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        queued = subprocess.run(["squeue", "-h", "-o", "%i %T"], env=_env(conf), capture_output=True, text=True)
        if not queued.stdout.strip():
            return
        time.sleep(3)
    pytest.fail(f"jobs still queued after {timeout_s} s:\n{queued.stdout}")


def _job_mem_mb(conf: Path, job: str) -> int:
    shown = subprocess.run(["scontrol", "show", "job", job], env=_env(conf), capture_output=True, text=True).stdout
    value = next(part for part in shown.split() if part.startswith("MinMemoryNode="))[len("MinMemoryNode="):]
    return int(float(value[:-1]) * (1024 if value.endswith("G") else 1))


def _status(conf: Path, sweep: Path) -> dict:
    result = _evalsuite(conf, "sweep", "status", sweep, "--json", cwd=sweep.parent)
    assert result.returncode == 0, result.stderr
    return {(cell["model"], cell["task"]): cell for cell in json.loads(result.stdout)}


def _short_seg_recipe(folder: Path) -> Path:
    """The shipped seg_linear recipe with 3 epochs instead of 30."""
    text = (REPO / "probes" / "seg_linear.yaml").read_text()
    path = folder / "seg_linear_short.yaml"
    path.write_text(text.replace("name: seg_linear\n", "name: seg_linear_short\n").replace("epochs: 30", "epochs: 3"))
    return path


def _plan(stdout: str) -> dict:
    path = next(line for line in stdout.splitlines() if line.startswith("plan: "))[len("plan: "):]
    return json.loads(Path(path).read_text())


def _submitted_arrays(stdout: str) -> list:
    return [line for line in stdout.splitlines() if line.startswith("running: sbatch") and "--array=" in line]


def _array_jobs(stdout: str) -> list:
    """[(array job id, first element, last element, --mem MB)] from the `array ID: elements A-B ...` lines."""
    found = []
    for line in stdout.splitlines():
        if line.startswith("array ") and ": elements " in line:
            job, rest = line[len("array "):].split(": elements ", 1)
            span, mem = rest.split(" of the plan, --mem=")
            first, last = span.split("-")
            found.append((job, int(first), int(last), int(mem.rstrip("M"))))
    return found


def _check_task_memory(conf: Path, stdout: str) -> list:
    """Every submitted task's MinMemoryNode is its element's mem_mb in the plan; returns the arrays."""
    plan, arrays = _plan(stdout), _array_jobs(stdout)
    for job, first, last, mem_mb in arrays:
        for task in range(last - first + 1):
            element = plan["elements"][first + task]
            assert element["mem_mb"] == mem_mb, element
            assert _job_mem_mb(conf, f"{job}_{task}") == mem_mb
    return arrays


def test_a_sweep_is_one_array_a_failed_cell_is_resubmitted_alone_and_rows_are_written_once(cluster, tmp_path):
    models = f"  - {PRETRAINED}\n  - {{name: {PRETRAINED}+random-init, model: {PRETRAINED}, random_init: true}}\n"
    # One short probe per task keeps the cells quick; the cards' default probes add nothing to what is tested here.
    seg = _short_seg_recipe(tmp_path)
    broken = _write_sweep(tmp_path, f"  - {{task: demo, probes: [linear]}}\n  - {{task: demo_seg, data_root: "
                                    f"/no/such/folder, probes: [{seg}]}}\n", models)
    first = _evalsuite(cluster, "sweep", "run", broken, "--executor", "slurm", cwd=tmp_path)
    assert first.returncode == 4, first.stdout + first.stderr  # the demo_seg cells failed at planning
    assert len(_submitted_arrays(first.stdout)) == 1, first.stdout  # the runnable cells are of one memory class
    assert len(_check_task_memory(cluster, first.stdout)) == 1
    _wait_for_queue(cluster)
    status = _status(cluster, broken)
    assert {key: cell["state"] for key, cell in status.items()} == {
        (PRETRAINED, "demo"): "done", (f"{PRETRAINED}+random-init", "demo"): "done",
        (PRETRAINED, "demo_seg"): "failed", (f"{PRETRAINED}+random-init", "demo_seg"): "failed"}
    assert "/no/such/folder" in status[(PRETRAINED, "demo_seg")]["error"]

    fixed = _write_sweep(tmp_path, f"  - {{task: demo, probes: [linear]}}\n  - {{task: demo_seg, probes: [{seg}]}}\n",
                         models)
    second = _evalsuite(cluster, "sweep", "run", fixed, "--executor", "slurm", cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    (array_line,) = _submitted_arrays(second.stdout)
    plan = _plan(second.stdout)
    assert {element["ref"]["task"] for element in plan["elements"]} == {"demo_seg"}, array_line  # only those cells
    _wait_for_queue(cluster)
    assert {cell["state"] for cell in _status(cluster, fixed).values()} == {"done"}

    rows = leaderboard_rows(tmp_path / "results dir")
    keys = collections.Counter((r["model"], r["task"], r["probe"], r["seed"], r["split"], r["metric"]) for r in rows)
    assert keys and max(keys.values()) == 1, [key for key, n in keys.items() if n > 1][:5]
    cells = {(r["model"], r["task"], r["seed"]) for r in rows if r["split"] == "test"}
    assert len(cells) == 2 * 2 * 2
    third = _evalsuite(cluster, "sweep", "run", fixed, "--executor", "slurm", cwd=tmp_path)
    assert "nothing to submit" in third.stdout and not _submitted_arrays(third.stdout), third.stdout
    assert (tmp_path / "results dir/leaderboard_wide.csv").is_file()  # the final job rebuilt the wide table


def _first_shard_chunk_done(cache_root: Path) -> bool:
    train = cache_manifests(cache_root.parent).get("train")
    return bool(train and train["chunks"][0]["done"] and not train["complete"])


def test_a_shard_stopped_mid_extraction_is_requeued_and_the_cache_is_byte_identical(cluster, tmp_path):
    models = "  - {name: tiny, model: test_vit, random_init: true}\n"
    sweep = _write_sweep(tmp_path, "  - {task: demo, shards: 2}\n", models,
                         extra="").read_text().replace("num_workers: 0\n", "num_workers: 0\nchunk_rows: 32\n"
                                                       "batch_size: 32\nprobes: [knn]\n")
    (tmp_path / "sweep.yaml").write_text(sweep)
    submitted = _evalsuite(cluster, "sweep", "run", tmp_path / "sweep.yaml", "--executor", "slurm", cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    (array_id, _, _, _), probe_array = _array_jobs(submitted.stdout)  # the shards, then the probe element after them
    assert probe_array[1:3] == (2, 2)  # its own array: task 0 runs element 2
    cache_root = tmp_path / "results dir/cache"
    deadline = time.monotonic() + 300
    while not _first_shard_chunk_done(cache_root):
        assert time.monotonic() < deadline, "shard 0 wrote no chunk in 300 s"
        time.sleep(0.2)
    subprocess.run(["scancel", "--batch", "--signal=USR1", f"{array_id}_0"], env=_env(cluster), check=True)
    _wait_for_queue(cluster)
    log = (tmp_path / f"results dir/sweeps/ci/logs/{array_id}_0.out").read_text(errors="replace")
    assert "requeueing" in log and "restart 1" in log, log[-3000:]
    assert {cell["state"] for cell in _status(cluster, tmp_path / "sweep.yaml").values()} == {"done"}

    single = tmp_path / "single"  # the same task in one process: the same cache keys, the same bytes
    one = _evalsuite(cluster, "run", "--task", "demo", "--model", "test_vit", "--random-init", "--device", "cpu",
                     "--num-workers", "0", "--chunk-rows", "32", "--batch-size", "32", "--probes", "knn",
                     "--out", single, cwd=tmp_path)
    assert one.returncode == 0, one.stderr
    keys = sorted(p.parent.name for p in (single / "cache").glob("*/features.npy"))
    assert len(keys) == 3
    for key in keys:
        assert (single / "cache" / key / "features.npy").read_bytes() == \
               (cache_root / key / "features.npy").read_bytes(), key
    verified = _evalsuite(cluster, "cache", "verify", "--out", tmp_path / "results dir", cwd=tmp_path)
    assert verified.returncode == 0, verified.stdout + verified.stderr


def _two_task_sweep(folder: Path, slurm_extra: str) -> Path:
    seg = _short_seg_recipe(folder)
    return _write_sweep(folder, f"  - {{task: demo, probes: [knn]}}\n  - {{task: demo_seg, probes: [{seg}]}}\n",
                        "  - {name: tiny, model: test_vit, random_init: true}\n", extra=slurm_extra)


def test_cells_of_two_memory_classes_go_in_as_two_arrays_and_each_task_gets_its_plan(cluster, tmp_path):
    """The two tasks' plans differ; a margin taken from a dry run puts the 4096 MB class boundary between them, so the
    submission is two arrays (the second waiting for the first: array_parallelism). Both finish, and `sweep status`
    follows each cell in its own array."""
    dry = _evalsuite(cluster, "sweep", "run", _two_task_sweep(tmp_path, "  mem_margin_gb: 0\n"), "--executor", "slurm",
                     "--dry-run", cwd=tmp_path)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    # The real scontrol's answers, read: Slurm's default MaxArraySize, the CI partition without a memory limit.
    assert "slurm limits (scontrol): MaxArraySize 1001, 1001 tasks an array; partition ci: MaxMemPerNode unlimited" \
           in dry.stdout
    small, large = sorted(element["request_mb"] for element in _plan(dry.stdout)["elements"])
    assert small < large
    margin_mb = 4096 - small
    sweep = _two_task_sweep(tmp_path, f"  mem_margin_gb: {margin_mb / 1024}\n")
    submitted = _evalsuite(cluster, "sweep", "run", sweep, "--executor", "slurm", cwd=tmp_path)
    assert submitted.returncode == 0, submitted.stdout + submitted.stderr
    arrays = _check_task_memory(cluster, submitted.stdout)
    assert [mem_mb for *_, mem_mb in arrays] == [4096, -(-(large + margin_mb) // 1024) * 1024], submitted.stdout
    assert len(_submitted_arrays(submitted.stdout)) == 2
    _wait_for_queue(cluster)
    status = _status(cluster, sweep)
    assert {cell["state"] for cell in status.values()} == {"done"}, status
    assert {cell["job"] for cell in status.values()} == {f"{job}_0" for job, *_ in arrays}


def test_a_cell_above_the_partitions_max_mem_per_node_is_refused_before_anything_is_submitted(cluster, tmp_path):
    sweep = _write_sweep(tmp_path, "  - {task: demo, probes: [knn]}\n",
                         "  - {name: tiny, model: test_vit, random_init: true}\n")
    limit = ["scontrol", "update", "PartitionName=ci"]  # MaxMemPerNode=0 is unlimited again
    subprocess.run([*limit, "MaxMemPerNode=2048"], env=_env(cluster), check=True, capture_output=True)
    try:
        refused = _evalsuite(cluster, "sweep", "run", sweep, "--executor", "slurm", cwd=tmp_path)
    finally:
        subprocess.run([*limit, "MaxMemPerNode=0"], env=_env(cluster), check=True, capture_output=True)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "cell tiny x demo plans --mem=" in refused.stderr and "partition ci's MaxMemPerNode (2048M)" in \
           refused.stderr, refused.stderr
    assert not _submitted_arrays(refused.stdout)
    queued = subprocess.run(["squeue", "-h"], env=_env(cluster), capture_output=True, text=True)
    assert not queued.stdout.strip()
