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
    assert fcn.endswith(
        "| cpu:1 launch (highly): try compile |"
    )  # the row's cpu:2 cell has no profile: nothing said of it
    [bf16] = [r for r in rows if r.startswith("| fcn-r | torch | bf16 |")]
    # matrix products 85% of the step; the synthetic store's fcn-r names no input shape: channels_last may apply
    assert bf16.endswith("| compute (highly): try channels_last |")
    data = json.loads(dlperf("table", "--explain", "--format", "json", db=profiled_db).stdout)
    assert any("`dlperf profile WORKLOAD` or `dlperf run --profile`" in note for note in data["notes"])
    [row] = [r for r in data["rows"] if r["workload"] == "fcn-r" and r["framework"] == "torch" and r["mode"] == "fp32"]
    # of the timed step (0.8 s): the profiler's 0.1 s taken out of host (0.6 of the 0.9 s profiled)
    assert row["cells"]["cpu:1"]["verdict"]["figure"] == "host/dispatch 62% of the step, 4100 ops per step"
    assert row["cells"]["cpu:2"]["verdict"] is None
    [bf16] = [r for r in data["rows"] if r["workload"] == "fcn-r" and r["mode"] == "bf16"]
    assert bf16["cells"]["cpu:2"]["verdict"] == {"bound": "compute", "level": "highly", "figure":
                                                 "matrix products 85% of the step", "modes": ["channels_last"],
                                                 "advice": None, "left_out": {}, "measured": {}}  # fmt: skip
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
    assert out.count(floor) == 1  # said by the verdict, not again on a line of its own


