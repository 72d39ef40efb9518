"""The tile_csv reader's captions (the text_retrieval probe's texts): one per tile in dataset order, from the
`caption` column or the one reader.args.caption_column names; an empty caption and a missing named column are
one-line errors naming the manifest."""

import re

import numpy as np
import pytest
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card


def _cohort(tmp_path, column="caption", caption_column=None, empty_line=None):
    splits = ["test", "train", "val", "test", "train", "val", "test", "train", "test"]
    lines = [f"image_path,label,split,{column}"]
    for i, split in enumerate(splits):
        Image.fromarray(np.full((8, 8, 3), i * 20, dtype=np.uint8)).save(tmp_path / f"t{i}.png")
        caption = "" if i + 2 == empty_line else f"caption {i}"
        lines.append(f"t{i}.png,{['a', 'b'][i % 2]},{split},{caption}")
    (tmp_path / "tiles.csv").write_text("\n".join(lines) + "\n")
    args = f", caption_column: {caption_column}" if caption_column else ""
    (tmp_path / "card.yaml").write_text(
        f"name: c\nkind: classification\nreader: {{name: tile_csv, args: {{manifest: tiles.csv{args}}}}}\n"
        f"data_root: {tmp_path}\nclasses: [a, b]\nsplits: [train, val, test]\nselection_metric: balanced_accuracy\n"
        "probes: [text_retrieval]\n")
    return build_reader(load_card(str(tmp_path / "card.yaml")), str(tmp_path))


def test_captions_follow_the_dataset_order_of_the_split(tmp_path):
    reader = _cohort(tmp_path)
    paths = reader.dataset("test", None).paths
    assert reader.captions("test") == [f"caption {p.stem[1:]}" for p in paths]
    assert len(paths) == 4 and reader.caption_column == "caption"


def test_a_named_caption_column_is_read_and_a_manifest_without_one_has_none(tmp_path):
    assert _cohort(tmp_path, column="text", caption_column="text").captions("val") == ["caption 2", "caption 5"]
    assert _cohort(tmp_path, column="notes").caption_column is None  # class texts then (probes/texts/retrieval_texts.py)


@pytest.mark.parametrize("kwargs, fragment", [
    ({"empty_line": 5}, "tiles.csv line 5: empty 'caption' (the caption column); every test tile needs a caption"),
    ({"column": "notes", "caption_column": "text"}, "has no column 'text', which task card"),
])
def test_bad_captions_are_one_line_errors_naming_the_manifest(tmp_path, kwargs, fragment):
    with pytest.raises(EvalsuiteError, match=re.escape(fragment)) as error:
        _cohort(tmp_path, **kwargs).captions("test")
    assert "\n" not in str(error.value)
