"""The allocator modes (frameworks/common/heap.py). malloc_keep: a PyTorch cell built in it keeps what a step frees in
glibc's heap, so the next step's large blocks come back without the kernel faulting their pages in again; it changes
nothing the step computes, so it is not loss-checked, and a mode search may choose it without one. tcmalloc and
jemalloc: the cell's process starts with the library preloaded (cold), and the cell is unsupported, saying why, where
it was not preloaded or is not installed."""

import json
import os
from types import SimpleNamespace

import pytest

from conftest import preloadable, run_in
from dlperf.frameworks.common import heap
from dlperf.modes import Mode, changes_arithmetic

if heap.glibc() is None:
    pytest.skip("malloc_keep sets glibc's malloc; this C library is not glibc", allow_module_level=True)

# faults taken by a 48 MiB block after a 64 MiB one was freed, in a cell built in MODE: the minor page faults the
# process took while it wrote the block (getrusage), beside the block's pages (4 KiB each). Smaller than the freed
# one: a block of its own size, asked with PyTorch's alignment, may not fit in the hole it left when something was
# allocated above it meanwhile (the heap grows instead: 2 runs in 12 so)
REFAULTS = """
import json, resource, sys
from dlperf.frameworks.common import heap

kept = heap.applied(sys.argv[1])  # as the worker does, before the framework's import
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
print(json.dumps({"faults": faults_of_a_block(48), "pages": 48 * 2**20 // 4096, "settings": kept}))
"""


def test_a_freed_block_comes_back_without_its_pages_faulted_in_again():
    plain = run_in("torch", REFAULTS, "fp32", timeout=120)
    kept = run_in("torch", REFAULTS, "malloc_keep", timeout=120)
    assert plain["faults"] > plain["pages"] / 2, plain  # glibc mapped the block afresh, every page faulted again
    assert kept["faults"] < kept["pages"] / 20, kept  # kept in the heap: its pages are still there
    assert kept["settings"]["malloc"].startswith(f"glibc {heap.glibc()}: mallopt"), kept
    assert kept["settings"]["malloc"].endswith("M_ARENA_MAX 1"), kept
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
    with pytest.raises(NotImplementedError, match=r"^malloc_keep: glibc [\d.]+ refused mallopt\(M_MMAP_MAX"):
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


# ----------------------------------------------------------------------------------------------------------------------
# tcmalloc, jemalloc: preloaded as the cell's process starts

CHECK = """
import json, sys
from dlperf.frameworks.common import heap
from dlperf.modes import Mode
try:
    print(json.dumps({"settings": heap.check_preloaded(Mode(sys.argv[1]))}))
except NotImplementedError as e:
    print(json.dumps({"refused": str(e)}))
"""


def checked_in_a_child(component, env):
    import subprocess
    import sys

    from conftest import ROOT

    env = {**os.environ, **env, "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", CHECK, component.value], capture_output=True, text=True, env=env,
                          timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize("component", list(heap.PRELOADS))
def test_a_preloaded_malloc_is_found_in_the_process_it_was_preloaded_in_and_refused_elsewhere(component):
    names, _ = heap.PRELOADS[component]
    found = preloadable(component)  # a machine without it: a skip, or a failure where CI requires it
    preloaded = checked_in_a_child(component, heap.preload_env(component.value, {}))
    assert preloaded["settings"]["malloc"].startswith(f"lib{names[0]}.so") and "(LD_PRELOAD)" in str(preloaded)
    plain = checked_in_a_child(component, {"LD_PRELOAD": ""})
    assert plain == {"refused": f"{component.value}: {found} was not preloaded in this process (LD_PRELOAD)"}


@pytest.mark.parametrize("component", list(heap.PRELOADS))
def test_a_malloc_not_installed_is_refused_naming_where_it_comes_from(component, monkeypatch):
    names, source = heap.PRELOADS[component]
    monkeypatch.setattr(heap, "library", lambda c: None)
    monkeypatch.setattr(heap, "mapped", lambda c: None)
    assert heap.preload_env(component.value, {}) == {}
    with pytest.raises(NotImplementedError) as refused:
        heap.check_preloaded(component)
    assert str(refused.value) == f"{component.value}: lib{names[0]} is not installed here; it comes with {source}"


