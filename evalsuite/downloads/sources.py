"""Where each card's dataset is published and how it lands under --data-root: one entry per card name.

Every URL and checksum names where it comes from (`facts`); none is typed from memory. Datasets whose terms ask for
a form, a registration or a login are `Manual`: `evalsuite download` prints their page and steps and writes nothing.
docs/download.md is the same table for people. To add a dataset: one entry here, keyed by the card's name.
"""

from evalsuite.downloads import (
    sources_eva_tasks,
    sources_ocelot_segpath,
    sources_plism,
    sources_spider_starc,
    sources_tcga_wilds,
)
from evalsuite.downloads.model import Download, HubFolder, Manual, Remote
from evalsuite.errors import EvalsuiteError

EVA = "kaiko-ai/eva"
# ---------------------------------------------------------------- PatchCamelyon (Zenodo record 2546921)
_PCAM_URL = "https://zenodo.org/records/2546921/files/{name}?download=1"  # eva patch_camelyon.py _URL_TEMPLATE
_PCAM_GZ_FACTS = ("URL: eva src/eva/vision/data/datasets/classification/patch_camelyon.py; size and sha256 of the .gz: "
                  "tensorflow/datasets tensorflow_datasets/datasets/patch_camelyon/checksums.tsv (ed49304); md5 of "
                  "the .h5 inside: eva patch_camelyon.py (73b61a7)")
_PCAM_META_FACTS = "URL: Zenodo record 2546921; md5: basveeling/pcam README.md, the dataset author's table"


def _pcam_gz(split: str, kind: str, size: int, sha256: str, h5_md5: str) -> Remote:
    name = f"camelyonpatch_level_2_split_{split}_{kind}.h5"
    return Remote(_PCAM_URL.format(name=name + ".gz"), name + ".gz", unpack="gz", target=name, size=size,
                  sha256=sha256, unpacked_md5=h5_md5, facts=_PCAM_GZ_FACTS)


def _pcam_meta(split: str, md5: str) -> Remote:
    name = f"camelyonpatch_level_2_split_{split}_meta.csv"
    return Remote(_PCAM_URL.format(name=name), name, target=name, md5=md5, facts=_PCAM_META_FACTS, optional=True)


PCAM = Download(
    title="PatchCamelyon (PCam)", page="https://github.com/basveeling/pcam",
    licence="CC0 1.0 (https://creativecommons.org/publicdomain/zero/1.0/)", size="8.0 GB of .h5.gz",
    files=(
        _pcam_gz("train", "x", 6421353462, "d619e741468a7ab35c7e4a75e6821b7e7e6c9411705d45708f2a0efc8960656c",
                 "01844da899645b4d6f84946d417ba453"),
        _pcam_gz("train", "y", 21378, "b74126d2c01b20d3661f9b46765d29cf4e4fba6faba29c8e0d09d406331ab75a",
                 "0781386bf6c2fb62d58ff18891466aca"),
        _pcam_gz("valid", "x", 805965320, "f82ee1670d027b4ec388048d9eabc2186b77c009655dae76d624c0ecb053ccb2",
                 "81cf9680f1724c40673f10dc88e909b1"),
        _pcam_gz("valid", "y", 3038, "ce1ae30f08feb468447971cfd0472e7becd0ad96d877c64120c72571439ae48c",
                 "94d8aacc249253159ce2a2e78a86e658"),
        _pcam_gz("test", "x", 800875929, "79174c2201ad521602a5888be8f36ee10875f37403dd3f2086caf2182ef87245",
                 "2614b2e6717d6356be141d9d6dbfcb7e"),
        _pcam_gz("test", "y", 3040, "0a522005fccc8bbd04c5a117bfaf81d8da2676f03a29d7499f71d0a0bd6068ef",
                 "11ed647efe9fe457a4eb45df1dba19ba"),
        # The slide of each tile: the reader's slide-level test intervals (docs/tasks.md, PCam).
        _pcam_meta("train", "5a3dd671e465cfd74b5b822125e65b0a"),
        _pcam_meta("valid", "3455fd69135b66734e1008f3af684566"),
        _pcam_meta("test", "67589e00a4a37ec317f2d1932c7502ca"),
    ))

