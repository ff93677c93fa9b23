"""What a plan warns about before anything is measured (each measured anyway): inherited thread variables, threads
or processes beyond the cores, a pinning mask smaller than a cell, a reduced precision without a fast path here,
loader workers that take the compute threads' cores, `--data dataset` where ./dataset is a folder. And what it says
before measuring that is no warning: the image folder each workload reads (`Plan.notes`)."""

from __future__ import annotations

from dlperf.answers import DataCheck
from dlperf.frameworks.common import capabilities
from dlperf.loaders import DATA_DATASET, keyword_folder, oversubscribed, restarts_every, setting
from dlperf.measure import system
from dlperf.measure.units import plural
from dlperf.modes import mode_components
from dlperf.protocol import Cell
from dlperf.spec import RunSpec

SLOW_PRECISION = 0.8  # a reduced precision whose matrix products run below this share of fp32's speed may not pay
TRAP_PRECISION = 0.25  # ... and below this one it is emulated (on an AVX2-only CPU bf16 ran 12-16x slower than fp32)
NATIVE_FLAGS = {"bf16": ("avx512_bf16", "amx_bf16"), "fp16": ("avx512_fp16", "amx_fp16")}
BF16_CAPABILITY = (8, 0)  # bf16 tensor cores arrived with Ampere; before it CUDA emulates bf16


def inherited_warning(name: str, value: str) -> str:
    if name in system.THREAD_COUNT_VARS:
        return f"inherited {name}={value} is replaced by each cell's thread count"
    return f"inherited {name}={value} changes threading or kernels; recorded with every cell"


def pin_warnings(spec: RunSpec, counts: list[int], allowed: int) -> list[str]:
    """--pin with more threads than this process may run on: those cells share the allowed CPUs."""
    if not spec.pin or max(counts) <= allowed:
        return []
    return [f"--pin: only {allowed} CPUs are in this process's affinity mask; cells with more threads are pinned to "
            f"those {allowed}"]  # fmt: skip


