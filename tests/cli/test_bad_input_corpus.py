"""The bad-input corpus of issue 13: inputs a new user or a hostile tester gives, each of which must end
in one line on stderr and a non-zero exit, never a hang, an internal error, data loss or library noise.

Rows that need a file-system fault (read-only --out, disk full, --out naming a file, debris, run JSON
without a leaderboard row) and `cache rm` live in tests/cli/test_fs_faults.py; a cache holding inf is
there too. The corrupt-image cases here run with DataLoader workers under a watchdog timeout: before
the fix the error was printed and the process then never exited.
"""

import json
import subprocess

import pytest
import torch
from conftest import (
    assert_one_line_error,
    cache_manifests,
    leaderboard_rows,
    make_crc,
    make_mhist,
    run_cli,
    run_cli_here,
)

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.tiles.crc import CrcReader
from evalsuite.tasks.cards import load_card

WATCHDOG_S = 120  # the corrupt-image runs take ~15 s; a hang is what this timeout catches


def _truncated(path):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _zero_bytes(path):
    path.write_bytes(b"")


def _text(path):
    path.write_text("this is a note, not an image\n")


CORRUPTIONS = {"truncated": _truncated, "zero-byte": _zero_bytes, "text-named-as-image": _text}


def _last_test_image_crc(root):
    return sorted((root / "CRC-VAL-HE-7K" / "TUM").glob("*.tif"))[-1]


def _last_test_image_mhist(root):
    return root / "images" / "MHIST_aaj.png"  # the last image of the test partition in make_mhist


LAYOUTS = {
    "crc": (lambda root: make_crc(root, train_per_class=2, test_per_class=1, size=(16, 16)), _last_test_image_crc),
    "mhist": (lambda root: make_mhist(root, {"train": 3, "test": 2}, size=(16, 16)), _last_test_image_mhist),
}
WORKER_CASES = [("crc", "truncated"), ("crc", "zero-byte"), ("crc", "text-named-as-image"), ("mhist", "truncated")]


@pytest.mark.slow
@pytest.mark.parametrize("task,corruption", WORKER_CASES, ids=[f"{t}-{c}" for t, c in WORKER_CASES])
def test_corrupt_image_read_by_a_worker_exits_2_and_never_hangs(tmp_path, task, corruption):
    make_layout, pick = LAYOUTS[task]
    root = make_layout(tmp_path / "data")
    bad = pick(root)
    assert bad.is_file()
    CORRUPTIONS[corruption](bad)
    try:
        result = run_cli("run", "--task", task, "--data-root", root, "--no-count-check", "--out", tmp_path / "out",
                         "--probes", "knn", "--num-workers", "2", "--no-autocast", timeout=WATCHDOG_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{task} with a {corruption} image and 2 workers did not exit within {WATCHDOG_S} s (hang)")
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result, f"cannot read image {bad}")
    assert not leaderboard_rows(tmp_path / "out")


@pytest.mark.parametrize("args,fragment", [
    (["--seed", "-1"], "--seed must be a non-negative integer"),
    (["--seeds", "0,,1"], "--seeds takes comma-separated non-negative integers"),
    (["--seeds=-1,2"], "--seeds takes comma-separated non-negative integers"),
    (["--seeds", ""], "--seeds takes comma-separated non-negative integers"),
    (["--seeds", "1,1"], "--seeds needs distinct integers"),
    (["--seed", str(2**62)], "--seed must be a non-negative integer up to 4294967295"),
    (["--seeds", f"0,{2**70}"], "--seeds takes comma-separated non-negative integers up to 4294967295"),
    (["--seeds", "0,²"], "--seeds takes comma-separated non-negative integers"),
    (["--seeds", "1" * 5000], "--seeds takes comma-separated non-negative integers"),
], ids=["seed-negative", "seeds-empty-item", "seeds-negative", "seeds-empty", "seeds-repeated", "seed-2**62",
        "seeds-2**70", "seeds-superscript-two", "seeds-5000-digits"])
