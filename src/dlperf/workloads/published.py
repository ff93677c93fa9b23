"""The networks of published single-GPU training benchmarks, as workloads: what `dlperf predict --validate` needs to
set its predictions against the published measurements it ships (dlperf/data/gpu_dev.csv).

Each has the mini-batch its reference benchmark uses by default, the parameter count of the reference definition
(static data: tests build every model and check it), and in `notes` the reference. They are defined for PyTorch only
(`torch_only`), and are not in the default sweep (`SUITE`, the paper's seven).
"""

from __future__ import annotations

from typing import Any

from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload

TORCH_ONLY = {"torch_only": True}  # Workload.extra: the other backends answer `unsupported` (see torch_only)

SGD_M = OptimizerSpec("sgd", lr=0.1, momentum=0.9)

TF_CNN = "tf_cnn_benchmarks (tensorflow/benchmarks), batch 64"
TORCHVISION = "parameters as torchvision's definition"
DLE_RN50 = "NVIDIA DeepLearningExamples PyTorch/Classification/ConvNets/resnet50v1.5, batch 256 (configs.yml)"
DAWN_CIFAR = (
    "He et al. 2016; batch 128 as stanford-futuredata/dawn-bench-models (tensorflow/CIFAR10/resnet, "
    "tensorflow/models' resnet_model.py)"
)


def torch_only(workload: Workload) -> None:
    """NotImplementedError (the cell is `unsupported`) for a network only PyTorch defines: a backend other than the
    torch one calls this before building."""
    if why := torch_only_refusal(workload):
        raise NotImplementedError(why)


def torch_only_refusal(workload: Workload) -> str | None:
    """Why `torch_only` refuses `workload` on another backend; None for a network every backend defines."""
    return f"{workload.name} is defined for PyTorch only" if workload.extra.get("torch_only") else None


def _image(name, arch, config, batch, params, *, data="ImageNet", outputs=1000, opt=SGD_M, notes):
    size = config["image"]
    return Workload(name=name, arch=arch, config=dict(config), input=InputSpec("image", (3, size, size)),
                    outputs=outputs, batch=batch, optimizer=opt, params=params, data=data, notes=notes,
                    extra=dict(TORCH_ONLY))  # fmt: skip


def _tokens(name, arch, config: dict[str, Any], batch, params, opt, *, data, notes):
    return Workload(name=name, arch=arch, config=dict(config),
                    input=InputSpec("tokens", (config["seq_len"],), dtype="int64", vocab=config["vocab"]),
                    outputs=config["vocab"], batch=batch, optimizer=opt, params=params, data=data, notes=notes,
                    extra=dict(TORCH_ONLY))  # fmt: skip


def _resnet(blocks, block="bottleneck", stride_on="3x3"):
    expansion = 4 if block == "bottleneck" else 1
    return {"blocks": blocks, "widths": [64, 128, 256, 512], "expansion": expansion, "image": 224, "block": block,
            "stride_on": stride_on}  # fmt: skip


def _cifar(n):
    return {"n": n, "widths": [16, 32, 64], "bias": False, "image": 32}


def _vgg(convs):
    widths = [64, 128, 256, 512, 512]
    return {"stages": [[w] * n for w, n in zip(widths, convs, strict=True)], "fc": 4096, "image": 224}


V1 = "ResNet v1: the stride on the first 1x1 (fb.resnet.torch, tf_cnn_benchmarks); "
CIFAR_V1 = "option-A shortcuts, bias-free convolutions; "

