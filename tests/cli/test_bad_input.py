"""Bad input through the CLI: one-line error, non-zero exit, leaderboard and caches untouched."""

import shutil
import subprocess
import sys

import numpy as np
import pytest
import torch
import yaml
from conftest import assert_one_line_error, run_cli_here

from evalsuite.results.leaderboard import append_rows
from evalsuite.tasks.resources import cards_dir, shipped_data_dir

DEMO_DATA = shipped_data_dir() / "hgsc_nest"


@pytest.fixture
def out(tmp_path):
    """An output folder that already holds a leaderboard row and a cache entry from earlier runs."""
    folder = tmp_path / "out"
    append_rows(folder / "leaderboard.csv", [{"run_id": "earlier", "task": "demo", "model": "m", "metric": "accuracy",
                                              "split": "test", "value": "0.5", "seed": 0}])
    (folder / "cache" / "earlier").mkdir(parents=True)
    (folder / "cache" / "earlier" / "meta.json").write_text("{}")
    return folder


def _snapshot(folder):
    files = sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix != ".lock")
    return {str(p.relative_to(folder)): p.read_bytes() for p in files}


def _card_with(tmp_path, **changes):
    card = yaml.safe_load((cards_dir() / "demo.yaml").read_text())
    for field, value in changes.items():
        if value is None:
            del card[field]
        else:
            card[field] = value
    path = tmp_path / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    return path


def _expect_error(out, args, *fragments):
    before = _snapshot(out)
    result = run_cli_here("run", "--out", out, *args)
    assert_one_line_error(result, *fragments)
    assert _snapshot(out) == before


def test_unknown_task(out):
    _expect_error(out, ["--task", "no_such_task"], "unknown task 'no_such_task'", "demo")


def test_card_missing_field(out, tmp_path):
    _expect_error(out, ["--task", _card_with(tmp_path, classes=None)], "card.yaml", "missing required field 'classes'")


def test_card_field_of_wrong_type(out, tmp_path):
    _expect_error(out, ["--task", _card_with(tmp_path, splits="train,val,test")], "card.yaml", "'splits' must be list")


def test_card_that_is_not_yaml(out, tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: [unclosed\n")
    _expect_error(out, ["--task", path], "broken.yaml", "not valid YAML")


def test_unknown_model(out):
    _expect_error(out, ["--task", "demo", "--model", "efficientnet_lite0_imagnet"],
                  "unknown model 'efficientnet_lite0_imagnet'", "Did you mean: efficientnet_lite0_imagenet")


def test_checkpoint_with_wrong_keys(out, tmp_path):
    import timm

    path = tmp_path / "resnet.pth"
    torch.save(timm.create_model("resnet18", num_classes=0).state_dict(), path)
    _expect_error(out, ["--task", "demo", "--weights", path], "resnet.pth", "missing keys", "unexpected keys")


def test_unreadable_checkpoint(out, tmp_path):
    path = tmp_path / "junk.safetensors"
    path.write_bytes(b"not a checkpoint")
    _expect_error(out, ["--task", "demo", "--weights", path], "cannot read weights", "junk.safetensors")


def test_missing_data_file(out, tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(DEMO_DATA / "hgsc_nest.jpg", data)
    _expect_error(out, ["--task", "demo", "--data-root", data], "missing data file", "hgsc_nest_type_mask.npz",
                  "--data-root")


def test_label_out_of_range(out, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DEMO_DATA, data)
    mask = np.load(DEMO_DATA / "hgsc_nest_type_mask.npz")["nuc_raster"].copy()
    mask[0, 0] = 7
    np.savez_compressed(data / "hgsc_nest_type_mask.npz", nuc_raster=mask)
    _expect_error(out, ["--task", "demo", "--data-root", data], "hgsc_nest_type_mask.npz", "type ids 0..7")


def test_mask_shape_disagreeing_with_image(out, tmp_path):
    data = tmp_path / "data"
    shutil.copytree(DEMO_DATA, data)
    np.savez_compressed(data / "hgsc_nest_type_mask.npz", nuc_raster=np.zeros((10, 10), dtype=np.int32))
    _expect_error(out, ["--task", "demo", "--data-root", data], "has shape (10, 10)")


@pytest.mark.slow
def test_nan_features_fail_loudly_and_cache_nothing(out, tmp_path):
    import timm

    model = timm.create_model("tf_efficientnet_lite0", num_classes=0)
    state = model.state_dict()
    state["conv_head.weight"][:] = float("nan")
    path = tmp_path / "nan.pth"
    torch.save(state, path)
    _expect_error(out, ["--task", "demo", "--weights", path, "--num-workers", "0"], "NaN/inf features")


def test_hub_model_offline_fails_fast_with_the_weights_alternative(out):
    _expect_error(out, ["--task", "demo", "--model", "hf-hub:MahmoodLab/UNI"],
                  "hf-hub:MahmoodLab/UNI", "--weights")


def test_unknown_probe(out):
    _expect_error(out, ["--task", "demo", "--probes", "svm"], "unknown probe 'svm'")


def test_a_repeated_probes_flag_adds_to_the_list(out):
    """`--probes svm --probes knn` used to keep the last flag only (argparse), running knn and dropping svm silently."""
    _expect_error(out, ["--task", "demo", "--probes", "svm", "--probes", "knn"], "unknown probe 'svm'")


_IMPORTS_AFTER_BAD_NAME = """
import sys
from evalsuite.cli import main
code = main(sys.argv[1:])
heavy = [name for name in ("torch", "timm", "sklearn", "evalsuite.runner") if name in sys.modules]
print("exit", code, "heavy", ",".join(heavy) or "none")
"""


@pytest.mark.parametrize(("args", "fragment"), [
    (["run", "--task", "cr"], "unknown task 'cr'"),
    (["budget", "--task", "cr"], "unknown task 'cr'"),
    (["run", "--task", "demo", "--probes", "linear,knnn"], "unknown probe 'knnn'"),
    (["run", "--task", "demo", "--model", "hf-hub:no-slash"], "hf-hub:ORG/NAME"),
    (["run", "--task", "demo", "--model", "hf-hub:org/name", "--random-init"], "timm architecture name"),
    (["run", "--task", "demo", "--weights", "w.pth", "--random-init"], "exclude each other"),
], ids=["run-task", "budget-task", "probe", "hub-name", "hub-random-init", "weights-random-init"])
def test_bad_names_are_answered_before_torch_is_imported(tmp_path, args, fragment):
    """Issue 25 item 5: `run --task cr` imported the runner (torch, timm, scikit-learn: 7.6 of 9 s) before it
    looked the task up. Without a clock: the reference is that none of torch, timm, sklearn or evalsuite.runner
    is in sys.modules when the CLI has answered exit 2."""
    result = subprocess.run([sys.executable, "-c", _IMPORTS_AFTER_BAD_NAME, *args, "--out", str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=120)
    assert fragment in result.stderr
    assert result.stdout.strip() == "exit 2 heavy none", result.stdout
    assert not (tmp_path / "out").exists()