def test_bad_seeds_are_one_line_errors(tmp_path, args, fragment):
    result = run_cli_here("run", "--task", "demo", "--out", tmp_path / "out", *args)
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("dtype", [torch.int32, torch.bool], ids=["int32", "bool"])
def test_checkpoint_with_integer_tensors_names_the_first_key_and_dtype(tmp_path, dtype):
    import timm
    from safetensors.torch import save_file

    state = timm.create_model("tf_efficientnet_lite0", num_classes=0).state_dict()
    state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    path = tmp_path / "ints.safetensors"
    save_file(state, str(path))
    result = run_cli_here("run", "--task", "demo", "--weights", path, "--out", tmp_path / "out")
    dtype_name = str(dtype).removeprefix("torch.")
    assert_one_line_error(result, str(path), f"tensor '{next(iter(state))}' is {dtype_name}", "model holds float32")
    assert not (tmp_path / "out").exists()


def test_half_precision_checkpoint_is_accepted(tmp_path):
    """Float16/bfloat16 checkpoints are common (hub releases) and are cast, not refused."""
    import timm
    from safetensors.torch import save_file

    from evalsuite.models.backbones import build_backbone

    state = {k: v.to(torch.bfloat16) if v.is_floating_point() else v
             for k, v in timm.create_model("vit_tiny_patch16_224", num_classes=0).state_dict().items()}
    save_file(state, str(tmp_path / "bf16.safetensors"))
    backbone = build_backbone("vit_tiny_patch16_224", str(tmp_path / "bf16.safetensors"))
    assert next(backbone.model.parameters()).dtype == torch.float32


def _crc_with_extra_folder(tmp_path):
    root = make_crc(tmp_path / "data", train_per_class=2, test_per_class=1, size=(8, 8))
    (root / "NCT-CRC-HE-100K" / "TUM_old").mkdir()
    (root / "NCT-CRC-HE-100K" / ".ipynb_checkpoints").mkdir()  # hidden: never a class, never named
    return root


def test_unknown_class_folder_is_named_on_stderr_and_skipped(tmp_path, capsys):
    reader = CrcReader(load_card("crc"), _crc_with_extra_folder(tmp_path), check_counts=False)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "TUM_old" in err[0] and "NCT-CRC-HE-100K" in err[0] and "classes_closed" in err[0]
    assert ".ipynb_checkpoints" not in err[0]
    assert sum(len(reader.splits[s][0]) for s in ("train", "val")) == 18  # the extra folder is not read


def test_unknown_class_folder_is_an_error_when_the_card_closes_the_class_list(tmp_path):
    import yaml

    from evalsuite.tasks.resources import cards_dir

    card = yaml.safe_load((cards_dir() / "crc.yaml").read_text())
    card["classes_closed"] = True
    path = tmp_path / "crc_closed.yaml"
    path.write_text(yaml.safe_dump(card))
    with pytest.raises(EvalsuiteError, match="class folders not in task card .*crc_closed.yaml: TUM_old"):
        CrcReader(load_card(str(path)), _crc_with_extra_folder(tmp_path), check_counts=False)


def test_classes_closed_must_be_a_boolean(tmp_path):
    import yaml

    from evalsuite.tasks.resources import cards_dir

    card = yaml.safe_load((cards_dir() / "crc.yaml").read_text())
    card["classes_closed"] = "yes"
    path = tmp_path / "crc_bad.yaml"
    path.write_text(yaml.safe_dump(card))
    with pytest.raises(EvalsuiteError, match="field 'classes_closed' must be bool"):
        load_card(str(path))


# ---- issue 24: silent wrong results and internal errors (CLI, show, card names) ----------------------------------

def test_debug_before_the_command_is_kept(tmp_path):
    """`evalsuite --debug show nope`: the subcommand's default (False) overwrote the flag, so one line was printed."""
    result = run_cli("--debug", "show", "nope", "--out", tmp_path)
    assert result.returncode != 0
    assert "Traceback" in result.stderr and "EvalsuiteError: no runs folder" in result.stderr


@pytest.mark.parametrize("name", ["crc\nsecond line", "crc,extra", "my task", "", "-crc", "x" * 101],
                         ids=["newline", "comma", "space", "empty", "leading-dash", "101-chars"])
def test_a_card_name_that_is_not_an_identifier_is_refused(tmp_path, name):
    import yaml

    from evalsuite.tasks.resources import cards_dir

    card = yaml.safe_load((cards_dir() / "crc.yaml").read_text())
    card["name"] = name
    path = tmp_path / "renamed.yaml"
    path.write_text(yaml.safe_dump(card))
    with pytest.raises(EvalsuiteError, match=r"renamed.yaml: field 'name' must be an identifier") as caught:
        load_card(str(path))
    assert "\n" not in str(caught.value)  # the bad name is quoted (repr), so the error stays one line
    card["name"] = "x" * 100  # the longest accepted name
    path.write_text(yaml.safe_dump(card))
    assert load_card(str(path)).name == "x" * 100


