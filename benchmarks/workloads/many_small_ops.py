"""A step bound by dispatching operators, not by their work, on a CPU: 24 residual blocks of a 32-wide linear layer,
layer norm and GELU at batch 16, so each of its ~500 operators per step does a few thousand FLOPs. What
benchmarks/optimize_order.py searches to see the verdict order a launch-bound step's search (the paper's networks
are all compute-bound on a CPU at their batch sizes).

    dlperf optimize benchmarks/workloads/many_small_ops.py:make --threads 1
"""

import torch
from torch import nn

import dlperf

WIDTH, DEPTH, BATCH = 32, 24, 16


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear, self.norm = nn.Linear(WIDTH, WIDTH), nn.LayerNorm(WIDTH)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + nn.functional.gelu(self.norm(self.linear(x)))


class ManySmallOps(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.Sequential(*(Block() for _ in range(DEPTH)))
        self.head = nn.Linear(WIDTH, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.blocks(x))


def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.randn(batch_size, WIDTH, device=device), torch.randint(0, 10, (batch_size,), device=device)


def make():
    return dlperf.user_workload(
        "many-small-ops", ManySmallOps(), make_batch, nn.functional.cross_entropy, batch_size=BATCH,
        optimizer=lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9),
    )  # fmt: skip
