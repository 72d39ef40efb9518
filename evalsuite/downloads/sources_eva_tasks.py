"""Download entries for the eva task cards gleason_arvaniti, unitopatho and bcss (issue 52).

All three are `Manual`: none of their publishers gives a file list with checksums that evalsuite could
fetch and verify, and eva's dataset classes (kaiko-ai/eva src/eva/vision/data/datasets/classification/
gleason_arvaniti.py, unitopatho.py, segmentation/bcss.py at 73b61a7) list no URLs or md5s for them
(each says the data "must be downloaded manually"). Pages and steps: eva's docs/datasets/*.md at 73b61a7,
eiriniar/gleason_CNN README.md at b18594e, EIDOSLAB/UNITOPATHO README.md at 418aabf,
PathologyDataScience/BCSS README.md at 3c49d55.
"""

from evalsuite.downloads.model import Manual

GLEASON_ARVANITI = Manual(
    title="Gleason (Arvaniti et al. 2018) TMA patches", page="https://doi.org/10.7910/DVN/OCYCMP",
    licence="CC0 1.0 as eva lists it (https://creativecommons.org/publicdomain/zero/1.0/)", size="about 4 GB",
    why=("Harvard Dataverse gives the TMA images and masks, not the patches: the 750 px patches are cut by the "
         "authors' script, which evalsuite does not run"),
    steps=("download the .tar.gz archives from that page and unpack them into one folder (TMA_images, "
           "Gleason_masks_train, Gleason_masks_test/Gleason_masks_test_pathologist{1,2})",
           "run utils/create_patches.py of https://github.com/eiriniar/gleason_CNN with its prefix set to that folder",
           "pass the folder holding train_validation_patches_750 and test_patches_750 as DIR"))
UNITOPATHO = Manual(
    title="UniToPatho", page="https://ieee-dataport.org/open-access/unitopatho",
    licence="CC BY 4.0 as eva lists it (https://creativecommons.org/licenses/by/4.0/)", size="about 48 GB",
    why="IEEE DataPort hands out its files only to signed-in users, and publishes no checksums",
    steps=("sign in to IEEE DataPort (a free account) and download UniToPatho from that page",
           "unpack it so that DIR/800/train.csv, DIR/800/test.csv and DIR/800/<class>/*.png exist "
           "(the 7000 subset is not read)"))
BCSS = Manual(
    title="BCSS (Breast Cancer Semantic Segmentation)", page="https://github.com/PathologyDataScience/BCSS",
    licence="CC0 1.0 (https://creativecommons.org/publicdomain/zero/1.0/)", size="about 5 GB",
    why="the 0.25 um/px release is a Google Drive folder without checksums, which evalsuite does not fetch",
    steps=("download the folder linked under 'Download (single link - convenient)' on that page",
           "put it so that DIR/rgbs_colorNormalized/TCGA-*.png and DIR/masks/TCGA-*.png (same names) exist"))

SOURCES = {"gleason_arvaniti": GLEASON_ARVANITI, "unitopatho": UNITOPATHO, "bcss": BCSS}
