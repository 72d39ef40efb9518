"""The RAM budget planner: where the limit comes from, and what it decides."""

import json

import pytest
from conftest import assert_one_line_error, run_cli

from evalsuite.features.budget import EXIT_REFUSE, SplitPlan, make_plan
from evalsuite.features.memory_limits import memory_sources, parse_size_bytes

GIB = 1024**3
MIB = 1024**2


def _fake_roots(tmp_path, cgroup_line=None, limit_file=None, limit_text=None, mem_available_kb=None):
    proc, sys_root = tmp_path / "proc", tmp_path / "sys"
    (proc / "self").mkdir(parents=True)
    (proc / "self" / "cgroup").write_text((cgroup_line or "0::/") + "\n")
    if mem_available_kb is not None:
        (proc / "meminfo").write_text(f"MemTotal: 99999999 kB\nMemAvailable: {mem_available_kb} kB\n")
    if limit_file:
        path = sys_root / limit_file
        path.parent.mkdir(parents=True)
        path.write_text(limit_text + "\n")
    return sys_root, proc


def test_size_parsing():
    assert parse_size_bytes("85G") == 85 * GIB
    assert parse_size_bytes("1536M") == 1536 * MIB
    assert parse_size_bytes("2048", default_unit="M") == 2048 * MIB
    assert parse_size_bytes("123") == 123


def test_slurm_mem_per_node_is_megabytes(tmp_path):
    sys_root, proc = _fake_roots(tmp_path)
    sources = memory_sources(env={"SLURM_MEM_PER_NODE": "87040"}, sys_root=sys_root, proc_root=proc)
    assert sources == {"SLURM_MEM_PER_NODE": 85 * GIB}


def test_slurm_mem_per_cpu_times_cpus_on_node(tmp_path):
    sys_root, proc = _fake_roots(tmp_path)
    env = {"SLURM_MEM_PER_CPU": "4000", "SLURM_CPUS_ON_NODE": "8"}
    assert memory_sources(env=env, sys_root=sys_root, proc_root=proc) == {"SLURM_MEM_PER_CPU": 8 * 4000 * MIB}


def test_cgroup_v2_limit_of_own_cgroup(tmp_path):
    sys_root, proc = _fake_roots(tmp_path, "0::/slurm/uid_0/job_7", "fs/cgroup/slurm/uid_0/job_7/memory.max",
                                 str(3 * GIB))
    assert memory_sources(env={}, sys_root=sys_root, proc_root=proc) == {"cgroup v2 memory.max": 3 * GIB}


def test_cgroup_v2_max_means_no_limit(tmp_path):
    sys_root, proc = _fake_roots(tmp_path, "0::/user.slice", "fs/cgroup/user.slice/memory.max", "max")
    assert memory_sources(env={}, sys_root=sys_root, proc_root=proc) == {}


def test_cgroup_v1_limit_and_its_unlimited_value(tmp_path):
    sys_root, proc = _fake_roots(tmp_path, "4:memory:/job_9", "fs/cgroup/memory/job_9/memory.limit_in_bytes",
                                 str(5 * GIB))
    assert memory_sources(env={}, sys_root=sys_root, proc_root=proc) == {"cgroup v1 memory.limit_in_bytes": 5 * GIB}
    (sys_root / "fs/cgroup/memory/job_9/memory.limit_in_bytes").write_text("9223372036854771712\n")
    assert memory_sources(env={}, sys_root=sys_root, proc_root=proc) == {}


def test_plain_mem_available(tmp_path):
    sys_root, proc = _fake_roots(tmp_path, mem_available_kb=16 * 1024 * 1024)
    assert memory_sources(env={}, sys_root=sys_root, proc_root=proc) == {"MemAvailable": 16 * GIB}


