"""The peers' published figures (package data, evalsuite/data/published/*.csv), matched to the rows a user ran.

A figure is shown beside a user's cell of the same model, task and metric, never as a row of its own: it is not
ranked, not averaged and not in any best set, and a model the user did not run gets none. A cell whose model carries
a weights suffix (`uni+random-init`, `uni+<checkpoint stem>`) gets the figure of its base name, flagged as published
for other weights than the cell's.

Each CSV row holds our model (registry name), task (card name) and metric names, the value exactly as published, the
peer, the peer's own model name, the source file, the peer's version and the commit it was copied from, the peer's
protocol and how it differs from ours (one phrase each). The numbers were copied from:
- kaiko-ai/eva tools/data/leaderboards/pathology.csv at tag 0.4.5 (82071009006aa003b4fea84688fad5b16b4217eb; the
  same file at 73b61a797bfda8daf232f6abea2bc87ac614589c): eva pools the class token, so Virchow2, H0-mini and
  Midnight map to our `-cls` entries; the `/test` columns for PCam, Camelyon16-small and PANDA-small;
- mahmoodlab/HEST README.md at afd42c3143092c51e6bcc0f1df65bbf58a467e5e (HEST-Benchmark results of 08.30.24; the
  pooling per encoder read in src/hest/bench/cpath_model_zoo/inference_models.py at the same commit);
- owkin/plism-benchmark README.md at b4f32b7c233e0f5ba8340da89ef65803cfc2ce49 (the leaderboard of 03/03/2025; the
  pooling per extractor read in plismbench/models/*.py at the same commit);
- MICS-Lab/thunder docs/leaderboards.md at 05eb5dc1d0b17a85886ddf924bf73bf4bc725b12 (the per-dataset linear probing
  table of 2026-04-01, read in the fork MedARC-AI/thunder, which carries that commit; its SPIDER columns equal the
  site's SPIDER table on MICS-Lab's gh-pages): macro F1 in percent, stored as a fraction; the pooling per model read
  in src/thunder/models/pretrained_models.py (e584c7e) and its model configs.
Peer models with no registry entry of the same weights and pooling (eva's kaiko_vitb8, kaiko_vits8, lunit_vits16;
HEST's ResNet50 (truncated), Remedis, UNIv1.5; plismbench's Kaiko ViT-B/8; THUNDER's CONCH 1.5, MUSK, QuiltNet-B-32,
OpenMidnight) are left out.
"""

import csv
import io
from dataclasses import dataclass
from importlib import resources

from evalsuite.errors import EvalsuiteError

COLUMNS = ("model", "task", "metric", "value", "peer", "peer_model", "source_file", "version", "commit", "protocol",
           "protocol_difference")
FOLDER = ("data", "published")  # under the evalsuite package


@dataclass(frozen=True)
class PublishedFigure:
    model: str
    task: str
    metric: str
    value: float
    value_text: str  # as published ("0.2670": the digits the peer printed)
    peer: str
    peer_model: str
    source_file: str
    version: str
    commit: str
    protocol: str
    protocol_difference: str
    other_weights: str = ""  # the user's cell's weights suffix ("random-init") when it is not the published model

    def source(self) -> str:
        """"published: eva 0.4.5, kaiko-ai/eva tools/data/... at 8207100": where the number comes from, one line."""
        return f"published: {self.peer} {self.version}, {self.source_file} at {self.commit[:7]}"

    def difference(self) -> str:
        """How the peer's protocol differs from ours, and that the user's weights differ when they do."""
        # The suffix is a run's own: random-init, a checkpoint's stem, or pooling=RULE (another embedding of the model).
        weights = f"; your row is {self.model}+{self.other_weights}, not {self.model} as published" \
            if self.other_weights else ""
        return self.protocol_difference + weights


def load_published() -> list[PublishedFigure]:
    """Every published figure shipped with evalsuite, file by file in name order."""
    folder = resources.files("evalsuite").joinpath(*FOLDER)
    if not folder.is_dir():
        return []
    figures = []
    for entry in sorted(folder.iterdir(), key=lambda item: item.name):
        if entry.name.endswith(".csv"):
            figures += _read(entry.name, entry.read_text(encoding="utf-8"))
    return figures


def _read(name: str, text: str) -> list[PublishedFigure]:
    reader = csv.DictReader(io.StringIO(text))
    if tuple(reader.fieldnames or ()) != COLUMNS:
        raise EvalsuiteError(f"evalsuite/data/published/{name}: header is not {','.join(COLUMNS)}; reinstall "
                             "evalsuite or correct the file")
    try:
        return [PublishedFigure(**{**row, "value": float(row["value"]), "value_text": row["value"]}) for row in reader]
    except (TypeError, ValueError):
        raise EvalsuiteError(f"evalsuite/data/published/{name} line {reader.line_num}: not a published figure "
                             "(a value that is no number, or a missing field); reinstall evalsuite or correct the "
                             "file") from None


def base_model(model: str) -> tuple[str, str]:
    """('uni', 'random-init') for 'uni+random-init'; ('uni', '') for 'uni'."""
    base, _, suffix = model.partition("+")
    return base, suffix


def figures_beside(table, figures: list | None = None) -> dict:
    """{(model, task): PublishedFigure} for every cell of a WideTable of the test split that has a published figure
    of its model's base name, task and shown metric; {} for other splits (the figures are test figures)."""
    if table.split != "test":
        return {}
    published = {(f.model, f.task, f.metric): f for f in (load_published() if figures is None else figures)}
    found = {}
    for row in table.rows:
        base, suffix = base_model(row.model)
        for task in row.cells:
            figure = published.get((base, task, table.metrics.get(task)))
            if figure:
                found[(row.model, task)] = PublishedFigure(**{**figure.__dict__, "other_weights": suffix})
    return found


def add_published(table):
    """`table` with its `published` field filled (figures_beside); the same object, returned for chaining."""
    table.published = figures_beside(table)
    return table
