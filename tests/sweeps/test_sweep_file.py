"""Bad sweep files through the CLI: one `evalsuite: error:` line naming the file and the key or the fix, exit 2,
and nothing written under the sweep's `out`. Relative paths in a sweep file are taken from its folder."""

import json
import os
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from conftest import assert_one_line_error, run_cli, run_cli_here

from evalsuite.errors import EXIT_SWEEP_INCOMPLETE, EXIT_USER
from evalsuite.tasks.resources import cards_dir

MODEL = {"model": "test_vit", "random_init": True, "name": "vit"}


def _base() -> dict:
    """A valid sweep: the tiny timm test model on the demo task, everything it writes under `out`."""
    return {"models": [dict(MODEL)], "tasks": ["demo"], "seeds": [0], "probes": ["linear"], "device": "cpu",
            "num_workers": 0, "out": "out"}


@pytest.fixture
def folder(tmp_path):
    return tmp_path.resolve()


def _write(folder: Path, raw=None, text: str | None = None, name: str = "sweep.yaml") -> Path:
    path = folder / name
    path.write_text(text if text is not None else yaml.safe_dump(raw, sort_keys=False))
    return path


def _expect_error(folder: Path, path: Path, *fragments: str, args=("run",), env=None):
    """`sweep ARGS PATH` refuses with one line naming the file and `fragments`, exit 2, nothing under out."""
    result = run_cli_here("sweep", *args, path, cwd=folder, env=env)
    assert_one_line_error(result, *fragments)
    assert result.returncode == EXIT_USER, result.stderr
    assert not (folder / "out").exists()
    return result


def _sweep_with(folder: Path, **changes) -> Path:
    raw = _base()
    raw.update(changes)
    return _write(folder, raw)


# ---- keys the format does not know

@pytest.mark.parametrize("changes, fragment, known", [
    ({"seed": [0]}, "unknown key 'seed'", "seeds"),
    ({"models": [{**MODEL, "pooling_rule": "cls"}]}, "unknown key 'models.pooling_rule'", "pooling"),
    ({"tasks": [{"task": "demo", "data_rot": "x"}]}, "unknown key 'tasks.data_rot'", "data_root"),
    ({"slurm": {"partion": "gpu"}}, "unknown key 'slurm.partion'", "partition"),
], ids=["top", "model", "task", "slurm"])
def test_unknown_key(folder, changes, fragment, known):
    """The line names the key where it is, and the known keys (the fix) beside it."""
    path = _sweep_with(folder, **changes)
    result = _expect_error(folder, path, str(path), fragment, "known: ")
    assert known in result.stderr.split("known: ", 1)[1]


def test_unknown_key_refused_by_status_too(folder):
    path = _sweep_with(folder, seed=[0])
    _expect_error(folder, path, str(path), "unknown key 'seed'", args=("status",))


# ---- tasks and probes

def test_unknown_task_card(folder):
    path = _sweep_with(folder, tasks=["no_such_card"])
    _expect_error(folder, path, str(path), "unknown task 'no_such_card'", "known tasks:", "demo")


def test_unknown_probe_recipe(folder):
    path = _sweep_with(folder, probes=["no_such_probe"])
    _expect_error(folder, path, str(path), "unknown probe 'no_such_probe'", "known probes:", "linear")


def test_two_cards_with_one_name(folder):
    """A copy of the demo card that keeps `name: demo` is the same leaderboard task (and the same cell id): refused
    when the sweep is read, not run twice (rows appended twice)."""
    shutil.copy(cards_dir() / "demo.yaml", folder / "my_demo.yaml")
    path = _sweep_with(folder, tasks=["demo", "my_demo.yaml"])
    _expect_error(folder, path, str(path), "'demo'", "name:", args=("run", "--dry-run"))


@pytest.mark.parametrize("shards", [0, "two"])
def test_bad_shards(folder, shards):
    path = _sweep_with(folder, tasks=[{"task": "demo", "shards": shards}])
    _expect_error(folder, path, str(path), "shards of task 'demo'", "must be an integer >= 1", repr(shards))