def _run_json(out, **changes):
    from evalsuite.results.run_json import write_run_json

    record = {"run_id": "20260101T000000Z-aaaa1111", "task": {"name": "crc", "classes": ["a", "b"]},
              "model": {"name": "m"}, "probes": [{"probe": "knn", "metrics": {"test": {"f1_macro": 0.5}}}],
              **changes}
    write_run_json(out, record)


@pytest.mark.parametrize("changes,expected", [
    ({"probes": None}, "probe     none recorded (probes is null)"),
    ({"probes": [{"probe": "knn", "metrics": {"test": {"f1_macro": None, "accuracy": 0.25}}}]},
     "          test  accuracy 0.2500  f1_macro null"),
    ({"task": None, "model": None, "versions": None}, "task      None  card None"),
], ids=["probes-null", "metric-null", "sections-null"])
def test_show_prints_a_run_json_holding_nulls(tmp_path, changes, expected):
    """Before: TypeError ('NoneType' object is not iterable / unsupported format string), an internal error."""
    _run_json(tmp_path, **changes)
    result = run_cli("show", "20260101", "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    assert any(line.startswith(expected) for line in result.stdout.splitlines()), result.stdout


MANIFEST_CARD = """name: corpus_slides
kind: slide
reader: {{name: slide_csv, args: {{manifest: slides.csv}}}}
classes: [neg, pos]
splits: [train, val, test]
selection_metric: balanced_accuracy
probes: [meanpool]
data_root: {root}
"""


@pytest.mark.parametrize("manifest,fragments,misleading", [
    ("slide_path,label\n", ["slides.csv lists no slides (a header and no rows)"], "has no column"),
    ("slide_path,label\nsiteA/001.svs,pos\nsiteB/001.svs,neg\n",
     ["line 3: slide id '001' (the file name of 001.svs)", "add a slide_id column"], "listed twice"),
], ids=["header-only", "one-file-name-in-two-site-folders"])
def test_slide_manifest_messages_point_the_right_way(tmp_path, manifest, fragments, misleading):
    """Issue 24 item 8: a header-only manifest was 'has no column slide_path, label'; siteA/001.svs and
    siteB/001.svs were 'listed twice' with no hint to add a slide_id column."""
    (tmp_path / "slides.csv").write_text(manifest)
    (tmp_path / "card.yaml").write_text(MANIFEST_CARD.format(root=tmp_path))
    result = run_cli_here("run", "--task", tmp_path / "card.yaml", "--model", "test_vit", "--random-init",
                          "--out", tmp_path / "out")
    assert_one_line_error(result, *fragments)
    assert result.returncode == 2 and misleading not in result.stderr
    assert not leaderboard_rows(tmp_path / "out")


def test_tile_csv_unreadable_image_says_to_delete_its_row_not_no_count_check(tmp_path):
    """Issue 24 item 8: tile_csv image errors suggested --no-count-check, which a tile manifest ignores."""
    import numpy as np
    from PIL import Image

    from evalsuite.readers import build_reader

    rows = ["image_path,label,split"]
    for split in ("train", "val", "test"):
        for label in ("left", "right"):
            Image.new("RGB", (8, 8), (200, 100, 150)).save(tmp_path / f"{split}_{label}.png")
            rows.append(f"{split}_{label}.png,{label},{split}")
    (tmp_path / "test_right.png").write_text("this is a note, not an image\n")
    (tmp_path / "tiles.csv").write_text("\n".join(rows) + "\n")
    (tmp_path / "card.yaml").write_text(
        "name: corpus_tiles\nkind: classification\nreader: {name: tile_csv, args: {manifest: tiles.csv}}\n"
        f"classes: [left, right]\nsplits: [train, val, test]\nselection_metric: balanced_accuracy\n"
        f"probes: [knn]\ndata_root: {tmp_path}\n")
    test = build_reader(load_card(str(tmp_path / "card.yaml"))).dataset("test", np.asarray)
    with pytest.raises(EvalsuiteError, match=f"cannot read image {tmp_path / 'test_right.png'}") as caught:
        test[1]
    assert f"delete its row from {tmp_path / 'tiles.csv'}" in str(caught.value)
    assert "--no-count-check" not in str(caught.value)


@pytest.mark.parametrize("command", [["run", "--task", "demo"], ["leaderboard"], ["show", "x"], ["cache", "ls"]],
                         ids=["run", "leaderboard", "show", "cache"])
@pytest.mark.parametrize("too_long", ["name", "path"])
def test_out_over_name_max_or_path_max_is_one_line(tmp_path, command, too_long):
    """Before: `OSError: [Errno 36] File name too long` from a stat(), an internal error (exit 1)."""
    out = tmp_path / ("n" * 256) if too_long == "name" else tmp_path.joinpath(*["p" * 200] * 21)  # 4221 bytes
    result = run_cli_here(*command, "--out", out)
    assert result.returncode == 2
    expected = ("is 256 bytes, over the file system's 255 (NAME_MAX)" if too_long == "name" else
                "PATH_MAX 4095, less 256 for the files under it); pass a shorter --out")
    assert_one_line_error(result, "--out", expected)


def test_leaderboard_saved_with_a_bom_is_read(tmp_path):
    """Excel saves UTF-8 with a BOM; it was read into the first column's name: "missing columns: schema"."""
    from evalsuite.results.leaderboard import COLUMNS

    row = {"schema": "5", "run_id": "r1", "timestamp_utc": "2026-01-01T00:00:00+00:00", "task": "crc",
           "model": "m", "probe": "knn", "split": "test", "metric": "balanced_accuracy", "value": "0.750000",
           "seed": "0", "headline_metric": "balanced_accuracy"}
    text = ",".join(COLUMNS) + "\r\n" + ",".join(row.get(c, "") for c in COLUMNS) + "\r\n"
    (tmp_path / "leaderboard.csv").write_bytes(b"\xef\xbb\xbf" + text.encode())
    result = run_cli("leaderboard", "--out", tmp_path)
    assert result.returncode == 0, result.stderr
    assert "0.7500" in result.stdout


# ---- issue 24: a split that cannot support its metrics ------------------------------------------------------------

TINY_MODEL = ["--model", "test_vit", "--random-init", "--num-workers", "0", "--precision", "fp32"]
TILE_CARD = """name: tiny_tiles
kind: classification
reader: {{name: tile_csv, args: {{manifest: tiles.csv}}}}
classes: [left, right]
splits: [train, val, test]
selection_metric: balanced_accuracy
probes: [knn]
data_root: {root}
"""


def _tile_cohort(root, labels: dict, patients=None, group=False):
    """PNG tiles listed in tiles.csv: `labels` = {split: [label, ...]}; `patients`: {split: [patient, ...]}."""
    from conftest import write_image

    rows = []
    for split, split_labels in labels.items():
        for index, label in enumerate(split_labels):
            name = f"{split}_{index}.png"
            write_image(root / name, size=(16, 16), seed=len(rows))
            row = {"image_path": name, "label": label, "split": split, "site": "ab"[index % 2]}
            if patients:
                row["patient"] = patients[split][index]
            rows.append(row)
    columns = list(rows[0])
    (root / "tiles.csv").write_text("\n".join([",".join(columns)] + [",".join(r[c] for c in columns) for r in rows])
                                    + "\n")
    card = root / "card.yaml"
    card.write_text(TILE_CARD.format(root=root) + ("group: site\n" if group else ""))
    return card


def test_a_train_split_with_one_class_is_refused(tmp_path):
    """Before: a degenerate kNN probe (every prediction 'left') went onto the leaderboard with exit 0."""
    card = _tile_cohort(tmp_path, {"train": ["left"] * 4, "val": ["left", "right"], "test": ["left", "right"] * 2})
    result = run_cli_here("run", "--task", card, *TINY_MODEL, "--out", tmp_path / "out")
    assert result.returncode == 2
    assert_one_line_error(result, "the train split has only class left (4 items)", "at least two classes")
    assert not leaderboard_rows(tmp_path / "out")
    assert not list((tmp_path / "out").glob("cache/*/*.npy"))  # refused before extraction (review of issue 24)


def test_group_index_on_test_tiles_of_one_patient_says_so(tmp_path):
    """Before: "robustness index: k=1 must be an integer from 1 to 0", which sends the user to lower k."""
    labels = {"train": ["left", "right"] * 2, "val": ["left", "right"], "test": ["left", "right"] * 2}
    patients = {"train": ["p1", "p2", "p3", "p4"], "val": ["p5", "p6"], "test": ["p0"] * 4}
    card = _tile_cohort(tmp_path, labels, patients, group=True)
    result = run_cli_here("run", "--task", card, *TINY_MODEL, "--out", tmp_path / "out")
    assert result.returncode == 2
    assert_one_line_error(result, "all 4 items come from one patient/slide", "at least two patients/slides")
    assert not (tmp_path / "out").exists()  # refused before any extraction


SLIDE_CARD = """name: tiny_slides
kind: slide
reader: {{name: slide_csv, args: {{manifest: slides.csv}}}}
classes: [stroma, tumour]
splits: [train, val, test]
tiling: {{target_mpp: 0.5, tile_size_px: 224, min_tissue_fraction: 0.5}}
selection_metric: balanced_accuracy
probes: [meanpool]
data_root: {root}
"""


def _slide_cohort(root, per_split: dict, missing=()):
    """Demo slides: `per_split` = {split: {label: count}}; `missing` rows name slide files that do not exist."""
    import csv
    import shutil

    from evalsuite.readers.demo.demo_slides import demo_slides_folder

    demo = demo_slides_folder()
    with open(demo / "slides.csv", newline="") as handle:
        demo_rows = list(csv.DictReader(handle))
    rows = []
    for split, counts in per_split.items():
        for label, count in counts.items():
            for row in [r for r in demo_rows if r["split"] == split and r["label"] == label][:count]:
                shutil.copyfile(demo / row["slide_path"], root / row["slide_path"])
                rows.append([row["slide_path"], label, split])
    rows += [[name, label, split] for name, label, split in missing]
    (root / "slides.csv").write_text("\n".join(["slide_path,label,split"] + [",".join(r) for r in rows]) + "\n")
    card = root / "card.yaml"
    card.write_text(SLIDE_CARD.format(root=root))
    return card


def test_a_three_slide_cohort_is_refused(tmp_path):
    """One slide per split: before, balanced accuracy 1.000 on a one-slide test split, exit 0. Issue 40: refused
    from the manifest's labels, before any slide is tiled (it was after train's extraction, 62 s)."""
    card = _slide_cohort(tmp_path, {"train": {"stroma": 1}, "val": {"tumour": 1}, "test": {"tumour": 1}})
    result = run_cli_here("run", "--task", card, *TINY_MODEL, "--out", tmp_path / "out")
    assert result.returncode == 2
    assert_one_line_error(result, "the train split has only class stroma (1 items)")
    assert not leaderboard_rows(tmp_path / "out")
    assert cache_manifests(tmp_path / "out") == {}


def test_skip_bad_slides_leaving_a_test_split_with_one_class_is_refused_naming_the_skipped(tmp_path):
    """Both tumour test slides skipped: before, test balanced accuracy 1.000 with nothing said and exit 0. Issue 40:
    refused once tiling has found the bad slides, before any tile is embedded (it was after all three splits)."""
    missing = [("gone_1.svs", "tumour", "test"), ("gone_2.svs", "tumour", "test")]
    card = _slide_cohort(tmp_path, {"train": {"stroma": 2, "tumour": 2}, "val": {"stroma": 1, "tumour": 1},
                                    "test": {"stroma": 2}}, missing)
    result = run_cli_here("run", "--task", card, *TINY_MODEL, "--skip-bad-slides", "--out", tmp_path / "out")
    assert result.returncode == 2
    assert_one_line_error(result, "refusing to score the test split: --skip-bad-slides left out 2 slide(s) "
                          "(gone_1, gone_2) and only class stroma (2 items) is left")
    assert not leaderboard_rows(tmp_path / "out")
    assert cache_manifests(tmp_path / "out") == {}


# ---- issue 40: a YAML key written twice (sweep files, task cards, probe recipes) ----------------------------------

def _duplicated_key_files(tmp_path) -> dict:
    """{kind: (path, the command that reads it, what its error says)}: each file writes one key twice."""
    from evalsuite.tasks.resources import cards_dir

    card = tmp_path / "card.yaml"
    demo = (cards_dir() / "demo.yaml").read_text()
    card.write_text("name: twice\nclasses: [a, b]\n" + demo.replace("name: demo\n", ""))  # demo's own classes: later
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text("name: twice\nprobe: knn\nparams: {k: [1]}\nprobe: linear\n")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text("name: twice\nmodels: [test_vit]\ntasks: [demo]\nmodels: [resnet18]\nout: out\n")
    nested = tmp_path / "nested.yaml"
    nested.write_text("models: [test_vit]\nslurm:\n  partition: gpu\n  partition: cpu\ntasks: [demo]\nout: out\n")
    return {
        "sweep": (sweep, ["sweep", "run", sweep, "--dry-run"], "key 'models' is written twice (lines 2 and 4)"),
        "sweep-nested": (nested, ["sweep", "status", nested], "key 'partition' is written twice (lines 3 and 4)"),
        "card": (card, ["run", "--task", card, "--out", tmp_path / "out"],
                 "key 'classes' is written twice (lines 2 and "),
        "recipe": (recipe, ["run", "--task", "demo", "--probes", recipe, "--out", tmp_path / "out"],
                   "key 'probe' is written twice (lines 2 and 4)"),
    }


@pytest.mark.parametrize("kind", ["sweep", "sweep-nested", "card", "recipe"])
def test_a_yaml_key_written_twice_is_refused(tmp_path, kind):
    """Before: PyYAML kept the last `models:` and the sweep ran half its models with exit 0; a card or recipe lost
    a field the same way."""
    path, command, fragment = _duplicated_key_files(tmp_path)[kind]
    result = run_cli_here(*command, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result, str(path), fragment, "keep one")
    assert not (tmp_path / "out").exists()


# ---- issue 40: `evalsuite report` on damaged run JSONs and an --html that cannot be a file -------------------------

def report_board(out):
    """A leaderboard of models a and b on task t (no stored predictions) and a's run JSON; returns a's run JSON."""
    from evalsuite.results.leaderboard import LEADERBOARD_FILE, append_rows

    for model, value in (("a", 0.9), ("b", 0.6)):
        append_rows(out / LEADERBOARD_FILE, [
            {"run_id": f"run-{model}", "timestamp_utc": "2026-01-02T00:00:00+00:00", "task": "t", "model": model,
             "weights_id": "w", "probe": "linear", "selected_params": "{}", "split": split,
             "metric": "balanced_accuracy", "value": f"{value:.6f}", "seed": 0, "n_samples": 10,
             "headline_metric": "balanced_accuracy"} for split in ("val", "test")])
    path = out / "runs" / "run-a.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps({"run_id": "run-a", "seeds": [0], "config": {"task": "t", "model": "a"},
                                "versions": {"evalsuite": "1"}, "probes": []}))
    return path


