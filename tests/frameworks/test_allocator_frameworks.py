"""The allocator's modes in JAX's, TensorFlow's and MXNet's cells, as in PyTorch's (frameworks/common/heap.py): the
setting is the process's, made by the worker before the framework is imported. XLA allocates a step's buffers on its
pool's threads, each of which glibc gives an arena of its own: there malloc_keep needs one arena besides its
thresholds, set before jax's import."""

import pytest

from conftest import dlperf, run_in
from dlperf.frameworks.common import heap
from dlperf.modes import Mode

if heap.glibc() is None:
    pytest.skip("malloc_keep sets glibc's malloc; this C library is not glibc", allow_module_level=True)

# the minor page faults a step of a jitted gradient of four 4,096 x 1,024 layers takes, with the allocator's mode set
# as the worker sets it, before jax's import
FAULTS = """
import json, resource, sys
from dlperf.frameworks.common import heap

kept = heap.applied(sys.argv[1])
import jax, jax.numpy as jnp

def loss(w, x):
    for _ in range(4):
        x = jnp.tanh(x @ w)
    return x.sum()

grad = jax.jit(jax.grad(loss))
x, w = jnp.ones((4096, 1024)), jnp.full((1024, 1024), 1e-3)
grad(w, x).block_until_ready()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(6):
    grad(w, x).block_until_ready()
faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 6
print(json.dumps({"faults": faults, "pages": 4096 * 1024 * 4 // 4096, "settings": kept}))
"""


@pytest.mark.slow  # two JAX processes: about 10 s
def test_a_jax_step_keeps_its_buffers_in_glibcs_heap_under_malloc_keep():
    plain = run_in("jax", FAULTS, "fp32", threads=2, timeout=180)
    kept = run_in("jax", FAULTS, "malloc_keep", threads=2, timeout=180)
    assert plain["faults"] > plain["pages"] / 2, plain  # a layer's activations mapped afresh each step
    assert kept["faults"] < plain["faults"] / 4, (plain, kept)
    assert kept["settings"]["malloc"].endswith("M_ARENA_MAX 1") and plain["settings"] == {}


@pytest.mark.slow  # twelve cells in three frameworks' interpreters, eight of them cold: about 30 s
def test_every_framework_measures_each_allocator_in_a_process_that_has_it(tmp_path):
    from dlperf.store import Store

    modes = ["fp32", "malloc_keep", "tcmalloc", "jemalloc"]
    flags = ["--frameworks", "jax,tensorflow,mxnet", "--threads", "1", "--modes", ",".join(modes)]
    flags += ["--min-time", "0.2", "--max-time", "0.5"]
    done = dlperf("run", "--workloads", "tiny-fcn-r", *flags, db=tmp_path / "a.db")
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store.open(tmp_path / "a.db", create=False)
    try:
        [run] = store.runs()
        cells = {(c.framework, c.mode): c for c in store.cells(run.id)}
    finally:
        store.close()
    assert len(cells) == 12
    for (framework, mode), cell in cells.items():
        malloc = (cell.settings or {}).get("malloc")
        if mode == "fp32":
            assert cell.ok and malloc is None, (framework, cell.error)
        elif mode == "malloc_keep":
            assert cell.ok and malloc.startswith(f"glibc {heap.glibc()}: mallopt"), (framework, cell.error)
        elif heap.library(Mode(mode)) is None:  # not installed here: said so, as the cell's reason
            assert cell.status.value == "unsupported" and "is not installed here" in cell.error, (framework, cell.error)
        else:
            assert cell.ok and malloc.startswith(heap.library(Mode(mode))), (framework, mode, cell.error)
        assert cell.loss_check is None  # fp32's arithmetic in every one: nothing to check
