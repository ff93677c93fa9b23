"""`dlperf fit` through the command line: the largest batch under a memory limit found as the true boundary (the
batch above it runs out of memory and is stored as such); bad input as one line before anything runs."""

from __future__ import annotations

import json
import re
from types import SimpleNamespace

import pytest

from conftest import FAST, cells, dlperf, one_line_error

# A tiny workload whose step holds a big activation per sample: 64 channels of 128 x 128 floats (4 MiB) after the
# 1x1 convolution, kept for its backward with their gradients, so each sample costs about 12 MiB at the step's peak
# while the model itself is a few hundred parameters. The boundary is then a small batch, some 12 MiB apart.
WIDE = """
import torch
import dlperf


class Wide(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.up = torch.nn.Conv2d(1, 64, 1)
        self.head = torch.nn.Linear(64, 3)

    def forward(self, x):  # x: B x 1 x 16 x 16
        h = torch.nn.functional.interpolate(x, scale_factor=8)  # B x 1 x 128 x 128
        h = self.up(h).relu()  # B x 64 x 128 x 128: 4 MiB a sample
        return self.head(h.mean((2, 3)))  # B x 3


def make():
    def batch(n, device):
        return torch.randn(n, 1, 16, 16, device=device), torch.randint(3, (n,), device=device)

    return dlperf.user_workload("wide", Wide(), batch, torch.nn.functional.cross_entropy, batch_size=4)
"""
PER_SAMPLE = 12 * 2**20  # about what a sample of WIDE costs at the step's peak


