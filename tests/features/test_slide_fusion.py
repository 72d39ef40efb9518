"""Patient-level fusion of a slide-encoder run (features/slide_embeddings.py): for a patient with two slides, early
fusion hands the encoder both slides' tiles and coordinates in one forward; late fusion hands each slide alone and
averages the two embeddings. A recording encoder shows exactly what each forward received."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from evalsuite.errors import EvalsuiteError
from evalsuite.features.bags import PatientBags, SlideBags
from evalsuite.features.slide_embeddings import EARLY, LATE, SlideForward, fusion_of, split_items
from evalsuite.readers.slides.base import SlideLayout


class Recording(torch.nn.Module):
    """Embedding = [tile count, sum of features, sum of x, side]; every forward's inputs kept."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def forward(self, features, coords, side):
        self.calls.append((features.clone(), coords.clone(), side))
        return torch.stack([torch.tensor(float(len(features))), features.sum(), coords[:, 0].sum(),
                            torch.tensor(float(side))])


def _patient_with_two_slides():
    """Slides A (2 tiles) and B (3 tiles) of patient 0, slide C (1 tile) of patient 1."""
    features = np.arange(12, dtype=np.float16).reshape(6, 2)
    offsets = np.array([0, 2, 5, 6])
    coords = np.array([[0, 0], [512, 0], [0, 0], [512, 0], [1024, 512], [0, 0]])
    layout = SlideLayout(["A", "B", "C"], ["a", "b", "c"], offsets, coords, [0, 0, 0], [512] * 3, 512, [],
                         [512.0, 512.0, 1024.0])
    return PatientBags(SlideBags(features, offsets), [0, 0, 1]), layout


def _forward(fusion):
    bags, layout = _patient_with_two_slides()
    encoder = SimpleNamespace(model=Recording(), spec=SimpleNamespace(name="recording"))
    forward = SlideForward(encoder, bags.slides.features, layout, torch.device("cpu"), "fp32")
    return [forward(item) for item in split_items(bags, fusion)], encoder.model.calls


def test_early_fusion_is_one_forward_over_all_tiles_of_the_patients_slides():
    embeddings, calls = _forward(EARLY)
    assert len(calls) == 2  # one forward per patient
    tiles, coords, side = calls[0]
    assert torch.equal(tiles, torch.arange(10, dtype=torch.float32).reshape(5, 2))  # A's 2 tiles then B's 3
    assert coords[:, 0].tolist() == [0, 512, 0, 512, 1024]
    assert side == 512
    assert embeddings[0].tolist() == [5, 45, 2048, 512]


def test_late_fusion_is_the_mean_of_each_slides_own_embedding():
    embeddings, calls = _forward(LATE)
    assert len(calls) == 3  # A alone, B alone, then C
    assert [len(c[0]) for c in calls] == [2, 3, 1]
    slide_a = [2, 0 + 1 + 2 + 3, 512, 512]
    slide_b = [3, sum(range(4, 10)), 1536, 512]
    assert embeddings[0].tolist() == pytest.approx(np.mean([slide_a, slide_b], axis=0).tolist())
    assert embeddings[1].tolist() == [1, 10 + 11, 0, 1024]  # a one-slide patient is the same either way


def test_early_and_late_differ_for_the_two_slide_patient():
    early, _ = _forward(EARLY)
    late, _ = _forward(LATE)
    assert not np.allclose(early[0], late[0])
    assert np.array_equal(early[1], late[1])


def test_a_card_with_another_fusion_word_is_refused_in_one_line(tmp_path):
    card = SimpleNamespace(extra={"fusion": "mean"}, path=tmp_path / "card.yaml")
    with pytest.raises(EvalsuiteError, match="fusion must be one of early, late, got 'mean'"):
        fusion_of(card, SimpleNamespace(uses_coords=False, name="chief"))


def test_positional_encoders_fuse_late_and_refuse_early(tmp_path):
    titan, chief = SimpleNamespace(uses_coords=True, name="titan"), SimpleNamespace(uses_coords=False, name="chief")
    plain = SimpleNamespace(extra={}, path=tmp_path / "card.yaml")
    assert fusion_of(plain, titan) == LATE and fusion_of(plain, chief) == EARLY
    early = SimpleNamespace(extra={"fusion": "early"}, path=tmp_path / "card.yaml")
    with pytest.raises(EvalsuiteError, match="titan reads tile positions and the slides share no coordinate frame"):
        fusion_of(early, titan)
