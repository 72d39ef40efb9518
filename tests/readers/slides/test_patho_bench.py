"""The patho_bench reader on split files in Patho-Bench's hub layout (patho_bench_layout.py): its folds, the val carved
from each fold's train, cross-cohort codes, and one-line errors naming the file. No slide is opened: the slides are
small stand-in files, looked up by slide_id.

Reference for the expected splits: the fold columns written below (Patho-Bench's DataSplit.get_ids(fold, mode) is
the rows whose fold column holds `mode`), and readers/splits.py `carve_val` for the val taken from train.
"""

import pytest
import yaml
from patho_bench_layout import fake_slides, write_task

from evalsuite.errors import EvalsuiteError
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card

LABELS = {0: "negative", 1: "positive"}


def _rows(cases: int = 10, folds: int = 5, two_slide_case: bool = True) -> list:
    """Case i has label i % 2 and is test in fold i % folds; case 0 has two slides when `two_slide_case`."""
    rows = [{"case_id": f"C{i}", "slide_id": f"S{i}", "label": i % 2,
             "folds": ["test" if i % folds == k else "train" for k in range(folds)]} for i in range(cases)]
    if two_slide_case:
        rows.append({**rows[0], "slide_id": "S0b"})
    return rows


def _reader(root, args: dict, kind: str = "slide", classes=("negative", "positive")):
    card = {"name": "pb", "kind": kind, "reader": {"name": "patho_bench", "args": args},
            "splits": ["train", "val", "test"], "tiling": {"target_mpp": 0.5, "tile_size_px": 224},
            "selection_metric": "c_index" if kind == "survival" else "balanced_accuracy", "probes": ["meanpool"],
            **({"classes": list(classes)} if classes else {})}
    path = root / "card.yaml"
    path.write_text(yaml.safe_dump(card))
    return build_reader(load_card(str(path)), str(root))


def _task(root, rows=None, **kwargs):
    rows = rows or _rows()
    write_task(root / "splits", "cohort", "task", rows, **{"label_dict": LABELS, **kwargs})
    fake_slides(root / "slides", [row["slide_id"] for row in rows])
    return rows


def _ids(reader, split):
    return sorted(record.slide_id for record in reader.split_records(split))


def test_each_fold_column_is_a_fold_with_the_file_test_and_val_carved_from_train(tmp_path):
    _task(tmp_path)
    reader = _reader(tmp_path, {"split_file": "splits/cohort/task/k=all.tsv", "slides": "slides"})
    assert reader.cv_folds == 5
    for fold in range(5):
        reader.use_fold(fold)
        test = [f"S{i}" for i in range(10) if i % 5 == fold] + (["S0b"] if fold == 0 else [])
        assert _ids(reader, "test") == sorted(test)
        train, val = _ids(reader, "train"), _ids(reader, "val")
        assert sorted(train + val) == sorted(({f"S{i}" for i in range(10)} | {"S0b"}) - set(test))
        assert val and not set(val) & set(train)
        assert ("S0" in val) == ("S0b" in val)  # a case's slides stay together
        # class-stratified: one case of each label (4 train cases a class, round(0.2 x 4) = 1)
        assert sorted({int(r.target[0]) for r in reader.split_records("val")}) == [0, 1]
        assert reader.fold_samples(fold)["val"] == [r.slide_id for r in reader.split_records("val")]
    again = _reader(tmp_path, {"split_file": "splits/cohort/task/k=all.tsv", "slides": "slides"})
    assert _ids(again, "val") == _ids(_reader(tmp_path, {"split_file": "splits/cohort/task/k=all.tsv",
                                                          "slides": "slides"}), "val")  # the same every run
    assert reader.fold_samples(3)["column"] == "fold_3"


def test_a_given_val_is_kept_minus_one_is_in_no_split_and_an_empty_label_is_dropped(tmp_path):
    rows = _rows(two_slide_case=False)
    rows[2]["folds"][0] = "val"
    rows[3]["folds"][0] = "val"
    rows[4]["folds"][0] = "-1"
    rows[6]["label"] = ""
    _task(tmp_path, rows)
    reader = _reader(tmp_path, {"split_file": "splits/cohort/task/k=all.tsv", "slides": "slides"})
    assert _ids(reader, "val") == ["S2", "S3"]
    assert "S4" not in {r.slide_id for r in reader.records()}
    assert "S6" not in {r.slide_id for r in reader.records()}


