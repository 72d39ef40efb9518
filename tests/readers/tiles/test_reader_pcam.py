"""PCam: camelyonpatch_level_2_split_{train,valid,test}_{x,y}.h5, one lazy HDF5 handle per process."""

import collections
import json
import multiprocessing
import os
import pickle

import h5py
import numpy as np
import pytest
import torch
from conftest import assert_one_line_error, make_pcam, make_pcam_meta, pcam_name, run_card, run_cli
from torchvision import transforms as T

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.bootstrap import task_draw_seed
from evalsuite.metrics.intervals import bootstrap_draw_scores, bootstrap_intervals
from evalsuite.metrics.shown_intervals import shown_interval
from evalsuite.readers.tiles import pcam
from evalsuite.readers.tiles.pcam import PcamReader
from evalsuite.results.predictions import load_predictions
from evalsuite.tasks.cards import load_card


def _reader(root):
    return PcamReader(load_card("pcam"), root, check_counts=False)


def _tiles(root, split):
    with h5py.File(root / pcam_name(split, "x"), "r") as file:
        return torch.from_numpy(file["x"][:]).permute(0, 3, 1, 2).float() / 255


def _count_opens(monkeypatch, log):
    """From now on, log every h5py.File open as a `pid file-name` line (forked DataLoader workers inherit this)."""
    real_open = h5py.File

    def counting_open(path, *args, **kwargs):
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()} {os.path.basename(path)}\n")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(pcam.h5py, "File", counting_open)


def _record_worker_pid(log):
    def init(worker_id):
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()}\n")
    return init


def test_h5_opened_at_most_once_per_process_over_epochs_with_workers(tmp_path, monkeypatch):
    root = make_pcam(tmp_path / "data", {"train": 24, "valid": 2, "test": 2})
    expected = _tiles(root, "train")
    open_log = tmp_path / "opens.log"
    _count_opens(monkeypatch, open_log)
    dataset = _reader(root).dataset("train", T.ToTensor())
    workers_log = tmp_path / "workers.log"
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2, persistent_workers=True,
                                         multiprocessing_context="fork", worker_init_fn=_record_worker_pid(workers_log))
    for _ in range(2):
        images, labels = map(torch.cat, zip(*loader))
        assert torch.equal(images, expected) and labels.tolist() == dataset.labels.tolist()
    del loader  # stops the persistent workers

    opens = collections.Counter(tuple(line.split()) for line in open_log.read_text().splitlines())
    workers = {int(pid) for pid in workers_log.read_text().split()}
    assert len(workers) == 2 and os.getpid() not in workers
    assert max(opens.values()) == 1, opens  # no file opened twice by any process
    x_file = pcam_name("train", "x")
    assert {int(pid) for pid, name in opens if name == x_file} == workers | {os.getpid()}


def _read_in_child(dataset, queue):
    inherited = dataset.images._file
    image, label = dataset[1]
    queue.put((dataset.images._file is not inherited, dataset.images._pid == os.getpid(), image.shape, label))


def test_forked_worker_never_reuses_the_parent_handle(tmp_path):
    dataset = _reader(make_pcam(tmp_path)).dataset("val", T.ToTensor())
    parent_handle = dataset.images.file()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_read_in_child, args=(dataset, queue))
    child.start()
    own_handle, own_pid, shape, label = queue.get(timeout=60)
    child.join(timeout=60)
    assert own_handle and own_pid and shape == (3, 96, 96) and label == 1
    assert dataset.images.file() is parent_handle and dataset[1][1] == 1  # the parent's handle is untouched


def test_dataset_pickles_without_its_handle(tmp_path):
    root = make_pcam(tmp_path)
    dataset = _reader(root).dataset("test", T.ToTensor())
    copy = pickle.loads(pickle.dumps(dataset))
    assert copy.images._file is None
    assert torch.equal(copy[3][0], _tiles(root, "test")[3]) and copy[3][1] == 1


def test_x_y_length_mismatch_is_one_line_error(tmp_path):
    root = make_pcam(tmp_path / "data")
    with h5py.File(root / pcam_name("valid", "y"), "w") as file:
        file.create_dataset("y", data=np.zeros((3, 1, 1, 1), dtype=np.uint8))
    result = run_cli("run", "--task", "pcam", "--data-root", root, "--out", tmp_path / "out", "--no-count-check")
    assert_one_line_error(result, pcam_name("valid", "x"), "has 4 tiles but its y file has 3 labels")


def test_gzipped_download_asks_for_decompression(tmp_path):
    root = make_pcam(tmp_path)
    packed = root / (pcam_name("test", "x") + ".gz")
    (root / pcam_name("test", "x")).rename(packed)
    with pytest.raises(EvalsuiteError, match=f"found {packed} but the reader needs it decompressed: run `gunzip -k"):
        _reader(root)