# ---- models

def test_duplicate_model_labels(folder):
    path = _sweep_with(folder, models=[dict(MODEL), {"model": "resnet18", "name": "vit"}])
    _expect_error(folder, path, str(path), "two models are labelled 'vit'", "name:")


@pytest.mark.parametrize("entry", [{"model": "test_vit", "random_init": True},
                                   {"model": "test_vit", "weights": "w.pth"}], ids=["random_init", "weights"])
def test_model_needs_a_name(folder, entry):
    (folder / "w.pth").write_bytes(b"not read")
    path = _sweep_with(folder, models=[entry])
    _expect_error(folder, path, str(path), "model 'test_vit'", "needs a name:")


def test_weights_file_missing(folder):
    path = _sweep_with(folder, models=[{"model": "test_vit", "name": "mine", "weights": "ckpt/missing.pth"}])
    _expect_error(folder, path, str(path), "weights of 'mine' not found", str(folder / "ckpt" / "missing.pth"))


def test_unknown_model(folder):
    path = _sweep_with(folder, models=[{"model": "not_a_model_xyz"}])
    _expect_error(folder, path, str(path), "unknown model 'not_a_model_xyz'", "evalsuite list --models")


# ---- seeds, precision, name, lists

@pytest.mark.parametrize("seeds", [[-1], [0, 0], [0.5], ["a"], [0, 2**70], [2**32]],
                         ids=["negative", "duplicate", "float", "string", "2**70", "2**32"])
def test_bad_seeds(folder, seeds):
    """2**70 passed this check and failed each cell with `Overflow when unpacking long long` (issue 40)."""
    path = _sweep_with(folder, seeds=seeds)
    _expect_error(folder, path, str(path), "seeds must be distinct non-negative integers up to 4294967295",
                  "[0, 1, 2]")


def test_bad_precision(folder):
    path = _sweep_with(folder, precision="fp8")
    _expect_error(folder, path, str(path), "precision 'fp8'", "auto, device, bf16, fp16, fp32")


# ---- the file itself

def test_missing_file(folder):
    path = folder / "nope.yaml"
    _expect_error(folder, path, "sweep file not found", str(path), "check the path")


def test_invalid_yaml(folder):
    path = _write(folder, text="models: [unclosed\ntasks: [demo]\n")
    _expect_error(folder, path, str(path), "not valid YAML")


def test_top_level_not_a_mapping(folder):
    path = _write(folder, text="- demo\n- test_vit\n")
    _expect_error(folder, path, str(path), "expected a mapping with models: and tasks:", "list")


# ---- more variants, read in this process (the CLI prints the same message; the cases above check that path)

