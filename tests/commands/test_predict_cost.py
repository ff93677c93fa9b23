"""`dlperf predict --cost` end to end: each GPU's time and cost for an epoch, this CPU's measured time beside, the
ranking, and bad input as one line before anything runs."""

import json
import sqlite3

from conftest import dlperf, one_line_error

GPUS = "H100-SXM5-80GB,T4,GTX 1080"
NO_FILE = {"DLPERF_PRICES": ""}


def this_machine(db, runs=None) -> None:
    """The store's runs (`runs`: these ids; None: all) as this machine's: the synthetic store's are a "Test CPU
    <v2>"'s, whose step --cost does not quote as this CPU's."""
    from dlperf import envinfo

    env = envinfo.capture()
    conn = sqlite3.connect(db)
    with conn:
        for run in runs or [r for (r,) in conn.execute("SELECT id FROM runs")]:
            conn.execute("UPDATE runs SET env_json = ?, fingerprint_json = ? WHERE id = ?",
                         (json.dumps(env), json.dumps(envinfo.fingerprint(env)), run))  # fmt: skip
    conn.close()


def test_the_cost_of_an_epoch_on_each_gpu_this_cpu_measured_and_the_ranking(report_db, tmp_path):
    """fcn-r trains on MNIST: an epoch is 60,000 samples; the store holds its CPU cells at batch 1024."""
    this_machine(report_db)
    own = tmp_path / "mine.csv"
    own.write_text("gpu,usd_per_hour_low,usd_per_hour_high,region,date,sources\nT4,0.05,0.05,on-prem,2026-11-01,ours\n")
    proc = dlperf("predict", "fcn-r", "--gpu", GPUS, "--modes", "fp32", "--cost", "--deadline", "1h",
                  "--prices", str(own), db=report_db, env={"COLUMNS": "250", **NO_FILE})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "one epoch: MNIST's 60,000 training samples" in out
    assert "Fastest: H100-SXM5-80GB" in out and "Cheapest within 1h: " in out
    assert "GTX 1080" in out and "no price" in out  # timed, not ranked by cost
    assert "your price (--prices)" in out  # the T4's row came from the user's file
    assert "On this CPU (measured" in out and "2 threads" in out and "100 W" in out  # the bf16 cell: 0.20 s/step


def test_json_and_no_measured_cpu_step_says_how_to_measure_it(tmp_path):
    proc = dlperf("predict", "fcn-r", "--gpu", "T4", "--modes", "fp32", "--cost", "--samples", "2048",
                  "--format", "json", cwd=tmp_path, env=NO_FILE)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["samples"] == 2048 and got["cpu_measured"] is None and got["fastest"]["gpu"] == "T4"
    assert got["rows"][0]["price"]["low"] == 0.5904 and got["rows"][0]["cost_usd"][0] > 0
    assert "dlperf run --workloads fcn-r --devices cpu" in got["cpu_how"]
    # the uncertainty and the notes the text prints, as advise's JSON holds them (they were left out)
    from dlperf.predict.roofline import uncertainty

    assert got["uncertainty"] == uncertainty() and any(n.startswith("counted at batch 1024") for n in got["notes"])
    assert any(n.startswith("the uncertainty was measured on published steps") for n in got["notes"])
    # at another batch, the crossover that measures it: at that batch (its own batches are powers of two)
    proc = dlperf("predict", "fcn-r", "--gpu", "T4", "--modes", "fp32", "--cost", "--samples", "2048", "--batch", "48",
                  "--format", "json", cwd=tmp_path, env=NO_FILE)  # fmt: skip
    assert (
        "`dlperf crossover fcn-r --batch 48 --batches 48 --db dlperf.db` measures one"
        in json.loads(proc.stdout)["cpu_how"]
    )  # the store it read


