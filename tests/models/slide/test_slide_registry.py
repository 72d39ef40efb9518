"""The slide encoders in the one registry (issue 51): `evalsuite list models` shows each with its tile encoder and
tiling, every entry's tile encoder is a registry model whose embedding is the width the slide encoder reads, and a
slide encoder is refused on a tile task and with a probe that reads bags."""

import pytest

from evalsuite.cli import main
from evalsuite.models.registry import REGISTRY, SLIDE, of_kind

SLIDE_ENCODERS = {"titan", "prism", "gigapath-slide", "chief", "feather-conch-v1.5", "feather-uni2", "madeleine"}


def test_list_models_shows_every_slide_encoder_with_its_tile_encoder_and_tiling(capsys):
    main(["list", "models"])
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if " slide " in line}
    assert SLIDE_ENCODERS <= set(rows)
    for name in SLIDE_ENCODERS:
        spec = REGISTRY[name]
        assert f"slide from {spec.tile_encoder} tiles ({spec.tile_dim}-d)" in rows[name]
        assert f"{spec.tiling['tile_size_px']} px tiles at {spec.magnification}" in rows[name]
        assert spec.licence.split()[0] in rows[name]


@pytest.mark.parametrize("name", sorted(of_kind(SLIDE)))
def test_the_tile_encoder_gives_the_width_the_slide_encoder_reads(name):
    spec = REGISTRY[name]
    tile_encoder = REGISTRY[spec.tile_encoder]
    assert tile_encoder.kind != SLIDE and tile_encoder.embed_dim == spec.tile_dim


def test_a_slide_encoder_on_a_tile_task_is_refused_in_one_line(capsys):
    assert main(["run", "--task", "demo", "--model", "chief", "--random-init", "--out", "/nonexistent/never-made"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "chief is a slide encoder: it needs a slide task" in error and "--model ctranspath" in error


def test_a_bag_probe_with_a_slide_encoder_is_refused_naming_the_vector_probes(capsys, tmp_path):
    assert main(["run", "--task", "demo_slide", "--model", "chief", "--random-init", "--probes", "abmil",
                 "--out", str(tmp_path)]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert "reads bags but slide task 'demo_slide' with slide encoder chief caches vectors" in error
    assert error.endswith("use a recipe of fewshot, knn, linear, logreg, retrieval, zeroshot")


def test_a_weights_folder_without_the_tile_checkpoint_the_encoder_names_is_refused_in_one_line(tmp_path):
    from evalsuite.errors import EvalsuiteError
    from evalsuite.models.slide.encoder import tile_weights_in

    (tmp_path / "CHIEF_pretraining.pth").write_bytes(b"")
    with pytest.raises(EvalsuiteError, match="chief reads its tiles with ctranspath weights CHIEF_CTransPath.pth, "
                                             "which the folder lacks"):
        tile_weights_in(REGISTRY["chief"], str(tmp_path))
    (tmp_path / "CHIEF_CTransPath.pth").write_bytes(b"")
    assert tile_weights_in(REGISTRY["chief"], str(tmp_path)) == str(tmp_path / "CHIEF_CTransPath.pth")
    assert tile_weights_in(REGISTRY["titan"], str(tmp_path)) is None  # its tile encoder comes from the hub