# ---------------------------------------------------------------- NCT-CRC-HE-100K + CRC-VAL-HE-7K (Zenodo 1214456)
CRC = Download(
    title="NCT-CRC-HE-100K and CRC-VAL-HE-7K", page="https://zenodo.org/records/1214456",
    licence="CC BY 4.0 (https://creativecommons.org/licenses/by/4.0/)", size="11.7 GB + 0.8 GB of zip",
    files=(
        # eva's crc.py gives NCT-CRC-HE-100K.zip the md5 035777cf...; that sum came with the -NONORM archive (eva
        # commit 29aa567 crc_he.py) and was carried over when eva switched files, so it is not used here.
        Remote("https://zenodo.org/records/1214456/files/NCT-CRC-HE-100K.zip?download=1", "NCT-CRC-HE-100K.zip",
               unpack="zip", facts="URL: eva src/eva/vision/data/datasets/classification/crc.py; no checksum known "
                                   "to evalsuite (see the comment in sources.py)"),
        Remote("https://zenodo.org/records/1214456/files/CRC-VAL-HE-7K.zip?download=1", "CRC-VAL-HE-7K.zip",
               unpack="zip", md5="2fd1651b4f94ebd818ebf90ad2b6ce06",
               facts="URL and md5: eva src/eva/vision/data/datasets/classification/crc.py (md5 first given for this "
                     "file in eva commit 29aa567)"),
    ),
    note="Zenodo's record page lists each file's md5; NCT-CRC-HE-100K.zip is checked by its zip CRC-32s and the "
         "reader's 100,000-tile count")

# ---------------------------------------------------------------- BACH (Zenodo 3632035)
BACH = Download(
    title="BACH (ICIAR 2018) microscopy photos", page="https://zenodo.org/records/3632035",
    licence="CC BY-NC-ND 4.0 (https://creativecommons.org/licenses/by-nc-nd/4.0/)", size="10.4 GB of zip",
    files=(Remote("https://zenodo.org/records/3632035/files/ICIAR2018_BACH_Challenge.zip?download=1",
                  "ICIAR2018_BACH_Challenge.zip", unpack="zip", md5="8ae1801334aa943c44627c1eef3631b2",
                  facts="URL: eva src/eva/vision/data/datasets/classification/bach.py; md5: eva "
                        "src/eva/vision/data/datasets/bach.py at commit 0ec4ff4, checked there by torchvision's "
                        "download_url"),))

# ---------------------------------------------------------------- BreaKHis (UFPR)
BREAKHIS = Download(
    title="BreaKHis v1", page="https://web.inf.ufpr.br/vri/databases/breast-cancer-histopathological-database-breakhis/",
    licence="CC BY 4.0 as eva lists it (https://creativecommons.org/licenses/by/4.0/); the page asks to cite "
            "Spanhol et al. 2016", size="4 GB of tar.gz",
    files=(Remote("http://www.inf.ufpr.br/vri/databases/BreaKHis_v1.tar.gz", "BreaKHis_v1.tar.gz", unpack="tar.gz",
                  facts="URL: eva src/eva/vision/data/datasets/classification/breakhis.py and MICS-Lab/thunder "
                        "src/thunder/datasets/dataset/break_his.py; no checksum published"),),
    note="no checksum is published; the gzip stream's CRC-32 and the reader's 1,995-image count are the checks")

# ---------------------------------------------------------------- PanNuke (Warwick TIA)
_PANNUKE_FACTS = ("URL: MICS-Lab/thunder src/thunder/datasets/dataset/pannuke.py; sha256: constantinpape/torch-em "
                  "torch_em/data/datasets/histopathology/pannuke.py (checked there on download)")
PANNUKE = Download(
    title="PanNuke", page="https://warwick.ac.uk/fac/cross_fac/tia/data/pannuke",
    licence="CC BY-NC-SA 4.0 (https://creativecommons.org/licenses/by-nc-sa/4.0/)", size="3 zips (folds 1-3)",
    files=tuple(
        Remote(f"https://warwick.ac.uk/fac/cross_fac/tia/data/pannuke/fold_{fold}.zip", f"fold_{fold}.zip",
               unpack="zip", sha256=sha256, facts=_PANNUKE_FACTS)
        for fold, sha256 in ((1, "6e19ad380300e8ce9480f9ab6a14cc91fa4b6a511609b40e3d70bdf9c881ed0b"),
                             (2, "5bc540cc509f64b5f5a274d6e5a245527dbd3e6d3155d43555115c5d54709b07"),
                             (3, "c14d372981c42f611ebc80afad01702b89cad8c1b3089daa31931cf5a4b1a39d"))))

