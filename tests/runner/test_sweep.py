"""End-to-end sweeps through the real command line: child processes, crashes, timeouts, interrupts, resume. Slow
(make test-slow), but for one interrupt and its --resume, kept in the fast run (make test)."""

import json
import os
import shlex
import signal
import sqlite3
import subprocess
import sys
import time
from types import SimpleNamespace

import pytest

from conftest import FAST, FAULTY_MODELS, ROOT, alive, cells, dlperf, one_line_error, require, rows
from dlperf.report.charts import DISTURBANCES
from dlperf.report.notes import kind_of


@pytest.fixture
def user_file(tmp_path):
    require("torch")
    path = tmp_path / "models.py"
    path.write_text(FAULTY_MODELS)
    return path


@pytest.mark.slow
def test_sweep_of_tiny_workloads_stores_and_prints_the_table(tmp_path):
    require("torch")
    db = tmp_path / "d.db"
    proc = dlperf("run", "--workloads", "tiny-fcn-r,tiny-resnet-56", "--threads", "1,2", *FAST, db=db)
    assert proc.returncode == 0, proc.stderr
    assert "tiny-fcn-r" in proc.stdout and "cpu:2" in proc.stdout
    rows = cells(db)
    assert [(r["workload"], r["threads"], r["status"]) for r in rows] == [
        ("tiny-fcn-r", 1, "ok"),
        ("tiny-fcn-r", 2, "ok"),
        ("tiny-resnet-56", 1, "ok"),
        ("tiny-resnet-56", 2, "ok"),
    ]
    for r in rows:
        assert r["median_s"] > 0 and r["params"] > 0 and r["flops_per_step"] > 0
        # at least --min-steps samples, unless the other slow test running beside this one took the cores: a 0.63 s
        # step of tiny-resnet-56 then used up --max-time 0.5 alone (CI), and the cell says it was disturbed
        disturbed = any(w in (r["extra_json"] or "") for w in ("other processes used", "CPU steal"))
        assert r["n"] >= 3 or disturbed, dict(r)
        assert r["peak_mem_bytes"] > 0 and r["peak_mem_kind"] == "live_tensors"
        assert r["samples_s"] == pytest.approx(r["batch"] / r["median_s"])
        settings = json.loads(r["extra_json"])["settings"]
        assert settings["torch_threads"] == r["threads"]
    table = json.loads(dlperf("table", "--format", "json", db=db).stdout)
    assert table["columns"] == ["cpu:1", "cpu:2"]
    # the fastest thread count is starred exactly when neither compared cell was disturbed (few samples, other
    # processes' load: the slow tests run two at a time) nor are the two tied (their intervals overlap); otherwise
    # no star, and a note names what disturbed which, or the tie
    fcn = [json.loads(r["extra_json"])["warnings"] for r in rows if r["workload"] == "tiny-fcn-r"]
    disturbed = [w for warnings in fcn for w in warnings if w.startswith(DISTURBANCES)]
    starred = sum(c["best"] for c in table["rows"][0]["cells"].values())
    noted = [n for n in table["notes"] if "no fastest thread count starred in tiny-fcn-r torch" in n]
    tied = not disturbed and any("a tie" in n for n in noted)
    assert (starred, len(noted)) == ((0, 1) if disturbed or tied else (1, 0)), (disturbed, table["notes"])
    assert all(any((kind_of(w).prefix if kind_of(w) else w) in n for n in table["notes"]) for w in disturbed)
    export = [json.loads(line) for line in dlperf("export", "--samples", db=db).stdout.splitlines()]
    assert len(export) == 4 and all(len(e["samples"][0]) == e["n"] for e in export)
    csv_out = dlperf("export", "--format", "csv", db=db).stdout.splitlines()
    assert csv_out[0].startswith("run_id,run_started_at,run_state,run_origin,hostname,") and len(csv_out) == 5
    assert ",key,workload," in csv_out[0]
    env = json.loads(dlperf("env", "--format", "json", db=db).stdout)
    assert env["frameworks"]["torch"]["version"].startswith("2.") and env["cores"]["cores"] >= 1


