"""Contradictions, stores and budgets that predict, crossover, advise and optimize cannot honour, refused in one line
naming the flags, exit 2, before anything is counted or measured."""

import pytest

from dlperf.cli import main


def error_line(args: list[str], capsys) -> str:
    """The one line a refused command line prints, after checking its exit code 2 and that it printed nothing else."""
    assert main(args) == 2
    out, err = capsys.readouterr()
    [line] = err.strip().splitlines()
    assert out == "" and line.startswith("dlperf: error: "), err
    return line.removeprefix("dlperf: error: ")


LISTING = "--list-gpus lists the GPUs of the table and predicts nothing: give no "


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--cost", "--db", "a" * 300], "--db '{long}': a name longer than this system allows (File name too long)"),
        (
            ["--cost", "--db", "{tmp}/nope/x.db"],
            "--db '{tmp}/nope/x.db': no such database file (leave --db out to predict without this CPU's steps)",
        ),
        (["--cost", "--db", "{tmp}"], "--db '{tmp}': is a directory, not a database file"),
    ],
)
def test_predicts_store_is_checked_before_anything_is_counted(args, said, capsys, tmp_path, monkeypatch):
    """predict --cost --db <300 characters> was a traceback from Path.is_file (ENAMETOOLONG) after the count, and a
    --db that is missing or a directory was passed over without a word."""
    from dlperf.commands import predict

    monkeypatch.setattr(predict, "resolved", lambda args: pytest.fail("counted before the store was checked"))
    fill = {"tmp": str(tmp_path), "long": "a" * 300}
    line = error_line(["predict", "tiny-fcn-r", "--gpu", "T4", *(a.format(**fill) for a in args)], capsys)
    assert line == said.format(**fill)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["nope"], "unknown workload 'nope'"),
        (["tiny-fcn-r", "--modes", "int8"], "--modes: unknown mode 'int8' (known: fp32, tf32, bf16 or fp16)"),
        (["tiny-fcn-r", "--memory", "--modes", "int8"], "--modes: 'int8' is not a memory mode"),
        (["tiny-fcn-r"], "--gpu: name the GPUs to predict for, e.g. --gpu H100-SXM5-80GB,T4 (--list-gpus lists them)"),
    ],
)
def test_predict_says_a_bad_workload_or_mode_before_a_missing_gpu(args, said, capsys):
    """`predict nope` and `predict tiny-fcn-r --modes int8` each said "--gpu: name the GPUs ...", and only with
    --gpu given did the user learn the workload or the mode was wrong."""
    assert error_line(["predict", *args], capsys).startswith(said)


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["tiny-fcn-r", "--list-gpus"], LISTING + "WORKLOAD"),
        (["--list-gpus", "--gpu", "T4"], LISTING + "--gpu"),
        (["--list-gpus", "--validate"], LISTING + "--validate"),
        (["--validate", ""], "--validate '': expected a CSV file, got nothing"),
        (["--validate="], "--validate '': expected a CSV file, got nothing"),
    ],
)
def test_predict_refuses_what_list_gpus_or_validate_would_drop(args, said, capsys):
    """predict --list-gpus listed the table over a WORKLOAD or --gpu given beside it, and --validate '' (an unset
    $CSV) said "dlperf predict WORKLOAD --gpu NAME..." as if no --validate were given."""
    assert error_line(["predict", *args], capsys) == said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (
            ["--batch", "1024", "--max-batch", "4"],
            "--batch 1024 is above --max-batch 4: your batch is measured, for the speed-up there; give a --max-batch "
            "from 1024, or a smaller --batch",
        ),
        (
            ["--batches", "1,2", "--batch", "4"],
            "--batch 4 is not among --batches 1,2: your batch is measured, for the speed-up there; add it to --batches",
        ),
        (
            ["--batches", "1,8,64", "--max-batch", "4"],
            "--batches 1,8,64 names 8,64, above --max-batch 4: give the batches up to it, or a larger --max-batch",
        ),
    ],
)
def test_crossover_refuses_batch_flags_that_contradict_each_other(args, said, capsys, tmp_path, monkeypatch):
    """`--batch 1024 --max-batch 4` and `--batches 1,2 --batch 4` both measured (the first without the user's batch,
    the second with a batch --batches left out), and `--batches 1,8,64 --max-batch 4` dropped 8 and 64 unsaid
    (beside --batches, the cap keeps out the workload's own batch: that stays)."""
    from dlperf import crossover

    monkeypatch.setattr(crossover, "make_plan", lambda spec: pytest.fail("planned before the flags were checked"))
    db = tmp_path / "x.db"
    assert error_line(["crossover", "tiny-fcn-r", "--gpu", "T4", *args, "--db", str(db)], capsys) == said
    assert not db.exists()


