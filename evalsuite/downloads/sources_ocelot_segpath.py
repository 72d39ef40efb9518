"""Download entries of the OCELOT and SegPath cards (merged into sources.SOURCES by card name).

URLs: THUNDER's download code (MICS-Lab/thunder src/thunder/datasets/dataset/ocelot.py and segpath_{epithelial,
lymphocytes}.py at 6fe47e0), which unpacks each file where the readers expect it. The OCELOT zip's sha256 is the one
constantinpape/torch-em checks on download (torch_em/data/datasets/histopathology/ocelot.py at e38c9cf). No checksum
of the SegPath files was found in a source evalsuite read (torch-em downloads them with checksum=None; the Zenodo
pages, which list md5s, were not readable here): the readers' image counts per split check them instead.
"""

from evalsuite.downloads.model import Download, Remote

_THUNDER = "MICS-Lab/thunder at 6fe47e0"
_ZENODO_FILE = "https://zenodo.org/api/records/{record}/files/{name}/content"

OCELOT = Download(
    title="OCELOT 2023 (Overlapped Cell On Tissue)", page="https://zenodo.org/records/8417503",
    licence=("CC BY-NC 4.0 as constantinpape/torch-em's ocelot.py states it (not checked on the Zenodo page); "
             "https://creativecommons.org/licenses/by-nc/4.0/"),
    size="one zip (size not stated in the sources evalsuite read)",
    files=(Remote(_ZENODO_FILE.format(record=8417503, name="ocelot2023_v1.0.1.zip"), "ocelot2023_v1.0.1.zip",
                  unpack="zip", sha256="74f46b79e3c4076ca0012d403629ab1e1e412591faf79a910d4d8bdd92c47920",
                  facts=(f"URL: {_THUNDER} src/thunder/datasets/dataset/ocelot.py; sha256: constantinpape/torch-em "
                         "torch_em/data/datasets/histopathology/ocelot.py at e38c9cf (checked there on download)")),),
    note="the zip unpacks to DIR/ocelot2023_v1.0.1/{images,annotations}/{train,val,test}/{tissue,cell}; the card "
         "reads the tissue folders")


def _segpath(title: str, record: int, prefix: str, archive: str) -> Download:
    facts = f"URL: {_THUNDER} src/thunder/datasets/dataset/{title}; no checksum known to evalsuite"
    return Download(
        title=f"SegPath {archive.split('_')[1].lower()} ({prefix})", page=f"https://zenodo.org/records/{record}",
        licence=("CC BY-NC-SA 4.0 as the saahilw/nuclei-segpath Hugging Face copy says each SegPath record states "
                 "it (not checked on the Zenodo page); https://creativecommons.org/licenses/by-nc-sa/4.0/"),
        size="one .tar.gz and one CSV (size not stated in the sources evalsuite read)",
        files=(Remote(_ZENODO_FILE.format(record=record, name=f"{prefix}_fileinfo.csv"), f"{prefix}_fileinfo.csv",
                      target=f"{prefix}_fileinfo.csv", facts=facts),
               Remote(_ZENODO_FILE.format(record=record, name=f"{archive}.tar.gz"), f"{archive}.tar.gz",
                      unpack="tar.gz", facts=facts)),
        note=f"the archive unpacks to DIR/{archive}/<name>_HE.png and <name>_mask.png; {prefix}_fileinfo.csv names "
             "each image's split; the reader's image counts per split are the check")


SOURCES = {
    "ocelot": OCELOT,
    "segpath_epithelial": _segpath("segpath_epithelial.py", 7412731, "panCK", "panCK_Epithelium"),
    "segpath_lymphocytes": _segpath("segpath_lymphocytes.py", 7412529, "CD3CD20", "CD3CD20_Lymphocyte"),
}
