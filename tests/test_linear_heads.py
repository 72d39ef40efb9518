"""The stacked grid of linear heads trains each head exactly as torch would train it alone."""

import pytest
import torch

from evalsuite.probes.linear_heads import LinearHeads

GRID = [(1e-2, 0.0), (1e-2, 1e-2), (1e-3, 1e-4), (1e-4, 0.0)]


def reference_heads(dim, classes, grid, generator, class_weights):
    """One nn.Linear per grid point, one AdamW parameter group each, summed weighted CE."""
    heads = []
    bound = 1.0 / dim ** 0.5
    for _ in grid:
        head = torch.nn.Linear(dim, classes)
        with torch.no_grad():
            head.weight.copy_(torch.empty(classes, dim).uniform_(-bound, bound, generator=generator))
            head.bias.zero_()
        heads.append(head)
    optimizer = torch.optim.AdamW([{"params": h.parameters(), "lr": lr, "weight_decay": wd}
                                   for h, (lr, wd) in zip(heads, grid)])
    loss_fn = torch.nn.CrossEntropyLoss(weight=class_weights)

    def step(batch, target):
        loss = sum(loss_fn(h(batch), target) for h in heads)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return heads, step


@pytest.mark.parametrize("class_weights", [None, torch.tensor([0.5, 2.0, 1.0])])
@pytest.mark.parametrize("device", [torch.device("cpu")])
def test_stacked_heads_match_separate_torch_adamw_heads(class_weights, device):
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
