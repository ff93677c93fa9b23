"""Pipeline cells (`--parallel pipeline`, gpipe and 1f1b) through `dlperf run`: 2 gloo processes, tiny workloads."""

import pytest

from conftest import FAST, dlperf, one_line_error
from dlperf.store import Store


@pytest.mark.slow
def test_pipeline_cells_end_to_end(tmp_path, torch):
    db = tmp_path / "d.db"
    done = dlperf("run", "--workloads", "tiny-fcn-r,tiny-resnet-56", "--nproc", "2", "--threads", "1",
                  "--parallel", "pipeline", "--microbatches", "4", *FAST, db=db, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "gpipe.m4:2x1" in done.stdout and "1f1b.m4:2x1" in done.stdout
    store = Store.open(db, create=False)
    cells = {c.key: c for c in store.cells(1)}
    assert len(cells) == 4
    for name in ("tiny-fcn-r", "tiny-resnet-56"):
        for schedule in ("gpipe", "1f1b"):
            cell = cells[f"{name}|torch|cpu|1|fp32|{schedule}:2:strong:m4"]
            assert cell.status == "ok", cell.error
            comm = cell.comm
            assert comm.strategy == schedule and comm.world == 2 and comm.backend == "gloo"
            assert comm.bubble_theory == pytest.approx(1 / 5) and 0 <= comm.bubble < 1
            assert len(comm.split) == 1 and comm.split_by in ("measured", "flops")
            assert len(comm.stage_s) == 2 and comm.local_step_s == max(comm.stage_s)
            assert comm.comm_share == comm.bubble and comm.exposed_comm_s >= 0
            assert comm.exposed_comm_s == pytest.approx(max(0.0, comm.step_s - comm.local_step_s))
            assert len(comm.param_bytes_rank) == 2 and sum(comm.param_bytes_rank) == 4 * cell.params
            [m] = store.measurements(1, cell.key)
            settings = m.detail.settings
            assert settings["microbatches"] == 4 and settings["microbatch_size"] * 4 == cell.batch
            assert settings["pipeline_schedule"] == {"gpipe": "ScheduleGPipe", "1f1b": "Schedule1F1B"}[schedule]
    store.close()


@pytest.mark.slow
def test_what_cannot_be_a_pipeline_is_unsupported_with_the_reason(tmp_path, torch):
    """tiny-lstm's forward has three parts that can run one after another (embedding, LSTM, head): not four stages;
    tiny-fcn-r's batch of 16 is not 3 micro-batches. Every rank decides alike: unsupported, not failed."""
    db = tmp_path / "d.db"
    done = dlperf("run", "--workloads", "tiny-lstm,tiny-fcn-r", "--nproc", "4", "--threads", "1", "--parallel",
                  "gpipe", "--microbatches", "4,3", *FAST, db=db, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store.open(db, create=False)
    cells = {(c.workload, c.microbatches): c for c in store.cells(1)}
    store.close()
    lstm, fcn = cells["tiny-lstm", 4], cells["tiny-fcn-r", 3]
    assert lstm.status == "unsupported" and "cannot be cut into 4 pipeline stages" in lstm.error
    assert "has 3 parts that can run one after another, fewer than 4 stages" in lstm.error
    assert fcn.status == "unsupported" and "a total batch of 16 does not divide into 3 micro-batches" in fcn.error


def test_zero_microbatches_is_a_one_line_error():
    one_line_error(dlperf("run", "--workloads", "tiny-fcn-r", "--nproc", "2", "--parallel", "gpipe",
                          "--microbatches", "0", "--dry-run"), "--microbatches")  # fmt: skip


@pytest.mark.parametrize(("workloads", "micro", "fragment"), [
    ("tiny-fcn-r", "32", "--microbatches 32: tiny-fcn-r's total batch at 2 processes is 16"),
    ("tiny-fcn-r,tiny-lstm", "8", "--microbatches 8: tiny-lstm's total batch at 2 processes is 4"),  # any workload's
])  # fmt: skip
def test_more_microbatches_than_the_batch_is_one_line_before_anything_runs(tmp_path, workloads, micro, fragment):
    """A micro-batch without a sample is no pipeline of any model, and every cell's batch is known before anything
    runs (a user workload's from the probe that builds it): bad input, not an unsupported cell."""
    db = tmp_path / "d.db"
    done = dlperf("run", "--workloads", workloads, "--nproc", "2", "--threads", "1", "--parallel", "gpipe",
                  "--microbatches", f"4,{micro}", *FAST, db=db, timeout=300)  # fmt: skip
    one_line_error(done, fragment, "at most 4" if "lstm" in workloads else "at most 16")
    assert not db.exists()


@pytest.mark.slow
def test_a_single_layer_model_in_a_pipeline_is_unsupported_with_the_reason(tmp_path, torch):
    """How many parts a user's forward has is known only once it is traced, in the cell's own processes: the cell is
    unsupported, saying why, and the run goes on (exit 0) with no process left."""
    source = tmp_path / "one.py"
    source.write_text(ONE_LAYER)
    cell = unsupported_cell(tmp_path / "d.db", "--workloads", f"{source}:make", "--nproc", "2", "--parallel", "1f1b")
    assert cell.error == ("rank 0: the model cannot be cut into 2 pipeline stages: its forward has 1 part that can "
                          "run one after another, fewer than 2 stages")  # fmt: skip


def unsupported_cell(db, *flags: str):
    """The one cell of a `dlperf run` of `flags` (1 thread per process, FAST), which ran (exit 0) as unsupported."""
    done = dlperf("run", *flags, "--threads", "1", *FAST, db=db, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store.open(db, create=False)
    [cell] = store.cells(1)
    store.close()
    assert cell.status == "unsupported", (cell.status, cell.error)
    return cell


ONE_LAYER = """
import torch
import dlperf


def make():
    def batch(n, device):
        return torch.randn(n, 8, device=device), torch.randint(3, (n,), device=device)

    return dlperf.user_workload("one", torch.nn.Linear(8, 3), batch, torch.nn.functional.cross_entropy, batch_size=8)
"""
