"""What CUDA calls a device (torch.cuda.get_device_name, nvidia-smi's name) and the row of the GPU table it is, or
none: a variant the table lacks (a laptop or Max-Q part, another memory size or form factor, a MIG slice) was taken
for the GPU whose name starts its own ("NVIDIA GeForce RTX 4090 Laptop GPU" predicted as the desktop RTX 4090, its
stored predicted-vs-measured wrong); it gets no prediction, and the note says why."""

from __future__ import annotations

import pytest

from dlperf.frameworks.common.ops import Count, Op
from dlperf.predict import cells, count, gpus
from dlperf.protocol import Cell
from dlperf.workloads import BUILTIN

# Each name as users report it in GitHub issues and logs (nvidia-smi --query-gpu=name gives what PyTorch gives), and
# the table's row it is. Older drivers leave out "NVIDIA" ("A100-SXM-80GB", "GeForce GTX TITAN X").
TABLE = [
    ("NVIDIA H200", "H200-SXM-141GB"), ("NVIDIA H200 NVL", "H200 NVL"), ("NVIDIA H100 80GB HBM3", "H100-SXM5-80GB"),
    ("NVIDIA H100 PCIe", "H100-PCIe-80GB"), ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA H800", "H800-SXM5-80GB"),
    ("NVIDIA H20", "H20"), ("NVIDIA GH200 480GB", "GH200"), ("NVIDIA B200", "B200"),
    ("NVIDIA GB200", "GB200 (per GPU)"), ("NVIDIA B300 SXM6 AC", "B300"), ("NVIDIA A100-SXM4-40GB", "A100-SXM4-40GB"),
    ("NVIDIA A100-SXM4-80GB", "A100-SXM4-80GB"), ("A100-SXM-80GB", "A100-SXM4-80GB"),
    ("NVIDIA A100-PCIE-40GB", "A100-PCIe-40GB"), ("NVIDIA A100 80GB PCIe", "A100-PCIe-80GB"), ("NVIDIA A10", "A10"),
    ("NVIDIA A10G", "A10G"), ("NVIDIA A30", "A30"), ("NVIDIA A40", "A40"), ("NVIDIA L4", "L4"), ("NVIDIA L40", "L40"),
    ("NVIDIA L40S", "L40S"), ("Tesla T4", "T4"), ("Tesla V100-SXM2-16GB", "V100-SXM2-16GB"),
    ("Tesla V100-SXM2-32GB", "V100-SXM2-32GB"), ("Tesla V100-SXM3-32GB", "V100-SXM3-32GB"),
    ("Tesla V100-PCIE-16GB", "V100-PCIe-16GB"), ("Tesla P100-SXM2-16GB", "P100-SXM2-16GB"),
    ("Tesla P100-PCIE-16GB", "P100-PCIe-16GB"), ("Tesla K80", "K80 (1 GK210 die)"), ("Tesla K20m", "K20m"),
    ("GRID K520", "GRID K520"), ("Quadro GP100", "Quadro GP100"), ("Quadro RTX 8000", "Quadro RTX 8000"),
    ("Quadro RTX 6000", "Quadro RTX 6000"), ("Quadro RTX 5000", "Quadro RTX 5000"), ("NVIDIA TITAN RTX", "Titan RTX"),
    ("NVIDIA TITAN X (Pascal)", "Titan X (Pascal)"), ("GeForce GTX TITAN X", "Titan X (Maxwell)"),
    ("GeForce GTX 980", "GTX 980"), ("GeForce GTX 1080", "GTX 1080"), ("NVIDIA GeForce GTX 1080 Ti", "GTX 1080 Ti"),
    ("NVIDIA GeForce RTX 2080 Ti", "RTX 2080 Ti"), ("NVIDIA GeForce RTX 3070", "RTX 3070"),
    ("NVIDIA GeForce RTX 3080", "RTX 3080"), ("NVIDIA GeForce RTX 3090", "RTX 3090"),
    ("NVIDIA GeForce RTX 4090", "RTX 4090"), ("NVIDIA GeForce RTX 5080", "RTX 5080"),
    ("NVIDIA GeForce RTX 5090", "RTX 5090"), ("NVIDIA RTX A4000", "RTX A4000"), ("NVIDIA RTX A4500", "RTX A4500"),
    ("NVIDIA RTX A5000", "RTX A5000"), ("NVIDIA RTX A5500", "RTX A5500"), ("NVIDIA RTX A6000", "RTX A6000"),
    ("NVIDIA RTX 4000 Ada Generation", "RTX 4000 Ada"), ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"),
    ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell"),
    ("NVIDIA A16", "A16 (1 of 4 GPUs)"),
]  # fmt: skip

