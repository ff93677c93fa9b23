"""An interrupt in `dlperf fit`, `optimize`, `crossover` and `profile`: each says what it stored and how to go on,
and each line is true (a user-testing pass found a fit cut short in its first try reading as "nothing fits", an
optimize note pointing "below" at notes printed above it, and no way on from a crossover or a profile). Searches
count their processes on across rounds (`[3/?]`), not from 1 in each. The children are faked (`sweep.run_task`):
each test runs in seconds, the planning probe included."""

from __future__ import annotations

import re
import sys

import pytest

from conftest import dlperf
from dlperf.runner import sweep
from dlperf.store.process import ProcessMeasurement
from dlperf.vocab import ExitCode, Status
from test_optimize import _fake_children, steps


def _ok(task) -> ProcessMeasurement:
    return ProcessMeasurement(status=Status.OK, samples=steps(1e-3, 1)[0], duration_s=0.1)


def _children(monkeypatch, interrupt_at: int | None = None, oom_above: int | None = None) -> list:
    """Timed children faked: each measures 1 ms steps, but the `interrupt_at`-th (from 1) is interrupted, and a batch
    above `oom_above` runs out of memory. Returns the cell labels of the children started."""
    started = []

    def run_task(task, ctx, poll):
        started.append(task.cell.label)
        if len(started) == interrupt_at:
            raise KeyboardInterrupt
        batch = int(task.cell.workload.rpartition("@b")[2] or 0) if "@b" in task.cell.workload else 0
        if oom_above is not None and batch > oom_above:
            return ProcessMeasurement(status=Status.FAILED, error=f"out of memory at batch {batch}", duration_s=0.1)
        return _ok(task)

    monkeypatch.setattr(sweep, "run_task", run_task)
    return started


def _main(monkeypatch, capsys, *args: str) -> tuple[int, str, str]:
    """`dlperf ARGS` in this process, its command line in sys.argv as the shell gives it; (code, stdout, stderr)."""
    from dlperf.cli import main

    monkeypatch.setattr(sys, "argv", ["dlperf", *args])
    monkeypatch.setenv("COLUMNS", "300")  # one line each, whatever width pytest's runner gives (xdist's: 80)
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _counts(err: str) -> list[str]:
    return re.findall(r"^\[(\d+)/[?≤\d]+\] .*(?:median|failed|out of memory|profiled)", err, flags=re.M)


# ----------------------------------------------------------------------------------------------------------------------
# dlperf fit


def test_fit_cut_short_in_its_first_try_says_nothing_is_known_yet_not_that_nothing_fits(tmp_path, monkeypatch,
                                                                                         capsys):  # fmt: skip
    db = str(tmp_path / "f.db")
    _children(monkeypatch, interrupt_at=1)
    code, out, err = _main(monkeypatch, capsys, "fit", "tiny-fcn-r", "--threads", "1", "--db", db)
    assert code == ExitCode.INTERRUPTED
    assert "┏" not in out, out  # no empty table of tries, which read as "no batch fits"
    assert ("fp32: the search stopped, interrupted during its try of batch 16; no try had finished, so whether any "
            "batch fits is not known yet") in out, out  # fmt: skip
    assert "no batch fit" not in out
    assert err.splitlines()[-1] == (
        # 'the tries that finished are stored in run 1', where none had
        "dlperf: interrupted; no cell was measured yet: run 1 holds its plan of 1 cell. To finish the search, run it "
        f"again (it starts over): dlperf fit tiny-fcn-r --threads 1 --db {db} (dlperf run --resume would not go on "
        "with the search)"
    )


def test_fit_cut_short_later_names_the_try_cut_short_and_a_mode_it_never_reached(tmp_path, monkeypatch, capsys):
    db = str(tmp_path / "f.db")
    _children(monkeypatch, interrupt_at=3, oom_above=16)  # 16 fits, 32 runs out of memory, 24 is cut short
    code, out, _ = _main(monkeypatch, capsys, "fit", "tiny-fcn-r", "--threads", "1", "--modes", "fp32,bf16",
                         "--db", db, "--format", "json")  # fmt: skip
    import json

    modes = json.loads(out)["modes"]
    assert code == ExitCode.INTERRUPTED
    fp32 = modes["fp32"]
    assert (fp32["largest"], fp32["interrupted_try"], fp32["ended"]) == (16, 24, "interrupted")
    assert modes["bf16"] == {"mode": "bf16", "largest": 0, "ended": "interrupted", "tries": [], "interrupted_try": None}
    from dlperf.commands.fit import headline
    from dlperf.fit import ModeAnswer

    assert headline(ModeAnswer("bf16", ended="interrupted")) == "bf16: not searched: interrupted before its first try"


