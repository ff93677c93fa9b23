"""Built-in networks at a batch other than the paper's, for `dlperf run --profile` (benchmarks/gpu_check.py): a
workload's batch is part of its definition, so a larger one is a user workload made from the built-in's own model,
loss and optimizer (`dlperf.training_parts`).

    dlperf profile benchmarks/workloads/big_batch.py:resnet50_b256 --device cuda:0
"""

import torch

import dlperf
from dlperf.workloads import BUILTIN


def at_batch(builtin: str, batch: int, name: str):
    model, optimizer, loss_fn, x, _ = dlperf.training_parts(builtin)
    shape, classes = tuple(x.shape[1:]), BUILTIN[builtin].outputs

    def make_batch(batch_size: int, device: torch.device):
        return torch.randn(batch_size, *shape, device=device), torch.randint(0, classes, (batch_size,), device=device)

    def same_optimizer(params):
        return type(optimizer)(params, **optimizer.defaults)

    return dlperf.user_workload(name, model, make_batch, loss_fn, batch_size=batch, optimizer=same_optimizer)


def resnet50_b256():
    """ResNet-50 at batch 256: enough work per kernel that a GPU's step is bound by its arithmetic, not launches."""
    return at_batch("resnet-50", 256, "resnet-50-b256")


def tiny_resnet50_b64():
    return at_batch("tiny-resnet-50", 64, "tiny-resnet-50-b64")
