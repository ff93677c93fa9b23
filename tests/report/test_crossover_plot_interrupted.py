"""A Ctrl-C while `dlperf crossover` prints or draws a finished crossover (`--plot`) said only 'dlperf: interrupted',
though the run was complete and stored: its last line says so, that the picture was not drawn, and what draws it
(`dlperf report --run N`, which charts a crossover run)."""

import pytest
from test_crossover import crossover_run

from dlperf import cli
from dlperf import crossover as search
from dlperf.commands import crossover as command
from dlperf.report import crossover
from dlperf.vocab import ExitCode


@pytest.fixture
def finished(tmp_path, monkeypatch):
    db = tmp_path / "d.db"
    store, run_id = crossover_run(db, {1: 0.001, 8: 0.004, 64: 0.03}, {1: 0.002, 8: 0.003, 64: 0.004})
    [answer] = crossover.read(store, [run_id])
    store.close()
    monkeypatch.setattr(search, "crossover", lambda *a, **k: search.Result(run_id, answer, ExitCode.OK))
    return str(db), run_id


def cut(*args, **kwargs):
    raise KeyboardInterrupt


@pytest.mark.parametrize(
    ("where", "said"),
    [("plot", "complete and stored in run {}; its picture was not drawn ({} left as it was). Draw it with: "
              "dlperf report --run {} -o report.html"),
     ("print_answer", "complete and stored in run {}. See it with: dlperf table --run {}")],
)  # fmt: skip
def test_a_ctrl_c_while_a_finished_crossover_is_shown_says_it_is_stored(tmp_path, monkeypatch, capsys, finished,
                                                                        where, said):  # fmt: skip
    db, run_id = finished
    png = tmp_path / "c.png"
    png.write_bytes(b"an earlier picture")
    monkeypatch.setattr(command, where, cut)
    code = cli.dispatch(["crossover", "tiny-fcn-r", "--gpu", "T4", "--plot", str(png), "--db", db])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == ExitCode.INTERRUPTED
    words = (run_id, png, run_id) if where == "plot" else (run_id, run_id)
    assert last.startswith(f"dlperf: interrupted; the crossover is {said.format(*words)}"), last
    assert png.read_bytes() == b"an earlier picture"
