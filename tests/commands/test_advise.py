"""`dlperf advise WORKLOAD` end to end: this CPU measured briefly (threads, then a short optimize), stored; the GPUs
predicted (time, memory, cost); one screen of answers, each figure labelled measured or predicted; bad input as one
line before anything runs."""

import json
import re
from pathlib import Path

import pytest

from conftest import dlperf, one_line_error

ROOT = Path(__file__).resolve().parents[2]
NO_FILE = {"DLPERF_PRICES": ""}
SPECS_HEAD = (
    "gpu,fp32_tflops,tf32_tflops,fp16_tensor_tflops,bf16_tensor_tflops,fp8_tensor_tflops,mem_bw_gbs,mem_gib,host_link,"
    "host_link_gbs,generation,sm_count,boost_clock_mhz,l2_mib,peak_clock,source\n"
)


def test_bad_input_is_one_line_before_anything_runs(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("gpu,usd_per_hour_low,usd_per_hour_high\nT4,cheap,1\n")
    cases = [
        (["--gpu", "No-Such-GPU"], ["unknown GPU"]),
        (["--gpu", ""], ["--gpu", "one or more GPU names"]),  # not every GPU of the table, silently
        (["--prices", str(bad)], [f"--prices {bad}, line 2, column usd_per_hour_low"]),
        (["--deadline=-2h"], ["--deadline", "above zero"]),
        (["--samples", "10", "--epochs", "2"], ["--samples and --epochs"]),
        (["--budget", "0"], ["--budget"]),
        (["--gpu-specs", str(bad)], ["--gpu-specs"]),
        (["--data", str(tmp_path / "none")], ["--data", "no such directory"]),
        (["--loaders", "w2"], ["--loaders", "--data DIR"]),  # a loader reads real data
        (["--batch", "0"], ["--batch"]),
        (["--batch", "65537"], ["--batch", "65,536"]),  # the mode search measures NAME@bN, up to fit's largest batch
    ]
    db = tmp_path / "x.db"
    for extra, fragments in cases:
        one_line_error(dlperf("advise", "tiny-fcn-r", *extra, db=db, env=NO_FILE), *fragments)
    one_line_error(dlperf("advise", "no-such-net", db=db, env=NO_FILE), "no-such-net")
    # a batch of its own is for run, profile and optimize; here, as predict and crossover take it, --batch
    one_line_error(dlperf("advise", "tiny-fcn-r@b8", db=db, env=NO_FILE), "tiny-fcn-r@b8", "--batch")
    one_line_error(dlperf("advise", "tiny-fcn-r", db=db, env={"DLPERF_PRICES": str(bad)}), "DLPERF_PRICES")
    assert not db.exists()  # nothing written


@pytest.mark.slow  # two tiny advises, each a thread search and a short optimize: 30-70 s on 2 cores
def test_one_screen_every_figure_labelled_and_stored(tmp_path):
    """A tiny workload and budget: every section's line, measured or predicted, the runs stored, and the JSON."""
    db, specs = tmp_path / "a.db", tmp_path / "tiny.csv"
    specs.write_text(SPECS_HEAD + "Tiny-512MB,1,,,,,50,0.5,PCIe Gen3 x16,15.75,Turing,,,,boost,a GPU nothing fits\n")
    proc = dlperf("advise", "tiny-fcn-r", "--budget", "30", "--gpu", "H100-SXM5-80GB,T4,Tiny-512MB", "--deadline",
                  "1h", "--gpu-specs", str(specs), db=db, env={"COLUMNS": "200", **NO_FILE})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())  # rich wraps a long line at a word
    # the time marked '?' where the CPU step is not one to rely on (a busy machine: report/advise.py)
    assert "On this CPU (measured): " in out and " thread" in out
    assert re.search(r" s\??\ for one epoch at its best ", out), out
    for line in ("Fastest GPU (predicted): ", "Cheapest GPU (predicted): ", "Cheapest within 1h (predicted): ",
                 "Does not fit (predicted): Tiny-512MB (has ",
                 "Crossover (CPU measured, GPUs predicted): "):  # fmt: skip
        assert line in out, line
    assert "the largest batch that fits: none" in out  # no room left beside the CUDA context
    assert "GPU figures' uncertainty: -" in out  # the predictor's, from its validation
    assert "on the 74 GPU steps dlperf measured itself" in out  # and the GPU steps dlperf measured, beside it
    table = dlperf("table", db=db)
    assert table.returncode == 0 and "tiny-fcn-r" in table.stdout  # the runs are stored: the views see them
    # a budget the thread search alone spends: the mode search is skipped, and said so
    got = json.loads(dlperf("advise", "tiny-fcn-r", "--budget", "10", "--gpu", "T4,Tiny-512MB", "--gpu-specs",
                            str(specs), "--format", "json", db=db, env=NO_FILE).stdout)  # fmt: skip
    assert got["cpu"]["measured"] is True and got["cpu"]["threads"] >= 1 and got["cpu"]["time_s"] > 0
    assert got["fastest"]["predicted"] is True and got["fastest"]["gpu"] == "T4"
    assert got["cheapest"]["gpu"] == "T4"
    assert {r["mode"] for r in got["gpus"] if r["gpu"] == "T4"} == {"fp32", "fp16"}  # no bf16 unit: as it is trained
    assert any(n.startswith("no bf16 unit: T4 predicted in fp32 and fp16") for n in got["notes"])
    assert {(r["gpu"], r["predicted"], r["largest_batch"]) for r in got["does_not_fit"]} == {("Tiny-512MB", True, 0)}
    assert any("mode search skipped" in n for n in got["notes"]) and got["cpu"]["mode"] == "fp32"
    assert got["mode_searched"] is False
    assert got["crossover"]["how"] in ("batches", "your batch") and got["uncertainty"]
    assert got["deadline_s"] is None and got["within_deadline_at_risk"] is None  # no --deadline: no risk to say


