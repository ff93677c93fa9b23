"""The allocator's modes in JAX's, TensorFlow's and MXNet's cells, as in PyTorch's (frameworks/common/heap.py): the
setting is the process's, made by the worker before the framework is imported. XLA allocates a step's buffers on its
pool's threads, each of which glibc gives an arena of its own: there malloc_keep needs one arena, set before jax's
import; and it allocates a step's temporaries as one block, over 2 GiB for ResNet-50, which glibc maps on its own
whatever its mmap threshold (an int): malloc_keep turns mmap off for blocks."""

import json
import re
import subprocess
import sys

import pytest

from conftest import LIBC_BLOCK, ROOT, dlperf, preloadable, run_in
from dlperf.frameworks.common import heap
from dlperf.modes import ROW, Mode

if heap.glibc() is None:
    pytest.skip("malloc_keep sets glibc's malloc; this C library is not glibc", allow_module_level=True)

# the minor page faults of each step of a jitted gradient of four 4,096 x 1,024 layers, with the allocator's mode set
# as the worker sets it, before jax's import. XLA frees a step's temporaries (one block of about 84 MiB here) on its
# pool's threads, at times after the step's result is ready: where other processes share the cores the next step may
# allocate its own before they are freed, and the kept heap grows by one such block, a step that faults its pages.
# Measured with two busy loops on the 2 cores: the heap grew from 156 to 493 MiB in four such steps out of forty, and
# the other steps faulted none. So the steps after a warm-up are compared by their median.
FAULTS = """
import json, resource, statistics, sys
from dlperf.frameworks.common import heap

kept = heap.applied(sys.argv[1])
import jax, jax.numpy as jnp

def loss(w, x):
    for _ in range(4):
        x = jnp.tanh(x @ w)
    return x.sum()

grad = jax.jit(jax.grad(loss))
x, w = jnp.ones((4096, 1024)), jnp.full((1024, 1024), 1e-3)
faults = []
for _ in range(14):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    grad(w, x).block_until_ready()
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
median = statistics.median(faults[3:])
print(json.dumps({"faults": median, "steps": faults, "pages": 4096 * 1024 * 4 // 4096, "settings": kept}))
"""


# the minor page faults of writing a block of argv[2] MiB, freed and allocated again, with malloc_keep set or not
BIG_BLOCK = (
    LIBC_BLOCK
    + """
import json, resource, sys
from dlperf.frameworks.common import heap

kept = heap.applied(sys.argv[1])
faults = []
for _ in range(2):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    write_block(int(sys.argv[2]))
    faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
print(json.dumps({"faults": faults, "pages": int(sys.argv[2]) * 2**20 // 4096, "settings": kept}))
"""
)


@pytest.mark.slow  # two processes each write 2.2 GiB twice, the kernel zeroing the pages: about 8 s
def test_a_block_over_2_gib_freed_comes_back_without_its_pages_faulted_in_again():
    """2,200 MiB, about XLA's temporaries for ResNet-50 at batch 16: mallopt's largest threshold (2**31 - 1) mapped
    and faulted it afresh each time (563,000 faults both times, glibc 2.36); with mmap off, once."""

    def faults(mode: str, **environ: str) -> dict:
        env = {"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", **environ}
        done = subprocess.run([sys.executable, "-c", BIG_BLOCK, mode, "2200"], capture_output=True, text=True,
                              env=env, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    plain, kept = faults("fp32"), faults("malloc_keep")
    assert min(plain["faults"]) > plain["pages"] / 2, plain  # mapped afresh, each time
    assert kept["faults"][0] > kept["pages"] / 2 and kept["faults"][1] < kept["pages"] / 100, kept
    # the recipe's other way, glibc's variables set before the process starts, as its first line says them
    first = ROW[Mode.MALLOC_KEEP].preamble[0]
    variables = dict(word.split("=", 1) for word in first.split(": ", 1)[1].split() if "=" in word)
    assert set(variables) == {"MALLOC_MMAP_MAX_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_ARENA_MAX"}, first
    by_environment = faults("fp32", **variables)
    assert by_environment["faults"][1] < by_environment["pages"] / 100, (variables, by_environment)


def test_the_recipe_says_the_mallopt_calls_the_worker_makes():
    recipe = "\n".join(ROW[Mode.MALLOC_KEEP].preamble)
    calls = [(int(o), int(v)) for o, v in re.findall(r"mallopt\((-?\d+), (-?\d+)\)", recipe)]
    assert calls == [(option, value) for _, option, value in heap.KEEP_OPTIONS], recipe


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
        else:  # a machine without it: a skip, or a failure where CI requires it
            assert cell.ok and malloc.startswith(preloadable(Mode(mode))), (framework, mode, cell.error)
        assert cell.loss_check is None  # fp32's arithmetic in every one: nothing to check