# Other parts, each named so by CUDA, that a part of their name once matched to a row: each is none of the table's.
OTHERS = [
    "NVIDIA GeForce RTX 4090 Laptop GPU", "NVIDIA GeForce RTX 3080 Ti", "NVIDIA GeForce RTX 3080 Laptop GPU",
    "NVIDIA GeForce RTX 2080", "NVIDIA GeForce RTX 5090 D", "NVIDIA RTX A4000 Laptop GPU",
    "NVIDIA RTX 4000 Ada Generation Laptop GPU", "NVIDIA RTX 4000 SFF Ada Generation", "NVIDIA TITAN Xp",
    "Quadro RTX 5000 with Max-Q Design", "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition",
    "NVIDIA RTX PRO 6000 Blackwell Server Edition", "NVIDIA H100 64GB HBM3", "NVIDIA H800 PCIe", "NVIDIA T400",
    "NVIDIA GH200 144G HBM3e", "Tesla V100-PCIE-32GB", "Tesla V100S-PCIE-32GB", "Tesla V100-DGXS-32GB",
    "Tesla P100-PCIE-12GB", "NVIDIA A800-SXM4-80GB", "NVIDIA A100-SXM4-40GB MIG 1g.5gb",
    "NVIDIA H100 80GB HBM3 MIG 1g.10gb", "NVIDIA A100-PCIE-40GB MIG 3G.20GB",
]  # fmt: skip


@pytest.mark.parametrize(("cuda", "name"), TABLE)
def test_what_cuda_calls_each_gpu_of_the_table_is_its_row(cuda, name):
    assert gpus.for_device(cuda).name == name


def test_every_row_of_the_table_has_what_cuda_calls_it():
    assert {name for _, name in TABLE} == set(gpus.names())


@pytest.mark.parametrize("cuda", OTHERS)
def test_another_part_is_none_of_the_tables_gpus(cuda):
    assert gpus.for_device(cuda) is None


def test_the_note_says_why_a_device_gets_no_prediction():
    assert gpus.unmatched("NVIDIA GeForce RTX 4090 Laptop GPU") == ", whose RTX 4090 is another part"
    assert "H100-SXM5-80GB, H100-PCIe-80GB, H100 NVL are other parts" in gpus.unmatched("NVIDIA H100 64GB HBM3")
    assert "a MIG slice of a GPU" in gpus.unmatched("NVIDIA H100 80GB HBM3 MIG 1g.10gb")
    assert gpus.unmatched("Some Future Accelerator 9000") == ""


def test_a_laptop_gpus_run_is_not_predicted_as_the_desktop_part(monkeypatch):
    w = BUILTIN["tiny-fcn-r"]
    cell = Cell(w.name, "torch", "cuda:0", 1, "fp32")
    model = "NVIDIA GeForce RTX 4090 Laptop GPU"
    machine = {"frameworks": {"torch": {"devices": [{"name": "cuda:0", "model": model}]}}}
    op = Op("matmul", "fp32", 2 * 1024**3, 4 * 1024**2)
    monkeypatch.setattr(count, "counts", lambda requests, timeout=None: [Count(w.name, "fp32", 16, (op,), 1, 1)])
    rows, warnings = cells.predictions([cell], {cell.key: w.to_json()}, machine)
    assert rows == [] and warnings == [
        f"no prediction for {model}: it is not in dlperf's GPU table, whose RTX 4090 is another part (dlperf predict "
        f"--list-gpus); give its figures with --gpu-specs FILE.csv, in a row named {model!r}"
    ]


@pytest.mark.parametrize(("cuda", "name"), TABLE)
def test_a_gpu_typed_as_nvidia_smi_names_it_is_the_row_run_maps_it_to(cuda, name):
    """`--gpu "NVIDIA H100 80GB HBM3"` (nvidia-smi's and CUDA's name for the H100 SXM) was "unknown GPU", though `run`
    maps that name to H100-SXM5-80GB: `lookup` reads the same names (`_CUDA_NAMES`)."""
    assert gpus.lookup(cuda).name == name == gpus.for_device(cuda).name
    assert gpus.parse_gpus(f" {cuda} ") == (gpus.lookup(name),)  # as --gpu reads it


def test_a_name_without_its_vendor_word_is_no_cuda_name_and_stays_ambiguous():
    """`--gpu H200` (the SXM part and the H200 NVL fit it) resolved silently to the SXM part once lookup read CUDA's
    names with their vendor word dropped ("NVIDIA H200" is the SXM's): refused as ambiguous again, as the docs say."""
    with pytest.raises(gpus.AmbiguousGPU, match=r"'H200' is ambiguous: H200-SXM-141GB, H200 NVL"):
        gpus.lookup("H200")
    assert gpus.lookup("nvidia h200").name == "H200-SXM-141GB"  # CUDA's name, in any case
