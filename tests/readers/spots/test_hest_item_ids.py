"""HEST names each spot by its sample and barcode (`item_ids`, issue 47 point 7), in dataset order, fold by fold."""

import shutil

from hest_layout import write_hest_task

from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card


def _reader(task_dir):
    return build_reader(load_card("hest_idc"), str(task_dir), check_counts=False)


def test_each_spot_of_a_fold_split_is_its_sample_and_barcode_once_under_any_root(tmp_path):
    task = write_hest_task(tmp_path / "bench_data", samples={"S1": 3, "S2": 2, "S3": 4}, tile_px=4)
    reader = _reader(task.task_dir)
    for fold in range(reader.cv_folds):
        reader.use_fold(fold)
        for split in ("train", "test"):
            ids = reader.item_ids(split)
            assert len(ids) == len(reader.dataset(split, None)) == len(set(ids)) == len(reader.groups(split))
    reader.use_fold(0)  # fold 0 tests S1, the first sample left out
    assert reader.item_ids("test") == [f"S1 spot {barcode}" for barcode in task.barcodes["S1"]]
    shutil.copytree(tmp_path / "bench_data", tmp_path / "moved")
    assert _reader(tmp_path / "moved" / "IDC").item_ids("test") == reader.item_ids("test")
