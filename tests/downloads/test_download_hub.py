"""HEST-Benchmark through the hub's listing, with the real hest_idc entry and the reader's own official counts.

The local server answers as the Hugging Face hub does (revision -> commit, the folder's recursive tree with `lfs.oid`
sha256 for LFS files and git blob ids for the others, `resolve/<commit>/<path>` for the bytes); the fixture is a
HEST task folder in HEST's exact layout with IDC's 4 samples and 4 folds, so `check_counts=True` passes as it does on
the real folder.
"""

import hashlib
import importlib.util
import json
from pathlib import Path

import pytest
from conftest import assert_one_line_error
from download_server import FileServer

COMMIT = "1a1077e2739b5a8ba2ca2f4ca636674f82840868"
REPO = "/datasets/MahmoodLab/hest-bench"
SAMPLES = {"TENX95": 3, "TENX99": 3, "NCBI783": 3, "NCBI785": 3}


def _hest_layout():
    path = Path(__file__).resolve().parents[1] / "readers" / "spots" / "hest_layout.py"
    spec = importlib.util.spec_from_file_location("hest_layout_for_downloads", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def serve_hub(served, task_dir: Path, folder: str = "IDC", lfs_suffixes=(".h5", ".h5ad")) -> list:
    """The hub's answers for `task_dir` published as `folder` of MahmoodLab/hest-bench at COMMIT; returns the tree."""
    tree = [{"type": "directory", "path": f"{folder}/splits", "oid": "0" * 40, "size": 0}]
    for path in sorted(p for p in task_dir.rglob("*") if p.is_file()):
        data, name = path.read_bytes(), f"{folder}/{path.relative_to(task_dir).as_posix()}"
        entry = {"type": "file", "path": name, "size": len(data),
                 "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()}
        if path.suffix in lfs_suffixes:
            entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
        tree.append(entry)
        served.add(f"{REPO}/resolve/{COMMIT}/{name}", data)
    tree.append({"type": "file", "path": f"{folder}/patches_vis/x.png", "size": 3, "oid": "1" * 40})  # not read
    served.add(f"/api{REPO}/revision/main", json.dumps({"id": "MahmoodLab/hest-bench", "sha": COMMIT}).encode(),
               "application/json")
    served.add(f"/api{REPO}/tree/{COMMIT}/{folder}", json.dumps(tree).encode(), "application/json")
    return tree


@pytest.fixture
def hest_task(tmp_path):
    return _hest_layout().write_hest_task(tmp_path / "src", task="IDC", samples=SAMPLES, tile_px=16).task_dir


def test_hest_idc_comes_from_the_hub_listing_and_passes_the_official_count(cli_in_process, tmp_path, hest_task):
    with FileServer() as served:
        serve_hub(served, hest_task)
        root = tmp_path / "IDC"
        result = cli_in_process("download", "hest_idc", "--data-root", root, "--mirror", served.base)
        assert result.returncode == 0, result.stderr
        assert f"MahmoodLab/hest-bench IDC at commit {COMMIT}" in result.stdout
        assert "ready     hest_idc under" in result.stdout and "folds 4 (the reader's official counts)" in result.stdout
        assert sorted(p.relative_to(root) for p in root.rglob("*") if ".evalsuite-download" not in p.parts) == \
            sorted(p.relative_to(hest_task) for p in hest_task.rglob("*"))
        assert "sha256 as published" in result.stdout and "git blob id as published" in result.stdout
        assert not any("patches_vis" in sent.path for sent in served.log)


def test_a_hub_file_that_differs_from_its_listing_is_refused(cli_in_process, tmp_path, hest_task):
    with FileServer() as served:
        serve_hub(served, hest_task)
        path = f"{REPO}/resolve/{COMMIT}/IDC/var_50genes.json"
        served.files[path] = served.files[path].replace(b"GENE0", b"GENE9")  # the same size, other bytes
        result = cli_in_process("download", "hest_idc", "--data-root", tmp_path / "IDC", "--mirror", served.base)
        assert_one_line_error(result, "checksum mismatch for", "var_50genes.json", "its git blob id is")
        served.files[path] = served.files[path][:-3]  # another size: refused before the body is read
        again = cli_in_process("download", "hest_idc", "--data-root", tmp_path / "IDC", "--mirror", served.base)
        assert_one_line_error(again, "var_50genes.json offers 105 bytes but the published file has 108")


def test_a_gated_hub_folder_names_the_page_and_the_way_round(cli_in_process, tmp_path):
    with FileServer() as served:
        served.refuse[f"/api{REPO}/revision/main"] = 403
        result = cli_in_process("download", "hest_idc", "--data-root", tmp_path / "IDC", "--mirror", served.base)
        assert_one_line_error(result, "HTTP 403", "accepted its conditions",
                              "https://huggingface.co/datasets/MahmoodLab/hest-bench",
                              "huggingface-cli download MahmoodLab/hest-bench --repo-type dataset --include 'IDC/*'")
        assert not (tmp_path / "IDC").exists()  # nothing is written before the listing is had
        del served.refuse[f"/api{REPO}/revision/main"]  # now nothing is served: a moved folder is a 404
        result = cli_in_process("download", "hest_idc", "--data-root", tmp_path / "IDC", "--mirror", served.base)
        assert_one_line_error(result, "HTTP 404", "the file is not (or no longer) there")