def test_smallest_source_is_the_limit(tmp_path):
    sys_root, proc = _fake_roots(tmp_path, "0::/job", "fs/cgroup/job/memory.max", str(6 * GIB), 16 * 1024 * 1024)
    sources = memory_sources(mem="85G", env={"SLURM_MEM_PER_NODE": "8192"}, sys_root=sys_root, proc_root=proc)
    plan = make_plan([SplitPlan("train", 10, [4], 80, False)], sources, 0, 0, 0, tmp_path, disk_free_bytes=GIB)
    assert plan.limit_source == "cgroup v2 memory.max" and plan.limit_bytes == 6 * GIB
    assert plan.usable_bytes == 6 * GIB - plan.margin_bytes and plan.decision == "ram"


def _plan(cache_gib: float, limit_gib: float, requested="auto", disk_free_gib=100.0, cached=False):
    split = SplitPlan("train", 1000, [1024], int(cache_gib * GIB), cached)
    return make_plan([split], {"--mem": int(limit_gib * GIB)}, model_size_bytes=GIB // 2,
                     probe_bytes=64 * MIB, extraction_bytes=512 * MIB, cache_dir=".", requested=requested,
                     disk_free_bytes=int(disk_free_gib * GIB))


def test_decisions_ram_memmap_refuse():
    assert _plan(cache_gib=2, limit_gib=8).decision == "ram"
    assert _plan(cache_gib=20, limit_gib=8).decision == "memmap"
    assert _plan(cache_gib=20, limit_gib=1).decision == "refuse"


def test_forcing_ram_over_budget_is_refused_with_the_numbers():
    plan = _plan(cache_gib=20, limit_gib=8, requested="ram")
    assert plan.decision == "refuse"
    assert str(plan.ram_needed_bytes) in plan.reason and "usable" in plan.reason


def test_insufficient_disk_refuses_memmap_unless_already_cached():
    plan = _plan(cache_gib=20, limit_gib=8, disk_free_gib=5)
    assert plan.decision == "refuse" and "on disk" in plan.reason
    assert _plan(cache_gib=20, limit_gib=8, disk_free_gib=5, cached=True).decision == "memmap"


TINY = ["--task", "demo", "--model", "test_vit", "--random-init", "--num-workers", "0"]


def test_budget_command_json_and_refuse_exit_code(tmp_path):
    ok = run_cli("budget", *TINY, "--out", tmp_path, "--mem", "4G", "--json")
    assert ok.returncode == 0, ok.stderr
    plan = json.loads(ok.stdout)
    assert plan["decision"] == "ram" and plan["limit_source"] == "--mem"
    assert [s["row_shape"] for s in plan["splits"]] == [[64]] * 3  # from a real forward pass of test_vit
    refused = run_cli("budget", *TINY, "--out", tmp_path, "--mem", "200M")
    assert refused.returncode == EXIT_REFUSE
    assert "decision: refuse" in refused.stdout
    assert_one_line_error(refused, "RAM budget", "usable")


@pytest.mark.slow
def test_small_budget_picks_memmap_and_forcing_ram_is_refused(tmp_path):
    out = tmp_path / "out"
    plan = json.loads(run_cli("budget", *TINY, "--out", out, "--mem", "4G", "--json").stdout)
    # A limit whose usable part holds the working sets but not the caches on top of them.
    usable = (plan["memmap_needed_bytes"] + plan["ram_needed_bytes"]) // 2
    mem = str(usable + 256 * MIB)
    auto = run_cli("run", *TINY, "--out", out, "--mem", mem, "--probes", "knn")
    assert auto.returncode == 0, auto.stderr
    assert "cache memmap" in auto.stdout
    forced = run_cli("run", *TINY, "--out", out, "--mem", mem, "--cache", "ram", "--probes", "knn")
    assert forced.returncode == EXIT_REFUSE
    assert_one_line_error(forced, "--cache ram needs", str(plan["ram_needed_bytes"]), "usable")


@pytest.mark.parametrize("env", [{"SLURM_MEM_PER_NODE": "0"}, {"SLURM_MEM_PER_CPU": "0", "SLURM_CPUS_ON_NODE": "8"}],
                         ids=["mem-per-node", "mem-per-cpu"])