IMAGENET: tuple[Workload, ...] = (
    _image("resnet-50-v1.5", "resnet-imagenet", _resnet([3, 4, 6, 3]), 256, 25_557_032,
           notes=f"ResNet v1.5: the stride on the 3x3; {DLE_RN50}"),
    _image("resnet-50-v1", "resnet-imagenet", _resnet([3, 4, 6, 3], stride_on="1x1"), 64, 25_557_032,
           notes=V1 + TF_CNN),
    _image("resnet-18", "resnet-imagenet", _resnet([2, 2, 2, 2], "basic"), 64, 11_689_512,
           notes=f"basic blocks; {TORCHVISION}; {TF_CNN}"),
    _image("resnet-34", "resnet-imagenet", _resnet([3, 4, 6, 3], "basic"), 64, 21_797_672,
           notes=f"basic blocks; {TORCHVISION}; {TF_CNN}"),
    _image("resnet-101", "resnet-imagenet", _resnet([3, 4, 23, 3], stride_on="1x1"), 64, 44_549_160,
           notes=V1 + TF_CNN),
    _image("resnet-152", "resnet-imagenet", _resnet([3, 8, 36, 3], stride_on="1x1"), 64, 60_192_808,
           notes=V1 + TF_CNN),
    _image("vgg-16", "vgg", _vgg([2, 2, 3, 3, 3]), 64, 138_357_544,
           notes=f"Simonyan & Zisserman 2015, configuration D, no batch norm; {TORCHVISION}; {TF_CNN}"),
    _image("vgg-19", "vgg", _vgg([2, 2, 4, 4, 4]), 64, 143_667_240,
           notes=f"Simonyan & Zisserman 2015, configuration E, no batch norm; {TORCHVISION}; {TF_CNN}"),
    _image("inception-v3", "inception-v3", {"image": 299}, 64, 27_161_264,
           notes=f"Szegedy et al. 2016; torchvision's training definition, with the auxiliary classifier and its loss "
                 f"(weight 0.4; 23,834,568 parameters without it); {TF_CNN}"),
    _image("alexnet-owt", "alexnet", {"channels": [64, 192, 384, 256, 256], "fc": [4096, 4096], "image": 224,
                                      "dropout": 0.5}, 512, 61_100_840,
           notes="Krizhevsky 2014, \"one weird trick\"; torchvision's AlexNet; batch 512 as tf_cnn_benchmarks"),
)  # fmt: skip

CIFAR: tuple[Workload, ...] = (
    *(
        _image(f"resnet-{6 * n + 2}", "resnet-cifar", _cifar(n), 128, params, data="CIFAR-10", outputs=10,
               notes=CIFAR_V1 + DAWN_CIFAR)
        for n, params in ((3, 269_722), (5, 464_154), (7, 658_586), (18, 1_727_962))
    ),
    _image("resnet-164", "preact-resnet-cifar", {"n": 18, "widths": [16, 32, 64], "block": "bottleneck", "image": 32},
           128, 1_703_258, data="CIFAR-10", outputs=10,
           notes="pre-activation bottleneck blocks, projection shortcuts; " + DAWN_CIFAR),
    _image("resnet-164-basic", "preact-resnet-cifar", {"n": 27, "widths": [16, 32, 64], "block": "basic",
                                                       "image": 32},
           128, 2_602_906, data="CIFAR-10", outputs=10,
           notes="pre-activation basic blocks (no bottleneck), option-A shortcuts; " + DAWN_CIFAR),
    _image("resnet-9", "resnet-9", {"widths": [64, 128, 256, 512], "scale": 0.125, "image": 32}, 512, 6_573_120,
           data="CIFAR-10", outputs=10, opt=OptimizerSpec("sgd", lr=0.4, momentum=0.9),
           notes="D. Page (Myrtle.ai), \"How to train your ResNet\", the DAWNBench CIFAR-10 entry; batch 512 as its "
                 "code (davidcpage/cifar10-fast); momentum without Nesterov"),
)  # fmt: skip

OTHER: tuple[Workload, ...] = (
    _tokens("gnmt", "gnmt", {"vocab": 32320, "hidden": 1024, "layers": 4, "seq_len": 50}, 128, 160_671_297,
            OptimizerSpec("adam", lr=2e-3), data="WMT16 En-De",
            notes="GNMT v2 as NVIDIA DeepLearningExamples PyTorch/Translation/GNMT (160,671,297 parameters, its "
                  "README); the tokens are both source and target (teacher forcing), every sequence of full length; "
                  "cross entropy without label smoothing"),
    _tokens("awd-lstm", "awd-lstm", {"vocab": 10000, "sizes": [400, 1150, 1150, 400], "seq_len": 70}, 20,
            24_221_600, OptimizerSpec("sgd", lr=30.0, clip_grad_norm=0.25), data="Penn Treebank",
            notes="Merity et al. 2018 (salesforce/awd-lstm-lm), tied decoder; dropouts and weight drop omitted "
                  "(they cost little time); batch 20, BPTT 70"),
    Workload("mlp-mnist", "fcn", {"widths": [784, 512, 512, 10], "activation": "relu", "dropout": 0.2},
             InputSpec("vector", (784,)), 10, 128, OptimizerSpec("rmsprop", lr=1e-3), params=669_706, data="MNIST",
             notes="Keras examples/mnist_mlp.py: ReLU, dropout 0.2, RMSprop, batch 128", extra=dict(TORCH_ONLY)),
)  # fmt: skip

PUBLISHED: tuple[Workload, ...] = IMAGENET + CIFAR + OTHER
