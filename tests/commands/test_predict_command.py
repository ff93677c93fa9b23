"""`dlperf predict` end to end: the operator count in a probe child, the prediction, --validate on a small CSV."""

import os
import re

import pytest

from conftest import dlperf, one_line_error

HEADER = "gpu,model,task,framework,precision,batch_per_gpu,metric,value,unit,source,notes\n"
ROWS = (
    "GTX 1080 Ti,ResNet-20 v1,CIFAR-10 32x32 train (50k imgs),Keras,FP32,32,epoch_time,35,s,s,n\n"
    "GRID K520,MLP 784-512-512-10 (ReLU; dropout),MNIST train (60k),Keras,FP32,128,epoch_time,2,s,s,n\n"
    "GRID K520,CNN conv32-conv64-pool-fc128,MNIST train (60k),Keras,FP32,128,epoch_time,16,s,s,n\n"
    "T4,ResNet-20 v1,CIFAR-10 32x32 train,PyTorch,FP32,32,train_throughput,n/a,img/s,s,n\n"
)


def test_a_tiny_model_is_predicted_launch_bound_with_its_uncertainty():
    proc = dlperf("predict", "tiny-fcn-r", "--gpu", "H100-SXM5-80GB", "--modes", "fp32,bf16", env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("│ H100-SXM5-80GB")]  # the table's rows
    assert len(rows) == 2 and all("launch" in row for row in rows), proc.stdout
    assert "uncertainty: " in proc.stdout and "each GPU left out of the fit" in proc.stdout


def test_validate_predicts_the_rows_it_can_and_reports_the_others(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + ROWS)
    proc = dlperf("predict", "--validate", str(path), env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "ResNet-20 v1" in out and "MLP 784-512-512-10" in out and "Prediction error" in out
    assert "Pascal" in out and "Kepler" in out and "CIFAR ResNet" in out  # by generation and by family
    assert "bad row, line 5 (ResNet-20 v1 on T4): value 'n/a' is not a number" in out
    assert "skipped 1: dlperf does not build this network: CNN conv32-conv64-pool-fc128" in out
    assert "2 rows predicted, 2 not" in out


def test_bad_input_is_one_line():
    one_line_error(dlperf("predict", "tiny-fcn-r"), "--gpu")
    one_line_error(dlperf("predict", "tiny-fcn-r", "--gpu", "T4", "--modes", "fp8"), "--modes", "fp8")
    # --modes "" was taken as every mode (rc 0) where "fp32," is refused: refused too, in one line
    one_line_error(dlperf("predict", "tiny-fcn-r", "--gpu", "T4", "--modes", ""), "--modes ''", "got nothing")
    one_line_error(dlperf("predict", "no-such-net", "--gpu", "T4"), "no-such-net")
    one_line_error(dlperf("predict", "--validate", "/nonexistent.csv"), "cannot read")


# ----------------------------------------------------------------------------------------------------------------------
# Bad input and absurd sizes (issue 30)

PEAK_RSS = """
import resource, subprocess, sys
done = subprocess.run([sys.executable, "-m", "dlperf", *sys.argv[1:]], capture_output=True, text=True)
print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def peak_rss(*args: str) -> tuple[int, int]:
    """dlperf's exit code and the peak resident memory of the processes it ran (the count's probe child among them)."""
    import subprocess
    import sys

    from conftest import ROOT

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    env["DLPERF_NO_COUNT_CACHE"] = "1"  # counted, not read from the cache
    done = subprocess.run([sys.executable, "-c", PEAK_RSS, *args], capture_output=True, text=True, env=env, timeout=300)
    code, rss = done.stdout.split()
    return int(code), int(rss)


@pytest.mark.slow
def test_the_largest_batch_counts_in_the_memory_of_a_small_one():
    """tiny-fcn-r at a batch of 2**20 would hold 3.3 GB of real inputs; counted on fake tensors it holds none."""
    small, large = (peak_rss("predict", "tiny-fcn-r", "--gpu", "T4", "--modes", "fp32", "--batch", str(b))
                    for b in (16, 2**20))  # fmt: skip
    assert small[0] == large[0] == 0
    assert large[1] < small[1] + 200 * 2**20, (small, large)


def test_a_batch_past_the_largest_counted_is_one_line():
    for batch in (str(2**20 + 1), str(2**63 - 1)):
        one_line_error(dlperf("predict", "tiny-fcn-r", "--gpu", "T4", "--batch", batch), "--batch", "1,048,576")


@pytest.mark.serial  # two timings compared: alone, after the rest (it failed once beside a busy test's load)
def test_a_million_rows_are_refused_in_the_time_a_few_take(tmp_path):
    """The file is streamed and refused at its 10,001st row; a few rows of networks dlperf does not build take the
    same start-up and reading, so the million may take at most 3 times as long."""
    import time

    head = "gpu,model,precision,batch_per_gpu,metric,value,unit\n"
    row = "T4,MobileNet v2,FP32,64,train_throughput,463,img/s\n"
    few, many = tmp_path / "few.csv", tmp_path / "many.csv"
    few.write_text(head + row * 10)
    with many.open("w") as f:
        f.write(head)
        f.writelines([row] * 1_000_000)
    times = []
    for path in (few, many):
        start = time.monotonic()
        proc = dlperf("predict", "--validate", str(path), timeout=120)
        times.append(time.monotonic() - start)
    one_line_error(proc, "more than 10,000 rows")
    assert times[1] < 3 * times[0], times


SLEEPY = """
import time
import torch
import dlperf