@pytest.mark.parametrize("key, data, message", [
    ("images", np.zeros((8, 96, 96, 3), np.uint8), "has no dataset 'x' \\(found images\\)"),
    ("x", np.zeros((8, 96, 96, 3), np.float32), "'x' is float32 \\(8, 96, 96, 3\\); expected uint8"),
    ("x", np.zeros((8, 64, 64, 3), np.uint8), "'x' is uint8 \\(8, 64, 64, 3\\); expected uint8 \\(N, 96, 96, 3\\)"),
])
def test_malformed_x_file(tmp_path, key, data, message):
    root = make_pcam(tmp_path)
    with h5py.File(root / pcam_name("train", "x"), "w") as file:
        file.create_dataset(key, data=data)
    with pytest.raises(EvalsuiteError, match=message):
        _reader(root)


def test_labels_come_from_y_and_counts_are_checked(tmp_path):
    root = make_pcam(tmp_path)
    reader = _reader(root)
    assert reader.labels["train"].dtype == np.int64 and reader.labels["train"].tolist() == [0, 1] * 4
    with pytest.raises(EvalsuiteError, match="split 'train' has 8 images but the official dataset has 262144"):
        PcamReader(load_card("pcam"), root)


@pytest.mark.slow
def test_pcam_card_end_to_end(tmp_path):
    run_card("pcam", make_pcam(tmp_path / "data"), tmp_path / "out", {"train": 8, "val": 4, "test": 4})


# ---- the source slide of each tile (camelyonpatch_level_2_split_*_meta.csv) ----

TEST_SLIDES = [f"camelyon16_test_{slide:03d}" for slide in range(6)]
TILES_PER_SLIDE = 4
KNN1 = "name: knn1\nprobe: knn\nparams:\n  k: [1]\n"


def _write_split(root, split, images, labels):
    with h5py.File(root / pcam_name(split, "x"), "w") as file:
        file.create_dataset("x", data=images)
    with h5py.File(root / pcam_name(split, "y"), "w") as file:
        file.create_dataset("y", data=np.asarray(labels, np.uint8).reshape(-1, 1, 1, 1))


def _correlated_pcam(root):
    """Test tiles correlated within their slide: each of 6 slides is 4 copies of one image with one label, and the
    train split holds each slide's image once, labelled right for slides 0-3 and wrong for 4-5, so a 1-NN probe gets
    whole slides right or wrong (test balanced accuracy 2/3). Returns the test meta CSV's `wsi` column."""
    make_pcam(root, {"train": 8, "valid": 4, "test": 24})
    rng = np.random.default_rng(3)
    slide_images = rng.integers(0, 256, (len(TEST_SLIDES), 96, 96, 3), dtype=np.uint8)
    slide_labels = np.arange(len(TEST_SLIDES)) % 2
    _write_split(root, "test", np.repeat(slide_images, TILES_PER_SLIDE, axis=0), np.repeat(slide_labels, 4))
    train_images = np.concatenate([slide_images, rng.integers(0, 256, (2, 96, 96, 3), dtype=np.uint8)])
    _write_split(root, "train", train_images, np.r_[slide_labels[:4], 1 - slide_labels[4:], [0, 1]])
    return list(np.repeat(TEST_SLIDES, TILES_PER_SLIDE))


def _run(root, out, recipe, model="test_vit"):
    return run_cli("run", "--task", "pcam", "--data-root", root, "--no-count-check", "--model", model,
                   "--random-init", "--num-workers", "0", "--probes", recipe, "--out", out)


def _only_record(out):
    (path,) = (out / "runs").glob("*.json")
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def pcam_runs(tmp_path_factory):
    """1-NN runs on the correlated fixture: `plain` without a meta CSV (test_vit), then `slides` with the test meta
    CSV (test_vit and test_vit2, for --compare)."""
    base = tmp_path_factory.mktemp("pcam_slides")
    root, recipe = base / "data", base / "knn1.yaml"
    recipe.write_text(KNN1)
    slides = _correlated_pcam(root)
    plain = _run(root, base / "plain", recipe)
    make_pcam_meta(root, "test", slides)
    runs = [_run(root, base / "slides", recipe, model) for model in ("test_vit", "test_vit2")]
    for result in [plain, *runs]:
        assert result.returncode == 0, result.stderr
    return {"base": base, "slides": slides, "plain": plain, "with_meta": runs[0]}