def in_process(capsys, *args) -> subprocess.CompletedProcess:
    """`evalsuite ARGS` through the CLI's main() in this process (no interpreter start), as a completed process."""
    from evalsuite import cli

    capsys.readouterr()
    code = cli.main([*map(str, args)])
    captured = capsys.readouterr()
    return subprocess.CompletedProcess(args, code, captured.out, captured.err)


def report_cli(capsys, *args) -> subprocess.CompletedProcess:
    return in_process(capsys, "report", *args)


DAMAGED_RUN_JSONS = {
    "fields-of-wrong-types": ('{"probes": null, "config": 5}', "field 'config' is an integer, not an object"),
    "a-list": ("[1, 2]", "the file is a list, not an object"),
    "seeds-a-string": ('{"seeds": "0,1"}', "field 'seeds' is a string, not a list"),
    "seed-a-list": ('{"seeds": [[0]]}', "field 'seeds' item 0 is a list, not an integer"),
    "versions-a-string": ('{"versions": "1.0"}', "field 'versions' is a string, not an object"),
    "config-task-a-number": ('{"config": {"task": 5}}', "field 'config.task' is an integer, not a string"),
    "config-probes-a-string": ('{"config": {"probes": "knn"}}', "field 'config.probes' is not a list"),
    "cut-short": ('{"run_id": "run-a", "seeds": [', "is damaged"),
    "not-utf8": (b"\xff\xfe{}", "is damaged"),
}


