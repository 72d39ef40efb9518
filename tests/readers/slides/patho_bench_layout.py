"""A Patho-Bench task folder in the hub's exact layout (MahmoodLab/Patho-Bench), for readers/slides/patho_bench.py.

Reference, the hub's files: `<source>/<task>/k=all.tsv`, tab-separated, header `case_id slide_id <task> fold_0 ..
fold_4`, one row per slide, the label an integer class id, fold values train/test (bcnb/her2/k=all.tsv,
mut-het-rcc/BAP1_mutation/k=all.tsv); `config.yaml` beside it with datasets, task_col, extra_cols, task_type, metrics,
label_dict, sample_col, num_samples (nadt/response/config.yaml; cptac_pda/OS/config.yaml for survival: extra_cols
OS_event, OS_days). Only the counts are small.
"""

import csv
from pathlib import Path

import yaml

SPLIT_FILE = "k=all.tsv"


def write_task(root: Path, source: str, task: str, rows: list, label_dict: dict | None = None,
               survival: bool = False, sample_col: str = "case_id") -> Path:
    """`<root>/<source>/<task>/k=all.tsv` from `rows` (dicts: case_id, slide_id, label or time/event/bin, folds: a
    list of fold values) and its config.yaml (none when `label_dict` is None and not survival); returns the TSV."""
    folder = Path(root) / source / task
    folder.mkdir(parents=True, exist_ok=True)
    folds = max(len(row["folds"]) for row in rows)
    extra = [f"{task}_event", f"{task}_days"] if survival else []
    header = ["case_id", "slide_id", task, *extra, *[f"fold_{k}" for k in range(folds)]]
    with open(folder / SPLIT_FILE, "w", newline="") as handle:
        writer = csv.writer(handle, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        for row in rows:
            labels = [row.get("bin", 0), row["event"], row["time"]] if survival else [row["label"]]
            writer.writerow([row["case_id"], row["slide_id"], *labels, *row["folds"]])
    if label_dict is not None or survival:
        config = {"datasets": [source], "task_col": task, "extra_cols": extra,
                  "task_type": "survival" if survival else "classification",
                  "metrics": ["cindex"] if survival else ["macro-ovr-auc"],
                  "label_dict": label_dict or {k: f"Quartile {k % 4 + 1}, Event {k // 4}" for k in range(8)},
                  "sample_col": sample_col, "num_samples": len({row["case_id"] for row in rows})}
        (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    return folder / SPLIT_FILE


def fake_slides(folder: Path, slide_ids, suffix: str = ".svs") -> Path:
    """One small file per slide id, each with its own bytes (a reader test only looks the files up)."""
    folder.mkdir(parents=True, exist_ok=True)
    for slide_id in slide_ids:
        (folder / f"{slide_id}{suffix}").write_text(f"not a slide: {slide_id}\n")
    return folder


def demo_rows(per_class: int, folds: int, classes=("stroma", "tumour")) -> list:
    """Rows over the demo slides `train-<class>-<NN>` (one case a slide), the label the class's index; in fold k the
    k-th block of per_class // folds slides of each class is test, the others train (as the hub's files: no val)."""
    block = per_class // folds
    return [{"case_id": f"case-{name}-{index:02d}", "slide_id": f"train-{name}-{index:02d}", "label": number,
             "folds": ["test" if index // block == k else "train" for k in range(folds)]}
            for number, name in enumerate(classes) for index in range(per_class)]