def test_fit_counts_its_tries_on_from_one_count(tmp_path, monkeypatch, capsys):
    _children(monkeypatch, oom_above=40)
    code, _, err = _main(monkeypatch, capsys, "fit", "tiny-fcn-r", "--threads", "1", "--db", str(tmp_path / "f.db"))
    assert code == ExitCode.OK, err
    tries = _counts(err)
    assert len(tries) > 3 and tries == [str(n) for n in range(1, len(tries) + 1)], err
    assert "[1/1]" not in err


# ----------------------------------------------------------------------------------------------------------------------
# dlperf optimize


def _optimize(tmp_path, **options):
    from dlperf import optimize as opt

    opts = opt.Options("tiny-fcn-r", threads=1, repeats=1, budget_s=900.0, **options)
    return opt.optimize(opts, str(tmp_path / "o.db"), warn=print)


def test_optimize_cut_short_in_a_round_says_which_and_what_it_did_not_reach(tmp_path, monkeypatch, capsys):
    from dlperf.commands import optimize as opt_cmd
    from dlperf.modes import SEARCH_ORDER

    _fake_children(monkeypatch, [])
    fake = sweep.run_task

    def run_task(task, ctx, poll):
        if task.cell.mode != "fp32":  # the first candidate of the first round
            raise KeyboardInterrupt
        return fake(task, ctx, poll)

    monkeypatch.setattr(sweep, "run_task", run_task)
    search = _optimize(tmp_path, order="fixed")
    assert search.exit_code == ExitCode.INTERRUPTED and search.interrupted == "the precision round"
    opt_cmd.print_text(search)
    out = " ".join(capsys.readouterr().out.split())  # lines as said, not as the console wraps them
    table_end, note = out.index("└"), out.index("note: interrupted during the precision round: the results are what "
                                                "was measured before it; bf16, fp16 not measured")  # fmt: skip
    assert table_end < note  # said after the table: it points at none "below"
    assert "below" not in out and "the notes above say why" not in out, out
    assert "--budget" not in out  # the interrupt left them unmeasured, not the budget
    assert (f"Searched (fixed order) until interrupted during the precision round: precision; not reached: "
            f"{', '.join(SEARCH_ORDER[1:])}; 0 candidate cells measured") in out, out  # fmt: skip
    assert "Recommended so far (interrupted): none: interrupted before a candidate was measured." in out


def test_optimize_cut_short_in_its_baseline_does_not_call_the_process_under_way_not_started(tmp_path, monkeypatch,
                                                                                          capsys):  # fmt: skip
    """Ctrl-C 12 s into `optimize`, its progress line "[1/?] tiny-block torch cpu:2 fp32 ..." on screen: the table's
    fp32 row said "not started" and a note "the fp32 baseline was not measured (not started: interrupted)", beside
    "interrupted during the fp32 baseline"."""
    from dlperf.commands import optimize as opt_cmd

    _children(monkeypatch, interrupt_at=1)
    search = _optimize(tmp_path, order="fixed")
    assert search.exit_code == ExitCode.INTERRUPTED and search.interrupted == "the fp32 baseline"
    opt_cmd.print_text(search)
    out = " ".join(capsys.readouterr().out.split())
    assert "not started" not in out, out
    assert "│ fp32 │ interrupted │" in out and "(not measured: interrupted)" in out, out


def test_optimize_cut_short_in_the_baselines_profile_says_no_round_was_searched(tmp_path, monkeypatch, capsys):
    from dlperf.commands import optimize as opt_cmd
    from dlperf.protocol import ProfileTask
    from dlperf.runner import launch as launcher

    _fake_children(monkeypatch, [])
    real = launcher.launch

    def launch(task, *args, **kw):
        if isinstance(task, ProfileTask):
            raise KeyboardInterrupt
        return real(task, *args, **kw)

    monkeypatch.setattr(launcher, "launch", launch)
    search = _optimize(tmp_path, order="verdict")
    assert search.interrupted == "the fp32 baseline's profile" and search.reached == ()
    opt_cmd.print_text(search)
    out = " ".join(capsys.readouterr().out.split())
    assert "Not searched: interrupted during the fp32 baseline's profile, before the first round" in out, out
    assert "Searched (" not in out and "the notes above say why" not in out


def test_optimize_interrupted_says_how_to_search_again(tmp_path, monkeypatch, capsys):
    _children(monkeypatch, interrupt_at=1)
    db = str(tmp_path / "o.db")
    code, _, err = _main(monkeypatch, capsys, "optimize", "tiny-fcn-r", "--threads", "1", "--db", db)
    assert code == ExitCode.INTERRUPTED
    assert err.splitlines()[-1] == (
        # 'what was measured is stored in run 1', where nothing was
        "dlperf: interrupted; no cell was measured yet: run 1 holds its plan of 1 cell. To search again, run it again "
        f"(it starts over): dlperf optimize tiny-fcn-r --threads 1 --db {db} (dlperf run --resume would not go on "
        "with the search)"
    )


