"""`dlperf run --dry-run` of a model whose step fails: its pilot step failed, and the dry run said "1 cell process,
estimated 6 s ... all from 1 pilot step that took 6 s", exit 0, where the run then failed. The cell is now named with
its pilot's error and line, and the dry run exits 1; a pilot that timed out is no failure of the run's own cells."""

import pytest

from conftest import dlperf, require
from dlperf.api import dry_run_code
from dlperf.plan.estimate import Estimate
from dlperf.vocab import ExitCode

require("torch")


def test_a_failed_pilot_is_named_and_the_dry_run_exits_1(tmp_path):
    from test_where_in_user_code import USER, line_of  # a forward whose product's shapes do not agree

    (tmp_path / "bad.py").write_text(USER)
    done = dlperf("run", "--workloads", f"{tmp_path / 'bad.py'}:make", "--threads", "1", "--dry-run",
                  db=tmp_path / "d.db", cwd=tmp_path)  # fmt: skip
    assert done.returncode == 1, done.stderr
    first, *_, last = done.stdout.strip().splitlines()
    assert first.startswith("shapes torch cpu:1 fp32  (its pilot step failed: RuntimeError: ")
    assert f"(at {tmp_path / 'bad.py'}:{line_of('@ torch.ones')}, in forward)" in first
    assert last.startswith("1 pilot step failed or timed out (above): the run's cells of it will likely do the same")
    assert not (tmp_path / "d.db").exists()


@pytest.mark.slow
def test_a_store_holding_a_failed_run_of_the_cell_pilots_it_again(tmp_path):
    """A failed process's life is no estimate of the cell's: the dry run had estimated the model from it, started no
    pilot step and exited 0."""
    from test_where_in_user_code import USER

    (tmp_path / "bad.py").write_text(USER)
    ran = dlperf("run", "--workloads", f"{tmp_path / 'bad.py'}:make", "--threads", "1", "--max-time", "1",
                 db=tmp_path / "d.db", cwd=tmp_path)  # fmt: skip
    assert ran.returncode == 1, ran.stderr  # stored failed: its life is no estimate of the cell's, so it pilots again
    again = dlperf("run", "--workloads", f"{tmp_path / 'bad.py'}:make", "--threads", "1", "--dry-run",
                   db=tmp_path / "d.db", cwd=tmp_path)  # fmt: skip
    assert again.returncode == 1 and "(its pilot step failed: RuntimeError" in again.stdout, again.stdout


def test_only_a_failed_pilot_fails_the_dry_run():
    def estimate(failed):
        return Estimate(1.0, 2.0, 1, 1.0, 0, failed=failed)

    assert dry_run_code(estimate({})) == ExitCode.OK
    assert dry_run_code(estimate({("x",): "timeout: exceeded 60 s"})) == ExitCode.OK
    assert dry_run_code(estimate({("x",): "failed: RuntimeError: shapes"})) == ExitCode.CELLS_FAILED
