"""The seven networks of Shi et al. (2016) as Flax NNX modules, built from a `Workload`'s `arch` and `config`.

Layer by layer the same networks as the torch models (same sizes, strides, paddings and pooling arithmetic), written
the way Flax writes them: images are NHWC (B, H, W, C), convolution kernels HWIO, padding given as explicit (low, high)
pairs so the output sizes are PyTorch's. Linear and convolution kernels are drawn as PyTorch draws them (uniform in
+-1/sqrt(fan_in)), so the first loss is on the same scale; biases start at zero (PyTorch: uniform), and the LSTM and
the embedding keep Flax's initializers. Parameters are fp32; `build_model`'s `dtype` is what every layer computes in
(bfloat16 for the bf16 mode: each layer casts its input and parameters to it, Flax's mixed precision).

Where Flax differs from the reference definition (`param_deviation` gives the change in the parameter count):
- LSTM: Flax's LSTM cells keep one bias vector per gate set (on the hidden-state projection), PyTorch two (b_ih and
  b_hh): 4 * hidden fewer parameters per layer, 6,180,624 instead of 6,182,672 for the full-size network.
- BatchNorm updates its running variance with the biased batch variance (PyTorch: unbiased). Training-mode outputs,
  which use the batch statistics, are the same; only the running averages, never read while training, differ.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from dlperf.workloads.base import Workload
from dlperf.workloads.published import torch_only

# PyTorch's BatchNorm2d defaults: momentum 0.1 weighs the new batch, Flax's momentum weighs the running average.
BN_MOMENTUM, BN_EPSILON = 0.9, 1e-5


def _out_size(size: int, kernel: int = 3, stride: int = 2, padding: int = 0) -> int:
    """Side length after a convolution or pooling window (rounded down, no dilation), as in the torch models."""
    return (size + 2 * padding - kernel) // stride + 1


# PyTorch's default for Linear and Conv weights, kaiming_uniform(a=sqrt(5)): uniform with variance 1 / (3 fan_in).
TORCH_KERNEL_INIT = nnx.initializers.variance_scaling(1 / 3, "fan_in", "uniform")


def linear(cin: int, cout: int, *, rngs: nnx.Rngs, dtype: Any = None) -> nnx.Linear:
    return nnx.Linear(cin, cout, kernel_init=TORCH_KERNEL_INIT, rngs=rngs, dtype=dtype)


def _pad(p: int) -> tuple[tuple[int, int], tuple[int, int]]:
    return ((p, p), (p, p))


def conv(
    cin: int, cout: int, kernel: int, stride: int = 1, *, padding: int, bias: bool, rngs: nnx.Rngs, dtype: Any = None
) -> nnx.Conv:
    size, step = (kernel, kernel), (stride, stride)
    return nnx.Conv(
        cin,
        cout,
        size,
        strides=step,
        padding=_pad(padding),
        use_bias=bias,
        kernel_init=TORCH_KERNEL_INIT,
        rngs=rngs,
        dtype=dtype,
    )


def batch_norm(channels: int, rngs: nnx.Rngs, dtype: Any = None) -> nnx.BatchNorm:
    """Training mode: normalizes with the batch statistics and updates the running averages (BatchStat state). Its
    statistics are reduced in fp32 whatever `dtype` (Flax's `force_float32_reductions`), as PyTorch's are."""
    return nnx.BatchNorm(
        channels, use_running_average=False, momentum=BN_MOMENTUM, epsilon=BN_EPSILON, rngs=rngs, dtype=dtype
    )


def max_pool(x: jax.Array, padding: int = 0) -> jax.Array:
    """3x3 window, stride 2; padding pads with -inf, as PyTorch's MaxPool2d does."""
    return nnx.max_pool(x, (3, 3), strides=(2, 2), padding=_pad(padding) if padding else "VALID")


# ----------------------------------------------------------------------------------------------------------------------
# FCN-S and FCN-R


class FCN(nnx.Module):
    """Linear layers over `widths`, a sigmoid between each pair, raw logits at the end."""

    def __init__(self, widths: list[int], *, rngs: nnx.Rngs, dtype: Any = None) -> None:
        self.layers = nnx.List([linear(a, b, rngs=rngs, dtype=dtype) for a, b in pairwise(widths)])

    def __call__(self, x: jax.Array) -> jax.Array:  # (B, widths[0])
        for layer in self.layers[:-1]:
            x = jax.nn.sigmoid(layer(x))
        return self.layers[-1](x)  # (B, widths[-1])


# ----------------------------------------------------------------------------------------------------------------------
# AlexNet-S


class AlexNet(nnx.Module):
    def __init__(
        self, channels: list[int], fc: list[int], image: int, outputs: int, *, rngs: nnx.Rngs, dtype: Any = None
    ) -> None:
        c1, c2, c3, c4, c5 = channels
        self.convs = nnx.List(
            [
                conv(3, c1, 11, 4, padding=2, bias=True, rngs=rngs, dtype=dtype),  # 224 -> 55, pool -> 27
                conv(c1, c2, 5, padding=2, bias=True, rngs=rngs, dtype=dtype),  # pool -> 13
                conv(c2, c3, 3, padding=1, bias=True, rngs=rngs, dtype=dtype),
                conv(c3, c4, 3, padding=1, bias=True, rngs=rngs, dtype=dtype),
                conv(c4, c5, 3, padding=1, bias=True, rngs=rngs, dtype=dtype),  # pool -> 6
            ]
        )
        side = _out_size(_out_size(_out_size(_out_size(image, 11, 4, 2))))
        widths = [c5 * side * side, *fc, outputs]
        self.classifier = nnx.List([linear(a, b, rngs=rngs, dtype=dtype) for a, b in pairwise(widths)])

    def __call__(self, x: jax.Array) -> jax.Array:  # (B, H, W, 3)
        for i, layer in enumerate(self.convs):
            x = jax.nn.relu(layer(x))
            if i in (0, 1, 4):
                x = max_pool(x)
        x = x.reshape(x.shape[0], -1)  # (B, 6 * 6 * C5), flattened in NHWC order
        for layer in self.classifier[:-1]:
            x = jax.nn.relu(layer(x))
        return self.classifier[-1](x)  # (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# ResNet-50


class ConvBN(nnx.Module):
    """A bias-free convolution (the BatchNorm after it has its own shift) with 'same' padding for odd kernels."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int = 1, *, rngs: nnx.Rngs, dtype: Any = None) -> None:
        self.conv = conv(cin, cout, kernel, stride, padding=kernel // 2, bias=False, rngs=rngs, dtype=dtype)
        self.bn = batch_norm(cout, rngs, dtype)

    def __call__(self, x: jax.Array) -> jax.Array:
        return self.bn(self.conv(x))


class Bottleneck(nnx.Module):
    """1x1 reduce, 3x3 (carries the stride), 1x1 expand; a projection shortcut where the shape changes."""

    def __init__(self, cin: int, width: int, cout: int, stride: int, *, rngs: nnx.Rngs, dtype: Any = None) -> None:
        self.reduce = ConvBN(cin, width, 1, rngs=rngs, dtype=dtype)
        self.spatial = ConvBN(width, width, 3, stride, rngs=rngs, dtype=dtype)
        self.expand = ConvBN(width, cout, 1, rngs=rngs, dtype=dtype)
        self.shortcut = ConvBN(cin, cout, 1, stride, rngs=rngs, dtype=dtype) if stride != 1 or cin != cout else None

    def __call__(self, x: jax.Array) -> jax.Array:  # (B, H, W, cin)
        y = self.expand(jax.nn.relu(self.spatial(jax.nn.relu(self.reduce(x)))))
        return jax.nn.relu(y + (x if self.shortcut is None else self.shortcut(x)))  # (B, H/s, W/s, cout)


class ResNetImageNet(nnx.Module):
    def __init__(
        self, blocks: list[int], widths: list[int], expansion: int, outputs: int, *, rngs: nnx.Rngs, dtype: Any = None
    ) -> None:
        self.stem = ConvBN(3, widths[0], 7, 2, rngs=rngs, dtype=dtype)  # 224 -> 112, max-pool -> 56
        stages, cin = [], widths[0]
        for i, (n, width) in enumerate(zip(blocks, widths, strict=True)):
            for j in range(n):
                stages.append(
                    Bottleneck(cin, width, width * expansion, 2 if i > 0 and j == 0 else 1, rngs=rngs, dtype=dtype)
                )
                cin = width * expansion
        self.stages = nnx.List(stages)
        self.fc = linear(cin, outputs, rngs=rngs, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:  # (B, H, W, 3)
        x = max_pool(jax.nn.relu(self.stem(x)), padding=1)
        for block in self.stages:
            x = block(x)
        return self.fc(x.mean((1, 2)))  # global average pool, (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# AlexNet-R


class AlexNetCifar(nnx.Module):
    def __init__(self, channels: list[int], image: int, outputs: int, *, rngs: nnx.Rngs, dtype: Any = None) -> None:
        c1, c2, c3 = channels
        self.conv1 = conv(3, c1, 5, padding=2, bias=True, rngs=rngs, dtype=dtype)
        self.conv2 = conv(c1, c2, 5, padding=2, bias=True, rngs=rngs, dtype=dtype)
        self.conv3 = conv(c2, c3, 5, padding=2, bias=True, rngs=rngs, dtype=dtype)
        side = _out_size(_out_size(_out_size(image)))
        self.fc = linear(c3 * side * side, outputs, rngs=rngs, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:  # (B, 32, 32, 3)
        x = jax.nn.relu(max_pool(self.conv1(x)))  # the original pools before its first ReLU; 32 -> 15
        x = max_pool(jax.nn.relu(self.conv2(x)))  # -> 7
        x = nnx.avg_pool(jax.nn.relu(self.conv3(x)), (3, 3), strides=(2, 2), padding="VALID")  # -> 3
        return self.fc(x.reshape(x.shape[0], -1))  # (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# ResNet-56


class BasicBlock(nnx.Module):
    """conv-BN-ReLU-conv-BN plus the parameter-free "option A" shortcut; no ReLU after the add."""

    def __init__(self, cin: int, cout: int, stride: int, bias: bool, *, rngs: nnx.Rngs, dtype: Any = None) -> None:
        self.conv1 = conv(cin, cout, 3, stride, padding=1, bias=bias, rngs=rngs, dtype=dtype)
        self.bn1 = batch_norm(cout, rngs, dtype)
        self.conv2 = conv(cout, cout, 3, padding=1, bias=bias, rngs=rngs, dtype=dtype)
        self.bn2 = batch_norm(cout, rngs, dtype)
        self.stride, self.extra = stride, cout - cin

    def shortcut(self, x: jax.Array) -> jax.Array:  # (B, H, W, cin)
        if self.stride == 1 and self.extra == 0:
            return x
        x = x[:, :: self.stride, :: self.stride, :]  # (B, H/2, W/2, cin)
        half = self.extra // 2  # zero channels split evenly before and after
        return jnp.pad(x, ((0, 0), (0, 0), (0, 0), (half, self.extra - half)))  # (B, H/2, W/2, cout)

    def __call__(self, x: jax.Array) -> jax.Array:
        y = self.bn2(self.conv2(jax.nn.relu(self.bn1(self.conv1(x)))))
        return y + self.shortcut(x)


class ResNetCifar(nnx.Module):
    def __init__(
        self, n: int, widths: list[int], bias: bool, outputs: int, *, rngs: nnx.Rngs, dtype: Any = None
    ) -> None:
        self.stem = conv(3, widths[0], 3, padding=1, bias=bias, rngs=rngs, dtype=dtype)
        self.stem_bn = batch_norm(widths[0], rngs, dtype)
        blocks, cin = [], widths[0]
        for i, width in enumerate(widths):
            for j in range(n):
                blocks.append(BasicBlock(cin, width, 2 if i > 0 and j == 0 else 1, bias, rngs=rngs, dtype=dtype))
                cin = width
        self.blocks = nnx.List(blocks)
        self.fc = linear(cin, outputs, rngs=rngs, dtype=dtype)

    def __call__(self, x: jax.Array) -> jax.Array:  # (B, 32, 32, 3)
        x = jax.nn.relu(self.stem_bn(self.stem(x)))
        for block in self.blocks:
            x = block(x)  # (B, 8, 8, 64) at the end, from 32
        return self.fc(x.mean((1, 2)))  # (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# LSTM


class LSTMLM(nnx.Module):
    """Embedding, stacked LSTM layers (one bias vector per layer: see the module docstring), a head at every step."""

    def __init__(
        self, vocab: int, embed: int, hidden: int, layers: int, *, unroll: int = 1, rngs: nnx.Rngs, dtype: Any = None
    ) -> None:
        self.embed = nnx.Embed(vocab, embed, rngs=rngs, dtype=dtype)
        self.hidden = hidden
        sizes = [embed] + [hidden] * layers
        # rngs=False: the state starts at zero (given in __call__), so the layers keep no random stream to advance
        cells = [nnx.OptimizedLSTMCell(a, b, rngs=rngs, dtype=dtype) for a, b in pairwise(sizes)]
        self.lstm = nnx.List([nnx.RNN(cell, unroll=unroll, rngs=False) for cell in cells])
        self.head = linear(hidden, vocab, rngs=rngs, dtype=dtype)

    def __call__(self, tokens: jax.Array) -> jax.Array:  # (B, T) int32
        h = self.embed(tokens)  # (B, T, embed)
        zeros = jnp.zeros((tokens.shape[0], self.hidden), h.dtype)  # (B, hidden): the state starts at zero
        for layer in self.lstm:
            h = layer(h, initial_carry=(zeros, zeros))  # (B, T, hidden); the carry is (c, h)
        return self.head(h)  # (B, T, V)


# ----------------------------------------------------------------------------------------------------------------------


def build_model(workload: Workload, rngs: nnx.Rngs, *, dtype: Any = None, **options: Any) -> nnx.Module:
    """The module of a built-in workload, its parameters in fp32. `dtype`: what its layers compute in (None: fp32;
    bfloat16 for mixed precision: each layer casts its input and its fp32 parameters to it). `options` go to the LSTM
    (`unroll`: time steps per loop iteration)."""
    torch_only(workload)  # the published networks: `unsupported` here, not an unknown arch
    c, k = workload.config, workload.outputs
    match workload.arch:
        case "fcn":
            return FCN(c["widths"], rngs=rngs, dtype=dtype)
        case "alexnet":
            return AlexNet(c["channels"], c["fc"], c["image"], k, rngs=rngs, dtype=dtype)
        case "resnet-imagenet":
            return ResNetImageNet(c["blocks"], c["widths"], c["expansion"], k, rngs=rngs, dtype=dtype)
        case "alexnet-cifar":
            return AlexNetCifar(c["channels"], c["image"], k, rngs=rngs, dtype=dtype)
        case "resnet-cifar":
            return ResNetCifar(c["n"], c["widths"], c["bias"], k, rngs=rngs, dtype=dtype)
        case "lstm-lm":
            return LSTMLM(c["vocab"], c["embed"], c["hidden"], c["layers"], rngs=rngs, dtype=dtype, **options)
    raise ValueError(f"workload {workload.name!r}: no Flax model for arch {workload.arch!r}")


def param_deviation(workload: Workload) -> int:
    """Trainable parameters of the Flax model minus the reference count (`workload.params`): Flax's LSTM cells have
    one bias vector per layer where PyTorch's have two."""
    if workload.arch == "lstm-lm":
        return -workload.config["layers"] * 4 * workload.config["hidden"]
    return 0


def count_params(workload: Workload) -> int:
    """Trainable parameters, from an abstract build (shapes only, no weights are made)."""
    model = nnx.eval_shape(lambda: build_model(workload, nnx.Rngs(0)))
    return sum(leaf.size for leaf in jax.tree.leaves(nnx.state(model, nnx.Param)))
