"""The seven networks of Shi et al. (2016) as MXNet Gluon HybridBlocks, built from a `Workload`'s `arch` and `config`.

Layer by layer the same networks as the torch models (read that for the why of each choice), in MXNet's native NCHW
layout, with the same parameter counts. Every layer is given its input size (`in_units`, `in_channels`), so the
parameters have their shapes before any forward pass. PyTorch's pooling and convolution arithmetic is MXNet's too:
`pooling_convention="valid"` (the default) rounds down, as PyTorch does. Imported only with mxnet, in a child process
(see the mxnet backend).
"""

from __future__ import annotations

from itertools import pairwise

import mxnet as mx
from mxnet.gluon import HybridBlock, nn, rnn
from mxnet.gluon.loss import SoftmaxCrossEntropyLoss

from dlperf.workloads.base import Workload
from dlperf.workloads.published import torch_only


def _out_size(size: int, kernel: int = 3, stride: int = 2, padding: int = 0) -> int:
    """Side length after a convolution or pooling window (rounded down, no dilation)."""
    return (size + 2 * padding - kernel) // stride + 1


def _sequential(*layers: HybridBlock) -> nn.HybridSequential:
    seq = nn.HybridSequential()
    seq.add(*layers)
    return seq


def _conv(cin: int, cout: int, kernel: int, stride: int = 1, *, bias: bool = True, relu: bool = False) -> nn.Conv2D:
    """A convolution padded to keep the size at stride 1 (kernel // 2, as the reference pads)."""
    activation = "relu" if relu else None
    return nn.Conv2D(cout, kernel, stride, kernel // 2, in_channels=cin, use_bias=bias, activation=activation)


def _bn(channels: int) -> nn.BatchNorm:
    # MXNet's momentum is the weight of the old running statistic: 0.9 here is PyTorch's momentum=0.1.
    return nn.BatchNorm(momentum=0.9, epsilon=1e-5, in_channels=channels)


# ----------------------------------------------------------------------------------------------------------------------
# FCN-S and FCN-R


def fcn(widths: list[int]) -> nn.HybridSequential:
    """Dense layers over `widths`, a sigmoid between each pair, raw logits at the end."""
    layers = [nn.Dense(b, in_units=a, activation="sigmoid") for a, b in pairwise(widths[:-1])]
    return _sequential(*layers, nn.Dense(widths[-1], in_units=widths[-2]))


# ----------------------------------------------------------------------------------------------------------------------
# AlexNet-S (single column, no LRN or dropout) and AlexNet-R (cuda-convnet's layers-18pct, no LRN)


def _classifier(widths: list[int]) -> list[nn.Dense]:
    """Dense layers with a ReLU between each pair; Dense flattens a (B, C, H, W) input to (B, C*H*W) itself."""
    layers = [nn.Dense(b, in_units=a, activation="relu") for a, b in pairwise(widths[:-1])]
    return [*layers, nn.Dense(widths[-1], in_units=widths[-2])]


def alexnet(channels: list[int], fc: list[int], image: int, outputs: int) -> nn.HybridSequential:
    c1, c2, c3, c4, c5 = channels
    side = _out_size(_out_size(_out_size(_out_size(image, 11, 4, 2))))  # 224 -> 55 -> 27 -> 13 -> 6
    return _sequential(
        nn.Conv2D(c1, 11, 4, 2, in_channels=3, activation="relu"), nn.MaxPool2D(3, 2),
        _conv(c1, c2, 5, relu=True), nn.MaxPool2D(3, 2),
        _conv(c2, c3, 3, relu=True), _conv(c3, c4, 3, relu=True), _conv(c4, c5, 3, relu=True), nn.MaxPool2D(3, 2),
        *_classifier([c5 * side * side, *fc, outputs]),
    )  # fmt: skip


def alexnet_cifar(channels: list[int], image: int, outputs: int) -> nn.HybridSequential:
    c1, c2, c3 = channels
    side = _out_size(_out_size(_out_size(image)))  # 32 -> 15 -> 7 -> 3
    return _sequential(
        _conv(3, c1, 5), nn.MaxPool2D(3, 2), nn.Activation("relu"),  # the original pools before this ReLU
        _conv(c1, c2, 5, relu=True), nn.MaxPool2D(3, 2),
        _conv(c2, c3, 5, relu=True), nn.AvgPool2D(3, 2),
        nn.Dense(outputs, in_units=c3 * side * side),
    )  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------------
# ResNet-50: bias-free convolutions, each followed by BatchNorm


class Bottleneck(HybridBlock):
    """1x1 reduce, 3x3 (carries the stride), 1x1 expand; a projection shortcut only where the shape changes."""

    def __init__(self, cin: int, width: int, cout: int, stride: int) -> None:
        super().__init__()
        self.body = _sequential(
            _conv(cin, width, 1, bias=False), _bn(width), nn.Activation("relu"),
            _conv(width, width, 3, stride, bias=False), _bn(width), nn.Activation("relu"),
            _conv(width, cout, 1, bias=False), _bn(cout),
        )  # fmt: skip
        changes = stride != 1 or cin != cout
        self.shortcut = _sequential(_conv(cin, cout, 1, stride, bias=False), _bn(cout)) if changes else None

    def hybrid_forward(self, F, x):  # (B, cin, H, W)
        return F.relu(self.body(x) + (x if self.shortcut is None else self.shortcut(x)))  # (B, cout, H/s, W/s)


def resnet_imagenet(blocks: list[int], widths: list[int], expansion: int, outputs: int) -> nn.HybridSequential:
    stem = widths[0]
    layers: list[HybridBlock] = [_conv(3, stem, 7, 2, bias=False), _bn(stem), nn.Activation("relu")]
    layers.append(nn.MaxPool2D(3, 2, padding=1))  # 224 -> 112 -> 56
    cin = stem
    for i, (n, width) in enumerate(zip(blocks, widths, strict=True)):
        for j in range(n):
            layers.append(Bottleneck(cin, width, width * expansion, 2 if i > 0 and j == 0 else 1))
            cin = width * expansion
    return _sequential(*layers, nn.GlobalAvgPool2D(), nn.Dense(outputs, in_units=cin))


# ----------------------------------------------------------------------------------------------------------------------
# ResNet-56: parameter-free "option A" shortcuts


class BasicBlock(HybridBlock):
    """conv-BN-ReLU-conv-BN plus the shortcut; no ReLU after the add, as in the reference."""

    def __init__(self, cin: int, cout: int, stride: int, bias: bool) -> None:
        super().__init__()
        self.body = _sequential(
            _conv(cin, cout, 3, stride, bias=bias), _bn(cout), nn.Activation("relu"),
            _conv(cout, cout, 3, bias=bias), _bn(cout),
        )  # fmt: skip
        self.stride, self.extra = stride, cout - cin

    def shortcut(self, F, x):  # (B, cin, H, W)
        if self.stride == 1 and self.extra == 0:
            return x
        x = F.slice(x, begin=(None,) * 4, end=(None,) * 4, step=(1, 1, self.stride, self.stride))  # (B, cin, H/2, W/2)
        # Zero channels split evenly before and after. F.pad pads only the last axes of a 4-d or 5-d array, so the
        # channels become the third axis of a 5-d one. (Concatenating zero channels instead crashes MXNet 1.9.1 in
        # hybridized training: its oneDNN Concat backward dies of SIGFPE when a piece does not start on a multiple of
        # the blocked layout's channel block, as ResNet-56's 8 + 16 + 8 channels do not on AVX-512.)
        before, after = self.extra // 2, self.extra - self.extra // 2
        x = F.pad(F.expand_dims(x, axis=1), mode="constant", pad_width=(0, 0, 0, 0, before, after, 0, 0, 0, 0))
        return F.reshape(x, shape=(0, -3, -2))  # (B, 1, cout, H/2, W/2) -> (B, cout, H/2, W/2)

    def hybrid_forward(self, F, x):
        return self.body(x) + self.shortcut(F, x)


def resnet_cifar(n: int, widths: list[int], bias: bool, outputs: int) -> nn.HybridSequential:
    stem = widths[0]
    layers: list[HybridBlock] = [_conv(3, stem, 3, bias=bias), _bn(stem), nn.Activation("relu")]
    cin = stem
    for i, width in enumerate(widths):
        for j in range(n):
            layers.append(BasicBlock(cin, width, 2 if i > 0 and j == 0 else 1, bias))
            cin = width
    return _sequential(*layers, nn.GlobalAvgPool2D(), nn.Dense(outputs, in_units=cin))  # (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# LSTM: the word-level language model


class LSTMLM(HybridBlock):
    def __init__(self, vocab: int, embed: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        # MXNet's fused LSTM keeps an i2h and an h2h bias per layer, as PyTorch does: the reference count holds.
        self.lstm = rnn.LSTM(hidden, num_layers=layers, layout="NTC", input_size=embed)
        self.head = nn.Dense(vocab, flatten=False, in_units=hidden)  # the same projection at every time step

    def hybrid_forward(self, F, tokens):  # (B, T) float32 ids, MXNet's convention for Embedding
        return self.head(self.lstm(self.embed(tokens)))  # (B, T, V); the state starts at zero each mini-batch


# ----------------------------------------------------------------------------------------------------------------------


class Objective(HybridBlock):
    """A model and its loss as one block: hybridized, the forward pass and the loss are one cached graph."""

    def __init__(self, net: HybridBlock) -> None:
        super().__init__()
        self.net = net
        self.loss = SoftmaxCrossEntropyLoss()  # one value per sample (for tokens, averaged over the sequence)
        self.traces = 0  # how often the graph was built: once, unless something forced a rebuild

    def hybrid_forward(self, F, x, y):
        if F is mx.symbol:  # only while the graph is being built; the cached graph runs without Python
            self.traces += 1
        return F.mean(self.loss(self.net(x), y))  # (1,): the mean over every prediction


def build_model(workload: Workload) -> HybridBlock:
    """The (uninitialized) block for a built-in workload."""
    torch_only(workload)  # the published networks: `unsupported` here, not an unknown arch
    c, k = workload.config, workload.outputs
    match workload.arch:
        case "fcn":
            return fcn(c["widths"])
        case "alexnet":
            return alexnet(c["channels"], c["fc"], c["image"], k)
        case "resnet-imagenet":
            return resnet_imagenet(c["blocks"], c["widths"], c["expansion"], k)
        case "alexnet-cifar":
            return alexnet_cifar(c["channels"], c["image"], k)
        case "resnet-cifar":
            return resnet_cifar(c["n"], c["widths"], c["bias"], k)
        case "lstm-lm":
            return LSTMLM(c["vocab"], c["embed"], c["hidden"], c["layers"])
    raise ValueError(f"workload {workload.name!r}: no MXNet model for arch {workload.arch!r}")
