"""PANDA and PANDA-small splits are eva's `stratified_split` (kaiko-ai/eva src/eva/core/data/splitting/stratified.py)
slide for slide, and bad split ratios are one-line errors naming the card.

The expected indices were recorded by running eva's `stratified_split` (eva 0.4.5, commit 73b61a79) once on the
grade vector GRADES below, samples = positions 0..99 in eva's order (sorted file names), seed 42:
    stratified_split(list(range(100)), GRADES, train_ratio, val_ratio, test_ratio, seed=42)
"""

import csv

import pytest
import yaml
from conftest import assert_one_line_error, run_cli

from evalsuite.errors import EvalsuiteError
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card
from evalsuite.tasks.resources import cards_dir

# 100 synthetic ISUP grades (31, 17, 12, 9, 23, 8 slides of grade 0..5), position i = the i-th file name in order.
GRADES = [int(g) for g in "0140240251401402503014024035140140251401402403014024035140140251301402403014024035140140250301402403"]
# eva, ratios 0.1 / 0.05 / 0.05 (PANDASmall): the ratios sum to 0.2, so 79 of the 100 slides are in no split.
EVA_SMALL = {
    "train": [8, 22, 29, 42, 45, 52, 55, 75, 98],
    "val": [4, 10, 12, 16, 87, 91],
    "test": [36, 37, 72, 77, 84, 89],
}
# eva, ratios 0.7 / 0.15 / 0.15 (PANDA): the ratios sum to 1, so test is the rest; train is the other 67.
EVA_FULL_VAL = [2, 24, 26, 38, 46, 54, 66, 71, 74, 83, 88, 95]
EVA_FULL_TEST = [1, 3, 5, 6, 14, 18, 20, 23, 25, 34, 43, 44, 62, 80, 81, 85, 86, 92, 93, 96, 97]


def _plain_id(position: int) -> str:
    return f"slide{position:03d}"


def _dash_id(position: int) -> str:
    # eva orders slides by file name: "s0--.tiff" < "s0-.tiff" ('-' < '.'), though "s0-" < "s0--" as ids, so
    # sorting the ids would reverse each run of ten positions
    return f"s{position // 10}" + "-" * (10 - position % 10)


def _panda_root(root, slide_id=_plain_id):
    (root / "train_images").mkdir(parents=True)
    with open(root / "train.csv", "w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["image_id", "data_provider", "isup_grade", "gleason_score"])
        for position in reversed(range(len(GRADES))):  # rows out of order: the reader sorts as eva does
            writer.writerow([slide_id(position), "radboud", GRADES[position], "0+0"])
    return root


def _positions(reader, split: str, slide_id=_plain_id) -> list:
    position_of = {slide_id(p): p for p in range(len(GRADES))}
    return sorted(position_of[r.slide_id] for r in reader.split_records(split))


@pytest.mark.parametrize("slide_id", [_plain_id, _dash_id])
def test_panda_small_split_is_eva_stratified_split_with_the_remainder_unused(tmp_path, slide_id):
    reader = build_reader(load_card("panda_small"), str(_panda_root(tmp_path, slide_id)), check_counts=False)
    assert {split: _positions(reader, split, slide_id) for split in EVA_SMALL} == EVA_SMALL
    assert len(reader.records()) == 21  # 9 + 6 + 6 of 100, as eva (the rest belongs to no split)


def test_panda_split_is_eva_stratified_split_with_the_rest_in_test(tmp_path):
    reader = build_reader(load_card("panda"), str(_panda_root(tmp_path)), check_counts=False)
    assert _positions(reader, "val") == EVA_FULL_VAL
    assert _positions(reader, "test") == EVA_FULL_TEST
    assert _positions(reader, "train") == sorted(set(range(100)) - set(EVA_FULL_VAL) - set(EVA_FULL_TEST))


@pytest.mark.parametrize("ratios", [[0.7, 0.2, 0.15], [0.9, 0.1, 0.0], [0.7, -0.1, 0.1], "0.1", [0.1, True, 0.1]])
def test_bad_ratios_are_a_one_line_error_naming_the_card(tmp_path, ratios):
    path = _card_with_ratios(tmp_path, ratios)
    with pytest.raises(EvalsuiteError, match=r"reader.args.ratios must be three shares \[train, val, test\]") as caught:
        build_reader(load_card(str(path)), str(_panda_root(tmp_path / "data")), check_counts=False)
    assert "\n" not in str(caught.value) and str(path) in str(caught.value)


def test_the_old_two_ratio_form_stops_the_run_with_exit_2_and_no_leaderboard(tmp_path):
    path = _card_with_ratios(tmp_path, [0.1, 0.05])  # before eva's rule: train, val and the rest in test
    out = tmp_path / "out"
    result = run_cli("run", "--task", path, "--data-root", _panda_root(tmp_path / "data"), "--no-count-check",
                     "--model", "test_vit", "--random-init", "--num-workers", "0", "--out", out, timeout=120)
    assert result.returncode == 2
    assert_one_line_error(result, str(path), "reader.args.ratios must be three shares", "[0.1, 0.05, 0.05]")
    assert not (out / "leaderboard.csv").exists()


def _card_with_ratios(folder, ratios):
    card = yaml.safe_load((cards_dir() / "panda_small.yaml").read_text())
    card["reader"]["args"]["ratios"] = ratios
    path = folder / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    return path
