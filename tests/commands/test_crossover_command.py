"""`dlperf crossover` through the command line: a tiny workload measured at two batches and stored with its GPU
predictions, the answer printed; the paper's check; bad input as one line before anything runs."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from conftest import one_line_error


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["tiny-fcn-r", "--gpu", "Z9000"], "unknown GPU"),
        (["tiny-fcn-r", "--gpu", "T4,H100-SXM9"], "H100-SXM9"),
        (["tiny-fcn-r", "--batches", "0"], "--batches"),
        (["no-such-net"], "unknown workload 'no-such-net'"),
        (["tiny-fcn-r", "--mode", "tf32"], "--mode"),
        (["tiny-fcn-r", "--paper"], "--paper"),
        (["tiny-fcn-r", "--plot", "x.gif"], "--plot"),
        ([], "WORKLOAD"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(tmp_path, capsys, args, fragment):
    from dlperf.cli import main

    db = tmp_path / "d.db"
    code = main(["crossover", *args, "--db", str(db)])
    one_line_error(SimpleNamespace(returncode=code, stderr=capsys.readouterr().err), fragment)
    assert not db.exists()
