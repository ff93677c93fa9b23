"""The seven networks of Shi et al. (2016), "Benchmarking State-of-the-Art Deep Learning Software Tools".

Definitions, mini-batch sizes and optimizers follow shared/reference/shi2016.md (the paper and its public scripts).
Parameter counts are static data of the reference (PyTorch) definition; tests build every model and check them.
Each network also has a hidden `tiny-` variant of the same topology, small enough for end-to-end tests on 2 cores.
"""

from __future__ import annotations

from dataclasses import replace

from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload

CITATION = (
    'S. Shi, Q. Wang, P. Xu, X. Chu, "Benchmarking State-of-the-Art Deep Learning Software Tools", '
    "arXiv:1608.07249 (v7, 2017)"
)

SGD = OptimizerSpec("sgd", lr=0.01)
SGD_M = OptimizerSpec("sgd", lr=0.01, momentum=0.9)


def _fcn(name, widths, batch, opt, params, *, data, paper, hidden=False):
    return Workload(
        name=name,
        arch="fcn",
        config={"widths": list(widths), "activation": "sigmoid"},
        input=InputSpec("vector", (widths[0],)),
        outputs=widths[-1],
        batch=batch,
        optimizer=opt,
        params=params,
        data=data,
        paper=paper,
        hidden=hidden,
    )


def _image(name, arch, config, batch, opt, params, *, outputs, data, paper, hidden=False, notes=""):
    size = config["image"]
    return Workload(
        name=name,
        arch=arch,
        config=dict(config),
        input=InputSpec("image", (3, size, size)),
        outputs=outputs,
        batch=batch,
        optimizer=opt,
        params=params,
        data=data,
        paper=paper,
        hidden=hidden,
        notes=notes,
    )


def _lstm(name, config, batch, params, *, paper, hidden=False):
    return Workload(
        name=name,
        arch="lstm-lm",
        config=dict(config),
        input=InputSpec("tokens", (config["seq_len"],), dtype="int64", vocab=config["vocab"]),
        outputs=config["vocab"],
        batch=batch,
        optimizer=OptimizerSpec("sgd", lr=0.1, clip_grad_norm=5.0),
        params=params,
        data="Penn Treebank",
        paper=paper,
        hidden=hidden,
        notes="two bias vectors per LSTM layer (PyTorch); one bias would give 6,180,624",
    )


ALEXNET_S = {"channels": [96, 256, 384, 384, 256], "fc": [4096, 4096], "image": 224}
RESNET_50 = {"blocks": [3, 4, 6, 3], "widths": [64, 128, 256, 512], "expansion": 4, "image": 224}
ALEXNET_R = {"channels": [32, 32, 64], "image": 32}
RESNET_56 = {"n": 9, "widths": [16, 32, 64], "bias": True, "image": 32}
LSTM = {"vocab": 10000, "embed": 256, "hidden": 256, "layers": 2, "seq_len": 32}

SUITE: tuple[Workload, ...] = (
    _fcn("fcn-s", [26752, 2048, 2048, 2048, 26752], 64, SGD, 117_997_696, data="synthetic", paper="FCN-S"),
    _image("alexnet-s", "alexnet", ALEXNET_S, 16, SGD, 62_378_344, outputs=1000, data="synthetic", paper="AlexNet-S"),
    _image(
        "resnet-50",
        "resnet-imagenet",
        RESNET_50,
        16,
        SGD_M,
        25_557_032,
        outputs=1000,
        data="synthetic",
        paper="ResNet-50",
    ),
    _fcn(
        "fcn-r",
        [784, 2048, 4096, 1024, 10],
        1024,
        OptimizerSpec("sgd", lr=0.05, momentum=0.9),
        14_205_962,
        data="MNIST",
        paper="FCN-R",
    ),
    _image(
        "alexnet-r", "alexnet-cifar", ALEXNET_R, 1024, SGD_M, 85_098, outputs=10, data="CIFAR-10", paper="AlexNet-R"
    ),
    _image(
        "resnet-56",
        "resnet-cifar",
        RESNET_56,
        128,
        SGD_M,
        855_050,
        outputs=10,
        data="CIFAR-10",
        paper="ResNet-56",
        notes="convolutions with bias; 853,018 parameters without",
    ),
    _lstm("lstm", LSTM, 128, 6_182_672, paper="LSTM"),
)

# Same topologies, a few thousand parameters: what the tests sweep end to end.
TINY: tuple[Workload, ...] = (
    _fcn("tiny-fcn-s", [64, 32, 32, 32, 64], 8, SGD, 6_304, data="synthetic", paper=None, hidden=True),
    _image(
        "tiny-alexnet-s",
        "alexnet",
        {"channels": [8, 16, 16, 16, 16], "fc": [32, 32], "image": 64},
        4,
        SGD,
        15_018,
        outputs=10,
        data="synthetic",
        paper=None,
        hidden=True,
    ),
    _image(
        "tiny-resnet-50",
        "resnet-imagenet",
        {"blocks": [1, 1, 1, 1], "widths": [4, 8, 8, 8], "expansion": 4, "image": 32},
        4,
        SGD_M,
        7_470,
        outputs=10,
        data="synthetic",
        paper=None,
        hidden=True,
    ),
    _fcn(
        "tiny-fcn-r",
        [784, 32, 32, 16, 10],
        16,
        OptimizerSpec("sgd", lr=0.05, momentum=0.9),
        26_874,
        data="MNIST",
        paper=None,
        hidden=True,
    ),
    _image(
        "tiny-alexnet-r",
        "alexnet-cifar",
        {"channels": [8, 8, 8], "image": 32},
        16,
        SGD_M,
        4_554,
        outputs=10,
        data="CIFAR-10",
        paper=None,
        hidden=True,
    ),
    _image(
        "tiny-resnet-56",
        "resnet-cifar",
        {"n": 1, "widths": [4, 8, 16], "bias": True, "image": 16},
        8,
        SGD_M,
        5_066,
        outputs=10,
        data="CIFAR-10",
        paper=None,
        hidden=True,
    ),
    _lstm(
        "tiny-lstm",
        {"vocab": 100, "embed": 16, "hidden": 16, "layers": 2, "seq_len": 8},
        4,
        7_652,
        paper=None,
        hidden=True,
    ),
)

# The paper's multi-GPU protocol fixes the total batch and splits it across the devices (strong scaling).
DDP_BATCH = {"fcn-r": 4096, "alexnet-r": 1024, "resnet-56": 128}
SUITE = tuple(replace(w, ddp_batch=DDP_BATCH[w.name]) if w.name in DDP_BATCH else w for w in SUITE)

BUILTIN: dict[str, Workload] = {w.name: w for w in SUITE + TINY}