@pytest.mark.slow
def test_crash_error_and_timeout_are_recorded_and_the_sweep_goes_on(tmp_path, user_file):
    db = tmp_path / "d.db"
    hang_file = tmp_path / "hang"
    hang_file.write_text("")
    proc = dlperf(
        "run",
        "--workloads",
        f"{user_file}:segv,{user_file}:fails,{user_file}:oom,{user_file}:hang,{user_file}:good",
        "--threads",
        "1",
        "--timeout",
        "20",
        *FAST,
        db=db,
        env={"HANG_FILE": str(hang_file)},
    )
    assert proc.returncode == 1, proc.stderr
    by_name = {r["workload"]: r for r in cells(db)}
    assert by_name["segv"]["status"] == "failed" and "SIGSEGV" in by_name["segv"]["error"]
    assert by_name["raise"]["status"] == "failed" and "RuntimeError: bad forward" in by_name["raise"]["error"]
    assert by_name["oom"]["status"] == "failed" and by_name["oom"]["error"].startswith("out of memory at batch 16: ")
    assert by_name["hang"]["status"] == "timeout" and "--timeout 20" in by_name["hang"]["error"]
    assert by_name["good"]["status"] == "ok"
    assert not alive(int(hang_file.read_text()))  # the hung worker's process is gone


