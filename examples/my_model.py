"""Measure your own model with dlperf.

    dlperf run --workloads examples/my_model.py:make --threads 1,2

or from Python:

    python examples/my_model.py

A factory is any module-level function of no arguments (or of `data_dir`, the folder `--data DIR` names) that
returns `dlperf.user_workload(...)`. It runs only in
dlperf's child processes (the probe and the worker), where the framework is imported with its thread count fixed.
"""

import torch
from torch import nn

import dlperf


class SmallConvNet(nn.Module):
    """A CIFAR-sized classifier: two conv blocks and a linear head."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),  # (B, 32, 16, 16)
            nn.Conv2d(32, 64, 3, padding=1),
            nn.BatchNorm2d(64),
            nn.ReLU(),
            nn.MaxPool2d(2),  # (B, 64, 8, 8)
        )
        self.head = nn.Linear(64 * 8 * 8, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))  # (B, classes)


def make_batch(batch_size: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Called once per measurement; the batch is reused for every step, already on the device."""
    images = torch.randn(batch_size, 3, 32, 32, device=device)
    labels = torch.randint(0, 10, (batch_size,), device=device)
    return images, labels


def make():
    return dlperf.user_workload(
        "small-convnet",
        SmallConvNet(),
        make_batch,
        nn.functional.cross_entropy,
        batch_size=128,
        optimizer=lambda params: torch.optim.SGD(params, lr=0.01, momentum=0.9),
    )


if __name__ == "__main__":
    outcome = dlperf.run([make], threads=[1, 2], db="dlperf.db")
    print(f"run {outcome.run_id} finished with exit code {outcome.exit_code}; see it with: dlperf table")
