"""Tables written to a file, a pipe or a CI log are wide enough for their figures: rich takes 80 columns there, and
`dlperf predict --cost` once showed every price as `$0.00…`, `dlperf table --best` the workload as `tiny-fcn…`."""

from __future__ import annotations

from conftest import dlperf
from dlperf.commands.common import LOG_WIDTH, console


def test_a_console_not_on_a_terminal_is_log_wide_unless_columns_says(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert console().width == LOG_WIDTH  # pytest's standard output is not a terminal
    assert console(100).width == 100
    monkeypatch.setenv("COLUMNS", "100")  # the user's choice (tests/store/test_schema11.py renders at 100)
    assert console().width == 100
    monkeypatch.setenv("COLUMNS", "")  # set but empty: as if not set
    assert console().width == LOG_WIDTH
    monkeypatch.setenv("COLUMNS", "80")  # as pytest-xdist's workers have it
    assert console().width == 80 and console(at_least=LOG_WIDTH).width == LOG_WIDTH  # compare's, optimize's tables


def test_the_price_columns_of_a_prediction_are_whole_in_a_pipe(tmp_path, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    # what tests/commands/test_whole_tables.py predicts at 80 columns: the count and traces it keeps serve both
    said = dlperf("predict", "tiny-fcn-r", "--gpu", "H100-SXM5-80GB,T4", "--cost", cwd=tmp_path)
    assert said.returncode == 0, said.stderr
    assert "…" not in said.stdout and "$/GPU-hour" in said.stdout, said.stdout