def test_optimize_counts_its_processes_on_across_its_rounds(tmp_path, monkeypatch, capsys):
    _fake_children(monkeypatch, [])
    search = _optimize(tmp_path, order="fixed")
    assert search.exit_code == ExitCode.OK
    counted = _counts(capsys.readouterr().err)
    assert len(counted) > 5 and counted == [str(n) for n in range(1, len(counted) + 1)], counted


# ----------------------------------------------------------------------------------------------------------------------
# dlperf crossover


def test_crossover_cut_short_is_resumed_into_the_whole_crossover(tmp_path, monkeypatch, capsys):
    """The GPUs' steps are stored beside every batch's cell before it is measured, so `dlperf run --resume` measures
    the batches left and prints the crossover, not a plain table."""
    db = str(tmp_path / "x.db")
    _children(monkeypatch, interrupt_at=3)
    args = ["crossover", "tiny-fcn-r", "--gpu", "T4", "--threads", "1", "--batches", "1,2,4,8", "--db", db]
    code, out, err = _main(monkeypatch, capsys, *args)
    assert code == ExitCode.INTERRUPTED
    assert "interrupted: the answer is from the 2 of 5 batches measured before the interrupt" in out, out
    assert "[1/5] tiny-fcn-r@b1" in err and "[3/5] tiny-fcn-r@b4" in err
    assert err.splitlines()[-1] == (
        f"dlperf: interrupted; the batches measured are stored in run 1. Continue with: dlperf run --resume --db {db} "
        "(it measures the batches left and prints the whole crossover)"
    )
    started = _children(monkeypatch)
    code, out, _ = _main(monkeypatch, capsys, "run", "--resume", "--db", db)
    assert code == ExitCode.OK and len(started) == 3  # b4, b8 and b16 (your batch)
    assert "tiny-fcn-r (fp32): one training step, this CPU against GPUs, at each batch" in " ".join(out.split()), out
    rows = re.findall(r"│\s+(\d+) │\s+\S+ m?s \(1\) │\s+\S+ ms predicted │", out)
    assert rows == ["1", "2", "4", "8", "16"], out
    assert re.search(r"T4: (not )?predicted faster than this CPU", out) and "seconds per mini-batch" not in out


def test_crossover_cut_short_in_its_thread_search_says_to_run_it_again(tmp_path, monkeypatch, capsys):
    db = str(tmp_path / "x.db")
    _children(monkeypatch, interrupt_at=1)
    args = ["crossover", "tiny-fcn-r", "--gpu", "T4", "--batches", "1,16", "--db", db]
    code, out, err = _main(monkeypatch, capsys, *args)
    assert code == ExitCode.INTERRUPTED
    assert "interrupted during the thread search, before the batches were measured: no answer" in out, out
    assert err.splitlines()[-1] == (
        # 'the thread search's cells are stored in run 1', where it had measured none
        "dlperf: interrupted; no cell was measured yet: run 1 holds its plan of 2 cells. For the crossover, run it "
        f"again (it starts over): dlperf crossover {' '.join(args[1:])} (dlperf run --resume would not go on with the "
        "thread search)"
    )
    refused = dlperf("run", "--resume", "--db", db)  # as it says: a crossover cut in its thread search is a search's
    assert refused.returncode == ExitCode.BAD_INPUT and "of dlperf crossover" in refused.stderr, refused.stderr


# ----------------------------------------------------------------------------------------------------------------------
# dlperf profile


def test_profile_cut_short_is_resumed_and_prints_every_cells_profile(tmp_path, monkeypatch, capsys):
    from dlperf.protocol import Profiled

    db = str(tmp_path / "p.db")
    _fake_children(monkeypatch, [Profiled(steps=3, step_s=1e-3, categories={"matmul": 0.6, "elementwise": 0.4})])
    fake, started = sweep.run_task, []

    def run_task(task, ctx, poll):
        started.append(task.cell.threads)
        if task.cell.threads == 2 and len(started) == 2:
            raise KeyboardInterrupt
        return fake(task, ctx, poll)

    monkeypatch.setattr(sweep, "run_task", run_task)
    code, _, err = _main(monkeypatch, capsys, "profile", "tiny-fcn-r", "--threads", "1,2", "--db", db)
    assert code == ExitCode.INTERRUPTED
    assert err.splitlines()[-1] == (
        f"dlperf: interrupted; 1 of 2 cells measured, 1 of them profiled, is stored in run 1. Continue with: dlperf "
        f"run --resume --db {db} (it "
        "measures and profiles the cells left, then prints every cell's profile)"
    )
    code, out, _ = _main(monkeypatch, capsys, "run", "--resume", "--db", db)
    assert code == ExitCode.OK and started == [1, 2, 2]
    for label in ("tiny-fcn-r torch cpu:1 fp32", "tiny-fcn-r torch cpu:2 fp32"):
        assert f"{label}: " in out and out.count("where the timed step goes") == 2, out
    assert "seconds per mini-batch" not in out  # the profiles, not the run's table