@pytest.mark.parametrize("case", DAMAGED_RUN_JSONS)
@pytest.mark.parametrize("form", ["markdown", "html"])
def test_report_on_a_damaged_run_json_names_it_and_the_fix(capsys, tmp_path, case, form):
    """Before: AttributeError ('int' object has no attribute 'get'), an internal error, for wrong types."""
    path = report_board(tmp_path)
    content, fragment = DAMAGED_RUN_JSONS[case]
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    result = report_cli(capsys, "--out", tmp_path, "--format", form)
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result, f"run JSON {path}", fragment, "move the file aside")
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before  # no report.html, no debris


def test_report_reads_null_sections_as_not_recorded(capsys, tmp_path):
    """As `evalsuite show` does: a null section is one the run did not record, not a damaged file."""
    report_board(tmp_path).write_text('{"run_id": "run-a", "probes": null, "config": null, "seeds": null}')
    result = report_cli(capsys, "--out", tmp_path, "--format", "markdown")
    assert result.returncode == 0, result.stderr


def test_report_html_naming_a_folder_is_refused_before_any_work(capsys, tmp_path):
    """Before: IsADirectoryError from the rename onto the folder, an internal error, after the page was made."""
    report_board(tmp_path)
    folder = tmp_path / "pages"
    (folder / "old").mkdir(parents=True)
    result = report_cli(capsys, "--out", tmp_path, "--html", folder)
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result, f"--html {folder}", "is a folder", "a file")
    assert sorted(p.name for p in folder.iterdir()) == ["old"]
    assert not [p for p in tmp_path.rglob("*.tmp")]


