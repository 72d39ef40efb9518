"""Recipe params of the wrong name, type or value (issue 48): one `evalsuite: error:` line naming the recipe file and
the parameter, refused with the other up-front checks, before the data is read or any feature extracted.

Before, they were internal errors or refusals after the whole extraction (mizero's `topj: [0]` and zeroshot's
`batch_size: 0` were checked when the probe was built: 106 s on demo_slide, hours on a cohort), or scored as
something else (`ks: [1.9]` as recall@1, `ks: [true]` as k = 1). Runs go through the CLI's main() in this process, so
the imports are paid once and the time to the refusal is the run's own.
"""

import json
import subprocess
import time

import pytest
from conftest import assert_one_line_error, make_crc, run_record

from evalsuite import cli, runner  # noqa: F401  (imported here, not inside the timed run)

TILE_RUN = ["--model", "test_vit", "--random-init", "--num-workers", "0", "--device", "cpu"]

# name -> (task, probe, params, fragments of the one error line)
BAD = {
    "batch-size-zero": ("demo", "retrieval", {"batch_size": 0}, ["params.batch_size must be an integer >= 1", "got 0"]),
    "batch-size-text": ("demo", "knn", {"batch_size": "big"}, ["params.batch_size must be an integer", 'got "big"']),
    "batch-size-float": ("demo", "knn", {"batch_size": 2.0}, ["params.batch_size must be an integer", "got 2.0"]),
    "topj-on-retrieval": ("demo", "retrieval", {"topj": [1, 5]},
                          ["probe 'retrieval' takes no parameter 'topj'", "ks, batch_size, database_batch_size"]),
    "ks-on-knn": ("demo", "knn", {"ks": [1, 3]}, ["probe 'knn' takes no parameter 'ks'", "its parameters are k"]),
    "ks-null": ("demo", "retrieval", {"ks": None}, ["params.ks must be", "a list of distinct integers >= 1",
                                                     "got null"]),
    "ks-text": ("demo", "retrieval", {"ks": ["a"]}, ["params.ks must be", 'got ["a"]']),
    "ks-fraction": ("demo", "retrieval", {"ks": [1.9]}, ["params.ks must be", "got [1.9]"]),
    "ks-bool": ("demo", "retrieval", {"ks": [True]}, ["params.ks must be", "got [true]"]),
    "ks-twice": ("demo", "text_retrieval", {"ks": [5, 5]}, ["params.ks must be", "distinct", "got [5, 5]"]),
    "zeroshot-batch-size": ("demo", "zeroshot", {"batch_size": 0}, ["params.batch_size must be an integer >= 1"]),
    "mizero-topj-zero": ("demo_slide", "mizero", {"topj": [0]}, ["params.topj must be", "got [0]"]),
    "seed-in-a-recipe": ("demo", "linear", {"seed": 3}, ["params.seed is set by --seed or --seeds", "remove it"]),
    "class-weight-typo": ("demo", "linear", {"class_weight": "Balanced"},
                          ["params.class_weight must be 'balanced' or null", 'got "Balanced"']),
    "negative-lr": ("demo", "linear", {"lr": [0.01, -0.001]}, ["params.lr must be a number > 0", "got [0.01, -0.001]"]),
    "switch-as-text": ("demo_seg", "seg_linear", {"normalize": "false"},
                       ["params.normalize must be true or false", 'got "false"']),
    "heads-do-not-divide": ("demo_seg", "seg_masktransformer", {"d_model": 100},
                            ["params.d_model (100) must be a multiple of params.n_heads (8)"]),
    "dropout-one": ("demo_slide", "abmil", {"dropout_mlp": 1.0}, ["params.dropout_mlp must be a number >= 0 and < 1"]),
}


def _recipe(folder, probe: str, params: dict):
    path = folder / f"bad_{probe}.yaml"
    path.write_text(f"name: bad_{probe}\nprobe: {probe}\nparams: {json.dumps(params)}\n")  # JSON is YAML
    return path


def _run(capsys, *args) -> tuple[subprocess.CompletedProcess, float]:
    capsys.readouterr()
    started = time.perf_counter()
    code = cli.main(["run", *map(str, args)])
    seconds = time.perf_counter() - started
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err), seconds


@pytest.mark.parametrize("case", BAD)
def test_a_wrong_recipe_param_is_refused_before_anything_is_extracted(capsys, tmp_path, case):
    task, probe, params, fragments = BAD[case]
    recipe, out = _recipe(tmp_path, probe, params), tmp_path / "out"
    result, seconds = _run(capsys, "--task", task, *TILE_RUN, "--probes", recipe, "--out", out)
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result, f"probe recipe {recipe}", *fragments)
    assert seconds < 2, f"refused after {seconds:.1f} s"
    assert not (out / "cache").exists() or not any((out / "cache").iterdir())
    assert not (out / "leaderboard.csv").exists()


def test_a_number_yaml_reads_as_text_reaches_the_probe_as_a_number(capsys, tmp_path):
    """PyYAML reads 1e-3 (YAML 1.1, no '.') as text: the linear grid's torch.tensor of it was an internal error."""
    recipe = tmp_path / "small_linear.yaml"
    recipe.write_text("name: small_linear\nprobe: linear\nparams: {lr: [1e-3, 1e-2], weight_decay: [0], epochs: 2}\n")
    out, data = tmp_path / "out", make_crc(tmp_path / "data", train_per_class=3, test_per_class=1, size=(16, 16))
    result, _ = _run(capsys, "--task", "crc", "--no-count-check", "--data-root", data, *TILE_RUN, "--probes", recipe,
                     "--out", out)
    assert result.returncode == 0, result.stderr
    (probe,) = run_record(out, result)["probes"]
    assert probe["recipe"]["lr"] == [0.001, 0.01]
