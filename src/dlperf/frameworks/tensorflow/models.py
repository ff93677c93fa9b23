"""The seven networks of Shi et al. (2016) as Keras 3 functional models (TensorFlow backend), NHWC.

Layer by layer the same networks as the torch models (shared/reference/shi2016.md), with the same output shapes and,
but for the LSTM, the same parameter counts. Imported only by the tensorflow backend, after it has set KERAS_BACKEND.

Padding follows PyTorch's arithmetic exactly. PyTorch pads p on each side; TensorFlow's SAME pads what the stride needs
to give ceil(size / stride) outputs, asymmetrically where that total is odd (AlexNet-S's conv1 would give 56 x 56, not
55 x 55, and TensorFlow's own SAME-padded AlexNet-S has 76,009,832 parameters instead of 62,378,344). So every strided
convolution or pooling that the reference pads gets an explicit `ZeroPadding2D(p)` and a 'valid' window. A stride-1
convolution with an odd kernel k is padded 'same', which for stride 1 is exactly k // 2 on each side, the reference's
padding, and lets the convolution pad internally: an explicit ZeroPadding2D copies the input into a padded tensor first,
which made graph-mode steps 8-18% slower on ResNet-56, 7-8% on AlexNet-S and 3-9% on AlexNet-R (2 cores, three
interleaved rounds). ResNet-50's stem max-pool pads with zeros where PyTorch pads with -inf: it follows a ReLU, so every
window holds a value >= 0 and the maxima agree.

Weights start as PyTorch's defaults draw them (Linear and Conv2d kernels and biases uniform in +-1/sqrt(fan_in), every
LSTM weight and bias uniform in +-1/sqrt(hidden) with no forget-gate bias added, embeddings standard normal), not with
Keras' defaults (Glorot kernels, zero biases): the first loss is on the reference's scale, and the loss check's short
training behaves as the reference's does. The one difference that remains (`deviations`): Keras' LSTM has one bias
vector per layer where PyTorch's has two, -4 x hidden parameters per layer.
Shapes in comments are NHWC: B mini-batch, H/W image size, C channels, T sequence length, V vocabulary.
"""

from __future__ import annotations

import math

import keras
from keras import layers, ops

from dlperf.workloads.base import Workload
from dlperf.workloads.published import torch_only

# PyTorch's BatchNorm2d defaults: running = 0.9 * running + 0.1 * batch (Keras' momentum is the kept share).
BN = {"momentum": 0.9, "epsilon": 1e-5}


def torch_kernel() -> keras.initializers.Initializer:
    """PyTorch's default for Linear and Conv2d weights, kaiming_uniform(a=sqrt(5)): uniform in +-1/sqrt(fan_in)."""
    return keras.initializers.VarianceScaling(1 / 3, "fan_in", "uniform")


def torch_uniform(fan_in: int) -> keras.initializers.Initializer:
    """PyTorch's default for biases (and for every LSTM weight, with fan_in = hidden): uniform in +-1/sqrt(fan_in)."""
    bound = 1 / math.sqrt(fan_in)
    return keras.initializers.RandomUniform(-bound, bound)


def conv(x, filters: int, kernel: int, stride: int = 1, padding: int = 0, *, bias: bool = True):
    """A 2-d convolution padded as PyTorch's Conv2d(kernel, stride, padding) pads (see the module docstring)."""
    init = {"kernel_initializer": torch_kernel(), "bias_initializer": torch_uniform(kernel * kernel * x.shape[-1])}
    if stride == 1 and kernel % 2 == 1 and padding == kernel // 2:
        return layers.Conv2D(filters, kernel, padding="same", use_bias=bias, **init)(x)
    if padding:
        x = layers.ZeroPadding2D(padding)(x)
    return layers.Conv2D(filters, kernel, strides=stride, padding="valid", use_bias=bias, **init)(x)


def dense(x, units: int, activation: str | None = None):
    init = {"kernel_initializer": torch_kernel(), "bias_initializer": torch_uniform(x.shape[-1])}
    return layers.Dense(units, activation=activation, **init)(x)


def batch_norm(x):
    return layers.BatchNormalization(**BN)(x)


# ----------------------------------------------------------------------------------------------------------------------
# FCN-S and FCN-R: a plain multi-layer perceptron


def fcn(widths: list[int]) -> keras.Model:
    """Dense layers over `widths`, a sigmoid between each pair, raw logits at the end."""
    x = inputs = keras.Input((widths[0],))  # (B, widths[0])
    for i, width in enumerate(widths[1:]):
        x = dense(x, width, "sigmoid" if i < len(widths) - 2 else None)
    return keras.Model(inputs, x, name="fcn")  # (B, widths[-1])