@pytest.mark.parametrize("command", [["leaderboard"], ["leaderboard", "--compare", "a", "b"], ["report"],
                                     ["report", "--format", "markdown"]], ids=" ".join)
def test_a_leaderboard_that_is_a_folder_says_so(capsys, tmp_path, command):
    """Issue 40: "no leaderboard at .../leaderboard.csv", which sent the user looking for a missing file."""
    (tmp_path / "leaderboard.csv" / "inside").mkdir(parents=True)
    result = in_process(capsys, *command, "--out", tmp_path)
    assert result.returncode == 2, result.stderr
    assert_one_line_error(result, f"{tmp_path / 'leaderboard.csv'} is a folder, not the leaderboard file",
                          "move it aside")
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["inside", "leaderboard.csv"]


# ---- issue 40: Slurm's compressed counts -------------------------------------------------------------------------

def test_slurm_cpus_on_node_in_slurms_repeated_count_form_is_read(tmp_path):
    """`SLURM_CPUS_ON_NODE=2(x2)` (2 CPUs on each of 2 nodes): before, `ValueError: invalid literal for int()`."""
    env = {"SLURM_MEM_PER_CPU": "1000", "SLURM_CPUS_ON_NODE": "2(x2)"}
    result = run_cli_here("budget", "--task", "demo", *TINY_MODEL, "--out", tmp_path / "out", env=env)
    assert result.returncode == 0, result.stderr
    assert "limits: SLURM_MEM_PER_CPU 1.95 GiB" in result.stdout  # 2 CPUs x 1000 MB on this node
    assert not (tmp_path / "out").exists()


