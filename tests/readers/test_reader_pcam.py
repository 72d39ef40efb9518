"""PCam: camelyonpatch_level_2_split_{train,valid,test}_{x,y}.h5, one lazy HDF5 handle per process."""

import collections
import multiprocessing
import os
import pickle

import h5py
import numpy as np
import pytest
import torch
from conftest import assert_one_line_error, make_pcam, pcam_name, run_card, run_cli
from torchvision import transforms as T

from evalsuite.errors import EvalsuiteError
from evalsuite.readers import pcam
from evalsuite.readers.pcam import PcamReader
from evalsuite.tasks.cards import load_card


def _reader(root):
    return PcamReader(load_card("pcam"), root, check_counts=False)


def _tiles(root, split):
    with h5py.File(root / pcam_name(split, "x"), "r") as file:
        return torch.from_numpy(file["x"][:]).permute(0, 3, 1, 2).float() / 255


def _count_opens(monkeypatch, log):
    """From now on, log every h5py.File open as a `pid file-name` line (forked DataLoader workers inherit this)."""
    real_open = h5py.File

    def counting_open(path, *args, **kwargs):
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()} {os.path.basename(path)}\n")
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(pcam.h5py, "File", counting_open)


def _record_worker_pid(log):
    def init(worker_id):
        with open(log, "a") as handle:
            handle.write(f"{os.getpid()}\n")
    return init


def test_h5_opened_at_most_once_per_process_over_epochs_with_workers(tmp_path, monkeypatch):
    root = make_pcam(tmp_path / "data", {"train": 24, "valid": 2, "test": 2})
    expected = _tiles(root, "train")
    open_log = tmp_path / "opens.log"
    _count_opens(monkeypatch, open_log)
    dataset = _reader(root).dataset("train", T.ToTensor())
    workers_log = tmp_path / "workers.log"
    loader = torch.utils.data.DataLoader(dataset, batch_size=4, num_workers=2, persistent_workers=True,
                                         multiprocessing_context="fork", worker_init_fn=_record_worker_pid(workers_log))
    for _ in range(2):
        images, labels = map(torch.cat, zip(*loader))
        assert torch.equal(images, expected) and labels.tolist() == dataset.labels.tolist()
    del loader  # stops the persistent workers

    opens = collections.Counter(tuple(line.split()) for line in open_log.read_text().splitlines())
    workers = {int(pid) for pid in workers_log.read_text().split()}
    assert len(workers) == 2 and os.getpid() not in workers
    assert max(opens.values()) == 1, opens  # no file opened twice by any process
    x_file = pcam_name("train", "x")
    assert {int(pid) for pid, name in opens if name == x_file} == workers | {os.getpid()}


def _read_in_child(dataset, queue):
    inherited = dataset.images._file
    image, label = dataset[1]
    queue.put((dataset.images._file is not inherited, dataset.images._pid == os.getpid(), image.shape, label))


def test_forked_worker_never_reuses_the_parent_handle(tmp_path):
    dataset = _reader(make_pcam(tmp_path)).dataset("val", T.ToTensor())
    parent_handle = dataset.images.file()
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_read_in_child, args=(dataset, queue))
    child.start()
    own_handle, own_pid, shape, label = queue.get(timeout=60)
    child.join(timeout=60)
    assert own_handle and own_pid and shape == (3, 96, 96) and label == 1
    assert dataset.images.file() is parent_handle and dataset[1][1] == 1  # the parent's handle is untouched


def test_dataset_pickles_without_its_handle(tmp_path):
    root = make_pcam(tmp_path)
    dataset = _reader(root).dataset("test", T.ToTensor())
    copy = pickle.loads(pickle.dumps(dataset))
    assert copy.images._file is None
    assert torch.equal(copy[3][0], _tiles(root, "test")[3]) and copy[3][1] == 1


def test_x_y_length_mismatch_is_one_line_error(tmp_path):
    root = make_pcam(tmp_path / "data")
    with h5py.File(root / pcam_name("valid", "y"), "w") as file:
        file.create_dataset("y", data=np.zeros((3, 1, 1, 1), dtype=np.uint8))
    result = run_cli("run", "--task", "pcam", "--data-root", root, "--out", tmp_path / "out", "--no-count-check")
    assert_one_line_error(result, pcam_name("valid", "x"), "has 4 tiles but its y file has 3 labels")


def test_gzipped_download_asks_for_decompression(tmp_path):
    root = make_pcam(tmp_path)
    packed = root / (pcam_name("test", "x") + ".gz")
    (root / pcam_name("test", "x")).rename(packed)
    with pytest.raises(EvalsuiteError, match=f"found {packed} but the reader needs it decompressed: run `gunzip -k"):
        _reader(root)


@pytest.mark.parametrize("key, data, message", [
    ("images", np.zeros((8, 96, 96, 3), np.uint8), "has no dataset 'x' \\(found images\\)"),
    ("x", np.zeros((8, 96, 96, 3), np.float32), "'x' is float32 \\(8, 96, 96, 3\\); expected uint8"),
    ("x", np.zeros((8, 64, 64, 3), np.uint8), "'x' is uint8 \\(8, 64, 64, 3\\); expected uint8 \\(N, 96, 96, 3\\)"),
])
def test_malformed_x_file(tmp_path, key, data, message):
    root = make_pcam(tmp_path)
    with h5py.File(root / pcam_name("train", "x"), "w") as file:
        file.create_dataset(key, data=data)
    with pytest.raises(EvalsuiteError, match=message):
        _reader(root)


def test_labels_come_from_y_and_counts_are_checked(tmp_path):
    root = make_pcam(tmp_path)
    reader = _reader(root)
    assert reader.labels["train"].dtype == np.int64 and reader.labels["train"].tolist() == [0, 1] * 4
    with pytest.raises(EvalsuiteError, match="split 'train' has 8 images but the official dataset has 262144"):
        PcamReader(load_card("pcam"), root)


@pytest.mark.slow
def test_pcam_card_end_to_end(tmp_path):
    run_card("pcam", make_pcam(tmp_path / "data"), tmp_path / "out", {"train": 8, "val": 4, "test": 4})
