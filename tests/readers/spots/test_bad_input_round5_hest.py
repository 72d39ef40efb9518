"""Issue 48, HEST: a section re-saved under a new id, two sources naming different patients, count arguments.

Before: one section's patch file re-saved under another sample id (the same spots and pixels, one HDF5 attribute
added, so other bytes and size) passed the identity check, which compared file sizes and the files' ends, so its
train copy was scored in test; a `patient` column of the split files silently won over the card's
reader.args.patients; `folds: .inf` was compared as a count. Each is now one line, exit 2, before any extraction.
"""

import h5py
import numpy as np
import pytest
import yaml
from conftest import REPO, assert_one_line_error
from hest_layout import write_hest_task, write_patches

from evalsuite.errors import EvalsuiteError
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card

SAMPLES = {"A": 3, "B": 3, "C": 3}


def _refused(cli_in_process, task_dir, out, *fragments, task="hest_idc") -> None:
    result = cli_in_process("run", "--task", task, "--data-root", task_dir, "--model", "test_vit", "--random-init",
                     "--no-count-check", "--out", out)
    assert_one_line_error(result, *fragments)
    assert result.returncode == 2
    assert not (out / "cache").exists() and not (out / "leaderboard.csv").exists()


def _resave(source, target, order=None) -> None:
    """Every dataset of the HDF5 file `source` written again to `target` (rows in `order` where given, the same
    values), plus one attribute: the same content under other bytes."""
    with h5py.File(source, "r") as old, h5py.File(target, "w") as new:
        old.visititems(lambda name, node: _copy(name, node, new, order))
        new.attrs["resaved_by"] = "a colleague's script"
        for name, value in old.attrs.items():
            new.attrs[name] = value


def _copy(name, node, new, order) -> None:
    if isinstance(node, h5py.Dataset):
        values = node[()] if order is None else node[()][order]
        new.create_dataset(name, data=values, dtype=node.dtype).attrs.update(dict(node.attrs))
    else:
        new.require_group(name).attrs.update(dict(node.attrs))


def _card(tmp_path, **args) -> str:
    raw = yaml.safe_load((REPO / "datasets" / "hest_idc.yaml").read_text())
    raw["name"], raw["reader"]["args"] = "hest_round5", args
    path = tmp_path / "hest_round5.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def test_a_section_re_saved_under_a_new_id_is_refused_by_its_content(cli_in_process, tmp_path):
    """Case 1: B is in train; B2, B's patch and expression files re-saved, is added to test."""
    task = write_hest_task(tmp_path / "bench_data", samples=SAMPLES, tile_px=8, folds=[(["A", "B"], ["C"])])
    for name in ("patches/{}.h5", "adata/{}.h5ad"):
        _resave(task.task_dir / name.format("B"), task.task_dir / name.format("B2"))
    original, copy = task.task_dir / "patches" / "B.h5", task.task_dir / "patches" / "B2.h5"
    assert original.read_bytes() != copy.read_bytes()  # the old identity check compared bytes (size and ends)
    test_csv = task.task_dir / "splits" / "test_0.csv"
    test_csv.write_text(test_csv.read_text() + "B2,patches/B2.h5,adata/B2.h5ad\n")
    _refused(cli_in_process, task.task_dir, tmp_path / "out",
             f"sample 'B2' ({test_csv}) names the patch file of sample 'B'",
             f"{copy} holds the same 3 spot barcodes as {original} and the same pixels in the 3 tiles compared",
             "list each sample once")


def test_content_identity_sees_reordered_spots_and_not_other_pixels_under_the_same_barcodes(tmp_path):
    """A copy listing its spots in another order is the same section; a sample sharing the barcodes (Visium's
    barcodes are one fixed set per slide design) but not the pixels is another."""
    task = write_hest_task(tmp_path / "bench_data", samples=SAMPLES, tile_px=8, folds=[(["A", "B"], ["C"])])
    test_csv = task.task_dir / "splits" / "test_0.csv"
    test_csv.write_text(test_csv.read_text() + "D,patches/D.h5,adata/D.h5ad\n")
    _resave(task.task_dir / "adata" / "B.h5ad", task.task_dir / "adata" / "D.h5ad")
    write_patches(task.task_dir / "patches" / "D.h5", task.barcodes["B"], 255 - task.tiles["B"])
    card = load_card("hest_idc")
    build_reader(card, str(task.task_dir), check_counts=False)  # accepted: the same barcodes, another section
    _resave(task.task_dir / "patches" / "B.h5", task.task_dir / "patches" / "D.h5", order=np.array([2, 0, 1]))
    with pytest.raises(EvalsuiteError, match="sample 'D' .* names the patch file of sample 'B' under other bytes"):
        build_reader(card, str(task.task_dir), check_counts=False)


def test_split_files_and_card_naming_different_patients_for_a_sample_is_refused(cli_in_process, tmp_path):
    """Case 2: the split files' patient column won and the card's mapping was dropped without a word."""
    patients = {"A": "P1", "B": "P2", "C": "P3"}
    task = write_hest_task(tmp_path / "bench_data", samples=SAMPLES, tile_px=8, folds=[(["A", "B"], ["C"])],
                           patients=patients)
    card = _card(tmp_path, patients={**patients, "B": "P9"})
    train_csv = task.task_dir / "splits" / "train_0.csv"
    _refused(cli_in_process, task.task_dir, tmp_path / "out",
             f"sample 'B' has patient 'P2' in {train_csv} but 'P9' in reader.args.patients of {card}",
             "fix one of the two", task=card)


def test_a_hest_count_argument_that_is_no_integer_names_the_card(cli_in_process, tmp_path):
    """Case 3 for HEST's count check: `folds: .inf` was compared with the folds found ('HEST-Benchmark's ... has inf
    folds')."""
    task = write_hest_task(tmp_path / "bench_data", samples=SAMPLES, tile_px=8)
    card = _card(tmp_path, folds=float("inf"), samples=3)
    _refused(cli_in_process, task.task_dir, tmp_path / "out",
             f"task card {card}: reader.args.folds must be an integer of at least 1",
             "got inf", task=card)