# ---- issue 40: labels and names follow the identifier rule -------------------------------------------------------

@pytest.mark.parametrize("label, fragment", [
    ("x\ny", "--label must be an identifier of up to 100 letters, digits, '_', '.', '+' or '-' that starts with "
             "a letter or digit (e.g. uni2-h-ft), got 'x\\ny': it holds '\\n'"),
    ("my model", "got 'my model': it holds ' '"),
    ("..", "--label '..' is refused: '.' and '..' name a folder and its parent"),
], ids=["line-break", "space", "dot-dot"])
def test_a_label_that_is_not_an_identifier_is_refused_at_once(tmp_path, label, fragment):
    """Before: `--label $'x\\ny'` was accepted and broke the leaderboard table and the Markdown report."""
    result = run_cli_here("run", "--task", "demo", *TINY_MODEL, "--label", label, "--out", tmp_path / "out")
    assert result.returncode == 2
    assert_one_line_error(result, fragment)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("name", [".", ".."])
def test_a_card_named_dot_says_why(tmp_path, name):
    import yaml

    from evalsuite.tasks.resources import cards_dir

    card = yaml.safe_load((cards_dir() / "crc.yaml").read_text())
    card["name"] = name
    (tmp_path / "dot.yaml").write_text(yaml.safe_dump(card))
    result = run_cli_here("run", "--task", tmp_path / "dot.yaml", "--out", tmp_path / "out")
    assert_one_line_error(result, f"field 'name' {name!r} is refused: '.' and '..' name a folder and its parent")
    assert "must be letters" not in result.stderr and not (tmp_path / "out").exists()