@pytest.mark.parametrize("changes, fragments", [
    ({"tasks": ["cards/missing.yaml"]}, ["task card file not found", "cards/missing.yaml"]),
    ({"tasks": [{"task": "demo", "probes": ["no_such_probe"]}]}, ["unknown probe 'no_such_probe'"]),
    ({"tasks": ["demo", {"task": "demo", "probes": ["knn"]}]}, ["task 'demo' is listed twice"]),
    ({"tasks": [{"task": "demo", "shards": -1}]}, ["shards of task 'demo'", "got -1"]),
    ({"tasks": [{"task": "demo", "shards": True}]}, ["shards of task 'demo'", "got True"]),
    ({"models": ["resnet18", {"model": "resnet18", "pooling": None}]}, ["two models are labelled 'resnet18'"]),
    ({"models": [{**MODEL, "weights": "w.pth"}]}, ["model 'vit' has both weights: and random_init:"]),
    ({"models": [{**MODEL, "pooling": "median"}]}, ["unknown pooling 'median'", "mean_patch"]),
    ({"models": ["test_vit", 3]}, ["each of models: is a name or a mapping with model:"]),
    ({"seeds": []}, ["seeds must be distinct non-negative integers"]),
    ({"seeds": [True]}, ["seeds must be distinct non-negative integers"]),
    ({"seeds": [0, None]}, ["seeds must be distinct non-negative integers"]),
    ({"name": "my sweep"}, ["name must be an identifier", "got 'my sweep': it holds ' '"]),
    ({"models": []}, ["'models' must be a non-empty list"]),
    ({"tasks": "demo"}, ["'tasks' must be a non-empty list"]),
    ({"slurm": ["--partition=gpu"]}, ["slurm: must be a mapping"]),
    ({"slurm": {"array_parallelism": 0}}, ["slurm.array_parallelism", "0"]),
    ({"slurm": {"warn_before_limit_s": 0}}, ["slurm.warn_before_limit_s must be an integer >= 1", "0"]),
    ({"slurm": {"warn_before_limit_s": 70000}}, ["slurm.warn_before_limit_s is at most 65535", "70000"]),
    ({"slurm": {"time": "10"}}, ["slurm.warn_before_limit_s (1200 s) is not shorter than slurm.time (10, 600 s)"]),
    ({"slurm": {"time": "0-0:20", "warn_before_limit_s": 1500}}, ["(1500 s)", "slurm.time (0-0:20, 1200 s)"]),
    ({"slurm": {"extra": [1]}}, ["slurm.extra must be a line or a list of lines"]),
    ({"batch_size": -1}, ["batch_size", "-1"]),
    ({"cache": "disk"}, ["cache must be auto, ram or memmap"]),
    ({"probes": []}, ["probes must be a list of probe recipe names"]),
])
def test_more_refusals(folder, changes, fragments):
    from evalsuite.errors import EvalsuiteError
    from evalsuite.sweeps.spec import load_sweep

    (folder / "w.pth").write_bytes(b"not read")
    path = _sweep_with(folder, **changes)
    with pytest.raises(EvalsuiteError) as caught:
        load_sweep(path)
    message = str(caught.value)
    assert "\n" not in message
    for fragment in [str(path), *fragments]:
        assert fragment in message, message


@pytest.mark.parametrize("text, kind", [("", "NoneType"), ("demo\n", "str")])
def test_file_that_is_not_a_mapping(folder, text, kind):
    from evalsuite.errors import EvalsuiteError
    from evalsuite.sweeps.spec import load_sweep

    path = _write(folder, text=text)
    with pytest.raises(EvalsuiteError, match=f"expected a mapping with models: and tasks:, got {kind}"):
        load_sweep(path)


# ---- the environment

def test_out_is_a_file(folder):
    """`out:` names an existing regular file: refused before anything runs; the file is left as it was."""
    (folder / "taken").write_text("mine\n")
    path = _sweep_with(folder, out="taken")
    result = run_cli_here("sweep", "run", path, cwd=folder)
    assert_one_line_error(result, str(folder / "taken"), "is not a folder")
    assert result.returncode == EXIT_USER
    assert (folder / "taken").read_text() == "mine\n"


def test_slurm_without_sbatch(folder):
    """`--executor slurm` on a host without sbatch: one line pointing at `--executor local`, nothing written."""
    bin_dir = folder / "bin"
    bin_dir.mkdir()
    os.symlink(sys.executable, bin_dir / "python")
    env = {"PATH": str(bin_dir)}
    assert shutil.which("sbatch", path=env["PATH"]) is None
    path = _sweep_with(folder)
    _expect_error(folder, path, "sbatch not found on PATH", "--executor local", args=("run", "--executor", "slurm"),
                  env=env)


# ---- relative paths