def test_meta_csv_slides_are_the_test_clusters_and_the_interval_resamples_slides(pcam_runs):
    out = pcam_runs["base"] / "slides"
    record = next(r for r in map(json.loads, (p.read_text() for p in (out / "runs").glob("*.json")))
                  if r["model"]["name"] == "test_vit+random-init")
    (knn,) = record["probes"]
    assert knn["intervals_95_unit"] == "slide" and "intervals_note" not in record
    assert knn["metrics"]["test"]["balanced_accuracy"] == pytest.approx(2 / 3)
    stored = load_predictions(out, record["run_id"])
    assert stored.cluster_unit == "slide" and stored.clusters.tolist() == pcam_runs["slides"]  # the wsi column
    # Reference intervals of test balanced accuracy (1000 draws, seed 0): resampling the 6 slides gives
    # [0.25, 1.0]; resampling the 24 tiles as if independent gives [0.469, 0.857], too narrow for these tiles.
    proba = stored.probas["knn1/seed0"]
    per_tile = bootstrap_intervals(stored.labels, proba, seed=0)["balanced_accuracy"]
    assert per_tile == pytest.approx((0.46875, 0.857142857), abs=1e-6)
    assert bootstrap_intervals(stored.labels, proba, seed=0, groups=stored.clusters)["balanced_accuracy"] == \
        pytest.approx((0.25, 1.0))
    # The run's own: the task's draws over the 6 slides read with t(5), cut at 1 (docs/significance.md).
    drawn = bootstrap_draw_scores(stored.labels, proba, seed=task_draw_seed("pcam"), groups=stored.clusters)
    expected = shown_interval(2 / 3, drawn["balanced_accuracy"], 6, "balanced_accuracy").bounds
    assert knn["intervals_95"]["test"]["balanced_accuracy"] == pytest.approx(list(expected))
    low, high = knn["intervals_95"]["test"]["balanced_accuracy"]
    assert low < 0.25 < per_tile[0] and high == 1.0


def test_compare_on_slide_clusters_uses_the_paired_cluster_bootstrap_not_mcnemar(pcam_runs):
    result = run_cli("leaderboard", "--out", pcam_runs["base"] / "slides", "--compare", "test_vit+random-init",
                     "test_vit2+random-init", "--metric", "accuracy")
    assert result.returncode == 0, result.stderr
    row = next(line for line in result.stdout.splitlines() if line.startswith("pcam "))
    # accuracy with one seed each: exact McNemar if the 24 tiles were independent; 6 slides make it the bootstrap.
    assert row.split()[2:5] == ["24", "6", "slide"] and " bootstrap " in row and "mcnemar" not in row
    assert "independent" not in result.stderr


def test_without_a_meta_csv_the_run_json_and_the_output_say_intervals_assume_independent_tiles(pcam_runs):
    out = pcam_runs["base"] / "plain"
    record = _only_record(out)
    note = ("intervals and paired tests treat the 24 test tiles as independent items (no patient or slide ids "
            "known); items of one slide are correlated, so they may be too narrow; put "
            "camelyonpatch_level_2_split_test_meta.csv (PCam's tile-to-slide table) beside the h5 files")
    assert record["intervals_note"] == note and record["probes"][0]["intervals_95_unit"] == "tile"
    assert f"note: {note}" in pcam_runs["plain"].stdout.splitlines()
    shown = run_cli("show", record["run_id"], "--out", out)
    assert shown.returncode == 0 and f"note      {note}" in shown.stdout.splitlines()
    assert "intervals_note" not in pcam_runs["with_meta"].stdout and "note:" not in pcam_runs["with_meta"].stdout


def test_groups_are_the_wsi_column_per_split_and_none_without_the_meta_csv(tmp_path):
    root = make_pcam(tmp_path)
    assert _reader(root).groups("test") is None and _reader(root).interval_unit == "tile"
    make_pcam_meta(root, "test", ["camelyon16_test_001"] * 2 + ["camelyon16_test_002"] * 2)
    make_pcam_meta(root, "valid", ["camelyon16_train_normal_033"] * 4)
    reader = _reader(root)
    assert reader.interval_unit == "slide" and reader.groups("train") is None
    assert reader.groups("test") == ["camelyon16_test_001"] * 2 + ["camelyon16_test_002"] * 2
    assert reader.groups("val") == ["camelyon16_train_normal_033"] * 4


def test_a_meta_csv_with_another_row_count_is_one_line_naming_it_and_nothing_is_written(tmp_path):
    root = make_pcam(tmp_path / "data")
    meta = make_pcam_meta(root, "test", ["camelyon16_test_001"] * 5)
    result = run_cli("run", "--task", "pcam", "--data-root", root, "--out", tmp_path / "out", "--no-count-check")
    assert_one_line_error(result, str(meta), "lists 5 tiles but camelyonpatch_level_2_split_test_x.h5 has 4")
    assert result.returncode == 2 and not (tmp_path / "out" / "leaderboard.csv").exists()


@pytest.mark.parametrize("text, message", [
    ("coord_y,coord_x,tumor_patch\n1,2,False\n", "has no 'wsi' column"),
    (",coord_y,coord_x,tumor_patch,center_tumor_patch,wsi\n0,1,2,False,False,\n", "line 2 has no 'wsi' value"),
])
def test_a_meta_csv_without_slides_is_one_line_naming_it(tmp_path, text, message):
    root = make_pcam(tmp_path, {"train": 8, "valid": 4, "test": 1})
    meta = root / "camelyonpatch_level_2_split_test_meta.csv"
    meta.write_text(text)
    with pytest.raises(EvalsuiteError) as error:
        _reader(root)
    assert str(meta) in str(error.value) and message in str(error.value) and "\n" not in str(error.value)
