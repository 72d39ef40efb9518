"""Download entries of the TCGA-TILs, TCGA-CRC-MSI and Camelyon17-WILDS cards: `SOURCES = {card name: entry}`, in
the shape of sources.py's table (evalsuite/downloads/model.py). Every URL and checksum names where it comes from."""

from evalsuite.downloads.model import Download, Remote

_THUNDER = "MICS-Lab/thunder src/thunder/datasets/dataset/{name} at 6fe47e0"

# ---------------------------------------------------------------- TCGA-TILs (Zenodo 6604094)
# The tar holds TCGA-TILs/images-tcga-tils/...; its `pancancer` folder's links are left out by the unpacker, as
# THUNDER deletes them (remove_symlinks).
TCGA_TILS = Download(
    title="TCGA-TILs (Abousamra et al. 2022)", page="https://zenodo.org/records/6604094",
    licence="as stated on the Zenodo record (not confirmed by evalsuite)", size="one tar.gz (size not confirmed)",
    files=(Remote("https://zenodo.org/records/6604094/files/TCGA-TILs.tar.gz?download=1", "TCGA-TILs.tar.gz",
                  unpack="tar.gz", md5="42d387c2f8d300dea8bb8a544b43ad3c",
                  facts="URL: SBU-BMI/champkit data/task2_tils/setup.sh (e94cc6b), the same file as "
                        + _THUNDER.format(name="tcga_tils.py") + "; md5: champkit data/task2_tils/md5sums.txt"),),
    note="the reader checks THUNDER's 209,221 / 38,601 / 56,275 tiles")

# ---------------------------------------------------------------- TCGA-CRC-MSI (Kather, Zenodo 3832231)
TCGA_CRC_MSI = Download(
    title="TCGA-CRC-DX MSI tiles (Kather)", page="https://zenodo.org/records/3832231",
    licence="as stated on the Zenodo record (not confirmed by evalsuite)", size="two zips (size not confirmed)",
    files=tuple(
        Remote(f"https://zenodo.org/api/records/3832231/files/{name}/content", name, unpack="zip",
               facts="URL: " + _THUNDER.format(name="tcga_crc_msi.py") + "; no checksum known to evalsuite")
        for name in ("TRAIN.zip", "TEST.zip")),
    note="no checksum is known to evalsuite; the zip CRC-32s and the reader's 19,557 / 32,361-tile counts are the "
         "checks")

# ---------------------------------------------------------------- Camelyon17-WILDS v1.0 (CodaLab bundle)
# WILDS downloads this bundle as archive.tar.gz and unpacks it into <root>/camelyon17_v1.0; its compressed_size
# (10,658,709,504 bytes) drives only a progress bar there, so it is not used as a check here.
CAMELYON17_WILDS = Download(
    title="Camelyon17-WILDS v1.0", page="https://wilds.stanford.edu/datasets/",
    licence="CC0 1.0 (https://creativecommons.org/publicdomain/zero/1.0/), as wilds' camelyon17_dataset.py states",
    size="10.7 GB of tar.gz",
    files=(Remote("https://worksheets.codalab.org/rest/bundles/0xe45e15f39fb54e9d9e919556af67aabe/contents/blob/",
                  "archive.tar.gz", unpack="tar.gz", target="camelyon17_v1.0",
                  facts="URL, file name and target folder: wilds 2.0.0 (PyPI) wilds/datasets/camelyon17_dataset.py "
                        "_versions_dict and wilds_dataset.py download_dataset; no checksum published"),),
    note="no checksum is published; the gzip stream's CRC-32 and the reader's 302,436 / 34,904 / 85,054-patch counts "
         "are the checks")

SOURCES = {"tcga_tils": TCGA_TILS, "tcga_crc_msi": TCGA_CRC_MSI, "camelyon17_wilds": CAMELYON17_WILDS}
