"""The networks of published GPU benchmarks (`dlperf.workloads.published`) as PyTorch modules, in plain torch.nn.

torchvision's wheel does not import beside the CPU torch, so its VGG and Inception-v3 are written again here, layer
for layer, with its parameter counts; the others follow their reference repositories (named in each section). Every
size follows from the config, so each model builds on the meta device and runs under FakeTensorMode (the predictor
counts operators that way). Shapes in comments use B for the mini-batch, T for the sequence length, V for the
vocabulary.
"""

from __future__ import annotations

from itertools import pairwise

import torch
import torch.nn.functional as F
from torch import nn

from dlperf.workloads.base import Workload

# ----------------------------------------------------------------------------------------------------------------------
# VGG-16 and VGG-19: torchvision's, without batch normalization


class VGG(nn.Module):
    """3x3 convolutions (ReLU after each) in stages closed by a 2x2 max-pool; three fully connected layers."""

    def __init__(self, stages: list[list[int]], fc: int, outputs: int) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        cin = 3
        for stage in stages:
            for cout in stage:
                layers += [nn.Conv2d(cin, cout, 3, padding=1), nn.ReLU()]
                cin = cout
            layers.append(nn.MaxPool2d(2))
        self.features = nn.Sequential(*layers)  # (B, 512, 7, 7) from 224
        self.pool = nn.AdaptiveAvgPool2d(7)  # the identity at 224, as in torchvision
        self.classifier = nn.Sequential(
            nn.Linear(cin * 7 * 7, fc), nn.ReLU(), nn.Dropout(),
            nn.Linear(fc, fc), nn.ReLU(), nn.Dropout(),
            nn.Linear(fc, outputs),
        )  # fmt: skip

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, H, W)
        return self.classifier(self.pool(self.features(x)).flatten(1))  # (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# Inception-v3: torchvision's Inception3 (Szegedy et al. 2016), with the auxiliary classifier it trains with


def _conv(cin: int, cout: int, kernel: int | tuple[int, int], stride: int = 1, padding=0) -> nn.Sequential:
    """torchvision's BasicConv2d: a bias-free convolution, batch norm (eps 0.001), ReLU."""
    return nn.Sequential(nn.Conv2d(cin, cout, kernel, stride, padding, bias=False), nn.BatchNorm2d(cout, eps=0.001),
                         nn.ReLU())  # fmt: skip


def _1x7(cin: int, cout: int) -> nn.Sequential:
    return _conv(cin, cout, (1, 7), padding=(0, 3))


def _7x1(cin: int, cout: int) -> nn.Sequential:
    return _conv(cin, cout, (7, 1), padding=(3, 0))


def _1x3(cin: int, cout: int) -> nn.Sequential:
    return _conv(cin, cout, (1, 3), padding=(0, 1))


def _3x1(cin: int, cout: int) -> nn.Sequential:
    return _conv(cin, cout, (3, 1), padding=(1, 0))


