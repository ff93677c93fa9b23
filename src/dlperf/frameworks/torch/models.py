"""The seven networks of Shi et al. (2016) as small PyTorch modules, built from a `Workload`'s `arch` and `config`.

Each class follows shared/reference/shi2016.md layer by layer; the full-size configurations give exactly the parameter
counts printed there (tests/frameworks/torch/test_torch_models.py checks every one). Shapes in comments use B for the
mini-batch, C/H/W for channels and image size, T for the sequence length and V for the vocabulary.
"""

from __future__ import annotations

from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import nn

from dlperf.frameworks.torch import models_published
from dlperf.workloads.base import Workload


def _out_size(size: int, kernel: int = 3, stride: int = 2, padding: int = 0) -> int:
    """Side length after a convolution or pooling window (PyTorch rounds down, no dilation)."""
    return (size + 2 * padding - kernel) // stride + 1


# ----------------------------------------------------------------------------------------------------------------------
# FCN-S and FCN-R: a plain multi-layer perceptron


ACTIVATIONS = {"sigmoid": torch.sigmoid, "relu": F.relu}


class FCN(nn.Module):
    """Linear layers over `widths`, an activation between each pair (sigmoid: the paper's choice; relu: Keras's
    mnist_mlp), each followed by dropout when `dropout` > 0; raw logits at the end."""

    def __init__(self, widths: list[int], activation: str = "sigmoid", dropout: float = 0.0) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in pairwise(widths))
        self.activation = ACTIVATIONS[activation]
        # No module at all without dropout: the paper's networks keep the modules a profile lists.
        self.dropout = nn.Dropout(dropout) if dropout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, widths[0])
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = self.activation(x)
                x = self.dropout(x) if self.dropout is not None else x
        return x  # (B, widths[-1])


# ----------------------------------------------------------------------------------------------------------------------
# AlexNet-S: single-column AlexNet ("one weird trick"), without LRN and dropout


class AlexNet(nn.Module):
    """With `dropout` > 0, dropout before each hidden fully connected layer, as torchvision's AlexNet."""

    def __init__(self, channels: list[int], fc: list[int], image: int, outputs: int, dropout: float = 0.0) -> None:
        super().__init__()
        c1, c2, c3, c4, c5 = channels
        self.features = nn.Sequential(
            nn.Conv2d(3, c1, 11, stride=4, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),  # 224 -> 55 -> 27
            nn.Conv2d(c1, c2, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),  # -> 27 -> 13
            nn.Conv2d(c2, c3, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c3, c4, 3, padding=1), nn.ReLU(),
            nn.Conv2d(c4, c5, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2),  # -> 13 -> 6
        )  # fmt: skip
        # The flatten size follows from the image size, so no lazy module is needed (and meta-device builds work):
        # conv1 (11/4, pad 2), then three 3/2 max-pools; the padded convolutions in between keep the size.
        side = _out_size(_out_size(_out_size(_out_size(image, 11, 4, 2))))
        widths = [c5 * side * side, *fc, outputs]  # 9216, 4096, 4096, 1000 for AlexNet-S
        layers: list[nn.Module] = []
        for i, (a, b) in enumerate(pairwise(widths)):
            drop = [nn.Dropout(dropout)] if dropout and i < len(widths) - 2 else []
            layers += [*drop, nn.Linear(a, b), nn.ReLU()]
        self.classifier = nn.Sequential(*layers[:-1])  # no ReLU on the logits

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W)
        x = self.features(x)  # (B, C5, 6, 6)
        return self.classifier(x.flatten(1))  # (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# ResNet-50: the ImageNet bottleneck ResNet, structured like torchvision's so the parameter count matches it


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1) -> list[nn.Module]:
    # Bias-free convolutions: the BatchNorm that follows has its own shift.
    return [nn.Conv2d(cin, cout, kernel, stride, padding=kernel // 2, bias=False), nn.BatchNorm2d(cout)]


class ImageNetBlock(nn.Module):
    """A residual block whose shortcut is a projection only where the shape changes; ReLU after the add."""

    def __init__(self, body: list[nn.Module], cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = nn.Sequential(*body)
        changes = stride != 1 or cin != cout
        self.shortcut = nn.Sequential(*_conv_bn(cin, cout, 1, stride)) if changes else nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, cin, H, W)
        return F.relu(self.body(x) + self.shortcut(x))  # (B, cout, H/stride, W/stride)


class Bottleneck(ImageNetBlock):
    """1x1 reduce, 3x3, 1x1 expand. The 3x3 carries the stride (torchvision's "ResNet v1.5"); with `stride_on_1x1`
    the first 1x1 does (the original ResNet v1, fb.resnet.torch and tf_cnn_benchmarks), which then computes a quarter
    of the outputs: v1 is the cheaper step."""

    def __init__(self, cin: int, width: int, cout: int, stride: int, stride_on_1x1: bool = False) -> None:
        s1, s3 = (stride, 1) if stride_on_1x1 else (1, stride)
        body = [
            *_conv_bn(cin, width, 1, s1), nn.ReLU(),
            *_conv_bn(width, width, 3, s3), nn.ReLU(),
            *_conv_bn(width, cout, 1),
        ]  # fmt: skip
        super().__init__(body, cin, cout, stride)


class Basic(ImageNetBlock):
    """Two 3x3 convolutions, the first carrying the stride: ResNet-18 and -34 (expansion 1)."""

    def __init__(self, cin: int, width: int, cout: int, stride: int, stride_on_1x1: bool = False) -> None:
        super().__init__([*_conv_bn(cin, width, 3, stride), nn.ReLU(), *_conv_bn(width, cout, 3)], cin, cout, stride)


BLOCKS = {"bottleneck": Bottleneck, "basic": Basic}


class ResNetImageNet(nn.Module):
    def __init__(
        self,
        blocks: list[int],
        widths: list[int],
        expansion: int,
        outputs: int,
        block: str = "bottleneck",
        stride_on: str = "3x3",
    ) -> None:
        super().__init__()
        stem = widths[0]
        # 7x7/2 convolution and 3x3/2 max-pool: 224 -> 112 -> 56
        self.stem = nn.Sequential(*_conv_bn(3, stem, 7, 2), nn.ReLU(), nn.MaxPool2d(3, 2, padding=1))
        stages, cin = [], stem
        for i, (n, width) in enumerate(zip(blocks, widths, strict=True)):
            for j in range(n):
                stride = 2 if i > 0 and j == 0 else 1  # every stage but the first halves the resolution
                stages.append(BLOCKS[block](cin, width, width * expansion, stride, stride_on == "1x1"))
                cin = width * expansion
        self.stages = nn.Sequential(*stages)  # (B, 2048, 7, 7) from 224
        self.fc = nn.Linear(cin, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W)
        x = self.stages(self.stem(x))
        return self.fc(x.mean((2, 3)))  # global average pool, (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# AlexNet-R: cuda-convnet's "layers-18pct" CIFAR-10 net, LRN removed


class AlexNetCifar(nn.Module):
    def __init__(self, channels: list[int], image: int, outputs: int) -> None:
        super().__init__()
        c1, c2, c3 = channels
        # The original's order is kept: the first block pools before its ReLU, the others after.
        self.features = nn.Sequential(
            nn.Conv2d(3, c1, 5, padding=2), nn.MaxPool2d(3, 2), nn.ReLU(),  # 32 -> 15
            nn.Conv2d(c1, c2, 5, padding=2), nn.ReLU(), nn.MaxPool2d(3, 2),  # -> 7
            nn.Conv2d(c2, c3, 5, padding=2), nn.ReLU(), nn.AvgPool2d(3, 2),  # -> 3
        )  # fmt: skip
        side = _out_size(_out_size(_out_size(image)))
        self.fc = nn.Linear(c3 * side * side, outputs)  # 576 -> 10 for AlexNet-R

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, 32, 32)
        return self.fc(self.features(x).flatten(1))  # (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# ResNet-56: He et al.'s CIFAR ResNet, 6n+2 layers, parameter-free "option A" shortcuts


class BasicBlock(nn.Module):
    """conv-BN-ReLU-conv-BN plus the shortcut; the reference applies no ReLU after the add."""

    def __init__(self, cin: int, cout: int, stride: int, bias: bool) -> None:
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(cin, cout, 3, stride, padding=1, bias=bias), nn.BatchNorm2d(cout), nn.ReLU(),
            nn.Conv2d(cout, cout, 3, padding=1, bias=bias), nn.BatchNorm2d(cout),
        )  # fmt: skip
        self.stride, self.extra = stride, cout - cin

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:  # (B, cin, H, W)
        if self.stride == 1 and self.extra == 0:
            return x
        x = x[:, :, :: self.stride, :: self.stride]  # subsample: (B, cin, H/2, W/2)
        # Zero channels split evenly before and after, as in the original option-A implementations.
        return F.pad(x, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))  # (B, cout, H/2, W/2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + self.shortcut(x)