# ---------------------------------------------------------------- MoNuSAC 2020 (the organisers' Google Drive files)
_MONUSAC_FACTS = ("Drive file ids: eva src/eva/vision/data/datasets/segmentation/monusac.py; sha256: "
                  "constantinpape/torch-em torch_em/data/datasets/histopathology/monusac.py")
_DRIVE = "https://drive.google.com/uc?export=download&id={id}&confirm=t"
MONUSAC = Download(
    title="MoNuSAC 2020", page="https://monusac-2020.grand-challenge.org/Data/",
    licence="CC BY-NC-SA 4.0 (https://creativecommons.org/licenses/by-nc-sa/4.0/)", size="about 0.6 GB of zip",
    files=(Remote(_DRIVE.format(id="1lxMZaAPSpEHLSxGA9KKMt_r-4S8dwLhq"), "MoNuSAC_images_and_annotations.zip",
                  unpack="zip", sha256="5b7cbeb34817a8f880d3fddc28391e48d3329a91bf3adcbd131ea149a725cd92",
                  facts=_MONUSAC_FACTS),
           Remote(_DRIVE.format(id="1G54vsOdxWY1hG7dzmkeK3r0xz9s-heyQ"), "MoNuSAC Testing Data and Annotations.zip",
                  unpack="zip", sha256="bcbc38f6bf8b149230c90c29f3428cc7b2b76f8acd7766ce9fc908fc896c2674",
                  facts=_MONUSAC_FACTS)),
    note="Google Drive may answer with a page instead of the file (quota, confirmation): the error then names the file "
         "to save from a browser into DIR/.evalsuite-download, and the same command goes on from there")

# ---------------------------------------------------------------- HEST-Benchmark (Hugging Face MahmoodLab/hest-bench)
_HEST_INCLUDE = ("splits/", "patches/", "adata/", "var_50genes.json")  # what readers/spots/hest.py reads


def _hest(folder: str) -> Download:
    return Download(
        title=f"HEST-Benchmark {folder}", page="https://huggingface.co/datasets/MahmoodLab/hest-bench",
        licence="CC BY-NC-SA 4.0 (https://creativecommons.org/licenses/by-nc-sa/4.0/)",
        size="as the hub lists it",
        hub=HubFolder("MahmoodLab/hest-bench", folder, _HEST_INCLUDE),
        note="sizes and hashes come from the hub's own listing (sha256 of LFS files, git blob ids of the others), "
             "fixed to the commit the listing names; the task folder's files land directly in DIR")


# ---------------------------------------------------------------- behind a form, a registration or a login
MHIST = Manual(
    title="MHIST", page="https://bmirds.github.io/MHIST/#accessing-dataset",
    licence="the Dataset Research Use Agreement sent with the files", size="354 MB",
    why="MHIST is handed out through a data access form",
    steps=("fill in the form on that page; the e-mail you get links images.zip, annotations.csv and MD5SUMs.txt",
           "check the files with `md5sum -c MD5SUMs.txt`",
           "unzip images.zip so that the PNGs are DIR/images/*.png, and put annotations.csv at DIR/annotations.csv"))
BRACS = Manual(
    title="BRACS", page="https://www.bracs.icar.cnr.it/download/",
    licence="CC BY-NC 4.0 (https://creativecommons.org/licenses/by-nc/4.0/)", size="52 GB",
    why="BRACS is given out through its own site, which asks you to register first",
    steps=("register on that page and download BRACS_RoI (the RoI set, latest version)",
           "put it so that DIR/BRACS_RoI/latest_version/{train,val,test}/<k_CLASS>/*.png exist"))
CONSEP = Manual(
    title="CoNSeP", page="https://warwick.ac.uk/TIA/data/hovernet/",
    licence="Apache 2.0 as eva lists it (https://www.apache.org/licenses/LICENSE-2.0)", size="about 0.8 GB",
    why="its publisher's page is password-protected (vqdang/hover_net issues 267 and 285), so no public URL exists",
    steps=("ask the TIA Centre (Warwick) for access through that page",
           "unpack it so that DIR/{Train,Test}/Images/*.png and DIR/{Train,Test}/Labels/*.mat exist"))
