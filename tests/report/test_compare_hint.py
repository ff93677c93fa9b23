"""A sweep measured again (a second `make run`) ends naming the earlier run of the same hardware that measured its
cells, and the `dlperf compare` command that tells a change from the noise: before, it printed a second table and
left the user to read the two side by side. Runs written through the Store API (tests/report/runs.py)."""

import json
import sqlite3

from dlperf.commands.run import where_stored
from dlperf.report.compare_side import compare_hint
from dlperf.store import Store
from report.runs import BASE, MACHINE, OTHER_MACHINE, SLOWER, processes, write_run


def _store(path, *runs):
    store = Store.open(path, create=True)
    for cells, fingerprint in runs:
        write_run(store, cells, fingerprint)
    store.close()


def test_a_sweep_measured_again_names_the_run_to_compare_with(tmp_path):
    db = tmp_path / "runs.db"
    _store(db, (BASE, MACHINE), (SLOWER, MACHINE))
    [line] = compare_hint(str(db), 2)
    assert line == (f"run 1 measured 2 of these cells on the same hardware too: dlperf compare 1 2 --db {db} compares "
                    "them (measure both with --repeats 3 for a verdict beyond the noise)")  # fmt: skip
    stored, hint = where_stored(str(db), 2).splitlines()
    assert stored.startswith("stored as run 2 in ") and hint == line
    assert compare_hint(str(db), 1) == [] and where_stored(str(db), 1).count("\n") == 0  # a first run: no line


def test_only_cells_both_runs_measured_ok_on_the_same_hardware_count(tmp_path):
    db = tmp_path / "runs.db"
    other = {"fcn-r": processes(30, 3, 0.2)}
    _store(db, (BASE, MACHINE), (BASE, OTHER_MACHINE), (other | {"resnet-56": processes(31, 3, 0.1)}, MACHINE),
           (BASE, OTHER_MACHINE))  # fmt: skip
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE cells SET status = 'failed' WHERE run_id = 4 AND workload = 'alexnet-r'")
    # run 3 (this hardware) shares fcn-r with run 1; run 2, later and sharing it too, is another machine's
    assert compare_hint(str(db), 3)[0].startswith("run 1 measured 1 of these cells on the same hardware too")
    # run 4 shares fcn-r with run 2 (its hardware), and alexnet-r did not train: one cell in common
    assert compare_hint(str(db), 4)[0].startswith("run 2 measured 1 of these cells")


def test_runs_of_three_repeats_are_told_the_verdict_is_there(tmp_path):
    db = tmp_path / "runs.db"
    _store(db, (BASE, MACHINE), (SLOWER, MACHINE))
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET spec_json = ?", (json.dumps({"repeats": 3}),))
    [line] = compare_hint(str(db), 2)
    assert line.endswith(f"dlperf compare 1 2 --db {db} says whether they changed beyond the noise"), line


def test_a_store_that_is_gone_leaves_the_stored_line_alone(tmp_path):
    assert compare_hint(str(tmp_path / "gone.db"), 2) == []
    assert where_stored(str(tmp_path / "gone.db"), 2).count("\n") == 0


def test_runs_that_read_different_data_are_said_so_with_the_command(tmp_path):
    """Two runs of the same loader cells over different --data folders ended 'dlperf compare 1 2 ... says whether
    they changed beyond the noise', with no word that the data was not the same: each ratio measures the data too."""
    db = tmp_path / "runs.db"
    _store(db, (BASE, MACHINE), (SLOWER, MACHINE))
    with sqlite3.connect(db) as conn:
        for run_id, data in ((1, "/data/photos"), (2, "/data/more")):
            conn.execute("UPDATE runs SET spec_json = ? WHERE id = ?", (json.dumps({"repeats": 3, "data": data}),
                                                                       run_id))  # fmt: skip
        conn.execute("UPDATE cells SET loader = 'w0'")  # cells that read --data
    [line] = compare_hint(str(db), 2)
    assert line.endswith("says whether they changed beyond the noise, though they read different data (run 1: "
                         "/data/photos; this run: /data/more)"), line  # fmt: skip
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE runs SET spec_json = ?", (json.dumps({"repeats": 3, "data": "/data/photos"}),))
    assert "different data" not in compare_hint(str(db), 2)[0]
    with sqlite3.connect(db) as conn:  # a run on synthetic data: the cells both measured read no folder
        conn.execute("UPDATE runs SET spec_json = ? WHERE id = 1", (json.dumps({"repeats": 3, "data": "synthetic"}),))
    assert "different data" not in compare_hint(str(db), 2)[0]


def test_runs_that_read_one_image_folder_by_two_names_are_not_said_to_differ(tmp_path):
    """--data goodlink (a link to good, which holds train/) and --data good/train: both runs said they read the
    image folder good/train, and the hint ended 'though they read different data'."""
    db = tmp_path / "runs.db"
    _store(db, (BASE, MACHINE), (SLOWER, MACHINE))
    (tmp_path / "good" / "train" / "n1").mkdir(parents=True)
    (tmp_path / "good" / "train" / "n1" / "a.jpg").write_bytes(b"\xff\xd8")
    with sqlite3.connect(db) as conn:
        for run_id, data in ((1, tmp_path / "good"), (2, tmp_path / "good" / "train")):
            conn.execute("UPDATE runs SET spec_json = ? WHERE id = ?", (json.dumps({"data": str(data)}), run_id))
        conn.execute("UPDATE cells SET loader = 'w0'")  # cells that read --data
    assert "different data" not in compare_hint(str(db), 2)[0]


def test_runs_that_share_only_cells_on_synthetic_data_are_not_said_to_read_different_data(tmp_path):
    """Run 1 --loaders w0 over photos, run 2 --loaders w1 over more: they share only the step on synthetic data, and
    `dlperf compare 1 2` rightly gave no data note, but the hint ended 'though they read different data'."""
    db = tmp_path / "runs.db"
    _store(db, (BASE, MACHINE), (SLOWER, MACHINE))
    with sqlite3.connect(db) as conn:
        for run_id, data in ((1, "/data/photos"), (2, "/data/more")):
            conn.execute("UPDATE runs SET spec_json = ? WHERE id = ?", (json.dumps({"data": data}), run_id))
    [line] = compare_hint(str(db), 2)
    assert line.startswith("run 1 measured 2 of these cells") and "different data" not in line, line
    with sqlite3.connect(db) as conn:  # one loader cell both measured ok: its ratio measures the data too
        conn.execute("UPDATE cells SET loader = 'w0' WHERE workload = 'fcn-r'")
    assert compare_hint(str(db), 2)[0].endswith("though they read different data (run 1: /data/photos; this run: "
                                                "/data/more)")  # fmt: skip
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE cells SET status = 'failed' WHERE run_id = 1 AND workload = 'fcn-r'")
    assert "different data" not in compare_hint(str(db), 2)[0]
