"""CRC: NCT-CRC-HE-100K (train, val carved with a seed) and CRC-VAL-HE-7K (test)."""

import numpy as np
import pytest
from conftest import assert_one_line_error, make_crc, run_card, run_cli

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.tiles.crc import CrcReader
from evalsuite.tasks.cards import load_card


def test_val_is_a_seeded_stratified_share_of_the_train_folder(tmp_path):
    root = make_crc(tmp_path, train_per_class=20, test_per_class=2, size=(8, 8))
    first, again = CrcReader(load_card("crc"), root, check_counts=False), CrcReader(load_card("crc"), root, False)
    train, val, test = (first.splits[s] for s in ("train", "val", "test"))
    assert val[0] == again.splits["val"][0]
    assert np.bincount(val[1]).tolist() == [2] * 9 and np.bincount(train[1]).tolist() == [18] * 9
    assert not set(train[0]) & set(val[0])
    assert all(p.parent.parent.name == "NCT-CRC-HE-100K" for p in train[0] + val[0])
    assert all(p.parent.parent.name == "CRC-VAL-HE-7K" for p in test[0]) and len(test[0]) == 18
    assert all(p.parent.name == load_card("crc").classes[label] for p, label in zip(test[0], test[1]))
    other_seed = CrcReader(load_card("crc"), root, check_counts=False, val_seed=1)
    assert other_seed.splits["val"][0] != val[0]


def test_hidden_files_are_not_samples(tmp_path):
    root = make_crc(tmp_path, size=(8, 8))
    (root / "CRC-VAL-HE-7K" / "TUM" / "._TUM-AAAAAAAA.tif").write_bytes(b"macOS resource fork")
    assert len(CrcReader(load_card("crc"), root, check_counts=False).splits["test"][0]) == 9


def test_official_counts_are_checked(tmp_path):
    with pytest.raises(EvalsuiteError, match="NCT-CRC-HE-100K has 27 images but the official dataset has 100000"):
        CrcReader(load_card("crc"), make_crc(tmp_path, size=(8, 8)))


def test_missing_test_folder_names_the_layout(tmp_path):
    root = make_crc(tmp_path, test_per_class=0, size=(8, 8))
    with pytest.raises(EvalsuiteError, match="missing folder .*CRC-VAL-HE-7K; expected NCT-CRC-HE-100K/<CLASS>"):
        CrcReader(load_card("crc"), root, check_counts=False)


@pytest.mark.slow
def test_corrupt_image_is_one_line_error_naming_the_file(tmp_path):
    root = make_crc(tmp_path / "data", train_per_class=2, size=(16, 16))
    # A TIFF header followed by garbage: Pillow also warns about it, which must not reach stderr.
    corrupt = sorted((root / "NCT-CRC-HE-100K" / "ADI").glob("*.tif"))[0]  # in the first batch extracted
    corrupt.write_bytes(b"II*\x00garbage, not a TIFF")
    result = run_cli("run", "--task", "crc", "--data-root", root, "--no-count-check", "--out", tmp_path / "out",
                     "--probes", "knn", "--num-workers", "0")
    assert_one_line_error(result, f"cannot read image {corrupt}")
    assert not (tmp_path / "out" / "leaderboard.csv").exists()


@pytest.mark.slow
def test_crc_card_end_to_end(tmp_path):
    root = make_crc(tmp_path / "data", train_per_class=2, test_per_class=1)
    run_card("crc", root, tmp_path / "out", {"train": 9, "val": 9, "test": 9})
