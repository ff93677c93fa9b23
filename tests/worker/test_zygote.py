"""The warm parent (`worker/zygote.py`) on a machine with a GPU, faked on the CPU: a process that has initialized CUDA
cannot give a working CUDA context to a child it forks, so nothing the warm parent runs before it forks, and nothing
dlperf's own process runs, may call into CUDA. Even `torch.cuda.is_available()` counts there: without
PYTORCH_NVML_BASED_CUDA_CHECK it asks the runtime for the device count, which initializes the driver (the zygote's
`cuda_in_use` would then refuse every GPU cell's fork, and each would start cold). GPU cells fork by design
(`runner/warm.py`'s `why_cell_cold`; 7 of 7 on the H200 at 10eb4c4), and since b62a5ac the predictor's probes fork
from the same parent (`dlperf.worker.probe` among what it preloads)."""

import json
import os
import subprocess
import sys

from conftest import ROOT, require

# PyTorch made to say it was built with CUDA and sees one GPU: the runtime's device count, and every other CUDA entry
# point of torch._C (context creation, `torch._C._cuda_init`, behind `torch.cuda._lazy_init`), records its call.
FAKE_GPU = """
import json, sys
import torch

calls = []


def called(name, answer=None):
    def call(*args, **kwargs):
        calls.append(name)
        return answer
    return call


def cuda_entry(name):
    if name.startswith(("_cuda", "_nvml", "_cudnn")):
        return called(name)
    raise AttributeError(name)


torch._C._cuda_getDeviceCount = called("_cuda_getDeviceCount", 1)
torch._C.__getattr__ = cuda_entry
assert torch.cuda.is_available() and calls == ["_cuda_getDeviceCount"], calls  # the fake holds
calls.clear()
"""

PRELOADED = """
from dlperf.worker import zygote

zygote.preload("torch")
print(json.dumps({"calls": calls, "loaded": [m for m in zygote.WORKERS if m in sys.modules]}))
"""
PREDICTED = """
import json, sys
from dlperf import cli

code = cli.main(["predict", "tiny-fcn-r", "--gpu", "T4", "--modes", "fp32"])
print(json.dumps({"code": code, "torch": sorted(m for m in sys.modules if m.split(".")[0] == "torch")}))
"""


def run(script: str, env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src"), **(env or {})})  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_warm_parents_imports_call_nothing_of_cuda_where_pytorch_sees_a_gpu():
    """What the warm parent runs before its first fork (`preload`: the backend, torch._dynamo, torch.optim,
    torch.utils.data, and the worker modules its children run, the predictor's probe included) calls no CUDA entry
    point, so a GPU cell forked after it initializes CUDA as a fresh process does."""
    require("torch")
    found = run(FAKE_GPU + PRELOADED)
    assert found == {"calls": [], "loaded": ["dlperf.worker.cell", "dlperf.worker.profile", "dlperf.worker.probe"]}


def test_a_predictor_command_never_imports_pytorch_in_dlperfs_own_process(tmp_path):
    """`dlperf predict` (as advise and crossover, and a run's GPU cells, ask the predictor) counts the step's
    operators in a probe child forked from the warm parent: dlperf's own process, which starts that parent and every
    cold child, never imports PyTorch, so it cannot have touched CUDA before it does."""
    require("torch")
    data = {"DLPERF_DATA_DIR": str(tmp_path / "data"), "DLPERF_NO_COUNT_CACHE": ""}  # none kept yet: a child counts
    found = run(PREDICTED, data)
    assert found == {"code": 0, "torch": []}
    assert any((tmp_path / "data" / "cache" / "opcounts").iterdir())  # a child did count