def ddp_warnings(spec: RunSpec, cores: int, on_cpu: bool) -> list[str]:
    """Each process count whose processes x threads exceed the cores, where the processes share the CPU."""
    warnings = []
    for n in spec.nprocs or ():
        threads = list(spec.threads) if spec.threads else [max(1, cores // n)]
        over = [t for t in threads if n * t > cores and on_cpu]
        if over:
            warnings.append(f"--nproc {n} x --threads {','.join(map(str, over))} exceeds the {cores} usable cores: "
                            "expect oversubscription; measured anyway")  # fmt: skip
    return warnings


def precision_warnings(cells: list[Cell], env: dict) -> list[str]:
    """Before anything is measured: each reduced precision the plan uses on a device that lacks a fast path for it.
    On the CPU, from the matrix-product speeds against fp32 each framework's probe measured in its own kernels
    (`common.speed`), and the CPU's flags; on a CUDA GPU, from its compute capability."""
    used: dict[tuple[str, str], set[str]] = {}
    for c in cells:
        for p in mode_components(c.mode):  # not a framework whose backend lacks the mode: its cells are unsupported
            if p.value in NATIVE_FLAGS and p in capabilities.of(c.framework).modes:
                used.setdefault((c.device, p.value), set()).add(c.framework)
    frameworks = env.get("frameworks") or {}
    speeds = {name: ((fw or {}).get("precision_speed") or {}).get("cpu") or {} for name, fw in frameworks.items()}
    gpus = {d["name"]: d for fw in frameworks.values() for d in fw.get("devices", []) if "capability" in d}
    flags = set((env.get("cpu") or {}).get("flags") or [])
    warnings = []
    for (device, dtype), names in sorted(used.items()):
        if device == "cpu":
            ratios = {name: speeds.get(name, {}).get(dtype) for name in names}
            warnings += cpu_precision_warnings(dtype, ratios, speeds.get("torch", {}).get(dtype), flags)
        gpu = gpus.get(device)
        if gpu and dtype == "bf16" and tuple(int(x) for x in gpu["capability"].split(".")) < BF16_CAPABILITY:
            warnings.append(f"bf16 on {device} ({gpu.get('model')}, compute capability {gpu['capability']}): no bf16 "
                            "tensor cores before 8.0, bf16 is emulated: expect the bf16 cells to be slower than fp32; "
                            "measured anyway")  # fmt: skip
    return warnings


def cpu_precision_warnings(dtype: str, ratios: dict[str, float | None], torch: float | None,
                           flags: set[str]) -> list[str]:  # fmt: skip
    """What the `dtype` matrix products each framework's probe timed (framework -> its speed over fp32's, None where
    it timed none) say of that framework's cells: one line for each framework whose own product ran below
    `SLOW_PRECISION`, and one for those whose probe timed none, from PyTorch's figure (`torch`) where it is slow,
    saying whose it was and promising only "no faster". Frameworks differ: on an Intel Xeon with AVX-512 and no
    avx512_bf16, a bf16 product ran 0.2x fp32's speed in PyTorch and TensorFlow and 0.8x in JAX."""
    native = [f for f in NATIVE_FLAGS[dtype] if f in flags]
    has = f"the CPU has {', '.join(native)}" if native else f"no {' or '.join(NATIVE_FLAGS[dtype])} on this CPU"
    named, said = len(ratios) > 1 or set(ratios) != {"torch"}, []
    for name, ratio in sorted(ratios.items()):
        if ratio is not None and ratio < SLOW_PRECISION:
            expect = "many times slower than" if ratio < TRAP_PRECISION else "no faster than, or slower than,"
            where, product, cells = (
                (f", {name}", f"{name}'s {dtype}", f"{name} {dtype}") if named else ("", f"a {dtype}", dtype)
            )
            said.append(f"{dtype} on cpu{where}: {product} matrix product ran {1 / ratio:.1f}x slower than fp32 here "
                        f"({has}): expect the {cells} cells to be {expect} fp32; measured anyway")  # fmt: skip
    untimed = sorted(name for name, ratio in ratios.items() if ratio is None and name != "torch")
    if untimed and torch is not None and torch < SLOW_PRECISION:
        others, owners = " and ".join(untimed), " and ".join(f"{name}'s" for name in untimed)
        said.append(f"{dtype} on cpu, {others}: a {dtype} matrix product ran {1 / torch:.1f}x slower than fp32 here "
                    f"in PyTorch ({has}; {owners} own kernels were not timed): expect the {others} {dtype} cells "
                    "to be no faster than fp32; measured anyway")  # fmt: skip
    return said


def loader_warnings(cells: list[Cell], cores: int) -> list[str]:
    """Loader workers and compute threads share the cores: the pairs of a plan that ask for more than there are."""
    over = sorted({(c.loader, c.threads) for c in cells if c.loader and c.device == "cpu"
                   and oversubscribed(setting(c.loader).workers, c.threads, cores)})  # fmt: skip
    if not over:
        return []
    pairs = ", ".join(f"{loader} with {plural(threads, 'thread')}" for loader, threads in over)
    return [f"--data: loader workers + compute threads exceed the {cores} cores in {pairs}: they take turns; "
            "measured anyway"]  # fmt: skip


def epoch_warnings(cells: list[Cell], batches: dict[str, int], data: dict[str, DataCheck]) -> list[str]:
    """Loader settings whose workers do not persist, on a dataset of fewer than `loaders.SHORT_EPOCH` batches: each
    epoch ends within a few steps and starts the workers again, and the steps carry it (each such cell says so too,
    once measured). On an H200, resnet-50 fed by two pinned workers from a 32-image folder, an epoch every 2 steps:
    145 ms a step against 109 ms loading in the training process."""
    warnings = []
    for workload in sorted({c.workload for c in cells if c.loader}):
        found, batch = data.get(workload), batches.get(workload)
        every = {c.loader: restarts_every(found and found.samples, batch, c.loader, found and found.batches)
                 for c in cells if c.workload == workload and c.loader}  # fmt: skip
        restarting = sorted(loader for loader, epoch in every.items() if epoch)
        if restarting:
            epoch = every[restarting[0]]  # the dataset's batches an epoch: the same for each setting
            warnings.append(
                f"--data: {workload}'s dataset holds {found.samples:,} samples, {epoch} batches of {batch} an "
                f"epoch: {', '.join(restarting)} {'start their' if len(restarting) > 1 else 'starts its'} workers "
                f"again every {epoch} steps, and {'their steps carry' if len(restarting) > 1 else 'its steps carry'} "
                "it (+persist keeps them, or more data spreads it); measured anyway"
            )
    return warnings


def keyword_warnings(data: str) -> list[str]:
    """`--data dataset` where a folder of that name is in the current directory: the keyword is what is read, and
    the line says how to name the folder (a `./dataset` of images was read as the keyword, every built-in loader cell
    `unsupported`, and nothing said of the folder). `--data synthetic` is also the default, which no folder should
    be warned of: the `--loaders` it refuses names ./synthetic (`spec.py`)."""
    here = keyword_folder(data) if data == DATA_DATASET else ""
    return [f"--data {data}: the keyword, each user workload's own Dataset and no folder (a built-in workload's "
            f"loader cells are unsupported); {here}"] if here else []  # fmt: skip


def data_notes(data: dict[str, DataCheck]) -> list[str]:
    """The image folder each workload reads, as dlperf found it in --data DIR (DIR/imagenet/train, DIR/train or DIR
    itself), with its images and classes: said once before the run measures, a line a folder."""
    read: dict[tuple, list[str]] = {}
    for name, found in sorted(data.items()):
        if found.folder is not None:
            read.setdefault((found.folder, found.samples or 0, found.classes or 0, found.skipped), []).append(name)
    return [f"--data: {', '.join(names)} {'read' if len(names) > 1 else 'reads'} the image folder {folder}: "
            f"{plural(images, 'image')} in {plural(classes, 'class', 'es')}" + (f"; {skipped}" if skipped else "")
            for (folder, images, classes, skipped), names in read.items()]  # fmt: skip
