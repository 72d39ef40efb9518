"""ABMIL probe: gated attention multiple-instance learning (Ilse et al. 2018) on each slide's tile features.

The network is eva's (src/eva/vision/models/networks/abmil.py, the head of its slide tasks): a linear
projection of each tile, gated attention (tanh branch * sigmoid branch -> one logit per tile), a softmax
over the bag's real tiles, the attention-weighted mean, then an MLP with ReLU. Bags of one batch are
padded to the longest with zeros and a mask keeps the padding out of the softmax (eva pads with -inf
and masks the same rows). Training follows eva's offline slide configs: AdamW, ConstantLR's first
epochs at a third of the lr (eva's HeadModule default scheduler, stepped per epoch), the val metric
checked after every epoch, the best epoch kept, early stopping after `patience` epochs without
improvement. Unlike eva, an epoch that ties the best val metric replaces it when its val loss is lower
(`val_loss_ties`): a metric that saturates (1.0 on an easy task) would otherwise keep its first, barely trained
epoch. Each training bag is a fresh random subset of at most `max_tiles_train` tiles every
epoch (seeded); evaluation reads every tile, bags grouped by size up to `eval_batch_tiles` padded tiles.
Survival targets train a one-output network (the risk) on the Cox loss of each batch of bags
(probes/bags/cox.py); batches are `survival_batch_size` bags so that nearly every one holds an event.
Features are read one bag at a time (the sampled rows only, while training) and upcast per bag.
"""

from typing import Literal

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from evalsuite.errors import EvalsuiteError
from evalsuite.metrics.classification import METRICS
from evalsuite.metrics.survival import SURVIVAL_METRICS
from evalsuite.probes.bags.cox import check_train_val, cox_loss
from evalsuite.probes.base import DROPOUT, NON_NEGATIVE, POSITIVE, Bound, FittedProbe
from evalsuite.probes.batches import epoch_permutation
from evalsuite.probes.pooled.linear import balanced_class_weights
from evalsuite.runtime.progress import Progress


