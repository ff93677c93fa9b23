"""A cell's counted figures kept between runs (runner/kept.py): a new run of the same cell asks its process for no
FLOP count and no memory step, and stores the first run's figures, marked as cached; anything they depend on that
changed (the batch, the model's file, the framework's version) is counted afresh; a figure read from the machine's
state (a resident-set or allocator peak) is never kept."""

import os
import time
from dataclasses import replace
from types import SimpleNamespace

import pytest

from conftest import FAST, dlperf, require
from dlperf import envs
from dlperf.protocol import Cell
from dlperf.runner import kept, probe_cache
from dlperf.runner.sweep import child_task, store_result
from dlperf.runner.tasks import Task
from dlperf.store import Store
from dlperf.store.process import ProcessDetail, ProcessMeasurement
from dlperf.store.records import CellFigures
from dlperf.vocab import Status

CELL = Cell("fcn-r", "torch", "cpu", 1, "fp32")
WORKLOAD = {"name": "fcn-r", "batch": 1024}
COUNTED = ProcessDetail(flops_per_step=840, flops_by_dtype={"fp32": 840},
                        memory={"live_tensor_peak_bytes": 2000, "process_rss_peak_bytes": 9000},
                        sources={}, started_at=time.time())  # fmt: skip


@pytest.fixture
def here(tmp_path, monkeypatch):
    """A DATA_DIR of the test's own, the cache on, and torch at a version the test sets (`here.version`)."""
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.delenv(kept.BYPASS, raising=False)
    state = SimpleNamespace(version="2.13.0")
    monkeypatch.setattr(probe_cache, "framework_version", lambda framework, python: state.version)
    monkeypatch.setattr(envs, "interpreter_for", lambda framework: "python")
    return state


def context(workload=WORKLOAD, cell=CELL):
    spec = SimpleNamespace(loss_check=False, timer=None, nvtx=False, data=None, pin=False, max_memory=None)
    store = SimpleNamespace(cells=lambda run_id: [], path="/tmp/a.db")
    return SimpleNamespace(store=store, run_id=1, spec=spec, workloads={cell.key: dict(workload)})


def asked(ctx, cell=CELL) -> tuple[bool, bool]:
    task = child_task(Task(cell, 0), ctx)
    return task.count_flops, task.measure_memory


def test_a_fit_try_is_asked_its_memory_not_its_flops(here):
    """A try of dlperf fit (a run under --max-memory) counted its FLOPs after its timed steps: one more step, 41 s at
    alexnet-r's batch 39,762 on 2 threads, where the try ran past --timeout 300 s. Its answer is its memory."""
    ctx = context()
    ctx.spec.max_memory = 2**30
    assert asked(ctx) == (False, True)


def entry(workload=WORKLOAD, cell=CELL):
    return kept.key(cell, workload)


def test_a_kept_cell_asks_its_process_for_neither_figure_and_takes_them(here):
    assert asked(context()) == (True, True)
    kept.keep(entry(), COUNTED, "run 1 of /tmp/a.db")
    assert asked(context()) == (False, False)
    figures = CellFigures(memory_figures={"process_hwm_increase_bytes": 77})
    kept.take(figures, *kept.extras(entry()))
    assert (figures.flops_per_step, figures.flops_by_dtype) == (840, {"fp32": 840})
    assert (figures.peak_mem_bytes, figures.peak_mem_kind) == (2000, "live_tensors")
    # the resident-set peak was the other process's machine state: not kept; this process's own figure stays
    assert figures.memory_figures == {"live_tensor_peak_bytes": 2000, "process_hwm_increase_bytes": 77}
    assert figures.shared_from == {
        "flops": "cached from run 1 of /tmp/a.db",
        "memory": "cached from run 1 of /tmp/a.db",
    }


@pytest.mark.parametrize(
    "change",
    [
        lambda here, w: {**w, "batch": 512},  # another batch
        lambda here, w: {**w, "hidden": [10, 20]},  # another description of the model
        lambda here, w: setattr(here, "version", "2.14.0") or w,  # another torch
    ],
    ids=["batch", "workload", "torch version"],
)
def test_what_the_figures_depend_on_changed_is_counted_afresh(here, change):
    kept.keep(entry(), COUNTED, "run 1 of /tmp/a.db")
    assert asked(context(change(here, WORKLOAD))) == (True, True)


def test_another_jaxlib_or_flax_is_counted_afresh(here, monkeypatch):
    """jax's figures are XLA's (jaxlib) on flax's model and optax's state: a dedicated environment whose jaxlib or
    flax changed under the same jax counts again."""
    installed = {"jax": "0.4.30", "jaxlib": "0.4.30", "flax": "0.8.5", "optax": "0.2.3"}
    monkeypatch.setattr(envs, "record", lambda framework: {"versions": dict(installed)})
    cell, workload = Cell("fcn-r", "jax", "cpu", 1, "fp32"), dict(WORKLOAD)
    kept.keep(entry(workload, cell), COUNTED, "run 1 of /tmp/a.db")
    assert asked(context(workload, cell), cell) == (False, False)
    for package, version in (("jaxlib", "0.4.31"), ("flax", "0.10.0")):
        installed[package] = version
        assert asked(context(workload, cell), cell) == (True, True), package


