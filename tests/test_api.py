"""The Python API and the README's example, end to end."""

import importlib.util
import json
import sqlite3

import pytest

import dlperf as dl
from conftest import FAST, ROOT, dlperf, require
from dlperf.measure.timer import TimerConfig
from dlperf.workloads.user import source_of

pytestmark = pytest.mark.slow

TINY_TIMER = TimerConfig(min_steps=3, min_time=0, max_time=0.5, max_warmup=3)


def load_example():
    spec = importlib.util.spec_from_file_location("my_model_example", ROOT / "examples" / "my_model.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_api_runs_a_factory_function(tmp_path):
    require("torch")
    example = load_example()
    assert source_of(example.make) == f"{ROOT / 'examples' / 'my_model.py'}:make"
    db = tmp_path / "api.db"
    outcome = dl.run([example.make, "tiny-fcn-r"], threads=[1], db=str(db), timer=TINY_TIMER)
    assert outcome.exit_code == 0
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT workload, status, params, batch FROM cells ORDER BY position").fetchall()
    assert rows[0] == ("small-convnet", "ok", 60_554, 128)  # 896 + 64 + 18,496 + 128 + 40,970 trainable parameters
    assert rows[1][:2] == ("tiny-fcn-r", "ok")


def test_example_from_the_command_line(tmp_path):
    require("torch")
    db = tmp_path / "cli.db"
    proc = dlperf("run", "--workloads", "examples/my_model.py:make", "--threads", "1", *FAST, db=db, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr
    assert "small-convnet" in proc.stdout


def test_repeats_are_separate_processes_and_the_cell_takes_the_median_of_their_medians(tmp_path):
    require("torch")
    db = tmp_path / "r.db"
    proc = dlperf("run", "--workloads", "tiny-alexnet-r", "--threads", "1", "--repeats", "3", *FAST, db=db)
    assert proc.returncode == 0, proc.stderr
    conn = sqlite3.connect(db)
    medians = json.loads(conn.execute("SELECT extra_json FROM cells").fetchone()[0])["per_process_medians"]
    median = conn.execute("SELECT median_s FROM cells").fetchone()[0]
    assert len(medians) == 3 and median == sorted(medians)[1]
    assert conn.execute("SELECT count(*) FROM measurements").fetchone()[0] == 3


def test_a_real_run_with_predict_false_never_asks_the_predictor(tmp_path, monkeypatch):
    require("torch")
    from dlperf.predict import cells

    monkeypatch.setattr(cells, "predictions", lambda *a: pytest.fail("predicted with predict=False"))
    outcome = dl.run("tiny-fcn-r", threads=[1], devices="cpu", db=str(tmp_path / "n.db"), timer=TINY_TIMER,
                     predict=False)  # fmt: skip
    assert outcome.exit_code == 0 and [s.value for s in outcome.statuses] == ["ok"]


def test_the_timer_is_part_of_the_api_and_a_bad_flag_is_named_before_anything_runs(tmp_path):
    """The API page's example imported `dlperf.measure.timer.TimerConfig`, an internal path: `dlperf.TimerConfig`."""
    import dlperf
    from dlperf.errors import UsageError

    assert dlperf.TimerConfig is TimerConfig and "TimerConfig" in dlperf.__all__
    with pytest.raises(UsageError, match=r"^threads='one'"):  # the argument as the caller named it
        dlperf.run("tiny-fcn-r", threads="one", timer=dlperf.TimerConfig(max_time=1), db=str(tmp_path / "a.db"))
    assert not (tmp_path / "a.db").exists()


def test_an_interrupt_while_the_run_is_predicted_leaves_it_interrupted_and_says_how_to_resume(
    tmp_path, monkeypatch, capsys
):
    """Ctrl-C between the run's creation and its first cell (its GPU predictions' operator count: ~9 s on the H200)
    ended with a bare "dlperf: interrupted", the run left "running" with nothing said of it; it is now marked
    interrupted, and the command names it and the resume command, as an interrupt mid-sweep does."""
    require("torch")
    from dlperf import cli
    from dlperf.predict import cells

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(cells, "predictions", interrupted)
    db = tmp_path / "p.db"
    again = f"dlperf run --resume --db {db}"
    code = cli.main(["run", "--workloads", "tiny-fcn-r", "--threads", "1", "--devices", "cpu", *FAST, "--db", str(db)])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    said = "no cell was measured yet: run 1 holds its plan of 1 cell"  # was 'finished cells are stored', none being
    assert code == 130 and last == f"dlperf: interrupted; {said}. Continue with: {again}"
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT id, status FROM runs").fetchall() == [(1, "interrupted")]
    assert conn.execute("SELECT count(*) FROM leases").fetchone() == (0,)