class ResNetCifar(nn.Module):
    def __init__(self, n: int, widths: list[int], bias: bool, outputs: int) -> None:
        super().__init__()
        stem = widths[0]
        self.stem = nn.Sequential(nn.Conv2d(3, stem, 3, padding=1, bias=bias), nn.BatchNorm2d(stem), nn.ReLU())
        blocks, cin = [], stem
        for i, width in enumerate(widths):
            for j in range(n):
                blocks.append(BasicBlock(cin, width, 2 if i > 0 and j == 0 else 1, bias))
                cin = width
        self.blocks = nn.Sequential(*blocks)  # (B, 64, 8, 8) from 32
        self.fc = nn.Linear(cin, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, 32, 32)
        x = self.blocks(self.stem(x))
        return self.fc(x.mean((2, 3)))  # (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# LSTM: the word-level language model


class LSTMLM(nn.Module):
    def __init__(self, vocab: int, embed: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        # PyTorch's LSTM keeps two bias vectors per gate set (b_ih and b_hh): the reference count assumes them.
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)  # the same projection at every time step

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, T) int64
        h, _ = self.lstm(self.embed(tokens))  # (B, T, hidden); the state starts at zero each mini-batch
        return self.head(h)  # (B, T, V)


# ----------------------------------------------------------------------------------------------------------------------


def build_model(workload: Workload) -> nn.Module:
    """The module for a built-in workload, on the current default device (use `with torch.device(...)` to pick)."""
    c, k = workload.config, workload.outputs
    if workload.arch in models_published.ARCHS:
        return models_published.build_model(workload)
    match workload.arch:
        case "fcn":
            return FCN(c["widths"], c.get("activation", "sigmoid"), c.get("dropout", 0.0))
        case "alexnet":
            return AlexNet(c["channels"], c["fc"], c["image"], k, c.get("dropout", 0.0))
        case "resnet-imagenet":
            block, stride_on = c.get("block", "bottleneck"), c.get("stride_on", "3x3")
            return ResNetImageNet(c["blocks"], c["widths"], c["expansion"], k, block, stride_on)
        case "alexnet-cifar":
            return AlexNetCifar(c["channels"], c["image"], k)
        case "resnet-cifar":
            return ResNetCifar(c["n"], c["widths"], c["bias"], k)
        case "lstm-lm":
            return LSTMLM(c["vocab"], c["embed"], c["hidden"], c["layers"])
    raise ValueError(f"workload {workload.name!r}: no PyTorch model for arch {workload.arch!r}")