CAMELYON16 = Manual(
    title="Camelyon16", page="https://camelyon17.grand-challenge.org/Data/",
    licence="CC0 1.0 (https://creativecommons.org/publicdomain/zero/1.0/)", size="about 700 GB (399 slides)",
    why="its 399 slides are on several mirrors with different layouts, and evalsuite carries no per-slide checksums",
    steps=(("download the CAMELYON16 folder from one of the mirrors on that page (the GigaScience copy has the layout "
            "this card reads: training/normal, training/tumor, testing/images, testing/reference.csv)"),
           "check the slides against the page's checksums.md5 (`md5sum -c checksums.md5`)",
           "pass that folder as DIR"))
PANDA = Manual(
    title="PANDA (Kaggle)", page="https://www.kaggle.com/competitions/prostate-cancer-grade-assessment/data",
    licence="the competition's rules, accepted on Kaggle", size="about 410 GB",
    why="Kaggle gives competition data only to signed-in users who accepted the competition's rules",
    steps=("sign in to Kaggle and accept the rules on that page",
           "`kaggle competitions download -c prostate-cancer-grade-assessment -p DIR`, then unzip it in DIR",
           "check that DIR/train.csv and DIR/train_images/*.tiff exist"))

SOURCES = {
    "pcam": PCAM, "crc": CRC, "bach": BACH, "breakhis": BREAKHIS, "pannuke": PANNUKE, "monusac": MONUSAC,
    "hest_idc": _hest("IDC"), "hest_prad": _hest("PRAD"), "hest_paad": _hest("PAAD"), "hest_skcm": _hest("SKCM"),
    "hest_coad": _hest("COAD"), "hest_read": _hest("READ"), "hest_ccrcc": _hest("CCRCC"),
    "hest_lung": _hest("LUNG"), "hest_lymph_idc": _hest("LYMPH_IDC"),
    "mhist": MHIST, "bracs": BRACS, "consep": CONSEP, "camelyon16": CAMELYON16, "panda": PANDA, "panda_small": PANDA,
    # The tasks of THUNDER, eva and plismbench issue 52 added, one file per group of datasets.
    **sources_spider_starc.SOURCES, **sources_tcga_wilds.SOURCES, **sources_eva_tasks.SOURCES,
    **sources_ocelot_segpath.SOURCES, **sources_plism.SOURCES,
}
# A card of your own (a path) that reads one of these datasets with its reader gets that dataset's entry.
ONE_DATASET_READERS = {"pcam": "pcam", "crc": "crc", "bach": "bach", "breakhis": "breakhis", "pannuke": "pannuke",
                       "monusac": "monusac", "mhist": "mhist", "bracs": "bracs", "consep": "consep",
                       "camelyon16": "camelyon16", "panda": "panda", "starc9": "starc9", "tcga_tils": "tcga_tils",
                       "tcga_crc_msi": "tcga_crc_msi", "camelyon17_wilds": "camelyon17_wilds",
                       "gleason_arvaniti": "gleason_arvaniti", "unitopatho": "unitopatho", "bcss": "bcss",
                       "ocelot": "ocelot", "plism": "plism"}
# Readers of data that has no public source: your own cohort.
OWN_DATA_READERS = {"tile_csv": "tiles.csv and the tiles it lists", "slide_csv": "slides.csv and the slides it lists"}


def source_for(card) -> Download | Manual | None:
    """The card's entry: by its name, else by its reader where that reader reads one public dataset; None for a card
    whose data ships with evalsuite. A card of your own data, or one no entry covers, is an error naming the fix."""
    if (card.data_root or "").startswith(("package:", "built:")):
        return None
    if card.name in SOURCES:
        return SOURCES[card.name]
    if card.reader in ONE_DATASET_READERS:
        return SOURCES[ONE_DATASET_READERS[card.reader]]
    if card.reader in OWN_DATA_READERS:
        raise EvalsuiteError(f"task '{card.name}' reads a cohort of your own ({OWN_DATA_READERS[card.reader]}): there "
                             "is nothing to download; write them under a folder and pass it as --data-root")
    downloadable = ", ".join(name for name, entry in SOURCES.items() if isinstance(entry, Download))
    raise EvalsuiteError(f"no public download is known for task '{card.name}' (reader '{card.reader}'); downloadable: "
                         f"{downloadable} (`evalsuite download --list` shows every task)")