def test_a_run_of_repeats_cut_short_says_how_many_processes_it_stored(tmp_path, monkeypatch, capsys):
    """With --repeats a cell is measured once its first process is: Ctrl-C with 5 of 8 processes done said '4 of 4
    cells measured are stored in run 1', as if the run were whole."""
    db = str(tmp_path / "r.db")
    _fake_children(monkeypatch, [])
    fake, started = sweep.run_task, []

    def run_task(task, ctx, poll):
        started.append(task.cell.threads)
        if len(started) == 4:
            raise KeyboardInterrupt
        return fake(task, ctx, poll)

    monkeypatch.setattr(sweep, "run_task", run_task)
    code, _, err = _main(monkeypatch, capsys, "run", "--workloads", "tiny-fcn-r", "--threads", "1,2", "--repeats", "2",
                         "--db", db)  # fmt: skip
    assert code == ExitCode.INTERRUPTED
    assert err.splitlines()[-1].startswith(
        "dlperf: interrupted; 3 of 4 processes done; 1 left, in 1 cell (2 of 2 cells measured at least once), "
        "stored in run 1. "
    ), err


def test_profile_cut_short_before_any_cell_finished_says_none_is_stored(tmp_path, monkeypatch, capsys):
    """It said 'finished cells are stored in run 1' when none had finished."""

    def run_task(task, ctx, poll):
        raise KeyboardInterrupt

    _fake_children(monkeypatch, [])
    monkeypatch.setattr(sweep, "run_task", run_task)
    db = str(tmp_path / "p.db")
    code, _, err = _main(monkeypatch, capsys, "profile", "tiny-fcn-r", "--threads", "1,2", "--db", db)
    assert code == ExitCode.INTERRUPTED
    assert err.splitlines()[-1].startswith(
        "dlperf: interrupted; no cell was measured yet: run 1 holds its plan of 2 cells. Continue with: "
    ), err


def test_a_resumed_crossover_says_which_cpu_steps_are_not_to_rely_on(tmp_path, monkeypatch, capsys):
    """`dlperf run --resume` of a crossover printed its answer with no note on the steps it rests on, as the crossover
    itself did before e83c96f: here 3 timed steps a batch, which `dlperf table` notes as few."""
    db = str(tmp_path / "x.db")
    _children(monkeypatch, interrupt_at=2)
    args = ["crossover", "tiny-fcn-r", "--gpu", "T4", "--threads", "1", "--batches", "1,2", "--batch", "2"]
    assert _main(monkeypatch, capsys, *args, "--db", db)[0] == ExitCode.INTERRUPTED
    monkeypatch.setattr(sweep, "run_task", lambda task, ctx, poll: ProcessMeasurement(
        status=Status.OK, samples=[1e-3, 1.1e-3, 0.9e-3], duration_s=0.1))  # fmt: skip
    code, out, _ = _main(monkeypatch, capsys, "run", "--resume", "--db", db)
    assert code == ExitCode.OK and "T4: at your batch 2: GPU predicted" in out, out
    assert "note: tiny-fcn-r@b2 torch cpu:1: few samples: the median of 3 timed steps" in " ".join(out.split()), out


def test_optimize_cut_short_between_two_rounds_still_says_what_it_measured(tmp_path, monkeypatch):
    """Ctrl-C just after "[4/?] tiny-fcn-r torch cpu:1 bf16: median 1.02 ms", while the parent worked out the round's
    speed-ups (no child running): `dlperf optimize` printed "dlperf: interrupted" and nothing else, no table, no
    answer so far, and left its run "running" (later "stopped (its process is gone)") rather than interrupted."""
    from dlperf import optimize as opt
    from dlperf.store import Store

    _fake_children(monkeypatch, [])
    monkeypatch.setattr(opt.Searcher, "_choose", lambda *a: (_ for _ in ()).throw(KeyboardInterrupt))
    try:
        search = _optimize(tmp_path, order="fixed")
    except KeyboardInterrupt:
        pytest.fail("the interrupt escaped the search: nothing it measured would be said")
    assert search.exit_code == ExitCode.INTERRUPTED and search.interrupted == "the precision round"
    assert {"fp32", "bf16"} <= {r.mode for r in search.results if r.median_s}, search.results  # what it measured
    store = Store.open(str(tmp_path / "o.db"), create=False)
    try:
        assert store.run(search.run_id).status == "interrupted"
    finally:
        store.close()
