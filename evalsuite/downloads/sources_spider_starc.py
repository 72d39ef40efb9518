"""Download entries of the SPIDER cards (four organs) and STARC-9, keyed by card name; merged into sources.py's table
by the lead. No URL or checksum is typed here: both datasets are on the Hugging Face hub, and neither page states
per-file checksums outside the hub's own listing.

Facts: the repositories are those THUNDER downloads (MICS-Lab/thunder src/thunder/datasets/dataset/
spider_colorectal.py at a91f8c5: histai/SPIDER-<organ>, tar parts spider-<organ>.tar.*; starc9.py at 3a91041:
Path2AI/STARC-9, per-class zips). The SPIDER hub pages ask each user to accept their conditions (gated); STARC-9's
zips must be unpacked into class folders, which evalsuite's hub download (files placed as they are) does not do.
"""

from evalsuite.downloads.model import Manual

_SPIDER_LICENCE = "CC BY-NC 4.0 (https://creativecommons.org/licenses/by-nc/4.0/), as the hub page states"


def _spider(organ: str) -> Manual:
    repo = f"histai/SPIDER-{organ}"
    return Manual(
        title=f"SPIDER-{organ} (HistAI)", page=f"https://huggingface.co/datasets/{repo}",
        licence=_SPIDER_LICENCE, size="not stated on the page (a 5x5 grid of 224 px patches per sample)",
        why="the hub page is gated: each user must sign in and accept its conditions before the files can be read",
        steps=("sign in to Hugging Face and accept the conditions on that page",
               f"`huggingface-cli download {repo} --repo-type dataset --local-dir DIR/hub` (THUNDER's way: "
               "snapshot_download of the same repository)",
               f"`cat DIR/hub/spider-{organ}.tar.* | tar -xf - -C DIR/hub`",
               f"pass DIR/hub/SPIDER-{organ} as --data-root: it holds metadata.json and images/"))


STARC9 = Manual(
    title="STARC-9", page="https://huggingface.co/datasets/Path2AI/STARC-9",
    licence="CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/), as the hub page states",
    size="over 66 GB (the hub lists 5.9-9.3 GB per training class zip) plus the validation zips",
    why="the hub copy is per-class zip archives that must be unpacked into class folders, which evalsuite's hub "
        "download does not do",
    steps=("`huggingface-cli download Path2AI/STARC-9 --repo-type dataset --local-dir DIR`",
           "unpack every zip next to itself into a folder of its name (e.g. `cd DIR/Training_data_normalized && "
           "unzip ADI.zip -d ADI`), for Training_data_normalized/*.zip and the two Validation_data/STANFORD-* zips",
           "check that DIR/Training_data_normalized/<CLASS>/ and DIR/Validation_data/STANFORD-CRC-HE-VAL-{SMALL,"
           "LARGE}/<CLASS>/ exist for the nine classes (a nested <CLASS>/<CLASS>/ is fine)"))

SOURCES = {**{f"spider_{organ}": _spider(organ) for organ in ("breast", "colorectal", "skin", "thorax")},
           "starc9": STARC9}
