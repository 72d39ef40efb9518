"""Task cards: found by name or path, validated, and shipped in the wheel with recipes and data."""

import subprocess
import sys
import zipfile

import pytest
from conftest import REPO

from evalsuite.errors import EvalsuiteError
from evalsuite.probes.recipes import load_recipe
from evalsuite.tasks.cards import load_card


def test_demo_card_by_name_and_by_path_are_the_same():
    by_name = load_card("demo")
    by_path = load_card(str(by_name.path))
    assert by_name == by_path
    assert by_name.classes == ["connective", "inflammatory", "neoplastic"]
    assert by_name.selection_metric == "balanced_accuracy"


def test_card_with_unknown_selection_metric_names_the_field(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text((REPO / "datasets" / "demo.yaml").read_text().replace(
        "selection_metric: balanced_accuracy", "selection_metric: dice"))
    with pytest.raises(EvalsuiteError, match=r"bad.yaml: field 'selection_metric' must be one of"):
        load_card(str(path))


def test_card_without_test_split_is_rejected(tmp_path):
    path = tmp_path / "nosplit.yaml"
    path.write_text((REPO / "datasets" / "demo.yaml").read_text().replace(
        "splits: [train, val, test]", "splits: [train, val]"))
    with pytest.raises(EvalsuiteError, match="'splits' must include test"):
        load_card(str(path))


def test_recipes_load_with_numeric_grids():
    linear = load_recipe("linear")
    assert linear.probe == "linear" and all(isinstance(v, float) for v in linear.params["lr"])
    assert load_recipe("knn").params["k"][0] == 1


@pytest.mark.slow
def test_installed_wheel_finds_cards_recipes_and_demo_data(tmp_path):
    wheel_dir, target = tmp_path / "wheel", tmp_path / "site"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                    "-w", wheel_dir, REPO], check=True, capture_output=True)
    wheel = next(wheel_dir.glob("evalsuite-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "evalsuite/cards/demo.yaml" in names and "evalsuite/recipes/linear.yaml" in names
    assert "evalsuite/data/hgsc_nest/LICENSE" in names
    assert not any(name.startswith(("datasets/", "probes/")) for name in names)
    subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", target, wheel],
                   check=True, capture_output=True)
    check = ("import evalsuite, sys; from evalsuite.tasks.cards import load_card; from evalsuite.readers import build_reader;"
             "from evalsuite.probes.recipes import load_recipe; card = load_card('demo'); load_recipe('knn');"
             "assert evalsuite.__file__.startswith(sys.argv[1]), evalsuite.__file__;"
             "print(len(build_reader(card).labels))")
    result = subprocess.run([sys.executable, "-c", check, str(target)], cwd=tmp_path, capture_output=True, text=True,
                            env={"PYTHONPATH": str(target), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) == 551