@pytest.mark.slow
def test_a_users_model_file_in_under_five_minutes(tmp_path):
    """The GPU guide's example (docs/guides/gpu.md): examples/my_model.py, the default budget and GPUs."""
    import time

    start = time.monotonic()
    proc = dlperf("advise", f"{ROOT}/examples/my_model.py:make", "--samples", "50000", db=tmp_path / "m.db",
                  env={"COLUMNS": "200", **NO_FILE})  # fmt: skip
    took = time.monotonic() - start
    assert proc.returncode == 0, proc.stderr
    assert "On this CPU (measured): " in proc.stdout and "Fastest GPU (predicted): " in proc.stdout
    assert took < 300, took


@pytest.mark.slow
def test_an_interrupt_in_the_mode_search_is_130_with_the_thread_search_kept(tmp_path):
    import os
    import signal
    import subprocess
    import sys
    import time

    from conftest import descendants, gone

    db = tmp_path / "i.db"
    env = {**os.environ, **NO_FILE, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-m", "dlperf", "advise", "tiny-fcn-r", "--budget", "120", "--gpu", "T4", "--db", str(db)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    seen = []
    for line in proc.stderr:  # the mode search's first cell is the run's first without a batch variant
        seen.append(line)
        if "tiny-fcn-r torch cpu:" in line and "@b" not in line:
            break
    below, deadline = descendants(proc.pid), time.monotonic() + 30  # read while it runs: after, they are init's
    while not below and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
        below = descendants(proc.pid)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, "".join(seen) + err
    assert "interrupted: the mode search stopped" in " ".join(out.split())
    assert "On this CPU (measured): " in out  # the thread search's step, kept
    table = dlperf("table", db=db)
    assert table.returncode == 0 and "tiny-fcn-r" in table.stdout
    assert below and gone(below), below  # the cell's process and what it started, seen while it ran
    from dlperf.store import Store

    store = Store.open(db, create=False)
    assert [r.env["made_by"] for r in store.runs()] == ["advise", "advise"]  # its thread search's, its mode search's
    store.close()
    resumed = dlperf("run", "--resume", db=db)  # a search's run: run advise again, --resume does not go on with it
    assert resumed.returncode == 2 and "of dlperf advise" in resumed.stderr, resumed.stderr


@pytest.mark.slow  # a thread search, a short optimize and its loader search: about 75 s on 2 quiet cores
def test_with_real_data_the_answer_says_how_fast_the_loader_feeds_each_gpu(tmp_path):
    """--data DIR: the mode search also searches the loader, and the answer says what one loading process prepares
    here, the loader alone, and how many each GPU would need; the loader cells are stored with the search's run."""
    data, db = tmp_path / "data", tmp_path / "a.db"
    assert dlperf("data", "synth", str(data), "--only", "mnist").returncode == 0
    proc = dlperf("advise", "tiny-fcn-r", "--data", str(data), "--budget", "150", "--gpu", "H100-SXM5-80GB,T4",
                  "--format", "json", db=db, env=NO_FILE)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    feed = got["input_pipeline"]  # None where the budget ran out first: 75 s did beside another slow test in CI
    assert feed, "\n".join(got["notes"])
    assert feed["measured"] and feed["setting"].startswith("w") and feed["per_process_samples_per_s"] > 0
    assert feed["samples_per_s"] >= feed["per_process_samples_per_s"] and feed["run_id"] in got["runs"]
    assert {(r["gpu"], r["mode"]) for r in feed["processes_needed"]} == {(r["gpu"], r["mode"]) for r in got["gpus"]}
    assert all(r["processes"] >= 1 and r["predicted"] for r in feed["processes_needed"])
    table = dlperf("table", "--run", str(feed["run_id"]), db=db, env={"COLUMNS": "200"})
    assert table.returncode == 0 and f"data:{feed['setting']}" in table.stdout  # the loader cell it was read from
    # this CPU on that data: an epoch of it (small MNIST: 1,000 samples), at the loader setting dlperf table recommends
    # in the steps the loader trains (8e3e9d4): it drops the partial last batch, 1,000 = 62 x 16 + 8
    assert (got["samples"], got["work"]) == (1000, "one epoch of your data (1,000 samples, --data: 62 steps of "
                                                   "batch 16, the last 8 samples left out as the loader drops a "
                                                   "partial batch)")  # fmt: skip
    here = got["loader_here"]
    assert here["measured"] and got["cpu"]["step_s"] == here["step_s"] and here["synthetic_step_s"] > 0
    assert f"recommended: {here['setting']} (" in table.stdout and here["why"] in table.stdout.replace("\n", " ")


def test_the_budget_is_one_deadline_from_the_start_the_mode_search_given_what_is_left():
    """`advise.Clock`: the thread search's deadline is the command's start plus --budget (`crossover.Options`); the
    mode search is given what is left when it starts, so its own deadline (`optimize`) is the same one, and it is
    skipped when less than MIN_SEARCH_S is left. (The thread search against the deadline: test_crossover_budget.py.)"""
    from dlperf.advise import MIN_SEARCH_S, Clock

    clock = Clock(60.0, started=1000.0)
    assert clock.deadline == 1060.0
    assert clock.left(1025.0) == 35.0 and 1025.0 + clock.search_s(1025.0) == clock.deadline
    assert clock.search_s(1060.0 - MIN_SEARCH_S) == MIN_SEARCH_S
    assert clock.search_s(1060.0 - MIN_SEARCH_S + 0.1) is None  # too little left: skipped, said so
    assert clock.search_s(1090.0) is None and clock.left(1090.0) == -30.0  # the thread search spent it all


class Stopped(Exception):
    """Raised by the stand-in mode search: what it was given is all these tests want."""


def parts_seen(monkeypatch) -> dict:
    """advise's parts stood in for (the predictions, the thread search, the mode search) on a clock of its own, each
    taking the seconds it says: what each was given, and the time the mode search would end."""
    from types import SimpleNamespace

    from dlperf import advise, crossover, optimize
    from dlperf.vocab import ExitCode

    seen: dict = {"now": 1000.0}
    monkeypatch.setattr(advise, "time", SimpleNamespace(monotonic=lambda: seen["now"]))

    def predicted(workload, *args):
        seen["now"] += 20.0
        seen["predicted"] = workload.batch
        return SimpleNamespace(), {}, [], {}

    def threads(opts, db, **kw):
        seen["now"] += 25.0
        seen["threads"] = {"batch": opts.batch, "batches": opts.batches, "deadline": opts.deadline}
        row = SimpleNamespace(cpu=SimpleNamespace(threads=2))
        return crossover.Result(1, SimpleNamespace(rows=[row]), ExitCode.OK, [])

    def modes(opts, db, **kw):
        seen["modes"] = {"workload": opts.workload, "ends": seen["now"] + opts.budget_s}
        raise Stopped

    monkeypatch.setattr(advise, "predicted", predicted)
    monkeypatch.setattr(crossover, "crossover", threads)
    monkeypatch.setattr(optimize, "optimize", modes)
    return seen


def test_the_thread_search_and_the_mode_search_end_at_the_commands_deadline(monkeypatch, tmp_path):
    """--budget 150 from the command's start (1000 on the stand-in clock): the thread search is given 1150 as its
    deadline, the mode search, begun at 1045 after the predictions and the thread search, the 105 s left."""
    from dlperf import advise

    seen = parts_seen(monkeypatch)
    with pytest.raises(Stopped):
        advise.advise(advise.Options("tiny-fcn-r", gpus="T4", budget_s=150.0), str(tmp_path / "a.db"), [])
    assert seen["threads"]["deadline"] == 1150.0 and seen["modes"]["ends"] == 1150.0


def test_your_batch_is_what_the_gpus_the_thread_search_and_the_mode_search_use(monkeypatch, tmp_path):
    """--batch 64 (tiny-fcn-r's own is 16): the GPUs predicted at 64, the thread search measures 64 alone, the mode
    search measures the workload at 64 (`NAME@bN`, as optimize takes it); without it, the workload's own batch."""
    from dlperf import advise

    seen = parts_seen(monkeypatch)
    with pytest.raises(Stopped):
        advise.advise(advise.Options("tiny-fcn-r", gpus="T4", batch=64), str(tmp_path / "a.db"), [])
    assert seen["predicted"] == 64 and seen["modes"]["workload"] == "tiny-fcn-r@b64"
    assert (seen["threads"]["batch"], seen["threads"]["batches"]) == (64, (64,))
    with pytest.raises(Stopped):
        advise.advise(advise.Options("tiny-fcn-r", gpus="T4"), str(tmp_path / "a.db"), [])
    assert seen["predicted"] == 16 and seen["modes"]["workload"] == "tiny-fcn-r"
    assert (seen["threads"]["batch"], seen["threads"]["batches"]) == (16, (16,))


def test_a_step_this_machine_cannot_hold_is_not_measured_and_the_answer_says_why(monkeypatch, tmp_path):
    """A model whose fp32 step needs more memory than this machine has available (a 1.3B-parameter LM at batch 8:
    45.7 GiB predicted, against 20 GiB here) was measured anyway: the thread search started a process that could only
    swap or be killed by the kernel's out-of-memory killer. Now nothing is measured, and the CPU and crossover lines
    say why, with the figures, while the GPUs are still ranked."""
    from types import SimpleNamespace

    from dlperf import advise, crossover
    from dlperf.measure import system
    from dlperf.predict import memory
    from dlperf.report import advise as view

    gib = 2**30
    costs = SimpleNamespace(cpu=None, fastest=lambda: None, left_out=[], batch=16, what="an epoch")
    monkeypatch.setattr(advise, "predicted", lambda *a: (costs, {}, [], {"fp32": int(45.7 * gib), "bf16": 9}))
    monkeypatch.setattr(system, "memory_available_bytes", lambda root="/": 20 * gib)
    monkeypatch.setattr(system, "memory_total_bytes", lambda root="/": 23 * gib)
    monkeypatch.setattr(crossover, "crossover", lambda *a, **k: pytest.fail("measured a step that cannot fit"))
    monkeypatch.setattr(memory, "largest_here", lambda w, mode, known, *a: 4 if known == {16: int(45.7 * gib)} else -1)
    a = advise.advise(advise.Options("tiny-fcn-r", gpus="T4"), str(tmp_path / "a.db"), [])
    assert a.runs == [] and a.exit_code == 0 and not (tmp_path / "a.db").exists()
    assert view._cpu_line(a) == (
        "On this CPU: not measured: the fp32 step at batch 16 needs about 45.7 GiB (predicted), more than the 20.0 GiB "
        "of 23.0 GiB this machine has available, so it cannot train here at this batch (batch 4 is the largest "
        "predicted to fit: dlperf fit measures it)"
    )
    # a 3.2B-parameter MLP with AdamW: its weights, gradients and states alone are 48 GiB, and dlperf fit was sent
    # to try six batches, each failing as the model was built
    monkeypatch.setattr(memory, "largest_here", lambda *a: 0)
    a = advise.advise(advise.Options("tiny-fcn-r", gpus="T4"), str(tmp_path / "a.db"), [])
    assert view._cpu_line(a).endswith("cannot train here at this batch nor at any: batch 1 is predicted to need more "
                                      "too (dlperf predict --memory shows where it goes)")  # fmt: skip
    assert view.NO_ROOM.startswith("not measured: the step does not fit this machine's memory")
    # room enough: measured as before
    monkeypatch.setattr(system, "memory_available_bytes", lambda root="/": 50 * gib)
    assert memory.no_room_here(SimpleNamespace(batch=16), int(45.7 * gib)) == ""
    assert memory.no_room_here(SimpleNamespace(batch=16), None) == ""  # not traced: measured, as before