@pytest.mark.parametrize("sig", [pytest.param(s, marks=pytest.mark.slow) for s in (signal.SIGINT, signal.SIGTERM)])
def test_interrupt_keeps_finished_cells_and_resume_finishes_the_rest(tmp_path, user_file, sig):
    db = tmp_path / "runs of 'today'" / "d.db"  # the hint must quote it for the shell
    db.parent.mkdir()
    hang_file = tmp_path / "hang"
    hang_file.write_text("")
    env = {**os.environ, "HANG_FILE": str(hang_file), "PYTHONPATH": str(ROOT / "src")}
    cmd = [
        sys.executable,
        "-m",
        "dlperf",
        "run",
        "--db",
        str(db),
        "--threads",
        "1",
        *FAST,
        "--workloads",
        f"tiny-fcn-r,{user_file}:hang,tiny-alexnet-r",
    ]
    # SIGINT at its default in the parent, as in a terminal: a shell's background job (`make test-slow &`) starts
    # with SIGINT ignored, and Python then installs no KeyboardInterrupt handler, so the signal would do nothing
    parent = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    deadline = time.monotonic() + 120
    while not hang_file.read_text() and time.monotonic() < deadline:  # the worker of cell 2 is hanging
        time.sleep(0.2)
    worker = int(hang_file.read_text())
    parent.send_signal(sig)
    _, err = parent.communicate(timeout=30)
    assert parent.returncode == 130, err
    hint = err.strip().splitlines()[-1].split("Continue with: ")[1]
    assert shlex.split(hint) == ["dlperf", "run", "--resume", "--db", str(db)], hint
    assert not alive(worker)
    rows = cells(db)
    assert [r["status"] for r in rows] == ["ok", "pending", "pending"]
    first_update = rows[0]["updated_at"]

    hang_file.unlink()  # the next attempt at the hanging cell succeeds
    # the hint, followed literally where $DLPERF_DB names another database, resumes this one
    resumed = [sys.executable, "-m", "dlperf", *shlex.split(hint)[1:]]
    env = {**env, "DLPERF_DB": str(tmp_path / "other.db")}
    proc = subprocess.run(resumed, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    rows = cells(db)
    assert [r["status"] for r in rows] == ["ok", "ok", "ok"]
    assert rows[0]["updated_at"] == first_update  # finished cells were not measured again
    assert len({r["run_id"] for r in rows}) == 1
    one_line_error(dlperf("run", "--resume", db=db), "nothing to resume")


def test_resume_takes_no_sweep_flag_and_says_when_a_store_holds_no_run(tmp_path):
    """--resume continues the run as planned: a flag that would change it is refused, not ignored; where there is no
    run to resume, that is said, flags or not."""
    from commands.test_table_unfinished import planned_run
    from dlperf.store import Store

    db = tmp_path / "d.db"
    one_line_error(dlperf("run", "--resume", "--repeats", "2", db=db), "no such database")
    store = Store.open(str(db), create=True)
    planned_run(store, 1, "interrupted")  # begun by `dlperf run`, its three cells planned
    store.close()
    for flags in (["--workloads", "tiny-lstm", "--threads", "2"], ["--repeats", "2"], ["--max-time", "1"]):
        one_line_error(dlperf("run", "--resume", *flags, db=db), "--resume", *flags[::2])
    Store.open(str(tmp_path / "empty.db"), create=True).close()  # a store of peaks alone, say: no run
    one_line_error(dlperf("run", "--resume", db=tmp_path / "empty.db"), "holds no run to resume")
    one_line_error(dlperf("run", "--resume", "--threads", "1", db=tmp_path / "empty.db"), "holds no run to resume")


@pytest.mark.slow  # a run with --data, then three resumes: 17 s on 2 cores
def test_resume_reads_its_data_again_and_its_dry_run_measures_nothing(tmp_path):
    """A resumed run's --data is read again (a folder gone since is one line, not a failed cell), and --dry-run lists
    what is left, measuring nothing."""
    require("torch")
    from conftest import write_datasets

    db, data = tmp_path / "d.db", write_datasets(tmp_path / "data")
    proc = dlperf("run", "--workloads", "tiny-fcn-r", "--data", str(data), "--loaders", "w0", "--threads", "1",
                  *FAST, db=db)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    conn = sqlite3.connect(db)  # as an interrupt leaves it: the loader cell not measured yet
    (key,) = conn.execute("SELECT key FROM cells WHERE loader IS NOT NULL").fetchone()
    conn.execute("DELETE FROM measurements WHERE cell_key = ?", (key,))
    conn.execute("UPDATE cells SET status = 'pending' WHERE key = ?", (key,))
    conn.execute("UPDATE runs SET status = 'interrupted'")
    conn.commit()
    conn.close()
    before = cells(db)

    data.rename(tmp_path / "moved")
    for flags in (["--dry-run"], []):
        one_line_error(dlperf("run", "--resume", *flags, db=db), "--resume: run 1's --data", "no such directory")
    (tmp_path / "moved").rename(data)
    proc = dlperf("run", "--resume", "--dry-run", db=db)
    assert proc.returncode == 0, proc.stderr
    assert "data:w0" in proc.stdout and "run 1: 1 of its 2 cell processes are left to measure" in proc.stdout
    assert cells(db) == before and rows(db, "SELECT status FROM runs") == [{"status": "interrupted"}]
    proc = dlperf("run", "--resume", db=db)
    assert proc.returncode == 0, proc.stderr
    assert [r["status"] for r in cells(db)] == ["ok", "ok"]


@pytest.mark.slow  # a run of two cells, then a resume: 10 s on 2 cores
def test_a_resumed_run_with_a_cell_that_failed_before_the_interrupt_exits_1(tmp_path):
    """A cell failed (its worker killed), then Ctrl-C; `--resume` measured the rest and exited 0 beside the `failed`
    in its table, where the same sweep without the interrupt exits 1: a CI job that resumes passed a failed run."""
    require("torch")
    db = tmp_path / "d.db"
    proc = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1,2", *FAST, db=db)
    assert proc.returncode == 0, proc.stderr
    conn = sqlite3.connect(db)  # as a kill -9 of cpu:1's worker, then an interrupt before cpu:2, leave it
    keys = [k for (k,) in conn.execute("SELECT key FROM cells ORDER BY position")]
    conn.execute("DELETE FROM measurements WHERE cell_key = ?", (keys[1],))
    for table, key in (("cells", "key"), ("measurements", "cell_key")):
        conn.execute(f"UPDATE {table} SET status = 'failed', error = 'worker killed by SIGKILL' WHERE {key} = ?",
                     (keys[0],))  # fmt: skip
    conn.execute("UPDATE cells SET status = 'pending' WHERE key = ?", (keys[1],))
    conn.execute("UPDATE runs SET status = 'interrupted'")
    conn.commit()
    conn.close()
    proc = dlperf("run", "--resume", db=db)
    assert proc.returncode == 1, proc.stderr
    assert [r["status"] for r in cells(db)] == ["failed", "ok"]


@pytest.mark.slow
def test_resume_refuses_another_machine_or_framework_version(tmp_path):
    require("torch")
    db = tmp_path / "d.db"
    dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", *FAST, db=db)
    conn = sqlite3.connect(db)
    fp = json.loads(conn.execute("SELECT fingerprint_json FROM runs").fetchone()[0])
    fp["frameworks"]["torch"] = "1.0.0"
    conn.execute("UPDATE runs SET status = 'interrupted', fingerprint_json = ?", (json.dumps(fp),))
    conn.commit()
    conn.close()
    one_line_error(dlperf("run", "--resume", db=db), "torch", "1.0.0")


@pytest.mark.slow
def test_user_workload_errors_are_one_line(tmp_path, user_file):
    db = tmp_path / "d.db"
    broken = tmp_path / "broken.py"
    broken.write_text("raise ValueError('cannot import me')\n")
    for spec, fragment in [
        (f"{user_file}:missing", "has no factory 'missing'"),
        (f"{user_file}:not_a_workload", "must return dlperf.user_workload"),
        (f"{broken}:make", "ValueError: cannot import me"),
    ]:
        one_line_error(dlperf("run", "--workloads", spec, db=db), fragment)
    assert not db.exists()


@pytest.mark.slow
def test_device_not_present_and_dry_run(tmp_path):
    require("torch")
    db = tmp_path / "d.db"
    absent = dlperf("run", "--workloads", "tiny-fcn-r", "--devices", "cuda:99", db=db)
    one_line_error(absent, "--devices: 'cuda:99' is not present")
    proc = dlperf(
        "run",
        "--workloads",
        "tiny-fcn-r,tiny-lstm",
        "--threads",
        "1,2,16",
        "--dry-run",
        db=db,
        env={"KMP_AFFINITY": "compact", "OMP_NUM_THREADS": "7"},
    )
    assert proc.returncode == 0
    assert "warning: inherited KMP_AFFINITY=compact changes threading" in proc.stderr
    assert "warning: inherited OMP_NUM_THREADS=7 is replaced by each cell's thread count" in proc.stderr
    assert "--threads 16 exceeds" in proc.stderr
    assert "tiny-lstm torch cpu:2 fp32" in proc.stdout and "6 cell processes, estimated" in proc.stdout
    assert not db.exists()


@pytest.mark.slow
def test_modes_are_cells_and_a_mode_that_does_not_apply_is_unsupported(tmp_path):
    require("torch")
    db = tmp_path / "d.db"
    proc = dlperf("run", "--workloads", "tiny-fcn-s,tiny-alexnet-r", "--threads", "1",
                  "--modes", "fp32,channels_last+bf16", *FAST, db=db)  # fmt: skip
    assert proc.returncode == 0, proc.stderr  # unsupported is not a failure
    status = {(r["workload"], r["mode"]): (r["status"], r["error"]) for r in cells(db)}
    assert status[("tiny-alexnet-r", "bf16+channels_last")][0] == "ok"
    assert status[("tiny-fcn-s", "bf16+channels_last")][0] == "unsupported"
    assert "channels_last applies to 2-d convolutional networks" in status[("tiny-fcn-s", "bf16+channels_last")][1]
    checks = {(r["workload"], r["mode"]): json.loads(r["extra_json"]).get("loss_check") for r in cells(db)}
    assert checks[("tiny-alexnet-r", "bf16+channels_last")]["ok"] is True  # it still trains like fp32
    assert checks[("tiny-alexnet-r", "fp32")] is None  # fp32 is the reference, not checked against itself
    only = json.loads(dlperf("table", "--modes", "channels_last+bf16", "--format", "json", db=db).stdout)
    assert {r["mode"] for r in only["rows"]} == {"bf16+channels_last"}
    one_line_error(dlperf("table", "--modes", "fp16", db=db), "no cells in these modes")
    best = {r["workload"]: r for r in json.loads(dlperf("table", "--best", "--format", "json", db=db).stdout)}
    assert best["tiny-fcn-s"]["mode"] == "fp32" and best["tiny-fcn-s"]["speedup"] == 1.0
    assert best["tiny-alexnet-r"]["mode"] in ("fp32", "bf16+channels_last")
    table = json.loads(dlperf("table", "--format", "json", db=db).stdout)
    assert {(r["workload"], r["mode"]) for r in table["rows"]} == set(status)


def measurements(db):
    return rows(db, "SELECT * FROM measurements ORDER BY run_id, cell_key, repeat")


@pytest.mark.slow
def test_compiled_cells_compile_with_empty_caches_and_record_compile_time_apart(tmp_path):
    """Two processes of a compiled cell, forked from the run's warm parent: each compiles from nothing."""
    require("torch")
    db = tmp_path / "d.db"
    proc = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", "--modes", "compile", "--repeats", "2",
                  *FAST, db=db, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [cell] = cells(db)
    assert cell["status"] == "ok" and cell["mode"] == "compile"
    compiled = json.loads(cell["extra_json"])["compile"]
    assert compiled["graphs"] >= 1 and compiled["graph_breaks"] == 0 and compiled["recompiles"] == 0
    assert compiled["first_step_s"] > cell["median_s"] and compiled["compile_s"] > 0
    both = measurements(db)
    assert len(both) == 2  # --repeats 2: a process each
    for m in both:  # the second process found no compiled code left by the first
        detail = json.loads(m["detail_json"])
        assert detail["compile"]["cache_hits"] == 0 and detail["started"] == "warm"
    assert cell["flops_per_step"] > 0  # counted on the eager module
    assert cell["peak_mem_kind"] == "process_rss"  # a dispatch mode cannot see inside compiled code


@pytest.mark.slow
def test_compile_timeout_stops_the_cell_with_the_reason(tmp_path):
    require("torch")
    db = tmp_path / "d.db"
    proc = dlperf("run", "--workloads", "tiny-fcn-r", "--threads", "1", "--modes", "fp32,compile",
                  "--compile-timeout", "0.5", *FAST, db=db)  # fmt: skip
    assert proc.returncode == 1, proc.stderr
    status = {r["mode"]: (r["status"], r["error"]) for r in cells(db)}
    assert status["fp32"][0] == "ok"  # the limit applies to compiling only
    assert status["compile"] == ("timeout", "compilation exceeded --compile-timeout 0.5 s")


SPAWNER = """
import os, subprocess, sys
import torch
import dlperf


def make():
    # a process the model's code starts (as a compiler's worker pool does), its pid kept where the test finds it
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    with open(os.environ["DLPERF_TEST_PIDS"], "a") as f:
        f.write(f"{child.pid}\\n")
    model = torch.nn.Linear(8, 2)
    batch = lambda n, device: (torch.randn(n, 8, device=device), torch.randint(0, 2, (n,), device=device))
    return dlperf.user_workload("spawner", model, batch, torch.nn.functional.cross_entropy, batch_size=4)
"""


@pytest.mark.slow
def test_nothing_a_cell_started_outlives_it(tmp_path):
    """Children end with os._exit, skipping the interpreter's teardown (0.85 s a cell): what they started is stopped
    first, so no process of a cell, nor of the probe that read the factory, is left running."""
    require("torch")
    source, pids = tmp_path / "spawner.py", tmp_path / "pids"
    source.write_text(SPAWNER)
    proc = dlperf("run", "--workloads", f"{source}:make", "--threads", "1", *FAST, db=tmp_path / "d.db",
                  env={"DLPERF_TEST_PIDS": str(pids)})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) == 2  # the probe's and the cell's
    deadline = time.monotonic() + 5
    while any(alive(p) for p in started) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(alive(p) for p in started)