def test_slurm_zero_memory_means_the_whole_node_not_a_zero_byte_limit(tmp_path, env):
    """Issue 24 item 8: `--mem=0` exports SLURM_MEM_PER_NODE=0 ("all the node's memory"); it was read as a 0-byte
    limit. The reference: the limit left is the cgroup's, 3 GiB here, and no Slurm source at all."""
    sys_root, proc = _fake_roots(tmp_path, "0::/slurm/job_7", "fs/cgroup/slurm/job_7/memory.max", str(3 * GIB))
    assert memory_sources(env=env, sys_root=sys_root, proc_root=proc) == {"cgroup v2 memory.max": 3 * GIB}


# PanNuke's fold sizes (Warwick release: 2,656 / 2,523 / 2,722 tiles) and the demo backbone's dense row, the
# 7x7 grid of 1,280 channels that efficientnet_lite0 gives a 224 px input.
PANNUKE_FOLDS = {"train": 2656, "val": 2523, "test": 2722}
LITE0_GRID_ROW = [7, 7, 1280]


def test_budget_without_data_plans_pannuke_from_its_card(tmp_path):
    """Issue 25 item 4: `budget --task pannuke --mem 8G` without data answered only "needs its data". Reference:
    the official fold sizes, cache bytes = tiles x 7 x 7 x 1280 x 2 (float16), labels = 7,901 masks of 256x256
    uint8 bytes, and a note saying the plan came from the card."""
    result = run_cli("budget", "--task", "pannuke", "--mem", "8G", "--json", "--out", tmp_path / "out")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert {s["split"]: s["samples"] for s in plan["splits"]} == PANNUKE_FOLDS
    assert all(s["row_shape"] == LITE0_GRID_ROW and not s["cached"] for s in plan["splits"])
    assert [s["cache_bytes"] for s in plan["splits"]] == [n * 7 * 7 * 1280 * 2 for n in PANNUKE_FOLDS.values()]
    assert sum(s["label_bytes"] for s in plan["splits"]) == 7901 * 256 * 256
    assert plan["decision"] == "ram" and "planned from task card pannuke without its data" in plan["notes"][0]
    assert not (tmp_path / "out").exists()  # planning writes nothing


def test_card_plan_rows_match_the_plan_from_files(tmp_path):
    """The card's plan must price a tile as the files' plan does: same row shape, same label bytes per tile
    (256x256 uint8), on a 3/2/2-tile PanNuke in the released layout (reference: 65,536 label bytes a tile)."""
    from conftest import make_pannuke

    root = make_pannuke(tmp_path / "pannuke")
    files = run_cli("budget", "--task", "pannuke", "--data-root", root, "--no-count-check", "--mem", "8G", "--json",
                    "--out", tmp_path / "out")
    assert files.returncode == 0, files.stderr
    rows = {s["split"]: s for s in json.loads(files.stdout)["splits"]}
    assert rows["train"]["row_shape"] == LITE0_GRID_ROW
    assert rows["train"]["label_bytes"] == rows["train"]["samples"] * 256 * 256


@pytest.mark.parametrize(("command", "task", "fragments"), [
    ("run", "pannuke", ["'Fold N/images/foldN/images.npy'", "docs/tasks.md#segmentation-tasks"]),
    ("budget", "crc", ["NCT-CRC-HE-100K/<CLASS>/*.tif", "docs/tasks.md#tile-classification-tasks",
                       "official counts fix every split"]),
    ("budget", "camelyon16", ["testing/reference.csv", "docs/slides.md"]),
])
def test_a_card_without_data_names_its_layout_and_docs_page(tmp_path, command, task, fragments):
    """Issue 25 item 4: without --data-root, `run` and `budget` (for a card whose sizes the card cannot fix: a carved
    val, slide tiles) name the layout to put there and the page describing it, as the layout error does."""
    result = run_cli(command, "--task", task, "--mem", "8G", "--out", tmp_path / "out")
    assert_one_line_error(result, "needs its data: pass --data-root DIR", *fragments)
    assert not (tmp_path / "out").exists()