def test_bad_input_is_one_line_before_anything_runs(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("gpu,usd_per_hour_low,usd_per_hour_high\nT4,cheap,1\n")
    cases = [
        (["--gpu", "No-Such-GPU"], ["unknown GPU"]),
        (["--gpu", "T4", "--prices", str(bad)], [f"--prices {bad}, line 2, column usd_per_hour_low"]),
        (["--gpu", "T4", "--deadline=-2h"], ["--deadline", "above zero"]),
        (["--gpu", "T4", "--deadline", "0m"], ["--deadline", "above zero"]),
        (["--gpu", "T4", "--samples", "10", "--epochs", "2"], ["--samples and --epochs"]),
        (["--gpu", "T4", "--epochs", "0"], ["--epochs"]),
    ]
    for extra, fragments in cases:
        one_line_error(dlperf("predict", "fcn-r", "--cost", *extra, cwd=tmp_path, env=NO_FILE), *fragments)
    env = {"DLPERF_PRICES": str(bad)}
    one_line_error(dlperf("predict", "fcn-r", "--cost", "--gpu", "T4", env=env), "DLPERF_PRICES", "line 2")
    one_line_error(dlperf("predict", "alexnet-s", "--cost", "--gpu", "T4", env=NO_FILE), "--samples N")
    one_line_error(dlperf("predict", "fcn-r", "--gpu", "T4", "--deadline", "2h", env=NO_FILE), "--cost")
    one_line_error(
        dlperf("predict", "fcn-r", "--gpu", "T4", "--format", "json", env=NO_FILE),
        "--format is for --cost and --memory only",
    )  # --help says both take it
    assert not (tmp_path / "dlperf.db").exists()  # nothing written


def test_a_cell_of_another_model_stored_under_the_name_is_never_quoted(report_db):
    """A user's factory named like a built-in (or two factories named alike): its stored step is another model's,
    so neither its CPU time nor its peak is used, and a note says why."""
    import sqlite3

    conn = sqlite3.connect(report_db)
    with conn:
        for key, spec in conn.execute("SELECT key, workload_json FROM cells WHERE workload = 'fcn-r'").fetchall():
            other = {**json.loads(spec), "params": 263338, "source": "/home/u/mymodel.py:make_slow"}
            conn.execute("UPDATE cells SET workload_json = ? WHERE key = ?", (json.dumps(other), key))
    conn.close()
    this_machine(report_db)
    proc = dlperf("predict", "fcn-r", "--gpu", "T4", "--modes", "fp32", "--cost", db=report_db,
                  env={"COLUMNS": "250", **NO_FILE})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "On this CPU (measured" not in proc.stdout and "no measured step of fcn-r at batch" in proc.stdout
    assert "was a different model (the workloads differ: params 263338 -> " in proc.stdout
    assert "so it was not used" in proc.stdout


def test_this_cpu_is_the_run_this_machine_measured_last_not_the_highest_id(report_db):
    """Issue: --cost quoted the run of the highest id: `dlperf merge day2.db day1.db` copies day 2's run first, so
    day 1's, measured a day before, got the higher id and was quoted; and a merged run of another machine was quoted
    as "this CPU". Now this machine's run measured last (by its start, as `Store.run(None)` takes "the latest"), the
    other machine's said and not quoted."""
    from datetime import datetime, timedelta

    from dlperf.store import Store
    from report.synthetic import fill

    store = Store.open(report_db, create=False)
    try:
        day1, elsewhere = fill(store), fill(store)  # runs 2 and 3
    finally:
        store.close()
    this_machine(report_db, [1, day1])
    conn = sqlite3.connect(report_db)
    with conn:
        (start,) = conn.execute("SELECT started_at FROM runs WHERE id = 1").fetchone()
        for run, days in ((day1, -1), (elsewhere, 1)):  # day 1's a day before run 1, the other machine's a day after
            when = (datetime.fromisoformat(start) + timedelta(days=days)).isoformat()
            conn.execute("UPDATE runs SET started_at = ? WHERE id = ?", (when, run))
    conn.close()
    proc = dlperf("predict", "fcn-r", "--gpu", "T4", "--modes", "fp32", "--cost", "--format", "json", db=report_db,
                  env=NO_FILE)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["cpu_measured"]["run_id"] == 1
    (note,) = got["not_used"]
    assert note.startswith(f"run {elsewhere} measured another machine (CPU model Test CPU <v2> -> ")
    assert note.endswith("so its CPU step is not this CPU's and is not quoted")


def test_a_damaged_samples_row_is_read_only_where_quoted_and_then_quotes_fp32_with_a_note(report_db):
    """Issue: one samples row that no longer decodes, of any run, stopped --cost with exit 2 ("its stored samples
    cannot be read"): every CPU cell's step times of every run were read. Now only the quoted run's, and a damaged one
    there is no step times (fp32 eager quoted: no mode told apart from it), said."""
    from datetime import datetime, timedelta

    from dlperf.store import Store
    from report.synthetic import fill

    store = Store.open(report_db, create=False)
    try:
        older = fill(store)
    finally:
        store.close()
    this_machine(report_db)
    conn = sqlite3.connect(report_db)
    with conn:
        (start,) = conn.execute("SELECT started_at FROM runs WHERE id = 1").fetchone()
        when = (datetime.fromisoformat(start) - timedelta(days=1)).isoformat()
        conn.execute("UPDATE runs SET started_at = ? WHERE id = ?", (when, older))
        conn.execute("UPDATE measurements SET samples_json = '{' WHERE run_id = ?", (older,))
    conn.close()
    flags = ("predict", "fcn-r", "--gpu", "T4", "--modes", "fp32", "--cost", "--format", "json")
    proc = dlperf(*flags, db=report_db, env=NO_FILE)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["cpu_measured"]["run_id"] == 1 and got["cpu_doubts"] == [], got
    conn = sqlite3.connect(report_db)
    with conn:
        conn.execute("UPDATE measurements SET samples_json = '{' WHERE run_id = 1 AND cell_key = ?",
                     ("fcn-r|torch|cpu|2|fp32",))  # fmt: skip
    conn.close()
    proc = dlperf(*flags, db=report_db, env=NO_FILE)
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert (got["cpu_measured"]["run_id"], got["cpu_measured"]["mode"], got["cpu_measured"]["step_s"]) == (
        1,
        "fp32",
        0.45,
    )
    (note,) = got["cpu_doubts"]
    assert note.startswith("run 1, cell fcn-r|torch|cpu|2|fp32: its stored samples cannot be read (")
    assert note.endswith("this CPU's step is that run's fp32 eager one, no other mode told apart from it without them")


def test_a_store_of_other_modes_alone_asks_for_the_fp32_eager_step_they_are_quoted_against(report_db):
    """Issue: a store holding a bf16 cell alone was said to hold "no measured step of fcn-r at batch 1024"."""
    this_machine(report_db)
    conn = sqlite3.connect(report_db)
    with conn:
        conn.execute("DELETE FROM cells WHERE workload = 'fcn-r' AND mode = 'fp32'")
    conn.close()
    proc = dlperf("predict", "fcn-r", "--gpu", "T4", "--modes", "fp32", "--cost", "--format", "json", db=report_db,
                  env=NO_FILE)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["cpu_measured"] is None
    assert got["cpu_how"] == (f"no fp32 eager step of fcn-r at batch 1024 in {report_db} to compare its measured bf16 "
                              f"against: `dlperf run --workloads fcn-r --devices cpu --modes fp32 --db {report_db}` "
                              "measures one")  # fmt: skip


DATASET_FACTORY = """
import torch
import dlperf


def make():
    ds = torch.utils.data.TensorDataset(torch.randn(1000, 3, 8, 8), torch.randint(0, 10, (1000,)))
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(192, 10))
    return dlperf.user_workload("ds-model", model, None, torch.nn.functional.cross_entropy, batch_size=32, dataset=ds)
"""


def test_a_users_dataset_is_the_epoch_of_its_workload(tmp_path):
    """A factory giving dataset= (and no make_batch) was said to train on "synthetic (user batch maker) data, which
    has no epoch": --epochs of it were refused. An epoch is its dataset's length now."""
    (tmp_path / "ds.py").write_text(DATASET_FACTORY)
    proc = dlperf("predict", "ds.py:make", "--gpu", "T4", "--modes", "fp32", "--cost", "--epochs", "2",
                  "--format", "json", cwd=tmp_path, env=NO_FILE)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    got = json.loads(proc.stdout)
    assert got["samples"] == 2000 and "2 epochs of its dataset's 1,000 samples" in json.dumps(got)
