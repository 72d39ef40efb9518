"""The linear probe's whole lr x weight-decay grid as one stacked weight, trained in one pass.

Each head is a multinomial logistic regression of its own; stacking their weights into one
[heads * classes, dim] matrix turns the grid's per-batch work into one matmul, one loss and one
optimiser update instead of one of each per head (9 heads, measured: about 3x less time per step on CPU).
The heads stay independent: the loss is the sum of the per-head losses, and Adam is
elementwise, so a per-row learning rate and weight decay give each head exactly the update
torch.optim.Adam would give it as parameter groups of its own (tested). Adam is written out
here because torch.optim takes one learning rate per tensor, which would undo the stacking.

Weight decay is an L2 penalty added to the gradient (torch.optim.Adam's `weight_decay`, as
THUNDER's linear probe uses), on the weights only, not the bias (the intercept of a logistic
regression is not penalised, as in scikit-learn). Each head then minimises
mean cross-entropy + weight_decay / 2 * ||W||^2, whose minimum does not depend on the
learning rate or on the number of steps. AdamW's decoupled decay, which this replaced,
multiplies the weight by (1 - lr * wd) every step, a total decay of about lr * wd * steps:
0.05 at the old grid's largest point (lr 1e-2, wd 1e-2) over the demo's 500 steps, where it
left every metric unchanged, but 15.6 over a 100k-tile task's 156k steps. Its strength
followed the dataset size, not the grid.
"""

import torch
import torch.nn.functional as F

BETAS = (0.9, 0.999)  # torch.optim.Adam's defaults
EPS = 1e-8


class LinearHeads:
    """Heads h = 0..H-1 with (lr, weight_decay) = grid[h], trained with `step(batch, target)`."""

    def __init__(self, dim: int, num_classes: int, grid: list[tuple[float, float]], device: torch.device,
                 generator: torch.Generator, class_weights: torch.Tensor | None = None):
        self.num_heads, self.num_classes = len(grid), num_classes
        # Heads initialised one after the other from the generator, as separate nn.Linear heads would be.
        bound = 1.0 / dim ** 0.5
        weight = torch.cat([torch.empty(num_classes, dim).uniform_(-bound, bound, generator=generator)
                            for _ in grid])
        self.weight = weight.to(device)
        self.bias = torch.zeros(len(grid) * num_classes, device=device)
        lr = torch.tensor([lr for lr, _ in grid]).repeat_interleave(num_classes).to(device)
        decay = torch.tensor([wd for _, wd in grid]).repeat_interleave(num_classes).to(device)
        # Per parameter: its lr and L2 coefficient shaped to broadcast over its rows (the bias is
        # not penalised), and Adam's two moment buffers.
        self.adam_state = [(self.weight, lr[:, None], decay[:, None],
                            torch.zeros_like(self.weight), torch.zeros_like(self.weight)),
                           (self.bias, lr, None, torch.zeros_like(self.bias), torch.zeros_like(self.bias))]
        self.class_weights = class_weights
        self.steps = 0

    def logits(self, batch: torch.Tensor) -> torch.Tensor:
        """[batch, heads, classes]."""
        return F.linear(batch, self.weight, self.bias).view(len(batch), self.num_heads, self.num_classes)

    @torch.no_grad()
    def step(self, batch: torch.Tensor, target: torch.Tensor) -> None:
        """One Adam step of every head on one batch. No host sync, and no autograd: the gradient of the weighted
        cross-entropy is written out, because at a batch of 64 the graph's bookkeeping cost more than the
        arithmetic (benchmarks/probe_contention.py)."""
        grad_logits = self._loss_gradient(self.logits(batch), target).view(len(batch), -1)
        self.weight.grad = grad_logits.t() @ batch
        self.bias.grad = grad_logits.new_ones(len(batch)) @ grad_logits  # a sum per column, in one order for all
        self.steps += 1
        for state in self.adam_state:
            self._adam(*state)

    def _loss_gradient(self, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        """d loss / d logits for loss = sum over heads of each head's cross-entropy, the mean over samples
        weighted by their class's weight (F.cross_entropy's `weight`, reduction "mean"): w_i (p_ih - onehot_i)
        / sum_i w_i."""
        grad = torch.softmax(logits, dim=-1)
        grad[torch.arange(len(target), device=grad.device), :, target] -= 1
        if self.class_weights is None:
            return grad.div_(len(target))
        sample_weights = self.class_weights[target]
        return grad.mul_((sample_weights / sample_weights.sum())[:, None, None])

    def head(self, index: int) -> torch.nn.Linear:
        """Head `index` as a plain nn.Linear (what the probe keeps after selection)."""
        rows = slice(index * self.num_classes, (index + 1) * self.num_classes)
        linear = torch.nn.Linear(self.weight.shape[1], self.num_classes, device=self.weight.device)
        with torch.no_grad():
            linear.weight.copy_(self.weight[rows])
            linear.bias.copy_(self.bias[rows])
        return linear.eval().requires_grad_(False)

    def _adam(self, param, lr, l2, exp_avg, exp_avg_sq) -> None:
        grad = param.grad if l2 is None else param.grad.addcmul(param, l2)  # the L2 term's gradient, l2 * w
        exp_avg.lerp_(grad, 1 - BETAS[0])
        exp_avg_sq.mul_(BETAS[1]).addcmul_(grad, grad, value=1 - BETAS[1])
        bias_correction1 = 1 - BETAS[0] ** self.steps
        bias_correction2_sqrt = (1 - BETAS[1] ** self.steps) ** 0.5
        denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(EPS)
        param.addcmul_(exp_avg / denom, lr, value=-1 / bias_correction1)