class GatedAttentionMIL(nn.Module):
    """eva's ABMIL: projection, gated attention, masked softmax pooling, MLP; `forward(tiles, mask)` -> [b, outputs]."""

    def __init__(self, dim: int, outputs: int, projected_dim: int | None, attention_dim: int, mlp_dims,
                 dropout_input: float, dropout_attention: float, dropout_mlp: float):
        super().__init__()
        width = projected_dim or dim
        self.projector = nn.Sequential(nn.Linear(dim, width), nn.Dropout(dropout_input)) if projected_dim \
            else nn.Dropout(dropout_input)
        self.attention_a = nn.Sequential(nn.Linear(width, attention_dim), nn.Dropout(dropout_attention), nn.Tanh())
        self.attention_b = nn.Sequential(nn.Linear(width, attention_dim), nn.Dropout(dropout_attention), nn.Sigmoid())
        self.attention_c = nn.Linear(attention_dim, 1)
        layers = []
        for size in mlp_dims:
            layers += [nn.Linear(width, size), nn.ReLU()] + ([nn.Dropout(dropout_mlp)] if dropout_mlp > 0 else [])
            width = size
        self.classifier = nn.Sequential(*layers, nn.Linear(width, outputs))

    def forward(self, tiles: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """`tiles` float32 [b, n, D] (padding zero), `mask` bool [b, n], True on a bag's real tiles."""
        projected = self.projector(tiles)
        logits = self.attention_c(self.attention_a(projected) * self.attention_b(projected)).squeeze(-1)
        weights = torch.softmax(logits.masked_fill(~mask, float("-inf")), dim=1)  # padding gets weight 0
        return self.classifier(torch.bmm(weights.unsqueeze(1), projected).squeeze(1))


def padded_batch(bags, indices, tiles_of_bag, read, device: torch.device, staging=None):
    """(float32 tiles [b, longest, D] zero-padded, bool mask [b, longest]) of the bags `indices`; `read(index)` gives
    a bag's float16 rows, upcast as they are copied in, so at most one bag is ever float16 outside the batch.
    `staging` (a StagingBuffer) lends the batch its memory instead of a fresh zeroed tensor."""
    longest = int(max(tiles_of_bag))
    if staging is None:
        tiles = torch.zeros(len(indices), longest, bags.dim, device=device)
    else:
        tiles = staging.take(len(indices), longest, bags.dim)
    for row, index in enumerate(indices):
        tiles[row, : tiles_of_bag[row]] = torch.from_numpy(read(index)).to(device)
        if staging is not None:
            tiles[row, tiles_of_bag[row] :] = 0
    mask = torch.arange(longest, device=device)[None, :] < torch.as_tensor(tiles_of_bag, device=device)[:, None]
    return tiles, mask


class StagingBuffer:
    """One float32 allocation reused by every padded batch of a fit. A fresh [32, 1,000, D] tensor per step was
    allocated, faulted in and zeroed anew (196 MB at D 1536): 14 % of a Camelyon16-sized fit's time in a profile.
    A step's graph is freed before the next batch is written, so reusing the memory is safe."""

    def __init__(self, device: torch.device):
        self.device, self.storage = device, None

    def take(self, rows: int, longest: int, dim: int) -> torch.Tensor:
        needed = rows * longest * dim
        if self.storage is None or self.storage.numel() < needed:
            self.storage = None  # the smaller one is freed before the larger one is allocated
            self.storage = torch.empty(needed, device=self.device)
        return self.storage[:needed].view(rows, longest, dim)


def sampled_rows(bags, index: int, max_tiles: int, generator: torch.Generator) -> np.ndarray:
    """At most `max_tiles` random tiles of bag `index` (all if it has fewer), reading only those rows."""
    tiles = int(bags.tile_counts[index])
    if tiles <= max_tiles:
        return bags.bag(index)
    picked = torch.randperm(tiles, generator=generator)[:max_tiles].sort().values.numpy()
    return bags.bag_rows(index, picked)


def size_groups(tile_counts: np.ndarray, budget_tiles: int) -> list[np.ndarray]:
    """Bags grouped by ascending size so a group's padded tiles stay within `budget_tiles`; a bag over it alone."""
    groups, current = [], []
    for index in np.argsort(tile_counts, kind="stable"):
        # Ascending order: this bag is the group's longest, so the padded size is (members + 1) * its tiles.
        if current and (len(current) + 1) * int(tile_counts[index]) > budget_tiles:
            groups.append(np.array(current))
            current = []
        current.append(index)
    return groups + [np.array(current)] if current else groups


def _cuda_indices(device: torch.device) -> list[int]:
    """The CUDA device whose RNG state a fit forks (none on CPU)."""
    if device.type != "cuda":
        return []
    return [device.index if device.index is not None else torch.cuda.current_device()]


class ABMILProbe(FittedProbe):
    inputs = "bags"  # features.bags.SlideBags: a slide task's cache, one bag of tiles per slide
    # mlp_dims are layer widths ([]: none); warmup_lr_factor is torch's ConstantLR factor, within [0, 1].
    PARAM_RULES = {"mlp_dims": Bound(1, layers=True), "dropout_input": DROPOUT, "dropout_attention": DROPOUT,
                   "dropout_mlp": DROPOUT, "lr": POSITIVE, "weight_decay": NON_NEGATIVE, "patience": NON_NEGATIVE,
                   "warmup_lr_factor": Bound(0, 1), "warmup_epochs": NON_NEGATIVE}

    def __init__(self, num_classes: int, projected_dim: int | None = 128, attention_dim: int = 128,
                 mlp_dims: list[int] = (128, 64), dropout_input: float = 0.0, dropout_attention: float = 0.0,
                 dropout_mlp: float = 0.0, lr: float = 1e-3, weight_decay: float = 0.01, epochs: int = 100,
                 patience: int | None = 20, batch_size: int = 32, survival_batch_size: int = 64,
                 max_tiles_train: int = 1000, eval_batch_tiles: int = 16384,
                 class_weight: Literal["balanced"] | None = None,
                 warmup_lr_factor: float = 1 / 3, warmup_epochs: int = 5, val_loss_ties: bool = True,
                 device: torch.device | str = "cpu", seed: int = 0):
        self.num_classes = num_classes
        self.network_params = {"projected_dim": projected_dim, "attention_dim": attention_dim,
                               "mlp_dims": tuple(mlp_dims), "dropout_input": dropout_input,
                               "dropout_attention": dropout_attention, "dropout_mlp": dropout_mlp}
        self.lr, self.weight_decay = float(lr), float(weight_decay)
        self.epochs, self.patience = int(epochs), patience  # patience None: no early stop
        if self.epochs < 1:
            raise EvalsuiteError(f"abmil probe: epochs must be >= 1, got {epochs}; check the recipe's params")
        self.batch_size, self.survival_batch_size = int(batch_size), int(survival_batch_size)
        self.max_tiles_train, self.eval_batch_tiles = int(max_tiles_train), int(eval_batch_tiles)
        self.class_weight = class_weight
        self.warmup_lr_factor, self.warmup_epochs = float(warmup_lr_factor), int(warmup_epochs)
        if not isinstance(val_loss_ties, bool):  # YAML's "no" is False, but a quoted "false" would be truthy
            raise EvalsuiteError(f"abmil probe: val_loss_ties must be true or false, got {val_loss_ties!r}; "
                                 "check the recipe's params")
        self.val_loss_ties = val_loss_ties
        self.device = torch.device(device)
        self.seed = seed

    def fit(self, bags, targets, val_bags, val_targets, selection_metric: str = "balanced_accuracy"):
        self.survival_, targets, val_targets = check_train_val("abmil", bags, targets, val_bags, val_targets,
                                                                self.num_classes)
        score = (SURVIVAL_METRICS if self.survival_ else METRICS)[selection_metric]
        # A private copy of the global RNGs, seeded: the network's init and dropout masks follow the seed, and the
        # caller's random state is left as it was.
        with torch.random.fork_rng(devices=_cuda_indices(self.device)):
            torch.manual_seed(self.seed)
            outputs = 1 if self.survival_ else self.num_classes
            self.model_ = GatedAttentionMIL(bags.dim, outputs, **self.network_params).to(self.device)
            self._staging = StagingBuffer(self.device)
            try:
                best_epoch, best_score, best_loss, epochs_run = self._train(bags, targets, val_bags, val_targets,
                                                                            score)
            finally:
                del self._staging  # a fitted probe keeps no batch memory
        # "epoch": how many epochs the kept weights had trained, 1 for the first.
        self.selected_params_ = {"epoch": best_epoch + 1, "val_" + selection_metric: best_score,
                                 "val_loss": None if np.isnan(best_loss) else best_loss, "epochs_trained": epochs_run}
        return self

    def predict_proba(self, bags) -> np.ndarray:
        """float32 [slides, classes] softmax probabilities."""
        self._require(survival=False)
        return torch.softmax(torch.from_numpy(self._outputs(bags)), dim=1).numpy()

    def predict_risk(self, bags) -> np.ndarray:
        """float32 [slides]: higher = shorter expected survival."""
        self._require(survival=True)
        return self._outputs(bags)[:, 0].copy()

    def _require(self, survival: bool) -> None:
        if getattr(self, "survival_", None) is None:
            raise RuntimeError("fit the abmil probe before predicting")
        if self.survival_ != survival:
            raise RuntimeError(f"this abmil probe was fit on {'survival' if self.survival_ else 'class'} targets; "
                               f"call {'predict_risk' if self.survival_ else 'predict_proba'}")

    def _train(self, bags, targets, val_bags, val_targets, score) -> tuple[int, float, float, int]:
        """Train, keeping the weights of the best val epoch; (its epoch, score, val loss, epochs run).

        Best: the highest val score, and of equal scores the lowest val loss when `val_loss_ties` (else the first, as
        Lightning's ModelCheckpoint in eva). Patience counts epochs since the last new best, so a saturated score
        whose val loss still falls keeps training (eva's EarlyStopping on the score alone would stop it)."""
        optimizer = torch.optim.AdamW(self.model_.parameters(), lr=self.lr, betas=(0.9, 0.999),
                                      weight_decay=self.weight_decay)
        # ConstantLR with total_iters=0 would keep the factor for good (torch's rule), hence none without warm-up.
        scheduler = torch.optim.lr_scheduler.ConstantLR(optimizer, factor=self.warmup_lr_factor,
                                                        total_iters=self.warmup_epochs) if self.warmup_epochs else None
        # Tile subsets come from their own generator, drawn on through the epochs: new subsets every epoch.
        tile_generator = torch.Generator().manual_seed(int(np.random.SeedSequence([self.seed, 1]).generate_state(1)[0]))
        # The val loss is the training objective on val, its class weights (class_weight: balanced) from val's own
        # labels: it only orders epochs tied on the val score.
        loss_of, val_loss_of = self._loss_function(targets), self._loss_function(val_targets)
        best, best_key = None, None  # best: (epoch, score, val loss, weights)
        progress = Progress("abmil", self.epochs)
        for epoch in range(self.epochs):
            self._train_epoch(bags, loss_of, optimizer, epoch, tile_generator)
            if scheduler is not None:
                scheduler.step()
            value, val_loss = self._val_check(val_bags, val_targets, score, val_loss_of)
            progress.update(epoch + 1, f"val score {value:.4f}, val loss {val_loss:.4f}")
            key = (np.nan_to_num(value, nan=-np.inf), -np.nan_to_num(val_loss, nan=np.inf) if self.val_loss_ties else 0)
            if best is None or key > best_key:
                best_key = key
                best = (epoch, value, val_loss, {k: v.detach().clone() for k, v in self.model_.state_dict().items()})
            elif self.patience is not None and epoch - best[0] >= self.patience:
                break  # as Lightning's EarlyStopping(patience, min_delta=0), which eva's configs use
        progress.close(f"kept epoch {best[0] + 1}, val score {best[1]:.4f}"
                       + (" (early stop)" if epoch + 1 < self.epochs else ""))
        self.model_.load_state_dict(best[3])
        return best[0], best[1], best[2], epoch + 1

    def _train_epoch(self, bags, loss_of, optimizer, epoch: int, tile_generator: torch.Generator) -> None:
        self.model_.train()
        order = epoch_permutation(len(bags), self.seed, epoch).numpy()
        batch_size = self.survival_batch_size if self.survival_ else self.batch_size
        tile_counts = np.minimum(bags.tile_counts, self.max_tiles_train)
        for start in range(0, len(order), batch_size):
            self._train_step(bags, order[start : start + batch_size], tile_counts, loss_of, optimizer, tile_generator)

    def _train_step(self, bags, indices, tile_counts, loss_of, optimizer, tile_generator) -> None:
        # One step per call: its padded batch and graph are freed on return, before the next batch is built (in
        # the loop body they stayed alive while the next one was padded: two batches at the peak).
        tiles, mask = padded_batch(bags, indices, tile_counts[indices], device=self.device, staging=self._staging,
                                   read=lambda i: sampled_rows(bags, i, self.max_tiles_train, tile_generator))
        loss = loss_of(self.model_(tiles, mask), torch.from_numpy(indices).to(self.device))
        if loss is None:
            return
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()

    def _loss_function(self, targets: np.ndarray):
        """loss(outputs [b, outputs], slide indices [b]) -> scalar, or None for a survival batch without events."""
        targets = torch.as_tensor(np.array(targets)).to(self.device)
        if self.survival_:
            def survival_loss(outputs, indices):
                time, event = targets[indices, 0], targets[indices, 1]
                return cox_loss(outputs[:, 0], time, event) if bool(event.any()) else None
            return survival_loss
        weights = balanced_class_weights(targets.cpu().numpy(), self.num_classes).to(self.device) \
            if self.class_weight == "balanced" else None
        return lambda outputs, indices: F.cross_entropy(outputs, targets[indices], weight=weights)

    def _val_check(self, val_bags, val_targets, score, val_loss_of) -> tuple[float, float]:
        """(val score, val loss: the training loss over all of val, nan for survival without an event)."""
        outputs = self._outputs(val_bags)
        predictions = outputs[:, 0] if self.survival_ else torch.softmax(torch.from_numpy(outputs), dim=1).numpy()
        loss = val_loss_of(torch.from_numpy(outputs).to(self.device), torch.arange(len(val_bags), device=self.device))
        return float(score(val_targets, predictions)), float("nan") if loss is None else float(loss)

    @torch.no_grad()
    def _outputs(self, bags) -> np.ndarray:
        """float32 [slides, outputs] from every tile of each bag, in slide order."""
        self.model_.eval()
        counts = bags.tile_counts
        out = np.empty((len(bags), self.model_.classifier[-1].out_features), dtype=np.float32)
        for group in size_groups(counts, self.eval_batch_tiles):
            out[group] = self._group_outputs(bags, group, counts)
        return out

    def _group_outputs(self, bags, group, counts) -> np.ndarray:
        tiles, mask = padded_batch(bags, group, counts[group], read=bags.bag, device=self.device,
                                   staging=getattr(self, "_staging", None))
        return self.model_(tiles, mask).float().cpu().numpy()  # the padded group is freed on return