@pytest.mark.slow  # a dry run, then a sweep run whose one cell fails: ~15 s of process starts and imports
def test_relative_paths_resolve_from_the_sweep_file(folder):
    """`out: results`, a task's `data_root` and `weights` are taken from the sweep file's folder, not the cwd."""
    elsewhere = folder / "elsewhere"
    elsewhere.mkdir()
    sweeps = folder / "sweeps"
    sweeps.mkdir()
    (sweeps / "ckpt.pth").write_bytes(b"weights are hashed, not loaded, by a dry run")
    path = _write(sweeps, {**_base(), "out": "results",
                           "models": [{"model": "test_vit", "name": "mine", "weights": "ckpt.pth"}]})
    dry = run_cli("sweep", "run", path, "--dry-run", cwd=elsewhere, timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert "mine x demo: seeds 0 with linear" in dry.stdout

    # A cell whose data root is missing fails at once, leaving its state and log under out.
    path = _write(sweeps, {**_base(), "out": "results", "tasks": [{"task": "demo", "data_root": "nowhere"}]})
    result = run_cli("sweep", "run", path, cwd=elsewhere, timeout=300)
    assert result.returncode == EXIT_SWEEP_INCOMPLETE, result.stderr
    assert str(sweeps / "nowhere" / "hgsc_nest.jpg") in result.stderr
    assert (sweeps / "results" / "sweeps" / "sweep" / "cells").is_dir()
    assert not (elsewhere / "results").exists() and not (folder / "out").exists()
    states = json.loads(run_cli("sweep", "status", path, "--json", cwd=elsewhere, timeout=120).stdout)
    assert [s["state"] for s in states] == ["failed"]
    assert Path(states[0]["log"]).is_relative_to(sweeps / "results")


# ---- issue 40: values written into the job scripts, seeds, names, device, the file itself

@pytest.mark.parametrize("slurm, key", [
    ({"partition": "gpu\ntouch /tmp/x"}, "slurm.partition"),
    ({"account": "lab;touch /tmp/x"}, "slurm.account"),
    ({"time": "01:00:00 $(touch /tmp/x)"}, "slurm.time"),
    ({"gpus": "a100:1`touch /tmp/x`"}, "slurm.gpus"),
    ({"partition": ["gpu", "cpu"]}, "slurm.partition"),
    ({"extra": ["--qos=normal\x1b[2J"]}, "slurm.extra"),
], ids=["partition-line-break", "account-semicolon", "time-substitution", "gpus-backtick", "partition-list",
        "extra-control-character"])
def test_a_slurm_value_that_cannot_be_a_slurm_option_is_refused(folder, slurm, key):
    """Before: `partition: "gpu\\ntouch /tmp/x"` was written into the #SBATCH block, where the line break ended the
    directives (the later --requeue and --signal were ignored) and the job ran the injected line."""
    path = _sweep_with(folder, slurm=slurm)
    value = next(iter(slurm.values()))
    value = value[0] if key == "slurm.extra" else value
    _expect_error(folder, path, str(path), f"{key} {value!r}", args=("run", "--executor", "slurm", "--dry-run"))


def test_out_resolved_into_a_folder_with_a_line_break_is_refused(folder):
    """`out: out` is taken from the sweep file's folder: a line break there reached the #SBATCH --output line."""
    odd = folder / "x\ntouch"
    odd.mkdir()
    path = _sweep_with(odd)
    result = run_cli_here("sweep", "run", path, "--executor", "slurm", "--dry-run", cwd=folder)
    assert_one_line_error(result, "out must not contain a double quote or a line break")
    assert result.returncode == EXIT_USER and not (odd / "out").exists()


def test_the_sbatch_block_holds_only_directives_with_each_value_quoted(folder):
    """A sweep file in a folder whose name holds a line break (`out` elsewhere): the path in the script's header
    comment stayed one line. `time: 12:00:00` unquoted was read by YAML 1.1 as 43200 (base 60): 30 days of minutes."""
    from evalsuite.sweeps.scripts import array_script
    from evalsuite.sweeps.spec import load_sweep

    odd = folder / "x\ntouch evil"
    odd.mkdir()
    path = _write(odd, text=f"models: [test_vit]\ntasks: [demo]\nout: {folder / 'out'}\nslurm:\n  partition: "
                            "gpu,gpu-long\n  account: lab42\n  gpus: a100:2,v100:1\n  time: 12:00:00\n"
                            "  extra: [qos=normal]\n")
    script = array_script(load_sweep(path), folder / "out" / "sweeps" / "sweep", folder / "plan.json")
    block = script.split("\n\n")[0].splitlines()
    assert all(line.startswith("#") for line in block), block
    for option in ('--partition="gpu,gpu-long"', '--account="lab42"', '--gpus="a100:2,v100:1"',
                   '--time="12:00:00"', "--qos=normal", "--requeue", "--signal=B:USR1@1200"):
        assert f"#SBATCH {option}" in block, block


@pytest.mark.parametrize("changes, fragments", [
    ({"models": [{**MODEL, "name": "vit\nsecond"}]}, ["models[].name must be an identifier",
                                                      "got 'vit\\nsecond': it holds '\\n'"]),
    ({"models": [{**MODEL, "name": "my vit"}]}, ["models[].name must be an identifier", "it holds ' '"]),
    ({"name": "run\n2"}, ["name must be an identifier", "got 'run\\n2'"]),
    ({"name": "."}, ["name '.' is refused: '.' and '..' name a folder and its parent"]),
    ({"name": ".."}, ["name '..' is refused: '.' and '..' name a folder and its parent"]),
    ({"name": ".hidden"}, ["got '.hidden': it starts with '.'"]),
    ({"device": "tpu"}, ["device 'tpu'", "auto, cpu, cuda or cuda:N"]),
    ({"models": ["test_vit\nsecond"]}, ["model 'test_vit\\nsecond' is not a model name"]),
], ids=["label-line-break", "label-space", "sweep-name-line-break", "dot", "dot-dot", "hidden", "device-tpu",
        "plain-model-line-break"])
def test_names_and_device_are_checked_with_the_file(folder, changes, fragments):
    """Before: a label with a line break broke the status grid and every table; `.` and `..` were told to use
    letters, digits, '.', '_' or '-' (which they are); `device: tpu` failed each cell with exit 4."""
    path = _sweep_with(folder, **changes)
    _expect_error(folder, path, str(path), *fragments)


def test_a_sweep_file_that_is_a_folder_says_so(folder):
    (folder / "sweep.yaml").mkdir()
    _expect_error(folder, folder / "sweep.yaml", "sweep file", str(folder / "sweep.yaml"), "is a folder",
                  args=("status",))


@pytest.mark.parametrize("plan, fragments", [
    (None, ["sweep plan", "not found", "plan-STAMP.json"]),
    ("", ["is not a sweep plan"]),
    ("{\"elements\": []}", ["is not a sweep plan"]),
    ("[1, 2]", ["is not a sweep plan"]),
], ids=["missing", "empty", "no-elements", "a-list"])
def test_sweep_element_on_a_file_that_is_no_plan_says_so(folder, plan, fragments):
    """Before: `no element 3 (it has 0)` for a missing file or any file that is not a plan."""
    path = folder / "plan.json"
    if plan is not None:
        path.write_text(plan)
    result = run_cli_here("sweep", "element", path, "3", cwd=folder)
    assert_one_line_error(result, str(path), *fragments)
    assert result.returncode == EXIT_USER and "no element 3" not in result.stderr


def test_a_model_label_may_hold_a_plus_as_the_default_labels_do(tmp_path):
    """`<model>+random-init` is the label a run gives by default: a sweep naming its model so must be accepted (the
    identifier rule refused it for a while, issue 40), and `run --label` takes it too."""
    from evalsuite.storage.names import check_identifier

    assert check_identifier("efficientnet_lite0_imagenet+random-init", "--label", "x", label=True)
    with pytest.raises(Exception, match="it holds '\\+'"):
        check_identifier("pathology+2026", "sweep file F: name", "pathology-2026")  # a folder name: no '+'