NAN_LOSS = """
import torch
import dlperf


def make():
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))

    def make_batch(n, device):
        return torch.randn(n, 8, device=device), torch.randint(3, (n,), device=device)

    def loss(out, target):
        return torch.nn.functional.cross_entropy(out, target) * float("nan")

    return dlperf.user_workload("nan", model, make_batch, loss, batch_size=16)
"""


@pytest.mark.slow
def test_a_workload_whose_loss_is_nan_is_timed_marked_and_its_modes_not_checked(tmp_path):
    """Issue 30, end to end: the fp32 cell read `ok` and the table said nothing; bf16's loss check "failed" on the
    reference's nan, in the export only."""
    require("torch")
    (tmp_path / "nan.py").write_text(NAN_LOSS)
    db = tmp_path / "d.db"
    proc = dlperf("run", "--workloads", f"{tmp_path / 'nan.py'}:make", "--threads", "1", "--modes", "fp32,bf16",
                  *FAST, db=db)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "! = the loss was not finite" in proc.stdout
    notes = " ".join(proc.stdout.split())  # one note for the kind, naming both cells (the table wraps it)
    assert notes.count("loss not finite: nan after the timed steps") == 1, proc.stdout
    assert "nan torch cpu:1, nan torch bf16 cpu:1: loss not finite" in notes, proc.stdout
    export = dlperf("export", db=db)
    fp32, bf16 = (json.loads(line) for line in export.stdout.splitlines())
    assert fp32["status"] == bf16["status"] == "ok" and fp32["median_s"] and bf16["median_s"]
    assert any(w.startswith("loss not finite: nan") for w in fp32["warnings"])
    assert bf16["loss_ok"] is None and bf16["loss_reason"] == "not checked: the fp32 reference's loss is nan at step 1"


