"""Dataset readers, registered by the name a task card gives in `reader.name`.

A reader turns a card plus a data directory into one torch Dataset per split. Each item is
`(image_tensor, label)`; each dataset exposes `labels` (int64 numpy array) so probes and
metrics never iterate over images to get them.
"""

from pathlib import Path

from evalsuite.errors import EvalsuiteError
from evalsuite.readers.hgsc_tiles import HgscTileReader
from evalsuite.resources import shipped_data_dir

READERS = {
    "hgsc_tiles": HgscTileReader,
}

_PACKAGE_PREFIX = "package:"


def resolve_data_root(card, data_root: str | None) -> Path:
    """`--data-root` wins; else the card's `data_root`; `package:X` means data shipped with evalsuite."""
    root = data_root or card.data_root
    if root is None:
        raise EvalsuiteError(f"task '{card.name}' needs its data: pass --data-root DIR")
    if root.startswith(_PACKAGE_PREFIX):
        return shipped_data_dir() / root[len(_PACKAGE_PREFIX):]
    return Path(root).expanduser()


def build_reader(card, data_root: str | None = None):
    if card.reader not in READERS:
        raise EvalsuiteError(
            f"task card {card.path}: unknown reader '{card.reader}'; known readers: {', '.join(READERS)}"
        )
    return READERS[card.reader](card, resolve_data_root(card, data_root), **card.reader_args)
