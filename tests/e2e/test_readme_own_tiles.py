"""The README's "Your own tiles" recipe, followed as written (issue 49, item 1): its CSV header, the shipped
`tile_csv` card copied and edited in the three places the README names (`name`, `classes`, `data_root`), one
`evalsuite run`, and the files it says come out. The README's own run command names a gated model and the
reader's tiles (`# needs: your tiles`); here the tiles are 24 made-up PNGs and the model a random-init test_vit."""

import json
import re

import numpy as np
import yaml
from conftest import REPO
from PIL import Image

README = REPO / "README.md"


def _section(title: str) -> str:
    text = README.read_text()
    start = text.index(f"## {title}\n")
    return text[start:text.index("\n## ", start + 1)]


def _readme_csv_header() -> list[str]:
    """The first line of the CSV the README's "Your own tiles" section shows."""
    block = re.search(r"```\n\s*(image_path[^\n]*)\n", _section("Your own tiles"))
    return [column.strip() for column in block.group(1).split(",")]


def _cohort(folder, header: list[str]) -> None:
    rng = np.random.default_rng(0)
    (folder / "tiles").mkdir()
    rows = [",".join(header)]
    for i in range(24):
        patient, split = f"P{i // 2:02d}", ("train", "train", "val", "test")[(i // 2) % 4]
        name = f"tiles/{patient}_{i:04d}.png"
        Image.fromarray(rng.integers(0, 255, size=(32, 32, 3), dtype=np.uint8)).save(folder / name)
        values = {"image_path": name, "label": ("tumour", "normal")[i % 2], "split": split, "patient": patient}
        rows.append(",".join(values[column] for column in header))
    (folder / "tiles.csv").write_text("\n".join(rows) + "\n")


def _card_as_the_readme_says(folder):
    """`cp datasets/tile_csv.yaml my_tiles.yaml`, then `name`, `classes` and `data_root` changed."""
    card = yaml.safe_load((REPO / "datasets" / "tile_csv.yaml").read_text())
    card.update(name="my_tiles", classes=["tumour", "normal"], data_root=str(folder))
    path = folder / "my_tiles.yaml"
    path.write_text(yaml.safe_dump(card, sort_keys=False))
    return path


def test_the_readme_recipe_for_your_own_tiles_runs_and_writes_what_it_says(tmp_path, cli_in_process):
    header = _readme_csv_header()
    assert header == ["image_path", "label", "split", "patient"]
    _cohort(tmp_path, header)
    out = tmp_path / "evalsuite_out"
    result = cli_in_process("run", "--task", _card_as_the_readme_says(tmp_path), "--model", "test_vit",
                            "--random-init", "--seeds", "0,1", "--out", out)
    assert result.returncode == 0, result.stderr
    # What the README says comes out: leaderboard rows of the task, a run record, its test predictions, the caches.
    rows = (out / "leaderboard.csv").read_text().splitlines()
    assert any(",my_tiles," in row for row in rows[1:])
    (record_path,) = (out / "runs").glob("*.json")
    record = json.loads(record_path.read_text())
    assert record["samples_extracted"] == {"train": 12, "val": 6, "test": 6}
    assert {probe["probe"] for probe in record["probes"]} == {"linear", "knn"}
    assert list((out / "runs").glob("*.predictions.npz"))
    assert len(record["cache"]["keys"]) == 3 and all((out / "cache" / key).is_dir()
                                                       for key in record["cache"]["keys"].values())
    shown = cli_in_process("leaderboard", "--out", out)
    assert shown.returncode == 0 and "my_tiles" in shown.stdout, shown.stderr