class Process(str):
    """A launch as `unsuspended` reads it: not killed with a warm parent."""

    child = SimpleNamespace(orphaned=False)


def test_a_process_killed_with_its_warm_parent_is_launched_again_once_and_the_cell_says_so():
    """The warm parent a cell's process was forked from died while it ran (killed, or out of memory): its process
    died with it (PR_SET_PDEATHSIG), and the cell was stored failed, 'worker killed by SIGKILL (sent by a process)',
    which --resume never measures again. It is launched again, once."""
    from dlperf.runner import sweep

    def launches(orphaned: int):
        made, discarded = [], []

        def start():
            made.append(SimpleNamespace(child=SimpleNamespace(orphaned=len(made) < orphaned), n=len(made) + 1))
            return made[-1]

        return start, discarded

    start, discarded = launches(1)
    launched, notes = sweep.unsuspended(start, discard=discarded.append)
    assert launched.n == 2 and [d.n for d in discarded] == [1]
    assert notes == ["measured again: its first process was killed with the warm parent it was forked from, which "
                     "died while it ran"]  # fmt: skip
    start, _ = launches(2)  # its parent died twice: the machine's doing, kept as it ended
    launched, notes = sweep.unsuspended(start)
    assert launched.n == 2 and launched.child.orphaned and len(notes) == 1


