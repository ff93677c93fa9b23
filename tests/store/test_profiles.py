"""The profiles table (schema version 7): a cell's profiled process, its overhead against the timed median, and merge
copying profiles with their runs."""

import sqlite3

from dlperf.protocol import Cell, Profiled
from dlperf.store import Store, merge
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures, PlannedCell, ProfileOutcome
from dlperf.store.schema import MIGRATIONS, PROFILES
from dlperf.vocab import Status

CELL = PlannedCell(Cell("fcn-r", "torch", "cpu", 1, "fp32"), {"batch": 1024})
KEY = CELL.cell.key
EVENT = Profiled(
    steps=5, step_s=0.012, categories={"matmul": 0.009, "elementwise": 0.002, "host": 0.001},
    flops={"matmul": 4.5e9}, top_ops=[{"name": "aten::addmm", "self_s": 0.008, "calls": 3, "shapes": "[[1024, 8]]"}],
    ops_per_step=120, trace="/traces/fcn-r.json.gz", notes=["no module times"],
)  # fmt: skip


def measured_run(path, median_s: float | None = 0.01, argv=("dlperf", "profile")) -> tuple[Store, int]:
    store = Store.open(path, create=True)
    run_id = store.create_run({"spec": 1}, {}, {"cpu_model": "x"}, list(argv), [CELL])
    m = ProcessMeasurement(status=Status.OK, samples=[median_s or 1.0])
    store.record(run_id, KEY, 0, m, CellFigures(status=Status.OK, median_s=median_s))
    return store, run_id


def test_a_profile_is_stored_with_its_figures_and_the_profilers_overhead(tmp_path):
    store, run_id = measured_run(tmp_path / "d.db", median_s=0.01)
    store.record_profile(run_id, KEY, ProfileOutcome(Status.OK, None, 3.5, EVENT))
    [(key, profile)] = store.profiles(run_id).items()
    assert key == KEY and profile.ok and profile.figures.steps == 5 and profile.figures.ops_per_step == 120
    assert profile.figures.categories == EVENT.categories and profile.figures.top_ops == EVENT.top_ops
    assert profile.figures.trace == EVENT.trace and profile.figures.notes == ["no module times"]
    assert profile.duration_s == 3.5
    assert abs(profile.overhead - 1.2) < 1e-9  # 0.012 profiled / 0.010 timed


def test_a_profile_that_could_not_be_taken_keeps_its_reason_and_replaces_an_earlier_one(tmp_path):
    store, run_id = measured_run(tmp_path / "d.db", median_s=None)
    store.record_profile(run_id, KEY, ProfileOutcome(Status.OK, profiled=EVENT))
    assert store.profiles(run_id)[KEY].overhead is None  # no timed median to hold it against
    store.record_profile(run_id, KEY, ProfileOutcome(Status.UNSUPPORTED, "jax: no profiler mapping"))
    [profile] = store.profiles(run_id).values()
    assert profile.status == "unsupported" and profile.error == "jax: no profiler mapping"
    assert profile.figures is None


def test_a_version_6_file_gains_the_profiles_table(tmp_path):
    path = tmp_path / "old.db"
    conn = sqlite3.connect(path)
    for version in range(1, PROFILES):
        for statement in MIGRATIONS[version]:
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(PROFILES - 1),))
    conn.commit()
    conn.close()
    store, run_id = measured_run(path)
    store.record_profile(run_id, KEY, ProfileOutcome(Status.OK, profiled=EVENT))
    assert store.profiles(run_id)[KEY].figures.step_s == EVENT.step_s


def test_merge_copies_a_runs_profiles_with_it(tmp_path):
    store, run_id = measured_run(tmp_path / "a.db")
    store.record_profile(run_id, KEY, ProfileOutcome(Status.OK, None, 2.0, EVENT))
    store.close()
    target = tmp_path / "all.db"
    store, _ = measured_run(target, argv=("dlperf", "run"))  # another run: the copy becomes run 2
    store.close()
    [copied] = merge.merge([str(tmp_path / "a.db")], str(target))
    store = Store.open(target, create=False)
    assert copied.target_run == 2 and set(store.profiles(2)) == {KEY} and store.profiles(1) == {}
    assert store.profiles(2)[KEY].figures.categories == EVENT.categories
    assert store.profiles(2)[KEY].overhead == Store.open(tmp_path / "a.db", create=False).profiles(1)[KEY].overhead