def test_label_dict_names_give_the_card_class_ids_and_without_config_the_values_are_names(tmp_path):
    _task(tmp_path)
    reader = _reader(tmp_path, {"split_file": "splits/cohort/task/k=all.tsv", "slides": "slides"},
                     classes=("positive", "negative"))
    assert {r.slide_id: r.target[0] for r in reader.records()}["S1"] == 0  # id 1 -> "positive", the card's first
    named = [{**row, "label": LABELS[row["label"]]} for row in _rows()]
    write_task(tmp_path / "plain", "cohort", "task", named, label_dict=None)
    reader = _reader(tmp_path, {"split_file": "plain/cohort/task/k=all.tsv", "slides": "slides", "task": "task"})
    assert {r.slide_id: r.target[0] for r in reader.records()}["S1"] == 1


def test_a_cross_cohort_code_trains_on_one_file_and_tests_on_the_other(tmp_path):
    train, test = _rows(), [{**row, "case_id": f"X{i}", "slide_id": f"X{i}"} for i, row in enumerate(_rows(6))]
    write_task(tmp_path / "splits", "cohort_a", "task", train, label_dict=LABELS)
    write_task(tmp_path / "splits", "cohort_b", "task", test, label_dict=None)  # the train cohort's config is used
    fake_slides(tmp_path / "wsi" / "cohort_a", [row["slide_id"] for row in train])
    fake_slides(tmp_path / "wsi" / "cohort_b", [row["slide_id"] for row in test], suffix=".ndpi")
    reader = _reader(tmp_path, {"task_code": "cohort_a==cohort_b--task", "splits_root": "splits",
                                "slides": "wsi/{source}/{slide_id}.*"})
    assert reader.cv_folds is None  # one fold: a plain run
    assert _ids(reader, "test") == sorted(row["slide_id"] for row in test)
    assert sorted(_ids(reader, "train") + _ids(reader, "val")) == sorted(row["slide_id"] for row in train)
    assert all(r.path.suffix == ".ndpi" for r in reader.split_records("test"))


def test_survival_reads_days_and_event_and_scores_cases(tmp_path):
    # every case but C9 died, so every split holds comparable pairs (Harrell's C), and val two cases or more
    rows = [{**row, "time": 100.0 * (i + 1), "event": int(i != 9), "bin": i % 8} for i, row in enumerate(_rows(20))]
    rows[-1] = {**rows[-1], "time": rows[0]["time"], "event": rows[0]["event"]}  # S0b: case C0's target
    _task(tmp_path, rows, label_dict=None, survival=True)
    reader = _reader(tmp_path, {"split_file": "splits/cohort/task/k=all.tsv", "slides": "slides"}, kind="survival",
                     classes=None)
    reader.use_fold(1)
    test = {r.slide_id: r.target for r in reader.split_records("test")}
    assert test == {"S1": (200.0, 1.0), "S6": (700.0, 1.0), "S11": (1200.0, 1.0), "S16": (1700.0, 1.0)}
    assert reader.scored_unit == "patient"


def test_a_slide_pattern_a_csv_and_a_folder_find_the_same_files(tmp_path):
    _task(tmp_path)
    (tmp_path / "list.csv").write_text("slide_id,slide_path\n" + "".join(
        f"{s},slides/{s}.svs\n" for s in [f"S{i}" for i in range(10)] + ["S0b"]))
    found = [{r.slide_id: r.path.resolve() for r in _reader(tmp_path, {"split_file": "splits/cohort/task/k=all.tsv",
                                                                         "slides": slides}).records()}
             for slides in ("slides", "slides/{slide_id}.svs", "list.csv", str(tmp_path / "slides/{slide_id}.*"))]
    assert all(paths == found[0] for paths in found) and len(found[0]) == 11


def _drop_column(root, column):
    path = root / "splits/cohort/task/k=all.tsv"
    lines = [line.split("\t") for line in path.read_text().splitlines()]
    keep = [i for i, name in enumerate(lines[0]) if name != column]
    path.write_text("\n".join("\t".join(line[i] for i in keep) for line in lines) + "\n")