def test_the_library_is_asked_for_by_the_names_the_dynamic_loader_knows(monkeypatch):
    """`heap.library` decides every allocator test's expectations: that it asks for the right names is tested alone
    (a misspelt name had every test take "not installed" as expected)."""
    asked = []
    monkeypatch.setattr("ctypes.util.find_library", lambda name: asked.append(name) or None)
    heap.library.cache_clear()
    try:
        assert heap.library(Mode.TCMALLOC) is None and heap.library(Mode.JEMALLOC) is None
    finally:
        heap.library.cache_clear()
    assert asked == ["tcmalloc_minimal", "tcmalloc", "jemalloc"]


def test_the_cell_preloads_its_malloc_before_the_users_own_and_starts_cold(monkeypatch):
    from dlperf.protocol import Cell
    from dlperf.runner import warm

    monkeypatch.setattr(heap, "library", lambda component: f"lib{component.value}.so.9")
    assert heap.preload_env("bf16+tcmalloc", {"LD_PRELOAD": "/opt/mine.so"}) == {
        "LD_PRELOAD": "libtcmalloc.so.9 /opt/mine.so"
    }
    conf = heap.PRELOAD_ENV[Mode.JEMALLOC]["MALLOC_CONF"]
    assert heap.preload_env("jemalloc", {}) == {"LD_PRELOAD": "libjemalloc.so.9", "MALLOC_CONF": conf}
    assert heap.preload_env("jemalloc", {"MALLOC_CONF": "narenas:1"}) == {"LD_PRELOAD": "libjemalloc.so.9"}  # theirs
    assert heap.preload_env("malloc_keep", {}) == heap.preload_env("fp32", {}) == {}
    monkeypatch.delenv(warm.OFF_VAR, raising=False)
    said = warm.why_cell_cold(Cell("tiny-fcn-r", "torch", "cpu", 1, "jemalloc"))
    assert said == "jemalloc is preloaded (LD_PRELOAD) as the interpreter starts"
    assert warm.why_cell_cold(Cell("tiny-fcn-r", "torch", "cpu", 1, "malloc_keep")) is None  # set after the fork


def test_malloc_keep_is_refused_where_another_malloc_was_preloaded(monkeypatch):
    monkeypatch.setattr(heap, "mapped", lambda c: "/usr/lib/libjemalloc.so.2" if c is Mode.JEMALLOC else None)
    with pytest.raises(NotImplementedError, match=r"^malloc_keep sets glibc's malloc; this process's is jemalloc's"):
        heap.keep_freed()


@pytest.mark.slow  # four cells, two of them started cold: about 7 s
def test_a_run_measures_each_allocator_in_a_process_that_has_it(tmp_path):
    from conftest import dlperf
    from dlperf.store import Store

    modes = ["fp32", "malloc_keep", "tcmalloc", "jemalloc"]
    done = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", "--modes", ",".join(modes), "--devices",
                  "cpu", "--min-time", "0.2", "--max-time", "0.5", db=tmp_path / "a.db")  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store.open(tmp_path / "a.db", create=False)
    try:
        [run] = store.runs()
        got = {c.mode: c for c in store.cells(run.id)}
        started = {m: store.measurements(run.id, c.key)[0].detail for m, c in got.items()}
    finally:
        store.close()
    assert sorted(got) == sorted(modes)
    assert got["fp32"].ok and "malloc" not in (got["fp32"].settings or {})
    assert got["malloc_keep"].ok and got["malloc_keep"].settings["malloc"].startswith("glibc ")
    assert got["malloc_keep"].loss_check is None  # fp32's arithmetic: nothing to check
    for component in (Mode.TCMALLOC, Mode.JEMALLOC):
        cell = got[component.value]
        preloadable(component)  # a machine without it: a skip, or a failure where CI requires it
        assert cell.ok, cell.error
        malloc = cell.settings["malloc"]  # the file mapped: the library's name, or the file it links to (.so.4.5.10)
        assert malloc.startswith(heap.library(component)) and " (LD_PRELOAD)" in malloc, malloc
        assert ("MALLOC_CONF=oversize_threshold:1" in malloc) is (component is Mode.JEMALLOC), malloc
        assert started[component.value].cold_because == f"{component.value} is preloaded (LD_PRELOAD) as the " \
                                                        "interpreter starts"  # fmt: skip