# ----------------------------------------------------------------------------------------------------------------------
# AlexNet-S: single-column AlexNet ("one weird trick"), without LRN and dropout


def alexnet(channels: list[int], fc: list[int], image: int, outputs: int) -> keras.Model:
    c1, c2, c3, c4, c5 = channels
    x = inputs = keras.Input((image, image, 3))
    x = layers.ReLU()(conv(x, c1, 11, 4, 2))  # 224 -> 55
    x = layers.MaxPooling2D(3, 2)(x)  # -> 27
    x = layers.ReLU()(conv(x, c2, 5, 1, 2))
    x = layers.MaxPooling2D(3, 2)(x)  # -> 13
    x = layers.ReLU()(conv(x, c3, 3, 1, 1))
    x = layers.ReLU()(conv(x, c4, 3, 1, 1))
    x = layers.ReLU()(conv(x, c5, 3, 1, 1))
    x = layers.MaxPooling2D(3, 2)(x)  # (B, 6, 6, C5)
    x = layers.Flatten()(x)  # 9216 for AlexNet-S (H, W, C order: the first Dense's rows are permuted, not changed)
    for width in fc:
        x = dense(x, width, "relu")
    return keras.Model(inputs, dense(x, outputs), name="alexnet")  # (B, outputs)


# ----------------------------------------------------------------------------------------------------------------------
# ResNet-50: the ImageNet bottleneck ResNet, torchvision's structure ("v1.5": the stride on the 3x3)