class Sleepy(torch.nn.Linear):
    def forward(self, x):
        time.sleep(3600)  # a forward that never ends, on fake tensors too
        return super().forward(x)


def make():
    def batch(n, device):
        return torch.randn(n, 8, device=device), torch.randint(3, (n,), device=device)

    return dlperf.user_workload("sleepy", Sleepy(8, 3), batch, torch.nn.functional.cross_entropy, batch_size=4)
"""


def test_a_count_that_never_ends_is_stopped_at_the_timeout_naming_it(tmp_path):
    source = tmp_path / "sleepy.py"
    source.write_text(SLEEPY)
    one_line_error(dlperf("predict", f"{source}:make", "--gpu", "T4", "--timeout", "3", timeout=60), "--timeout 3 s")


def test_ctrl_c_while_the_rows_are_counted_is_exit_130_with_no_report_and_no_process(tmp_path):
    """--validate writes no file: its report goes to standard output once every row is counted. SIGINT while the
    probe child counts: exit 130, one line, nothing of the report printed, the child and its files gone."""
    import glob
    import signal
    import subprocess
    import sys
    import tempfile
    import time

    from conftest import ROOT, gone

    path = tmp_path / "rows.csv"
    row = "T4,ResNet-152,ImageNet train,PyTorch,FP32,{},train_throughput,100,img/s,s,n\n"
    path.write_text(HEADER + "".join(row.format(b) for b in range(1, 201)))  # counted at 1, then fitted at 2, 3, 200
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "dlperf", "predict", "--validate", str(path), "--no-cache"]  # a child counts
    parent = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    deadline, seen = time.monotonic() + 60, set()
    while not seen and time.monotonic() < deadline:
        found = subprocess.run(["pgrep", "-P", str(parent.pid)], capture_output=True, text=True).stdout.split()
        seen.update(int(p) for p in found)
        time.sleep(0.01)
    time.sleep(1.5)  # the child has imported torch and counts
    assert seen and parent.poll() is None, parent.communicate()
    parent.send_signal(signal.SIGINT)
    out, err = parent.communicate(timeout=60)
    assert parent.returncode == 130 and err == "dlperf: interrupted\n" and out == "", (parent.returncode, out, err)
    assert gone(list(seen)), seen
    assert not glob.glob(os.path.join(tempfile.gettempdir(), f"dlperf-{parent.pid}-*"))


@pytest.mark.slow
def test_a_second_predict_reads_the_count_kept_and_no_cache_counts_again(tmp_path):
    """The count is kept in DATA_DIR/cache/opcounts: an entry changed there (ten times the calls) is what the second
    run predicts from, and --no-cache counts again."""
    import json

    env = {"COLUMNS": "200", "DLPERF_DATA_DIR": str(tmp_path)}
    args = ("predict", "tiny-fcn-r", "--gpu", "T4", "--modes", "fp32")

    def kernels(proc) -> int:  # the count note's: "(29 kernels a step)", or a count per mode "(fp32 29, ...)"
        assert proc.returncode == 0, proc.stderr
        (count,) = re.findall(r"\((?:fp32 )?([\d,]+)[^()]* kernels a step\)", " ".join(proc.stdout.split()))
        return int(count.replace(",", ""))

    first = kernels(dlperf(*args, env=env))
    # the count's entry: plain predict also keeps its memory trace there (the note on a step no GPU holds)
    entries = (tmp_path / "cache" / "opcounts").glob("*.json")
    (entry,) = [p for p in entries if "ops" in json.loads(p.read_text())["value"]]
    payload = json.loads(entry.read_text())
    for op in payload["value"]["ops"]:
        op["calls"] *= 10
    entry.write_text(json.dumps(payload))
    assert kernels(dlperf(*args, env=env)) == 10 * first
    assert kernels(dlperf(*args, "--no-cache", env=env)) == first


def test_rows_out_of_scope_by_their_metadata_are_reported_apart_whatever_their_error(tmp_path, capsys, monkeypatch):
    """Issue 32: the scope column decides, never the error. A row out of scope with no error at all is still reported
    apart with its reason and its error; a row in scope 4 times too slow stays in, and in the in-scope median."""
    from dlperf.commands import predict
    from dlperf.predict import validate as v
    from dlperf.predict.roofline import Prediction

    path = tmp_path / "rows.csv"
    head = HEADER.strip() + ",scope\n"
    good = "T4,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,100,img/s,s,n"
    path.write_text(head + f"{good},out: an epoch's wall time\n{good},in\n{good},in\n")
    cases, _ = v.read(path)

    def result(case, ratio):
        p = Prediction(case.gpu.name, case.workload, case.mode, case.batch, case.measured_s * ratio, 0.0, "compute")
        return v.Result(case, p)

    results = [result(c, r) for c, r in zip(cases, (1.0, 4.0, 1.2), strict=True)]  # out +0%; in +300%, +20%
    monkeypatch.setenv("COLUMNS", "200")
    predict.report(results, [])
    out = capsys.readouterr().out
    main = out[: out.index("Out of scope")]
    apart = out[out.index("Out of scope") : out.index("Prediction error")]
    assert "+300%" in main and "+20%" in main and "+0%" not in main  # the large error stays in
    assert "+0%" in apart and "an epoch's wall time" in apart  # reported apart with its reason and its own error
    summary = out[out.index("Prediction error") :]
    [all_rows] = [line for line in summary.splitlines() if line.count("│") > 2 and "all rows" in line.split("│")[2]]
    # in scope: 2 rows, median |error| (300 + 20) / 2 = 160%; all rows: 3, median 20%
    cells = [c.strip() for c in all_rows.split("│")]
    assert cells[3:5] == ["2", "160%"] and cells[7:9] == ["3", "20%"], all_rows
    assert "3 rows predicted (2 in scope, 1 out of scope by its metadata), 0 not" in " ".join(out.split())


WRONG_MODEL = """
import torch
from torch import nn
import dlperf


class Wrong(nn.Module):
    def __init__(self):
        super().__init__()
        self.a, self.b = nn.Linear(32, 3072), nn.Linear(7, 10)

    def forward(self, x):
        return self.b(self.a(x))


def make_batch(n, device):
    return torch.randn(n, 32, device=device), torch.randint(0, 10, (n,), device=device)


def make_wrong():
    return dlperf.user_workload("wrong", Wrong(), make_batch, nn.functional.cross_entropy, batch_size=16)
"""


def test_a_model_whose_step_raises_is_the_models_error_at_the_users_line(tmp_path, torch):
    """A shape mismatch is the user's: said in torch's own words, at the line of their forward, as run says it."""
    path = tmp_path / "mymodel.py"
    path.write_text(WRONG_MODEL)
    proc = dlperf("predict", f"{path}:make_wrong", "--gpu", "T4", "--modes", "fp32", "--no-cache")
    one_line_error(proc, "the model's own step raises RuntimeError: mat1 and mat2 shapes cannot be multiplied",
                   f"(at {path}:13, in forward)", "the model's error, not the counter's")  # fmt: skip
