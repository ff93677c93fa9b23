"""The malloc_keep mode (frameworks/common/heap.py): a PyTorch cell built in it keeps what a step frees in glibc's heap,
so the next step's large blocks come back without the kernel faulting their pages in again; it changes nothing the
step computes, so it is not loss-checked, and a mode search may choose it without one."""

import os
from types import SimpleNamespace

import pytest

from conftest import run_in
from dlperf.frameworks.common import heap
from dlperf.modes import changes_arithmetic

if heap.glibc() is None:
    pytest.skip("malloc_keep sets glibc's malloc; this C library is not glibc", allow_module_level=True)

# faults taken by a 48 MiB block after a 64 MiB one was freed, in a cell built in MODE: the minor page faults the
# process took while it wrote the block (getrusage), beside the block's pages (4 KiB each). Smaller than the freed
# one: a block of its own size, asked with PyTorch's alignment, may not fit in the hole it left when something was
# allocated above it meanwhile (the heap grows instead: 2 runs in 12 so)
REFAULTS = """
import json, resource, sys
import torch
from dlperf.frameworks.torch.build import build
from dlperf.workloads import BUILTIN

step = build(BUILTIN["tiny-fcn-r"], "cpu", sys.argv[1])
step.step()

def faults_of_a_block(mib):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = torch.empty(mib * 2**20, dtype=torch.uint8)
    block.fill_(1)
    del block
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

faults_of_a_block(64)  # the first maps its pages in either way
print(json.dumps({"faults": faults_of_a_block(48), "pages": 48 * 2**20 // 4096, "settings": step.mode_settings}))
"""


def test_a_freed_block_comes_back_without_its_pages_faulted_in_again():
    plain = run_in("torch", REFAULTS, "fp32", timeout=120)
    kept = run_in("torch", REFAULTS, "malloc_keep", timeout=120)
    assert plain["faults"] > plain["pages"] / 2, plain  # glibc mapped the block afresh, every page faulted again
    assert kept["faults"] < kept["pages"] / 20, kept  # kept in the heap: its pages are still there
    assert kept["settings"]["malloc"].startswith(f"glibc {heap.glibc()}: mallopt"), kept
    assert "malloc" not in plain["settings"], plain


def test_the_mode_is_refused_in_one_line_where_the_c_library_is_not_glibc(monkeypatch):
    monkeypatch.setattr(os, "confstr", lambda name: (_ for _ in ()).throw(ValueError("unrecognized configuration")))
    with pytest.raises(NotImplementedError, match=r"^malloc_keep sets glibc's malloc \(mallopt\); this C library"):
        heap.keep_freed()


def test_the_mode_is_refused_where_glibc_refuses_a_threshold(monkeypatch):
    class Refusing:
        def mallopt(self, option, value):
            return 0

    monkeypatch.setattr(heap.ctypes, "CDLL", lambda name: Refusing())
    with pytest.raises(NotImplementedError, match=r"^malloc_keep: glibc [\d.]+ refused mallopt\(M_MMAP_THRESHOLD"):
        heap.keep_freed()


def test_an_allocator_alone_is_not_loss_checked_but_with_a_precision_it_is():
    from dlperf.protocol import Cell
    from dlperf.runner.sweep import child_task
    from dlperf.runner.tasks import Task

    assert not changes_arithmetic("malloc_keep") and not changes_arithmetic("fp32")
    assert changes_arithmetic("bf16+malloc_keep") and changes_arithmetic("channels_last+malloc_keep")
    spec = SimpleNamespace(loss_check=True, timer=None, nvtx=False, data=None, pin=False, max_memory=None)
    store = SimpleNamespace(cells=lambda run_id: [], path="/tmp/a.db")
    for mode, checked in (("malloc_keep", False), ("bf16+malloc_keep", True)):
        cell = Cell("tiny-fcn-r", "torch", "cpu", 1, mode)
        ctx = SimpleNamespace(store=store, run_id=1, spec=spec, workloads={cell.key: {"name": "tiny-fcn-r"}})
        assert child_task(Task(cell, 0), ctx).loss_check is checked, mode


def test_a_search_may_choose_it_without_a_loss_check():
    """A candidate whose arithmetic is fp32's passes the loss condition as fp32 does, and may be recommended; a
    precision without a check may not (optimize.eligible)."""
    from conftest import make_cell
    from dlperf import optimize as opt

    times = {"fp32": 2.0, "malloc_keep": 1.2, "bf16": 1.0}
    cells = [make_cell(mode=m, median_s=t, n=20, loss_check=None) for m, t in times.items()]
    samples = {c.key: [[times[c.mode] * (1 + 0.001 * i) for i in range(20)]] for c in cells}
    cands = {c.mode: c for c in opt.candidates_of(cells, samples, {})}
    assert cands["malloc_keep"].loss_ok is True and cands["bf16"].loss_ok is None
    assert opt.recommend(list(cands.values())).mode == "malloc_keep"  # bf16, faster but unchecked, is not
