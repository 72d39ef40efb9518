"""Where the PLISM card's data is published (to be merged into sources.py's table, keyed by the card's name).

Facts: the Hugging Face dataset card of owkin/plism-dataset (91 .h5 files of 16,278 tiles each, "225 Go", CC BY 4.0)
and owkin/plism-benchmark at b4f32b7c233e0f5ba8340da89ef65803cfc2ce49: plismbench/engine/cli.py (`download` logs in
with a Hugging Face token and keeps the files matching *_to_GMH_S60.tif.h5), README.md (licences) and
assets/tiles_subset_8139.npy (kept in git, not LFS: its 65,240 bytes and sha256 below were computed from that blob,
git blob id e49c2b0fa2c6932faf1d86100e1ed4ce31809625). Not confirmed: whether the hub dataset is gated (plismbench
asks for a token) and its file listing, so evalsuite does not fetch it itself.
"""

from evalsuite.downloads.model import Manual

PLISMBENCH_COMMIT = "b4f32b7c233e0f5ba8340da89ef65803cfc2ce49"
SUBSET_URL = (f"https://raw.githubusercontent.com/owkin/plism-benchmark/{PLISMBENCH_COMMIT}/assets/"
              "tiles_subset_8139.npy")
SUBSET_SHA256 = "7d3c5cb3cd5364263a388d0bb4ad25b0dfa117f9718c4f69688e427a77ebb298"

PLISM = Manual(
    title="PLISM tiles as plismbench reads them (owkin/plism-dataset)",
    page="https://huggingface.co/datasets/owkin/plism-dataset",
    licence="CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/)",
    size="225 GB of .h5",
    why="plismbench downloads it with a Hugging Face token; whether the dataset is gated and its file listing "
        "could not be confirmed, so evalsuite does not fetch it",
    steps=(
        "log in to Hugging Face (`huggingface-cli login`) and accept the dataset's terms on its page if it asks",
        "huggingface-cli download owkin/plism-dataset --repo-type dataset --include '*_to_GMH_S60.tif.h5' "
        "--local-dir DIR   (or plismbench's own `plismbench download --download-dir DIR --token TOKEN`)",
        f"put plismbench's tile subset beside them: {SUBSET_URL} saved as DIR/tiles_subset_8139.npy "
        f"(65,240 bytes, sha256 {SUBSET_SHA256})",
        "check: DIR holds 91 files {staining}_{scanner}_to_GMH_S60.tif.h5; then evalsuite run --task plism "
        "--data-root DIR --model MODEL",
    ),
)

SOURCES = {"plism": PLISM}
