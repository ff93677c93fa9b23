"""`dlperf predict --memory` end to end: the step's predicted peak and its parts, bf16 and checkpointing lowering the
activations, the largest batch that fits a GPU of tiny memory (a --gpu-specs file), JSON, `--cost` leaving out a GPU
the predicted peak does not fit, and bad input as one line."""

import json
import re

import pytest

from conftest import dlperf, one_line_error

HEADER = (
    "gpu,fp32_tflops,tf32_tflops,fp16_tensor_tflops,bf16_tensor_tflops,fp8_tensor_tflops,mem_bw_gbs,mem_gib,"
    "host_link,host_link_gbs,generation,sm_count,boost_clock_mhz,l2_mib,peak_clock,source"
)
NO_FILE = {"DLPERF_PRICES": ""}


def tiny_gpus(tmp_path):
    """Two GPUs of tiny memory: fcn-r's weights, gradients and momentum (163 MiB) fit both, a few batches more."""
    rows = [f"Tiny-{gib},9.9,,70,,,330,{gib},PCIe Gen3 x16,15.75,Turing,40,1590,4,boost,a test's" for gib in (0.8, 1)]
    path = tmp_path / "tiny.csv"
    path.write_text("\n".join([HEADER, *rows]) + "\n")
    return path


def memory_json(*args: str) -> dict:
    proc = dlperf("predict", *args, "--memory", "--format", "json", env=NO_FILE)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


@pytest.mark.slow  # three traces in child processes: about 30 s on 2 cores
def test_the_parts_add_up_and_the_largest_batch_is_the_boundary(tmp_path):
    specs = str(tiny_gpus(tmp_path))
    got = memory_json("fcn-r", "--gpu", "Tiny-0.8,Tiny-1,T4", "--gpu-specs", specs, "--modes", "fp32")
    (mode,) = got["modes"]
    peak = mode["peak_bytes"]
    parts = ("params", "grads", "optimizer", "data", "activations")
    assert sum(peak[p] for p in parts) == peak["traced"] and peak["traced"] + peak["overhead"] == peak["total"]
    assert peak["params"] == peak["optimizer"] == 14_205_962 * 4  # SGD's momentum: one fp32 buffer per weight
    assert peak["data"] == 1024 * (784 + 1) * 4 + 1024 * 4  # the MNIST batch (fp32) and its int64 labels
    assert 0 < peak["grads"] <= peak["params"] and peak["activations"] > 0
    largest = {g["gpu"]: g["largest_batch"] for g in mode["gpus"]}
    assert 0 < largest["Tiny-0.8"] < largest["Tiny-1"] < largest["T4"]  # more memory, a larger batch
    assert [g["fits"] for g in mode["gpus"]] == [largest[g["gpu"]] >= 1024 for g in mode["gpus"]]
    b = largest["Tiny-0.8"]
    at = {n: memory_json("fcn-r", "--gpu", "Tiny-0.8", "--gpu-specs", specs, "--modes", "fp32", "--batch", str(n))
          for n in (b, b + 1)}  # fmt: skip
    assert at[b]["modes"][0]["gpus"][0]["fits"] and not at[b + 1]["modes"][0]["gpus"][0]["fits"]
    assert at[b + 1]["modes"][0]["peak_bytes"]["total"] > at[b]["modes"][0]["peak_bytes"]["total"]


@pytest.mark.slow  # every mode's search: about 30 s on 2 cores
def test_bf16_and_checkpointing_lower_the_activations_and_the_table_says_how(tmp_path):
    proc = dlperf("predict", "resnet-56", "--gpu", "Tiny-1", "--gpu-specs", str(tiny_gpus(tmp_path)), "--batch", "8",
                  "--memory", env={"COLUMNS": "200"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "bf16 against fp32: activations -" in out and "checkpoint against fp32: activations -" in out
    assert "bf16+checkpoint against fp32: activations -" in out and "fits (" in out
    largest = {
        m: int(n.replace(",", "")) for m, n in re.findall(r"Tiny-1 +│ (\S+) +│ fits \([^)]*\) +│ +([\d,]+)", out)
    }
    assert largest["bf16+checkpoint"] > largest["bf16"] > largest["fp32"] and largest["checkpoint"] > largest["fp32"]
    # fcn-r has no sequential trunk of three blocks: said, not guessed; beside a mode that traces, in its row
    modes = {m["mode"]: m for m in memory_json("fcn-r", "--gpu", "T4", "--modes", "fp32,checkpoint")["modes"]}
    assert "checkpoint" in modes["checkpoint"]["error"] and modes["fp32"]["peak_bytes"]
    alone = dlperf("predict", "fcn-r", "--gpu", "T4", "--modes", "checkpoint", "--memory", env=NO_FILE)
    one_line_error(alone, "checkpoint needs an nn.Sequential of 3 or more modules")  # the only mode asked: exit 2


def test_cost_leaves_out_a_gpu_the_predicted_peak_does_not_fit(tmp_path):
    proc = dlperf("predict", "fcn-r", "--gpu", "Tiny-0.8,T4", "--gpu-specs", str(tiny_gpus(tmp_path)), "--modes",
                  "fp32", "--batch", "4096", "--cost", "--samples", "8192", "--format", "json",
                  cwd=tmp_path, env=NO_FILE)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert [r["gpu"] for r in got["does_not_fit"]] == ["Tiny-0.8"]
    assert "predicted peak" in got["does_not_fit"][0]["memory"] and "predicted peak" in got["rows"][0]["memory"]


def test_bad_input_is_one_line_before_anything_runs(tmp_path):
    cases = [
        (["--gpu", "No-Such-GPU"], ["unknown GPU"]),
        (["--gpu", "T4", "--modes", "fp8"], ["--modes", "fp8"]),
        (["--gpu", "T4", "--modes", "bf16+fp16"], ["--modes"]),
        (["--gpu", "T4", "--cost"], ["--memory and --cost"]),
        (["--gpu", "T4", "--samples", "10"], ["--samples"]),
    ]
    for extra, fragments in cases:
        one_line_error(dlperf("predict", "fcn-r", "--memory", *extra, env=NO_FILE, cwd=tmp_path), *fragments)
    one_line_error(dlperf("predict", "no-such-net", "--memory", "--gpu", "T4", env=NO_FILE), "no-such-net")
    assert list(tmp_path.iterdir()) == []  # no store written


@pytest.mark.slow
def test_a_step_that_cannot_be_traced_is_one_line_as_without_memory(tmp_path):
    """A forward that reads a tensor's value (`.item()`) cannot run on fake tensors: predict without --memory said so
    in one line (exit 2), with --memory it printed an empty table and exit 0."""
    (tmp_path / "dyn.py").write_text(
        "import torch, dlperf\n"
        "class Net(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(8, 4)\n"
        "    def forward(self, x):\n"
        "        return self.lin(x) * float(x.sum().item() > 0)\n"
        "def make():\n"
        "    batch = lambda n, d: (torch.randn(n, 8, device=d), torch.zeros(n, dtype=torch.long, device=d))\n"
        "    return dlperf.user_workload('dyn', Net(), batch, torch.nn.functional.cross_entropy, batch_size=4)\n"
    )
    for extra in ([], ["--memory"]):
        proc = dlperf("predict", f"{tmp_path}/dyn.py:make", "--gpu", "T4", "--modes", "fp32", *extra, env=NO_FILE)
        one_line_error(proc, "dyn (fp32, batch 4)")
