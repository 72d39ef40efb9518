"""The stacked grid of linear heads trains each head exactly as torch would train it alone."""

import pytest
import torch

from evalsuite.probes.pooled.linear_heads import LinearHeads

GRID = [(1e-2, 0.0), (1e-2, 1e-2), (1e-3, 1e-4), (1e-4, 0.0), (1e-3, 1e-1)]


def reference_heads(dim, classes, grid, generator, class_weights):
    """One nn.Linear per grid point, torch.optim.Adam with the head's L2 weight decay on its weight (not its
    bias), summed weighted CE."""
    heads = []
    bound = 1.0 / dim ** 0.5
    for _ in grid:
        head = torch.nn.Linear(dim, classes)
        with torch.no_grad():
            head.weight.copy_(torch.empty(classes, dim).uniform_(-bound, bound, generator=generator))
            head.bias.zero_()
        heads.append(head)
    groups = [[{"params": [h.weight], "lr": lr, "weight_decay": wd}, {"params": [h.bias], "lr": lr, "weight_decay": 0.0}]
              for h, (lr, wd) in zip(heads, grid)]
    optimizer = torch.optim.Adam([group for pair in groups for group in pair])
    loss_fn = torch.nn.CrossEntropyLoss(weight=class_weights)

    def step(batch, target):
        loss = sum(loss_fn(h(batch), target) for h in heads)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return heads, step


@pytest.mark.parametrize("class_weights", [None, torch.tensor([0.5, 2.0, 1.0])])
@pytest.mark.parametrize("device", [torch.device("cpu")])
def test_stacked_heads_match_separate_torch_adam_heads_with_l2_on_the_weights(class_weights, device):
    dim, classes = 12, 3
    data = torch.Generator().manual_seed(1)
    batches = [(torch.randn(16, dim, generator=data), torch.randint(0, classes, (16,), generator=data))
               for _ in range(25)]
    stacked = LinearHeads(dim, classes, GRID, device, torch.Generator().manual_seed(5), class_weights)
    reference, reference_step = reference_heads(dim, classes, GRID, torch.Generator().manual_seed(5), class_weights)
    for batch, target in batches:
        stacked.step(batch.to(device), target.to(device))
        reference_step(batch, target)
    for index, head in enumerate(reference):
        exported = stacked.head(index)
        assert torch.allclose(exported.weight.cpu(), head.weight, atol=1e-6, rtol=1e-5), index
        assert torch.allclose(exported.bias.cpu(), head.bias, atol=1e-6, rtol=1e-5), index
        batch = batches[0][0]
        assert torch.allclose(stacked.logits(batch.to(device))[:, index].cpu(), head(batch), atol=1e-5)


def test_heads_differ_by_their_grid_point():
    heads = LinearHeads(8, 2, [(1e-1, 0.0), (1e-4, 0.0)], torch.device("cpu"), torch.Generator().manual_seed(0))
    start = [heads.head(i).weight.detach().clone() for i in range(2)]
    batch, target = torch.randn(32, 8), torch.randint(0, 2, (32,))
    for _ in range(5):
        heads.step(batch, target)
    moved = [float((heads.head(i).weight - start[i]).abs().max()) for i in range(2)]
    assert moved[0] > 50 * moved[1] > 0


def test_the_largest_weight_decay_shrinks_the_weights_measurably():
    """Overlapping classes, so wd 0 keeps growing the weights; the largest L2 weight decay of the recipe must hold
    them back (AdamW's decoupled decay at this lr did not: lr * wd * steps = 0.06, a few % at most)."""
    import yaml
    from conftest import REPO

    from evalsuite.probes.pooled.linear import LinearProbe

    largest = max(yaml.safe_load((REPO / "probes" / "linear.yaml").read_text())["params"]["weight_decay"])
    data = torch.Generator().manual_seed(3)
    centres = torch.randn(3, 32, generator=data) * 0.5
    labels = torch.arange(300) % 3
    features = (centres[labels] + torch.randn(300, 32, generator=data)).half().numpy()
    probe = LinearProbe(3, lr=[1e-2], weight_decay=[0.0, largest], epochs=60, batch_size=32)
    heads = probe._train_heads(features, labels.numpy())
    free, decayed = (float(heads.head(h).weight.norm()) for h in range(2))
    assert decayed < 0.7 * free, (free, decayed)  # measured at wd 1e-2: 5.08 vs 3.14 (AdamW decoupled: 4.61)


def test_weight_decay_does_not_touch_the_bias():
    """With all-zero features the cross-entropy moves only the bias; the L2 term only the weight."""
    heads = LinearHeads(4, 3, [(1e-2, 0.0), (1e-2, 1e-1)], torch.device("cpu"), torch.Generator().manual_seed(0))
    start = heads.weight.detach().clone()
    batch, target = torch.zeros(30, 4), torch.arange(30) % 3 // 2  # classes 0 and 1 only
    for _ in range(20):
        heads.step(batch, target)
    free, decayed = heads.head(0), heads.head(1)
    assert torch.equal(free.weight, start[:3])  # no gradient, no decay
    assert float(decayed.weight.norm()) < 0.9 * float(start[3:].norm())
    assert torch.equal(free.bias, decayed.bias) and float(free.bias.abs().max()) > 0.1