@pytest.mark.parametrize(
    ("args", "fragments"),
    [
        (["profile", "no-such-net"], ["unknown workload 'no-such-net'"]),
        (["profile", "tiny-fcn-r", "--framework", "mxnet"], ["--framework mxnet: mxnet cannot be profiled"]),
        (["run", "--profile", "--workloads", "tiny-fcn-r", "--frameworks", "mxnet"], ["--profile: mxnet cannot be"]),
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


# ----------------------------------------------------------------------------------------------------------------------
# One filter for the advice (issue 31): profile's "try:", table --explain and optimize name only the modes that apply
# to the model and have a fast path here, and say why the others are left out

TRANSFORMER = {"batch": 32, "input": {"kind": "tokens", "shape": [128], "vocab": 1000},
               "optimizer": {"name": "adamw"}}  # fmt: skip
MEMORY = Profiled(steps=5, step_s=1.0, categories={"elementwise": 0.5, "normalization": 0.2, "matmul": 0.28,
                                                   "host": 0.02}, ops_per_step=300)  # fmt: skip


def memory_bound_db(path, peaks: dict[str, float], env: dict | None = None, n: int = 20, warnings: list[str] = ()):
    """A run of one memory-bound token model at 2 threads, profiled, with `peaks` (dtype -> FLOP/s, each measured
    on a quiet machine, or (FLOP/s, others' CPU share)) stored for its machine; the cell's `warnings` as stored."""
    from dlperf.envinfo import fingerprint
    from dlperf.protocol import Cell
    from dlperf.store.process import ProcessMeasurement
    from dlperf.store.records import CellFigures, PlannedCell
    from report.synthetic import ENV

    env = env or ENV
    store = Store.open(path, create=True)
    cell = PlannedCell(Cell("transformer", "torch", "cpu", 2, "fp32"), TRANSFORMER)
    run_id = store.create_run({"workloads": "t"}, env, fingerprint(env), ["dlperf", "profile"], [cell])
    figures = CellFigures(status=Status.OK, median_s=1.0, iqr_s=0.01, n=n, warnings=list(warnings))
    store.record(run_id, cell.cell.key, 0, ProcessMeasurement(status=Status.OK, samples=[1.0] * n), figures)
    store.record_profile(run_id, cell.cell.key, ProfileOutcome(Status.OK, None, 3.0, MEMORY))
    for dtype, value in peaks.items():
        value, others = value if isinstance(value, tuple) else (value, 0.0)
        store.record_peaks(fingerprint(env), env, [MeasuredPeak(
            framework="torch", framework_version="2.13.0+cpu", device="cpu", threads=2, kind="matmul", dtype=dtype,
            value=value, detail={"others_cpu_share": others})])  # fmt: skip
    store.set_run_status(run_id, "complete")
    store.close()
    return path


def test_profile_advises_no_mode_a_slow_bf16_peak_or_a_model_without_image_input_rules_out_and_says_why(
    tmp_path, capsys
):
    from dlperf.commands.profile import print_profiles

    db = memory_bound_db(tmp_path / "d.db", {"fp32": 1.4e11, "bf16": 4e9})  # bf16 35x slower, as on an AVX2 EPYC
    print_profiles(str(db), 1)
    out = capsys.readouterr().out
    assert "  verdict: memory-bound (highly)" in out
    assert "  try: --modes fused (with dlperf run or profile; dlperf optimize tries each)\n" in out  # AdamW: fused
    assert "  left out: bf16: no fast path for bf16 here: `dlperf peak` measured its matrix product 35x slower " in out
    assert "channels_last: needs an image input (channels, height, width)" in out
    table = json.loads(dlperf("table", "--explain", "--format", "json", db=db).stdout)
    [row] = table["rows"]
    explained = row["cells"]["cpu:2"]["verdict"]
    assert explained["modes"] == ["fused"] and set(explained["left_out"]) == {"bf16", "channels_last"}
    md = dlperf("table", "--explain", "--format", "md", db=db).stdout
    assert "memory (highly): try fused" in md


def test_without_peaks_the_planning_probes_timing_rules_bf16_out_and_a_busy_peak_is_said(tmp_path, capsys):
    from dlperf.commands.profile import print_profiles
    from report.synthetic import ENV

    env = {**ENV, "frameworks": {"torch": {"version": "2.13.0+cpu", "precision_speed": {"cpu": {"bf16": 0.07}}}}}
    db = memory_bound_db(tmp_path / "d.db", {"fp32": (1.8e10, 0.55)}, env)  # measured while others held the CPUs
    print_profiles(str(db), 1)
    out = capsys.readouterr().out
    assert "  try: --modes fused (with dlperf run or profile; dlperf optimize tries each)\n" in out
    assert "bf16: no fast path for bf16 here: the planning probe timed its matrix product 14x slower" in out
    assert "cpu:2 fp32: only a peak measured on a busy machine (other processes used 55% of the CPUs)" in out
    notes = json.loads(dlperf("table", "--format", "json", db=db).stdout)["notes"]
    assert any(n.startswith("cpu:2 fp32: only a peak measured on a busy machine") for n in notes)  # its utilization


def test_optimize_leaves_out_what_profile_leaves_out_with_the_same_reasons():
    from dlperf import optimize as opt
    from dlperf.modes import Fit

    fit = Fit.of("cpu", TRANSFORMER, {"fp32": 1.4e11, "bf16": 4e9})
    why = opt.not_applicable("bf16", fit)
    assert why.startswith("no fast path for bf16 here: `dlperf peak` measured its matrix product 35x slower")
    assert "image input" in opt.not_applicable("channels_last", fit)
    assert opt.not_applicable("fused", fit) is None
    assert "no fused implementation" in opt.not_applicable("fused", Fit.of("cpu", {"optimizer": {"name": "rmsprop"}}))


def test_a_verdict_from_fewer_than_6_timed_steps_says_how_many_it_rests_on(tmp_path, capsys):
    from dlperf.commands.profile import print_profiles

    print_profiles(str(memory_bound_db(tmp_path / "few.db", {}, n=2)), 1)  # 31 s steps on a busy machine: n=2
    assert "  verdict: memory-bound (highly): " in (out := capsys.readouterr().out)
    assert "of the step (rests on 2 timed steps)\n" in out
    print_profiles(str(memory_bound_db(tmp_path / "five.db", {}, n=5)), 1)  # no 95% interval of its median yet
    assert "(rests on 5 timed steps)" in capsys.readouterr().out
    print_profiles(str(memory_bound_db(tmp_path / "one.db", {}, n=1)), 1)
    assert "(rests on 1 timed step)" in capsys.readouterr().out  # not "1 timed steps"
    print_profiles(str(memory_bound_db(tmp_path / "enough.db", {}, n=6)), 1)
    assert "rests on" not in capsys.readouterr().out


def test_a_profile_of_a_cell_timed_on_a_busy_machine_says_its_shares_and_verdict_are_the_loads_too(tmp_path, capsys):
    from dlperf.commands.profile import print_profiles

    busy = "other processes used 66% of the CPUs while this cell was timed"
    print_profiles(
        str(memory_bound_db(tmp_path / "busy.db", {}, warnings=["noisy: IQR is 94% of the median", busy])), 1
    )
    out = capsys.readouterr().out
    assert (
        f"\n  note: {busy}; on a busy machine the shares and the verdict vary from run to run (host time most): " in out
    )
    assert "noisy" not in out  # a wide spread is no other process's load
    print_profiles(str(memory_bound_db(tmp_path / "quiet.db", {})), 1)
    assert "busy machine" not in capsys.readouterr().out


def test_the_profile_guides_advice_example_is_what_profile_prints(tmp_path, capsys):
    from pathlib import Path

    from dlperf.commands.profile import print_profiles

    guide = (Path(__file__).parents[2] / "docs" / "guides" / "profile.md").read_text()
    block = guide.split("trained with AdamW on a CPU where `dlperf peak` measured bf16 35x slower than fp32:")[1]
    example = [line.strip() for line in block.split("\n\n")[1].splitlines()]
    print_profiles(str(memory_bound_db(tmp_path / "d.db", {"fp32": 1.4e11, "bf16": 4e9})), 1)
    printed = [line.strip() for line in capsys.readouterr().out.splitlines()]
    assert len(example) == 3 and all(line in printed for line in example), (example, printed)


# ----------------------------------------------------------------------------------------------------------------------
# Advice against the run's own measurements: the probe's matrix product judges a precision, the step may disagree

LSTM = {"batch": 4, "input": {"kind": "tokens", "shape": [32], "vocab": 10000}, "optimizer": {"name": "sgd"}}
COMPUTE_LSTM = Profiled(
    steps=5,
    step_s=0.0032,
    ops_per_step=282,
    categories={"matmul": 0.0024, "elementwise": 0.0004, "optimizer": 0.0003, "host": 0.0001},
)


def fp32_beside_bf16_db(path, bf16: tuple[float, float, float]):
    """tiny-lstm as `dlperf profile --modes fp32,bf16` stored it on an AVX-512 BF16 CPU whose planning probe timed
    bf16's matrix product 3.2x fp32's: the fp32 cell (1.72 ms, 95% interval 1.63-1.84) profiled compute-bound, the
    bf16 cell at `bf16` (median, interval low, interval high)."""
    from dlperf.envinfo import fingerprint
    from dlperf.protocol import Cell
    from dlperf.store.process import ProcessMeasurement
    from dlperf.store.records import CellFigures, PlannedCell
    from report.synthetic import ENV

    env = {**ENV, "frameworks": {"torch": {"version": "2.13.0+cpu", "precision_speed": {"cpu": {"bf16": 3.152}}}}}
    store = Store.open(path, create=True)
    cells = [PlannedCell(Cell("tiny-lstm", "torch", "cpu", 1, mode), LSTM) for mode in ("fp32", "bf16")]
    run_id = store.create_run({"workloads": "l"}, env, fingerprint(env), ["dlperf", "profile"], cells)
    for cell, (median, low, high) in zip(cells, [(0.00172, 0.00163, 0.00184), bf16], strict=True):
        figures = CellFigures(status=Status.OK, median_s=median, iqr_s=median / 2, n=200, ci_low_s=low, ci_high_s=high)
        store.record(run_id, cell.cell.key, 0, ProcessMeasurement(status=Status.OK, samples=[median] * 200), figures)
    store.record_profile(run_id, cells[0].cell.key, ProfileOutcome(Status.OK, None, 1.86, COMPUTE_LSTM))
    store.set_run_status(run_id, "complete")
    store.close()
    return path


def test_a_mode_the_same_run_measured_slower_is_left_out_with_both_medians(tmp_path, capsys):
    from dlperf.commands.profile import print_profiles

    db = fp32_beside_bf16_db(tmp_path / "d.db", (0.00277, 0.00258, 0.00299))  # 1.61x fp32's, the intervals apart
    print_profiles(str(db), 1)
    out = capsys.readouterr().out
    assert "  verdict: compute-bound (highly): matrix products " in out
    assert "  try: none of the modes that address it (left out below)\n" in out
    assert "; bf16: measured slower in this run: 2.77 ms a step against this cell's 1.72 ms (1.61x)\n" in out
    assert "  left out: channels_last: needs an image input (channels, height, width); bf16: " in out
    rows = json.loads(dlperf("table", "--explain", "--format", "json", db=db).stdout)["rows"]
    [explained] = [r["cells"]["cpu:1"]["verdict"] for r in rows if r["mode"] == "fp32"]
    assert explained["modes"] == [] and explained["left_out"]["bf16"].startswith("measured slower in this run: 2.77")


def test_a_mode_the_same_run_did_not_tell_apart_or_measured_faster_is_still_advised(tmp_path, capsys):
    """One it measured faster says so, with its step: the advice is a measurement already. One it did not tell apart
    says that, with both steps: it read '(with dlperf run or profile; ...)', as if the run had not measured it."""
    from dlperf.commands.profile import print_profiles

    tries = {
        (0.00180, 0.00150, 0.00210): "--modes bf16 (measured in this run: 1.80 ms a step against this cell's 1.72 ms, "
        "not told apart)",  # overlap: it read '(with dlperf run or profile; ...)', as if never tried
        (0.00090, 0.00085, 0.00095): "--modes bf16 (measured in this run: 900 µs a step, 1.91x faster)",  # told apart
    }
    for bf16, said in tries.items():
        db = fp32_beside_bf16_db(tmp_path / f"{bf16[0]}.db", bf16)
        print_profiles(str(db), 1)
        out = capsys.readouterr().out
        assert f"  try: {said}\n" in out
        assert "  left out: channels_last: needs an image input (channels, height, width)\n" in out  # an LSTM
        rows = json.loads(dlperf("table", "--explain", "--format", "json", db=db).stdout)["rows"]
        [explained] = [r["cells"]["cpu:1"]["verdict"] for r in rows if r["mode"] == "fp32"]
        assert explained["modes"] == ["bf16"]
        tie = {"bf16": "1.80 ms a step against this cell's 1.72 ms, not told apart"}
        assert explained["measured"] == ({"bf16": "900 µs a step, 1.91x faster"} if bf16[0] < 0.001 else tie)
    dlperf("report", "-o", str(tmp_path / "r.html"), db=db)  # the report's "try" says it too
    assert "<td>bf16 (measured in this run: 900 µs a step, 1.91x faster)</td>" in (tmp_path / "r.html").read_text()
