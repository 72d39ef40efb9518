"""Issue 48, cards: numeric reader arguments out of range and YAML aliases that expand without bound.

Before: `val_fraction: 1.5` ran (val took all but one unit of each class), `val_fraction: .nan` and `folds: .inf` or
10^20 were internal errors (int() and numpy), `folds: 1` blamed a split column the manifest does not have, and an
alias bomb in a field evalsuite does not read was a MemoryError when the card was hashed. Each is now one line naming
the card, exit 2, before any backbone runs (readers/reader_args.py, storage/yaml_files.py).
"""

import numpy as np
import pytest
from conftest import REPO, assert_one_line_error
from PIL import Image

from evalsuite.errors import EvalsuiteError
from evalsuite.readers import build_reader
from evalsuite.tasks.cards import load_card

PATIENTS = 6


def _cohort(tmp_path, arg_line: str):
    """Six one-tile patients in tiles.csv (no split column: the reader deals folds) and datasets/tile_csv.yaml with
    its `reader.args` line for one argument replaced by `arg_line`."""
    data = tmp_path / "data"
    (data / "tiles").mkdir(parents=True)
    rows = ["image_path,label,patient"]
    for number in range(PATIENTS):
        Image.fromarray(np.full((8, 8, 3), 40 * number, np.uint8)).save(data / "tiles" / f"{number}.png")
        rows.append(f"tiles/{number}.png,{('negative', 'positive')[number % 2]},p{number}")
    (data / "tiles.csv").write_text("\n".join(rows) + "\n")
    name = arg_line.split(":")[0]
    card_lines = [f"    {arg_line}" if line.strip().startswith(f"{name}:") else line
                  for line in (REPO / "datasets" / "tile_csv.yaml").read_text().splitlines()]
    card = tmp_path / "my_tiles.yaml"
    card.write_text("\n".join(card_lines) + "\n")
    return card, data


def _refused(cli_in_process, tmp_path, card, data, *fragments) -> None:
    out = tmp_path / "out"
    result = cli_in_process("run", "--task", card, "--data-root", data, "--model", "test_vit", "--random-init",
                            "--out", out)
    assert_one_line_error(result, str(card), *fragments)
    assert result.returncode == 2
    assert not (out / "cache").exists() and not (out / "leaderboard.csv").exists()


@pytest.mark.parametrize("arg_line, fragments", [
    ("val_fraction: 1.5", ("reader.args.val_fraction must be a number between 0 and 1, exclusive", "got 1.5")),
    ("val_fraction: .nan", ("reader.args.val_fraction must be a number between 0 and 1, exclusive", "got nan")),
    ("folds: .inf", ("reader.args.folds must be an integer of at least 2", "got inf")),
    ("folds: 100000000000000000000", ("reader.args.folds is 100000000000000000000 but the manifest lists 6 patients",
                                      "use at most 6 folds", "tiles.csv")),
], ids=["val_fraction_1.5", "val_fraction_nan", "folds_inf", "folds_1e20"])
def test_a_reader_argument_out_of_range_names_the_card_and_the_range(cli_in_process, tmp_path, arg_line, fragments):
    """Cases 3: 1.5 was accepted, the others were internal errors."""
    card, data = _cohort(tmp_path, arg_line)
    _refused(cli_in_process, tmp_path, card, data, *fragments)


def test_one_fold_says_folds_must_be_at_least_two(cli_in_process, tmp_path):
    """Case 4: `folds: 1` put every patient in test and blamed a split column ('no train tiles ... drop the split
    column') that the manifest does not have."""
    card, data = _cohort(tmp_path, "folds: 1")
    _refused(cli_in_process, tmp_path, card, data, "reader.args.folds must be an integer of at least 2",
             "one fold leaves no train",
             "got 1")


BOMB = "".join(f"  a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * 10) + "]\n" for level in range(1, 6))


@pytest.mark.parametrize("extra, fragment", [
    # 10^6 values once expanded: small enough that the old loader survived it (and accepted the card)
    ("notes:\n  a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + BOMB,
     "its aliases (*name) expand it by more than 10000 values"),
    ("notes: &self [1, *self]\n", "an alias (*name) sits inside its own anchor (&name)"),
], ids=["alias_bomb", "self_alias"])
def test_aliases_that_expand_without_bound_are_refused_naming_the_card(cli_in_process, tmp_path, extra, fragment):
    """Case 5: the card's hash writes every expanded value out (a MemoryError for a bigger bomb); a value containing
    itself was an internal 'Circular reference detected'."""
    card = tmp_path / "bomb.yaml"
    card.write_text((REPO / "datasets" / "tile_csv.yaml").read_text() + extra)
    result = cli_in_process("budget", "--task", card, "--model", "test_vit")
    assert_one_line_error(result, f"task card {card}: {fragment}", "write the values out")
    assert result.returncode == 2


def test_a_seed_that_is_no_integer_names_the_card(tmp_path):
    """Beside case 3: panda's `seed: .inf` was int(inf), an internal OverflowError (checked in-process: no CLI)."""
    card = tmp_path / "my_panda.yaml"
    card.write_text((REPO / "datasets" / "panda.yaml").read_text().replace("    seed: 42", "    seed: .inf", 1))
    with pytest.raises(EvalsuiteError, match=r"reader.args.seed must be an integer of at least 0, got inf") as raised:
        build_reader(load_card(str(card)), str(tmp_path))
    assert str(card) in str(raised.value)
