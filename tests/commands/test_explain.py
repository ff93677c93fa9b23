"""`dlperf profile`, `run --profile` at the edge, and `dlperf table --explain` over stored profiles."""

import json
import re

import pytest

from conftest import FAST, dlperf, one_line_error
from dlperf.protocol import Profiled
from dlperf.report.profile import verdict
from dlperf.store import Store
from dlperf.store.machine import MeasuredPeak
from dlperf.store.records import ProfileOutcome
from dlperf.vocab import Status
from report.synthetic import fill

FCN_KEY = "fcn-r|torch|cpu|1|fp32"  # a cell of report/synthetic.py's run, 0.80 s per step
LAUNCH = Profiled(steps=5, step_s=0.9, categories={"host": 0.6, "matmul": 0.2, "elementwise": 0.1}, ops_per_step=4100,
                  trace="/traces/fcn-r.json.gz")  # fmt: skip
BF16_KEY = "fcn-r|torch|cpu|2|bf16"  # 0.20 s per step, the only cell of its row
COMPUTE = Profiled(steps=5, step_s=0.2, categories={"matmul": 0.17, "elementwise": 0.025, "host": 0.005},
                   ops_per_step=40)  # fmt: skip


@pytest.fixture
def profiled_db(tmp_path):
    """report/synthetic.py's run, one of its cells profiled."""
    path = tmp_path / "p.db"
    store = Store.open(path, create=True)
    run_id = fill(store)
    store.record_profile(run_id, FCN_KEY, ProfileOutcome(Status.OK, None, 3.0, LAUNCH))
    store.close()
    return path


def test_table_explain_shows_the_verdict_of_profiled_cells_and_says_how_to_fill_the_others(profiled_db):
    store = Store.open(profiled_db, create=False)
    store.record_profile(1, BF16_KEY, ProfileOutcome(Status.OK, None, 1.0, COMPUTE))  # host 2.5%: below launch's 3%
    store.close()
    proc = dlperf("table", "--explain", "--format", "md", db=profiled_db)
    assert proc.returncode == 0, proc.stderr
    header, _, *rows = proc.stdout.splitlines()
    assert header.split(" | ")[-1] == "verdict |"
    [fcn] = [r for r in rows if r.startswith("| fcn-r | torch | fp32 |")]
    assert fcn.endswith("| cpu:1 launch (highly) |")  # the row's cpu:2 cell has no profile: nothing said of it
    [bf16] = [r for r in rows if r.startswith("| fcn-r | torch | bf16 |")]
    assert bf16.endswith("| compute (highly) |")  # matrix products 85% of the step
    data = json.loads(dlperf("table", "--explain", "--format", "json", db=profiled_db).stdout)
    assert any("`dlperf profile WORKLOAD` or `dlperf run --profile`" in note for note in data["notes"])
    [row] = [r for r in data["rows"] if r["workload"] == "fcn-r" and r["framework"] == "torch" and r["mode"] == "fp32"]
    # of the timed step (0.8 s): the profiler's 0.1 s taken out of host (0.6 of the 0.9 s profiled)
    assert row["cells"]["cpu:1"]["verdict"]["figure"] == "host/dispatch 62% of the step, 4100 ops per step"
    assert row["cells"]["cpu:2"]["verdict"] is None
    [bf16] = [r for r in data["rows"] if r["workload"] == "fcn-r" and r["mode"] == "bf16"]
    assert bf16["cells"]["cpu:2"]["verdict"] == {"bound": "compute", "level": "highly", "figure":
                                                 "matrix products 85% of the step", "modes": []}  # fmt: skip
    assert "verdict" not in dlperf("table", "--format", "md", db=profiled_db).stdout  # only with --explain