def conv_bn(x, filters: int, kernel: int, stride: int = 1):
    return batch_norm(conv(x, filters, kernel, stride, kernel // 2, bias=False))  # BN has its own shift


def bottleneck(x, cin: int, width: int, cout: int, stride: int):
    y = layers.ReLU()(conv_bn(x, width, 1))
    y = layers.ReLU()(conv_bn(y, width, 3, stride))
    y = conv_bn(y, cout, 1)
    shortcut = conv_bn(x, cout, 1, stride) if stride != 1 or cin != cout else x  # projection where the shape changes
    return layers.ReLU()(layers.Add()([y, shortcut]))


def resnet_imagenet(blocks: list[int], widths: list[int], expansion: int, image: int, outputs: int) -> keras.Model:
    x = inputs = keras.Input((image, image, 3))
    x = layers.ReLU()(conv_bn(x, widths[0], 7, 2))  # 224 -> 112
    x = layers.MaxPooling2D(3, 2)(layers.ZeroPadding2D(1)(x))  # -> 56 (zeros after a ReLU: see the module docstring)
    cin = widths[0]
    for i, (n, width) in enumerate(zip(blocks, widths, strict=True)):
        for j in range(n):
            x = bottleneck(x, cin, width, width * expansion, 2 if i > 0 and j == 0 else 1)
            cin = width * expansion
    x = layers.GlobalAveragePooling2D()(x)  # (B, 2048)
    return keras.Model(inputs, dense(x, outputs), name="resnet_imagenet")


# ----------------------------------------------------------------------------------------------------------------------
# AlexNet-R: cuda-convnet's "layers-18pct" CIFAR-10 net, LRN removed


def alexnet_cifar(channels: list[int], image: int, outputs: int) -> keras.Model:
    c1, c2, c3 = channels
    x = inputs = keras.Input((image, image, 3))
    x = layers.ReLU()(layers.MaxPooling2D(3, 2)(conv(x, c1, 5, 1, 2)))  # 32 -> 15; pools before its ReLU
    x = layers.MaxPooling2D(3, 2)(layers.ReLU()(conv(x, c2, 5, 1, 2)))  # -> 7
    x = layers.AveragePooling2D(3, 2)(layers.ReLU()(conv(x, c3, 5, 1, 2)))  # -> 3
    x = layers.Flatten()(x)  # 576 for AlexNet-R
    return keras.Model(inputs, dense(x, outputs), name="alexnet_cifar")


# ----------------------------------------------------------------------------------------------------------------------
# ResNet-56: He et al.'s CIFAR ResNet, 6n+2 layers, parameter-free "option A" shortcuts


class ShortcutA(layers.Layer):
    """Option A: subsample by the stride and pad the channels (the last axis) with zeros, split evenly."""

    def __init__(self, stride: int, extra: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.stride, self.extra = stride, extra

    def call(self, x):  # (B, H, W, cin)
        x = x[:, :: self.stride, :: self.stride, :]  # (B, H/2, W/2, cin)
        return ops.pad(x, [[0, 0], [0, 0], [0, 0], [self.extra // 2, self.extra - self.extra // 2]])  # (.., cout)

    def compute_output_shape(self, shape):
        b, h, w, c = shape
        return (b, -(-h // self.stride), -(-w // self.stride), c + self.extra)


def basic_block(x, cin: int, cout: int, stride: int, bias: bool):
    y = layers.ReLU()(batch_norm(conv(x, cout, 3, stride, 1, bias=bias)))
    y = batch_norm(conv(y, cout, 3, 1, 1, bias=bias))
    shortcut = x if stride == 1 and cin == cout else ShortcutA(stride, cout - cin)(x)
    return layers.Add()([y, shortcut])  # no ReLU after the add, as the reference


def resnet_cifar(n: int, widths: list[int], bias: bool, image: int, outputs: int) -> keras.Model:
    x = inputs = keras.Input((image, image, 3))
    x = layers.ReLU()(batch_norm(conv(x, widths[0], 3, 1, 1, bias=bias)))
    cin = widths[0]
    for i, width in enumerate(widths):
        for j in range(n):
            x = basic_block(x, cin, width, 2 if i > 0 and j == 0 else 1, bias)
            cin = width
    x = layers.GlobalAveragePooling2D()(x)  # (B, 64) from (B, 8, 8, 64)
    return keras.Model(inputs, dense(x, outputs), name="resnet_cifar")


# ----------------------------------------------------------------------------------------------------------------------
# LSTM: the word-level language model


def lstm_lm(
    vocab: int, embed: int, hidden: int, layer_count: int, seq_len: int, *, unroll: bool = False, cudnn="auto"
) -> keras.Model:
    """Embedding, stacked LSTMs (the state starts at zero each mini-batch), the same Dense head at every step.

    Keras' LSTM keeps one bias vector per layer, PyTorch's two (b_ih and b_hh, whose sum is all that matters): the
    model has 4 x hidden x layers parameters fewer than the reference (its one bias is drawn as one of PyTorch's two).
    `unroll` builds the same network with the
    time loop unrolled (for FLOP counting, whose counter cannot look inside a while loop); `cudnn` is Keras'
    `use_cudnn` (cuDNN runs only on a GPU; on the CPU Keras always runs its generic tf.while_loop over LSTMCell)."""
    x = inputs = keras.Input((seq_len,), dtype="int32")  # (B, T)
    x = layers.Embedding(vocab, embed, embeddings_initializer=keras.initializers.RandomNormal(0.0, 1.0))(x)  # (B, T, E)
    for _ in range(layer_count):
        init = {f"{w}_initializer": torch_uniform(hidden) for w in ("kernel", "recurrent", "bias")}
        lstm = layers.LSTM(
            hidden, return_sequences=True, unroll=unroll, use_cudnn=cudnn, unit_forget_bias=False, **init
        )
        x = lstm(x)  # (B, T, hidden)
    return keras.Model(inputs, dense(x, vocab), name="lstm_lm")  # (B, T, V)


# ----------------------------------------------------------------------------------------------------------------------


def build_model(workload: Workload, **lstm_options) -> keras.Model:
    """The Keras model of a built-in workload, created on the current device scope (`with tf.device(...)`)."""
    torch_only(workload)  # the published networks: `unsupported` here, not an unknown arch
    c, k = workload.config, workload.outputs
    match workload.arch:
        case "fcn":
            return fcn(c["widths"])
        case "alexnet":
            return alexnet(c["channels"], c["fc"], c["image"], k)
        case "resnet-imagenet":
            return resnet_imagenet(c["blocks"], c["widths"], c["expansion"], c["image"], k)
        case "alexnet-cifar":
            return alexnet_cifar(c["channels"], c["image"], k)
        case "resnet-cifar":
            return resnet_cifar(c["n"], c["widths"], c["bias"], c["image"], k)
        case "lstm-lm":
            return lstm_lm(c["vocab"], c["embed"], c["hidden"], c["layers"], c["seq_len"], **lstm_options)
    raise NotImplementedError(
        f"workload {workload.name!r}: the tensorflow backend has no model for arch {workload.arch!r}"
    )


def deviations(workload: Workload) -> list[str]:
    """How the parameter count differs from the reference (PyTorch) definition, in words; [] where it does not."""
    if not param_deviation(workload):
        return []
    return [f"one bias vector per LSTM layer (Keras), not two (PyTorch): {param_deviation(workload):+,} parameters"]


def param_deviation(workload: Workload) -> int:
    """Parameters this backend has beyond (+) or short of (-) the reference definition, by design."""
    if workload.arch == "lstm-lm":
        return -4 * workload.config["hidden"] * workload.config["layers"]  # one LSTM bias vector, not two
    return 0