def _edit(root, line: int, column: str, value: str):
    path = root / "splits/cohort/task/k=all.tsv"
    lines = [row.split("\t") for row in path.read_text().splitlines()]
    lines[line - 1][lines[0].index(column)] = value
    path.write_text("\n".join("\t".join(row) for row in lines) + "\n")


@pytest.mark.parametrize("edit, args, fragments", [
    (lambda root: (root / "splits/cohort/task/k=all.tsv").unlink(), {}, ["k=all.tsv not found"]),
    (lambda root: _drop_column(root, "task"), {}, ["k=all.tsv has no column task"]),
    (lambda root: _edit(root, 3, "task", "7"), {}, ["k=all.tsv line 3", "'7' is not a class id", "0, 1"]),
    (lambda root: _edit(root, 4, "fold_2", "validation"), {}, ["k=all.tsv line 4", "fold_2 is 'validation'"]),
    (lambda root: (root / "slides" / "S3.svs").unlink(), {}, ["k=all.tsv line 5", "slide 'S3' has no file"]),
    (lambda root: _edit(root, 12, "fold_1", "test"), {}, ["k=all.tsv line 12", "case_id 'C0' is test in fold_1"]),
    (lambda root: None, {"config": "none.yaml"}, ["config", "none.yaml not found"]),
    (lambda root: (root / "splits/cohort/task/config.yaml").unlink(), {}, ["no config.yaml beside", "task"]),
])
def test_bad_input_is_one_line_naming_the_file(tmp_path, edit, args, fragments):
    _task(tmp_path)
    edit(tmp_path)
    with pytest.raises(EvalsuiteError) as error:
        _reader(tmp_path, {"split_file": "splits/cohort/task/k=all.tsv", "slides": "slides", **args})
    message = str(error.value)
    assert "\n" not in message and all(fragment in message for fragment in fragments), message


def test_a_label_outside_the_card_classes_and_a_case_across_train_and_test_are_refused(tmp_path):
    _task(tmp_path)
    with pytest.raises(EvalsuiteError, match=r"k=all.tsv line 2: label 'negative' is not one of the card's classes"):
        _reader(tmp_path, {"split_file": "splits/cohort/task/k=all.tsv", "slides": "slides"},
                classes=("benign", "positive"))
    rows = _rows()
    rows[-1] = {**rows[-1], "case_id": "C0", "folds": ["train"] * 5}  # S0b: case C0, train where S0 is test
    _task(tmp_path / "by_slide", rows, sample_col="slide_id")
    reader = _reader(tmp_path / "by_slide", {"split_file": "splits/cohort/task/k=all.tsv", "slides": "slides"})
    with pytest.raises(EvalsuiteError, match=r"k=all.tsv \(fold_0\): case 'C0' has slides in test and train"):
        reader.split_records("test")


def test_cross_cohort_files_sharing_a_case_and_bad_task_codes_are_refused(tmp_path):
    write_task(tmp_path / "splits", "a", "task", _rows(), label_dict=LABELS)
    write_task(tmp_path / "splits", "b", "task", [{**r, "slide_id": f"B{i}"} for i, r in enumerate(_rows(4, 2, False))],
               label_dict=LABELS)
    fake_slides(tmp_path / "slides", [f"S{i}" for i in range(10)] + ["S0b"] + [f"B{i}" for i in range(4)])
    with pytest.raises(EvalsuiteError, match=r"a/task/k=all.tsv and .*b/task/k=all.tsv both list case 'C0'"):
        _reader(tmp_path, {"task_code": "a==b--task", "splits_root": "splits", "slides": "slides"})
    for code in ("a==a--task", "a--b--task", "a=="):
        with pytest.raises(EvalsuiteError, match="is not Patho-Bench's <source>--<task>"):
            _reader(tmp_path, {"task_code": code, "splits_root": "splits", "slides": "slides"})


def test_the_shipped_example_card_reads_its_layout(tmp_path):
    """datasets/patho_bench_example.yaml as documented: splits/<source>/<task>/ and slides/<source>/<slide_id>.svs."""
    rows = _rows()
    write_task(tmp_path / "splits", "nadt", "response", [{**r, "response": r["label"]} for r in rows],
               label_dict=LABELS)
    fake_slides(tmp_path / "slides" / "nadt", [row["slide_id"] for row in rows])
    reader = build_reader(load_card("patho_bench_example"), str(tmp_path))
    assert reader.cv_folds == 5 and len(reader.records()) == len(rows)