def test_profile_prints_each_cells_shares_verdict_modes_overhead_and_trace(profiled_db, capsys):
    from dlperf.commands.profile import print_profiles

    print_profiles(str(profiled_db), 1)
    out = capsys.readouterr().out
    assert "fcn-r torch cpu:1 fp32: 0.800 s per step" in out
    assert "  where the timed step goes: host 62%, matmul 25%, elementwise 12%" in out  # 0.5, 0.2, 0.1 of 0.8 s
    assert "  verdict: launch-bound (highly): host/dispatch 62% of the step, 4100 ops per step" in out
    assert "  try: --modes compile" in out and "  trace: /traces/fcn-r.json.gz" in out
    assert "  profiler overhead: the profiled step took 1.12x the timed median" in out  # 0.9 / 0.8


def test_profile_prints_the_dispatch_floor_when_peak_measured_the_dispatch_cost(profiled_db, capsys):
    from dlperf.commands.profile import print_profiles

    store = Store.open(profiled_db, create=False)
    try:
        fingerprint = store.run(1).fingerprint
        dispatch = {"framework": "torch", "device": "cpu", "threads": 1, "kind": "dispatch", "value": 1e-4}
        store.record_peaks(
            fingerprint, {}, [MeasuredPeak(**dispatch), MeasuredPeak(**{**dispatch, "threads": 2, "value": 1.0})]
        )
    finally:
        store.close()
    print_profiles(str(profiled_db), 1)
    out = capsys.readouterr().out
    floor = "dispatch floor 0.410 s (51% of the step): 4100 ops x 100 µs"  # of the timed 0.8 s; the 1-thread cost
    assert f"  verdict: launch-bound (highly): host/dispatch 62% of the step, 4100 ops per step; {floor}" in out
    assert f"\n  {floor}\n" in out


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["profile", "no-such-net"], ["unknown workload 'no-such-net'"]),
        (["profile", "tiny-fcn-r", "--framework", "mxnet"], ["--profile: mxnet cannot be profiled"]),
        (["run", "--profile", "--workloads", "tiny-fcn-r", "--frameworks", "mxnet"], ["mxnet cannot be profiled"]),
        (["run", "--profile", "--workloads", "tiny-fcn-r", "--nproc", "2"], ["--profile: data-parallel"]),
        (["profile", "tiny-fcn-r", "--steps", "0"], ["--steps"]),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(tmp_path, args, fragments):
    db = tmp_path / "d.db"
    one_line_error(dlperf(*args, db=db, timeout=60), *fragments)
    assert not db.exists() and not (tmp_path / "d.db.traces").exists()


@pytest.mark.slow  # an end-to-end run of the command: with the sweeps (make test-slow), keeping make test short
def test_profile_a_tiny_workload_end_to_end_then_explain_it(tmp_path):
    db = tmp_path / "d.db"
    proc = dlperf("profile", "tiny-fcn-r", "--threads", "1", "--steps", "2", *FAST, db=db, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "tiny-fcn-r torch cpu:1 fp32:" in proc.stdout
    [printed] = re.findall(r"^  verdict: (\w+)-bound \((\w+)\): (.+)$", proc.stdout, re.M)
    store = Store.open(db, create=False)
    [profile] = store.profiles(1).values()
    store.close()
    assert profile.ok and profile.overhead is not None and profile.figures.trace.startswith(str(db) + ".traces")
    figures = profile.figures
    assert abs(sum(figures.categories.values()) - figures.step_s) <= 0.1 * figures.step_s
    table = dlperf("table", "--explain", "--format", "json", db=db, timeout=60)
    [row] = json.loads(table.stdout)["rows"]
    explained = row["cells"]["cpu:1"]["verdict"]
    # which bound a step of tiny ops shows varies from run to run (report/profile.py): the one `profile` printed,
    # the stored profile's, is the one explained
    assert (explained["bound"], explained["level"], explained["figure"]) == printed
    stored = verdict(figures, device="cpu", mode="fp32", overhead=profile.overhead)
    assert (explained["bound"], explained["level"], explained["figure"]) == (stored.bound, stored.level, stored.figure)