def test_a_users_model_file_changed_is_counted_afresh(here, tmp_path):
    model = tmp_path / "models.py"
    model.write_text("def make(): ...\n")
    workload = {"name": "mine", "batch": 8, "source": f"{model}:make"}
    cell = Cell("mine", "torch", "cpu", 1, "fp32")
    kept.keep(entry(workload, cell), replace(COUNTED, started_at=time.time()), "run 1 of /tmp/a.db")
    assert asked(context(workload, cell), cell) == (False, False)
    model.write_text("def make(): ...  # changed\n")
    assert asked(context(workload, cell), cell) == (True, True)


def test_a_model_file_edited_while_its_process_ran_is_not_kept(here, tmp_path):
    """The key is the file's bytes as the figures are stored, after the process: a file written since the process
    started (edited during a run of several minutes) is not what it counted, and its figures are not kept for it."""
    model = tmp_path / "models.py"
    model.write_text("def make(): ...  # as the process imported it\n")
    started = time.time()
    model.write_text("def make(): ...  # edited while it ran\n")
    os.utime(model, (started + 5, started + 5))
    workload = {"name": "mine", "batch": 8, "source": f"{model}:make"}
    cell = Cell("mine", "torch", "cpu", 1, "fp32")
    kept.keep(entry(workload, cell), replace(COUNTED, started_at=started), "run 1 of /tmp/a.db")
    assert kept.extras(entry(workload, cell)) == (None, None)
    assert asked(context(workload, cell), cell) == (True, True)


def test_the_origin_names_the_database_by_its_whole_path(here, tmp_path, monkeypatch):
    """A later run reads the origin from any folder: a store opened as `--db a.db` is named by its whole path."""
    monkeypatch.chdir(tmp_path)
    ctx = context()
    ctx.store = SimpleNamespace(cells=lambda run_id: [], measurements=lambda run_id, key: [], path="a.db",
                                record=lambda *args: None)  # fmt: skip
    ctx.spec.nnodes, ctx.cores = 1, 2
    measured = ProcessMeasurement(status=Status.OK, samples=[0.01] * 9, detail=replace(COUNTED, started_at=time.time()))
    store_result(ctx, Task(CELL, 0), measured)
    flops, _ = kept.extras(entry())
    assert flops["from"] == f"run 1 of {tmp_path / 'a.db'}"


def test_a_figure_of_the_machines_state_is_never_kept(here):
    kept.keep(entry(), ProcessDetail(memory={"process_rss_peak_bytes": 9000}), "run 1 of /tmp/a.db")
    assert kept.extras(entry()) == (None, None)
    kept.keep(entry(), ProcessDetail(memory={"cuda_allocator_peak_bytes": 9000}), "run 1 of /tmp/a.db")
    assert kept.extras(entry()) == (None, None)
    assert asked(context()) == (True, True)


def test_nothing_is_kept_where_it_is_not_read_back_alike(here, monkeypatch):
    assert kept.key(Cell("fcn-r", "torch", "cpu", 1, "fp32", nproc=2), WORKLOAD) is None  # each rank's
    assert kept.key(Cell("fcn-r", "torch", "cpu", 1, "fp32", loader="w2"), WORKLOAD) is None  # --data
    assert kept.key(CELL, {**WORKLOAD, "source": "package.module:make"}) is None  # not read unimported
    monkeypatch.setenv(kept.BYPASS, "1")
    kept.keep(entry(), COUNTED, "run 1 of /tmp/a.db")
    assert asked(context()) == (True, True)
    monkeypatch.delenv(kept.BYPASS)
    assert kept.extras(entry()) == (None, None)  # nor written while off


def test_a_damaged_entry_is_a_miss(here):
    kept.keep(entry(), COUNTED, "run 1 of /tmp/a.db")
    for path in kept.directory().glob("*.json"):
        path.write_text("{not json")
    assert asked(context()) == (True, True)


@pytest.mark.slow
def test_a_second_run_of_a_cell_counts_nothing_and_stores_the_same_figures(tmp_path):
    require("torch")
    env = {"DLPERF_DATA_DIR": str(tmp_path / "data"), kept.BYPASS: ""}
    db = tmp_path / "a.db"
    for _ in range(2):
        done = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", *FAST, db=db, env=env)
        assert done.returncode == 0, done.stderr
    done = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", *FAST, db=db, env={**env, kept.BYPASS: "1"})
    assert done.returncode == 0, done.stderr
    store = Store.open(db, create=False)
    ids = sorted(r.id for r in store.runs())
    runs = [store.cells(i)[0] for i in ids]
    events = [
        [name for name, _ in store.measurements(i, c.key)[0].detail.timeline] for i, c in zip(ids, runs, strict=True)
    ]
    assert "flops" in events[0] and "memory" in events[0]
    assert "flops" not in events[1] and "memory" not in events[1]  # the second run's process counted nothing
    assert "flops" in events[2] and "memory" in events[2]  # the cache off: counted again
    first, second = runs[0], runs[1]
    assert (second.flops_per_step, second.flops_by_dtype) == (first.flops_per_step, first.flops_by_dtype)
    assert (second.peak_mem_bytes, second.peak_mem_kind) == (first.peak_mem_bytes, "live_tensors")
    assert second.shared_from == {"flops": f"cached from run 1 of {db}", "memory": f"cached from run 1 of {db}"}
    assert runs[2].shared_from == {} and runs[2].flops_per_step == first.flops_per_step