def test_a_process_suspended_while_it_ran_is_launched_again_and_the_cell_says_so(monkeypatch):
    """Ctrl-Z while a cell's process ran (`lifeline.suspend` counts it): its times hold the pause, so it is launched
    again; a job of several nodes, whose other nodes ran on, is kept and noted instead."""
    from dlperf.runner import lifeline, sweep

    count = {"n": 0, "s": 0.0}
    monkeypatch.setattr(lifeline, "paused", lambda: (count["n"], count["s"]))

    def launches(suspended: int):
        made = []

        def start():
            made.append(len(made) + 1)
            if len(made) <= suspended:  # Ctrl-Z, then fg, while this one ran
                count["n"], count["s"] = count["n"] + 1, count["s"] + 2.5
            return Process(f"process {made[-1]}")

        return start

    assert sweep.unsuspended(launches(0)) == ("process 1", [])
    assert sweep.unsuspended(launches(1)) == (
        "process 2", ["measured again: 1 process suspended (Ctrl-Z) for 2.5 s while it ran was left out"])  # fmt: skip
    assert sweep.unsuspended(launches(2))[1] == [
        "measured again: 2 processes suspended (Ctrl-Z) while they ran, 5.0 s in all, were left out"]  # fmt: skip
    assert sweep.unsuspended(launches(1), again=False) == (
        "process 1", ["suspended (Ctrl-Z) for 2.5 s while it ran: its times include the pause"])  # fmt: skip