def test_advise_refuses_a_budget_below_its_first_cpu_process(capsys, tmp_path, monkeypatch):
    """`advise --budget 1s` ran 23 s and exited 0: its first CPU process is never stopped, and its steps may be timed
    for 10 s (crossover's --max-time), so a budget below that is refused, the least said, before anything runs."""
    from dlperf import advise

    monkeypatch.setattr(advise, "_resolved", lambda opts: pytest.fail("resolved before the budget was checked"))
    db = tmp_path / "x.db"
    line = error_line(["advise", "tiny-fcn-r", "--gpu", "T4", "--budget", "1s", "--db", str(db)], capsys)
    assert line == ("--budget 1s: advise measures this CPU's first thread count whole, its steps timed for up to 10 s, "
                    "after the predictions: give at least 10s")  # fmt: skip
    with pytest.raises(advise.UsageError, match=r"^budget_s=9\.5: advise .* give budget_s=10 or more$"):
        advise.check(advise.Options("tiny-fcn-r", gpus="T4", budget_s=9.5))
    assert not db.exists()
    advise.check(advise.Options("tiny-fcn-r", gpus="T4", budget_s=10.0))  # the least is taken


def test_advise_refuses_epochs_of_a_workload_with_no_epoch(capsys, tmp_path, monkeypatch):
    """`advise MODEL --epochs 2` on synthetic data (a user's factory, fcn-s) measured for 2.5 minutes and costed
    1,000,000 samples, the --epochs asked dropped for a note; `predict --cost --epochs 2` refused it. It is refused
    in one line naming --epochs, before anything is predicted, measured or stored."""
    from dlperf import advise

    monkeypatch.setattr(advise, "predicted", lambda *a: pytest.fail("predicted before --epochs was checked"))
    db = tmp_path / "x.db"
    line = error_line(["advise", "tiny-fcn-s", "--gpu", "T4", "--epochs", "2", "--db", str(db)], capsys)
    assert line == ("--epochs: tiny-fcn-s trains on synthetic data, which has no epoch: give the work with --samples N "
                    "(e.g. your data set's size)")  # fmt: skip
    assert not db.exists()
    with pytest.raises(advise.UsageError, match=r"^epochs: tiny-fcn-s .* with samples=N "):
        advise.advise(advise.Options("tiny-fcn-s", gpus="T4", epochs=2), str(db), [])


def test_optimize_refuses_a_budget_below_what_its_baseline_is_timed(capsys, tmp_path):
    """`optimize --budget 1s` measured nothing, exit 1 or 0 by the machine's pace; the least is said before it plans
    (the baseline's --repeats processes of --min-time each), and a budget the flags lower is taken."""
    db = tmp_path / "x.db"
    line = error_line(["optimize", "tiny-fcn-r", "--budget", "1s", "--db", str(db)], capsys)
    assert line == ("--budget 1 s: below the 4 s the fp32 baseline alone is timed at the least (--repeats 2 processes "
                    "of --min-time 2 s each): give at least 4s")  # fmt: skip
    line = error_line(["optimize", "tiny-fcn-r", "--budget", "1s", "--repeats", "1", "--min-time", "1.5", "--db",
                       str(db)], capsys)  # fmt: skip
    assert line.startswith("--budget 1 s: below the 1.5 s") and line.endswith("give at least 1.5s")
    assert not db.exists()


def test_advise_is_exit_0_when_its_budget_left_the_mode_search_nothing_and_1_when_the_baseline_failed():
    """optimize's measured-nothing is exit 1 whatever stopped its baseline; advise, whose answer then stands on the
    thread search's step, kept 0 for a baseline the budget stopped (1 for one it left unstarted, by the pace): both
    are 0 there, a note saying to raise --budget, and a baseline that failed on its own 1."""
    from types import SimpleNamespace

    from dlperf import advise, optimize
    from dlperf.runner.sweep import Deadline
    from dlperf.vocab import ExitCode

    def code(status, error=None):
        baseline = optimize.Candidate("fp32", status, error=error)
        return advise._search_code(SimpleNamespace(baseline=baseline, exit_code=ExitCode.CELLS_FAILED))

    assert code("pending") == code("timeout", Deadline.REASON) == ExitCode.OK
    assert code("failed", "RuntimeError: boom") == code("timeout", "ran past --timeout") == ExitCode.CELLS_FAILED