class Branches(nn.Module):
    """Branches over one input, their outputs concatenated along the channels."""

    def __init__(self, *branches: nn.Module) -> None:
        super().__init__()
        self.branches = nn.ModuleList(branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([b(x) for b in self.branches], 1)


class Split(nn.Module):
    """A 1x3 and a 3x1 convolution side by side over the same input (Inception E's expanded filter banks)."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.a, self.b = _1x3(channels, channels), _3x1(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.a(x), self.b(x)], 1)


def _avg_then(cin: int, cout: int) -> nn.Sequential:
    return nn.Sequential(nn.AvgPool2d(3, 1, padding=1), _conv(cin, cout, 1))


def inception_a(cin: int, pool: int) -> Branches:  # 35x35, out 224 + pool
    return Branches(
        _conv(cin, 64, 1),
        nn.Sequential(_conv(cin, 48, 1), _conv(48, 64, 5, padding=2)),
        nn.Sequential(_conv(cin, 64, 1), _conv(64, 96, 3, padding=1), _conv(96, 96, 3, padding=1)),
        _avg_then(cin, pool),
    )


def inception_b(cin: int) -> Branches:  # 35 -> 17, out 480 + cin
    return Branches(
        _conv(cin, 384, 3, 2),
        nn.Sequential(_conv(cin, 64, 1), _conv(64, 96, 3, padding=1), _conv(96, 96, 3, 2)),
        nn.MaxPool2d(3, 2),
    )


def inception_c(cin: int, c7: int) -> Branches:  # 17x17, out 768
    return Branches(
        _conv(cin, 192, 1),
        nn.Sequential(_conv(cin, c7, 1), _1x7(c7, c7), _7x1(c7, 192)),
        nn.Sequential(_conv(cin, c7, 1), _7x1(c7, c7), _1x7(c7, c7), _7x1(c7, c7), _1x7(c7, 192)),
        _avg_then(cin, 192),
    )


def inception_d(cin: int) -> Branches:  # 17 -> 8, out 512 + cin
    return Branches(
        nn.Sequential(_conv(cin, 192, 1), _conv(192, 320, 3, 2)),
        nn.Sequential(_conv(cin, 192, 1), _1x7(192, 192), _7x1(192, 192), _conv(192, 192, 3, 2)),
        nn.MaxPool2d(3, 2),
    )


def inception_e(cin: int) -> Branches:  # 8x8, out 2048
    return Branches(
        _conv(cin, 320, 1),
        nn.Sequential(_conv(cin, 384, 1), Split(384)),
        nn.Sequential(_conv(cin, 448, 1), _conv(448, 384, 3, padding=1), Split(384)),
        _avg_then(cin, 192),
    )


class InceptionV3(nn.Module):
    """299x299 in. In training mode it returns (logits, auxiliary logits) and the loss adds the auxiliary term
    (the torch backend's `cross_entropy`); in eval mode the logits alone. The auxiliary head needs a 17x17 map
    at Mixed_6e, so an image of at least 299."""

    def __init__(self, outputs: int, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            _conv(3, 32, 3, 2), _conv(32, 32, 3), _conv(32, 64, 3, padding=1), nn.MaxPool2d(3, 2),  # 299 -> 73
            _conv(64, 80, 1), _conv(80, 192, 3), nn.MaxPool2d(3, 2),  # -> 35
            inception_a(192, 32), inception_a(256, 64), inception_a(288, 64),  # (B, 288, 35, 35)
            inception_b(288),  # -> 17
            inception_c(768, 128), inception_c(768, 160), inception_c(768, 160), inception_c(768, 192),
        )  # fmt: skip  # (B, 768, 17, 17)
        self.aux = nn.Sequential(
            nn.AvgPool2d(5, 3), _conv(768, 128, 1), _conv(128, 768, 5),  # 17 -> 5 -> 1
            nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(768, outputs),
        )  # fmt: skip
        self.tail = nn.Sequential(inception_d(768), inception_e(1280), inception_e(2048))  # (B, 2048, 8, 8)
        self.dropout = nn.Dropout(dropout)
        self.fc = nn.Linear(2048, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:  # (B, 3, 299, 299)
        x = self.features(x)
        aux = self.aux(x) if self.training else None  # (B, outputs)
        logits = self.fc(self.dropout(self.tail(x).mean((2, 3))))  # (B, outputs)
        return logits if aux is None else (logits, aux)


# ----------------------------------------------------------------------------------------------------------------------
# ResNet-164: He et al. (2016), "Identity Mappings in Deep Residual Networks": pre-activation CIFAR ResNets, as the
# DAWNBench models ran them (tensorflow/models' resnet_model.py, stanford-futuredata/dawn-bench-models)


class PreActBlock(nn.Module):
    """BN-ReLU before each convolution. The bottleneck (1x1 reduce to cout/4, 3x3, 1x1 expand) projects its shortcut
    with a 1x1 convolution where the shape changes; the basic block (two 3x3) subsamples and zero-pads it instead."""

    def __init__(self, cin: int, cout: int, stride: int, bottleneck: bool) -> None:
        super().__init__()
        self.pre = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU())
        if bottleneck:
            w = cout // 4
            self.body = nn.Sequential(
                nn.Conv2d(cin, w, 1, stride, bias=False),
                nn.BatchNorm2d(w), nn.ReLU(), nn.Conv2d(w, w, 3, padding=1, bias=False),
                nn.BatchNorm2d(w), nn.ReLU(), nn.Conv2d(w, cout, 1, bias=False),
            )  # fmt: skip
        else:
            self.body = nn.Sequential(
                nn.Conv2d(cin, cout, 3, stride, padding=1, bias=False),
                nn.BatchNorm2d(cout), nn.ReLU(), nn.Conv2d(cout, cout, 3, padding=1, bias=False),
            )  # fmt: skip
        changes = stride != 1 or cin != cout
        self.project = nn.Conv2d(cin, cout, 1, stride, bias=False) if changes and bottleneck else None
        self.stride, self.extra = stride, cout - cin

    def shortcut(self, x: torch.Tensor, activated: torch.Tensor) -> torch.Tensor:
        if self.project is not None:
            return self.project(activated)  # the reference projects the activated input
        if self.stride == 1 and self.extra == 0:
            return x
        x = x[:, :, :: self.stride, :: self.stride]  # (B, cin, H/2, W/2)
        return F.pad(x, (0, 0, 0, 0, self.extra // 2, self.extra - self.extra // 2))  # (B, cout, H/2, W/2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, cin, H, W)
        activated = self.pre(x)
        return self.body(activated) + self.shortcut(x, activated)


class PreActResNetCifar(nn.Module):
    """A 3x3 stem of `widths[0]`, three stages of `n` blocks (stride 2 into the second and third), BN-ReLU, global
    average pool, one linear layer. Bottleneck stages output 4x their width (16, 32, 64 -> 64, 128, 256)."""

    def __init__(self, n: int, widths: list[int], block: str, outputs: int) -> None:
        super().__init__()
        bottleneck = block == "bottleneck"
        self.stem = nn.Conv2d(3, widths[0], 3, padding=1, bias=False)
        blocks, cin = [], widths[0]
        for i, width in enumerate(widths):
            cout = width * 4 if bottleneck else width
            for j in range(n):
                blocks.append(PreActBlock(cin, cout, 2 if i > 0 and j == 0 else 1, bottleneck))
                cin = cout
        self.blocks = nn.Sequential(*blocks)  # (B, 256, 8, 8) from 32 (bottleneck)
        self.post = nn.Sequential(nn.BatchNorm2d(cin), nn.ReLU())
        self.fc = nn.Linear(cin, outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, 32, 32)
        return self.fc(self.post(self.blocks(self.stem(x))).mean((2, 3)))  # (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# ResNet-9: D. Page (Myrtle.ai), "How to train your ResNet" (2018), the DAWNBench CIFAR-10 entry


def _conv_bn_relu(cin: int, cout: int) -> list[nn.Module]:
    return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]


class Residual(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.body = nn.Sequential(*_conv_bn_relu(channels, channels), *_conv_bn_relu(channels, channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.body(x)


class ResNet9(nn.Module):
    """prep 64; layer1 128 + pool + residual; layer2 256 + pool; layer3 512 + pool + residual; global max-pool; a
    bias-free linear layer whose logits are scaled by `scale` (0.125)."""

    def __init__(self, widths: list[int], outputs: int, scale: float) -> None:
        super().__init__()
        prep, c1, c2, c3 = widths
        self.layers = nn.Sequential(
            *_conv_bn_relu(3, prep),
            *_conv_bn_relu(prep, c1), nn.MaxPool2d(2), Residual(c1),  # 32 -> 16
            *_conv_bn_relu(c1, c2), nn.MaxPool2d(2),  # -> 8
            *_conv_bn_relu(c2, c3), nn.MaxPool2d(2), Residual(c3),  # -> 4
        )  # fmt: skip
        self.fc = nn.Linear(c3, outputs, bias=False)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # (B, 3, 32, 32)
        return self.fc(self.layers(x).amax((2, 3))) * self.scale  # (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# GNMT v2: NVIDIA DeepLearningExamples, PyTorch/Translation/GNMT (seq2seq/models: encoder.py, decoder.py,
# attention.py), the MLPerf reference; 160,671,297 parameters at its sizes


class BahdanauAttention(nn.Module):
    """Normalized Bahdanau attention, every query at once: scores (B, Tq, Tk) from tanh(q + k + b) . v, where v is
    the learned vector scaled to a learned norm."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.linear_q = nn.Linear(size, size, bias=False)
        self.linear_k = nn.Linear(size, size, bias=False)
        self.linear_att = nn.Parameter(torch.empty(size).uniform_(-0.1, 0.1))
        self.normalize_scalar = nn.Parameter(torch.full((1,), size**-0.5))
        self.normalize_bias = nn.Parameter(torch.zeros(size))

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:  # (B, Tq, n), (B, Tk, n)
        q, k = self.linear_q(query), self.linear_k(keys)
        summed = q.unsqueeze(2) + k.unsqueeze(1) + self.normalize_bias  # (B, Tq, Tk, n): what DLE materializes
        v = self.linear_att / self.linear_att.norm() * self.normalize_scalar
        scores = F.softmax(torch.tanh(summed).matmul(v), dim=-1)  # (B, Tq, Tk)
        return torch.bmm(scores, keys)  # (B, Tq, n)


def _lstm(cin: int, hidden: int, bidirectional: bool = False) -> nn.LSTM:
    return nn.LSTM(cin, hidden, batch_first=True, bidirectional=bidirectional)


class GNMT(nn.Module):
    """Encoder: a bidirectional LSTM, then `layers - 1` LSTMs, residual from the third. Decoder: an LSTM whose output
    attends over the encoder's (DLE's RecurrentAttention: no context fed back into its input), then `layers - 1`
    LSTMs over [h, context], residual from the second of them; a classifier over the vocabulary. One embedding is
    shared by encoder and decoder. Source and target are the same tokens (teacher forcing, every length full)."""

    def __init__(self, vocab: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.encoder = nn.ModuleList(
            [_lstm(hidden, hidden, bidirectional=True), _lstm(2 * hidden, hidden)]
            + [_lstm(hidden, hidden) for _ in range(layers - 2)]
        )
        self.attention_rnn = _lstm(hidden, hidden)
        self.attention = BahdanauAttention(hidden)
        self.decoder = nn.ModuleList(_lstm(2 * hidden, hidden) for _ in range(layers - 1))
        self.classifier = nn.Linear(hidden, vocab)

    def encode(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, T)
        x = self.embed(tokens)  # (B, T, H)
        for i, lstm in enumerate(self.encoder):
            y, _ = lstm(x)  # (B, T, 2H) from the bidirectional layer, (B, T, H) after
            x = y + x if i >= 2 else y
        return x  # (B, T, H)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, T) int64
        context = self.encode(tokens)
        x, _ = self.attention_rnn(self.embed(tokens))  # (B, T, H)
        attended = self.attention(x, context)  # (B, T, H)
        for i, lstm in enumerate(self.decoder):
            y, _ = lstm(torch.cat([x, attended], 2))  # (B, T, 2H) in
            x = y + x if i >= 1 else y
        return self.classifier(x)  # (B, T, V)


# ----------------------------------------------------------------------------------------------------------------------
# AWD-LSTM: Merity et al. (2018), salesforce/awd-lstm-lm, without its dropouts and weight drop (they cost little time)


class AWDLSTM(nn.Module):
    """An embedding of `sizes[0]`, one LSTM per following size (400 -> 1150 -> 1150 -> 400), and a decoder whose
    weight is the embedding's (tied), so the last LSTM's size is the embedding's."""

    def __init__(self, vocab: int, sizes: list[int]) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, sizes[0])
        self.lstms = nn.ModuleList(nn.LSTM(a, b, batch_first=True) for a, b in pairwise(sizes))
        self.decoder = nn.Linear(sizes[-1], vocab)
        self.decoder.weight = self.embed.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:  # (B, T) int64
        x = self.embed(tokens)  # (B, T, E)
        for lstm in self.lstms:
            x, _ = lstm(x)
        return self.decoder(x)  # (B, T, V)


# ----------------------------------------------------------------------------------------------------------------------

ARCHS = frozenset({"vgg", "inception-v3", "preact-resnet-cifar", "resnet-9", "gnmt", "awd-lstm"})


def build_model(workload: Workload) -> nn.Module:
    """The module for a published network (`workload.arch` in ARCHS), on the current default device."""
    c, k = workload.config, workload.outputs
    match workload.arch:
        case "vgg":
            return VGG(c["stages"], c["fc"], k)
        case "inception-v3":
            return InceptionV3(k)
        case "preact-resnet-cifar":
            return PreActResNetCifar(c["n"], c["widths"], c["block"], k)
        case "resnet-9":
            return ResNet9(c["widths"], k, c["scale"])
        case "gnmt":
            return GNMT(c["vocab"], c["hidden"], c["layers"])
        case "awd-lstm":
            return AWDLSTM(c["vocab"], c["sizes"])
    raise ValueError(f"workload {workload.name!r}: no PyTorch model for arch {workload.arch!r}")