@pytest.fixture
def wide(tmp_path):
    (tmp_path / "wide.py").write_text(WIDE)
    return f"{tmp_path / 'wide.py'}:make"


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["tiny-fcn-r", "--max-memory", "3XB"], "--max-memory '3XB'"),
        (["tiny-fcn-r", "--max-memory", "0"], "--max-memory"),
        (["tiny-fcn-r", "--max-memory", "1MiB"], "below what a training process needs to start"),
        (["tiny-fcn-r", "--max-memory", "1KB"], "--max-memory 1000 B: below what"),  # was "0 MiB"
        (["tiny-fcn-r", "--device", "cuda:0", "--max-memory", "1GiB"], "the GPU's own memory is the limit"),
        (["no-such-net"], "unknown workload 'no-such-net'"),
        (["tiny-fcn-r", "--modes", "fp33"], "--modes"),
        (["tiny-fcn-r", "--max-batch", "0"], "--max-batch"),
        (["tiny-fcn-r", "--device", "tpu"], "--device"),
        ([], "WORKLOAD"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(tmp_path, capsys, args, fragment):
    from dlperf.cli import main

    db = tmp_path / "d.db"
    code = main(["fit", *args, "--db", str(db)])
    one_line_error(SimpleNamespace(returncode=code, stderr=capsys.readouterr().err), fragment)
    assert not db.exists()


@pytest.mark.slow
def test_the_largest_batch_under_max_memory_is_the_true_boundary(tmp_path, wide):
    """The limit is the process's own start (measured as fit measures it) and room for about six samples: the answer
    N fits and is stored measured, N+1 was tried and is stored as out of memory at its batch, not as a crash."""
    from dlperf.fit import start_bytes

    limit = start_bytes("torch", threads=1) + 64 * 2**20 + 6 * PER_SAMPLE
    db = tmp_path / "d.db"
    proc = dlperf("fit", wide, "--threads", "1", "--max-memory", str(limit), "--format", "json", *FAST, db=db,
                  timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout)["modes"]["fp32"]
    largest = answer["largest"]
    assert 2 <= largest <= 8, answer  # about six samples of room: the boundary is a small batch
    stored = {c["batch"]: c for c in cells(db)}
    assert stored[largest]["status"] == "ok" and stored[largest]["peak_mem_bytes"] > 0
    above = stored[largest + 1]
    assert above["status"] == "failed"
    assert above["error"].startswith(f"out of memory at batch {largest + 1}"), above["error"]
    tried = {t["batch"]: t for t in answer["tries"]}
    assert tried[largest]["samples_per_s"] > 0 and tried[largest + 1]["out_of_memory"]
    assert 0 < tried[largest]["data_peak_bytes"] <= limit  # what the limit counted, which fit's guess aims by
    assert all(t["out_of_memory"] for t in answer["tries"] if t["batch"] > largest)
    assert all(t["status"] == "ok" for t in answer["tries"] if t["batch"] <= largest)


@pytest.mark.slow  # two searches end to end: with the sweeps (make test-slow), keeping make test short
def test_each_mode_is_searched_on_its_own_and_stored_with_its_mode(tmp_path, wide):
    from dlperf.fit import start_bytes

    limit = start_bytes("torch", threads=1) + 64 * 2**20 + 6 * PER_SAMPLE
    db = tmp_path / "d.db"
    proc = dlperf("fit", wide, "--threads", "1", "--modes", "fp32,bf16", "--max-memory", str(limit), *FAST, db=db,
                  timeout=600)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    stored = {(c["mode"], c["batch"]): c for c in cells(db)}
    for mode in ("fp32", "bf16"):
        largest = max(b for (m, b), c in stored.items() if m == mode and c["status"] == "ok")
        assert stored[(mode, largest + 1)]["error"].startswith(f"out of memory at batch {largest + 1}")
        said = f"{mode}: the largest batch that fits is {largest}; batch {largest + 1} runs out of memory"
        assert said in proc.stdout


BREAKS = """
import torch
import dlperf


class Breaks(torch.nn.Linear):
    def forward(self, x):
        if x.shape[0] >= 8:
            raise RuntimeError("bad forward")
        return super().forward(x)


def make():
    def batch(n, device):
        return torch.randn(n, 8, device=device), torch.randint(3, (n,), device=device)

    return dlperf.user_workload("breaks", Breaks(8, 3), batch, torch.nn.functional.cross_entropy, batch_size=4)
"""


@pytest.mark.slow
def test_a_failure_other_than_out_of_memory_stops_the_search_and_says_so(tmp_path):
    (tmp_path / "breaks.py").write_text(BREAKS)
    db = tmp_path / "d.db"
    proc = dlperf("fit", f"{tmp_path / 'breaks.py'}:make", "--threads", "1", "--format", "json", *FAST, db=db)
    assert proc.returncode == 1, proc.stderr
    answer = json.loads(proc.stdout)["modes"]["fp32"]
    assert [t["batch"] for t in answer["tries"]] == [4, 8] and answer["largest"] == 4
    assert answer["ended"].startswith("batch 8 failed: RuntimeError: bad forward")
    assert not answer["tries"][1]["out_of_memory"]


@pytest.mark.slow
def test_ctrl_c_keeps_the_tries_made_says_so_and_leaves_no_process(tmp_path, wide):
    from conftest import gone, interrupt_once, rows

    db = tmp_path / "d.db"
    args = ["fit", wide, "--threads", "1", "--max-memory", "4GiB", *FAST, "--db", str(db)]
    code, out, seen = interrupt_once(args, tmp_path / "err.txt", "wide@b8 torch cpu:1 fp32: median")
    assert code == 130, out
    assert seen and gone(seen), seen  # seen: read while it ran; none would pass unchecked
    said = r"fp32: the search stopped, interrupted( during its try of batch \d+)?; the largest batch that fit so far"
    said += " is 8"
    assert re.search(said, " ".join(out.split())), out  # as said, not as a narrow console wraps it
    ok = {r["workload"] for r in rows(db, "SELECT workload FROM cells WHERE status = 'ok'")}
    assert {"wide@b4", "wide@b8"} <= ok
    assert rows(db, "SELECT status FROM runs")[0]["status"] == "interrupted"
