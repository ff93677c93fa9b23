"""The memory a step has on a GPU is what CUDA reports for it (`cuda_gib`), not the size it is sold by (`mem_gib`):
a T4 sold with 16 GB shows 15360 MiB in nvidia-smi and 14.56 GiB to CUDA (a sixteenth held by ECC), so a step
predicted at 15 GiB fitted a T4 it cannot run on."""

from __future__ import annotations

import pytest

from dlperf.errors import UsageError
from dlperf.predict import gpus, memory
from predict.conftest import BEFORE_CUDA_GIB, HEADER


def test_a_t4_has_the_memory_cuda_reports_for_it_not_the_16_gb_it_is_sold_with():
    t4 = gpus.lookup("T4")
    assert t4.memory_gib == 16 and t4.cuda_gib == pytest.approx(14.56)
    assert memory.usable(t4) == int(14.56 * memory.GIB) - memory.CONTEXT_BYTES
    assert memory.usable(t4) < 15 * memory.GIB  # below the 15360 MiB nvidia-smi shows: the driver keeps some


def test_every_cuda_figure_is_below_the_size_sold_and_names_its_source():
    given = [g for g in gpus.builtin() if g.cuda_gib]
    assert {"T4", "H100-SXM5-80GB", "A100-SXM4-80GB", "L40S", "RTX 4090", "A10"} <= {g.name for g in given}
    for g in given:
        assert 0.9 * g.memory_gib < g.cuda_gib < g.memory_gib, g.name
        assert "cuda_gib: " in g.source and "github.com/" in g.source.split("cuda_gib: ")[1], g.name
    for g in gpus.builtin():  # without one, the size sold: an upper bound
        assert memory.usable(g) == int((g.cuda_gib or g.memory_gib) * memory.GIB) - memory.CONTEXT_BYTES


def write(tmp_path, row: str, header: str = HEADER):
    path = tmp_path / "mine.csv"
    path.write_text(f"{header}\n{row}\n")
    return str(path)


def test_a_users_file_may_give_the_cuda_figure_or_leave_it_out(tmp_path):
    gpus.use_specs(write(tmp_path, "Lab GPU,50,100,200,200,,1000,32,30.5,PCIe Gen5 x16,63,Hopper,,,,boost,ours"))
    assert gpus.lookup("Lab GPU").device_gib == 30.5
    old = BEFORE_CUDA_GIB  # a file in the columns of before: still read, the size sold taken
    gpus.use_specs(write(tmp_path, "Lab GPU,50,100,200,200,,1000,32,PCIe Gen5 x16,63,Hopper,,,,boost,ours", old))
    assert gpus.lookup("Lab GPU").device_gib == 32


def test_a_cuda_figure_above_the_size_sold_is_one_line_naming_the_column(tmp_path):
    path = write(tmp_path, "Lab GPU,50,100,200,200,,1000,32,33,PCIe Gen5 x16,63,Hopper,,,,boost,ours")
    with pytest.raises(UsageError, match=r"line 2, column cuda_gib: 33 is above mem_gib"):
        gpus.use_specs(path)
