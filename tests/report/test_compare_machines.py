"""`dlperf compare` of runs from two machines: a one-line warning that each ratio compares the machines, where their
hardware differs; none where only the hostname does. Runs written through the Store API (tests/report/runs.py),
the second machine a simulation: its fingerprint made up."""

import json
import sqlite3

from conftest import dlperf
from report.runs import BASE, MACHINE, OTHER_MACHINE, SLOWER, make_db

WARNING = "dlperf: warning: A and B ran on different hardware (CPU model, cores): each ratio compares the machines"


def test_runs_of_different_hardware_are_warned_of_in_one_line(tmp_path):
    """Before, a 'regression' from a baseline measured on another CPU read as the code's, with no warning."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_db(a, BASE)
    make_db(b, SLOWER, fingerprint=OTHER_MACHINE)
    proc = dlperf("compare", str(a), str(b))
    assert proc.returncode == 1, proc.stderr  # the gate is unchanged: the regression is still said
    [said] = [line for line in proc.stderr.splitlines() if line.startswith("dlperf:")]
    assert said.startswith(WARNING), proc.stderr
    out = json.loads(dlperf("compare", str(a), str(b), "--format", "json").stdout)
    assert out["hardware_warning"].startswith(WARNING.removeprefix("dlperf: warning: "))


def test_another_host_of_the_same_hardware_is_no_warning(tmp_path):
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_db(a, BASE)
    make_db(b, SLOWER, fingerprint={**MACHINE, "hostname": "runner-2"})
    proc = dlperf("compare", str(a), str(b))
    assert proc.returncode == 1 and "warning" not in proc.stderr, proc.stderr
    assert "differences: hostname alpha -> runner-2" in proc.stdout  # still said, as what differs


def test_a_different_dlperf_is_named_among_the_differences(tmp_path):
    """The dlperf that measured each run is in its environment, not its fingerprint: compare never said it."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    for path, version in ((a, "0.1.0"), (b, "0.2.0")):
        make_db(path, BASE)
        with sqlite3.connect(path) as db:
            db.execute("UPDATE runs SET env_json = json_set(env_json, '$.dlperf_version', ?)", (version,))
        db.close()
    proc = dlperf("compare", str(a), str(b))
    assert "differences: dlperf 0.1.0 -> 0.2.0" in proc.stdout and "warning" not in proc.stderr, proc.stdout


def with_code(path, digest: str | None, commit: str = "11eef592") -> None:
    with sqlite3.connect(path) as db:
        if digest is None:
            db.execute("UPDATE runs SET env_json = json_remove(env_json, '$.dlperf_code')")
        else:
            code = json.dumps({"digest": digest + "0" * 52, "commit": commit + "0" * 32})
            db.execute("UPDATE runs SET env_json = json_set(env_json, '$.dlperf_code', json(?))", (code,))
    db.close()


def test_runs_of_other_dlperf_code_are_said_to_differ(tmp_path):
    """Two runs of dlperf 0.1.0 at two commits, whose timing code differs: compare named no difference, the ratios
    read as the runs' own. It says the code as `--resume` does; a commit that left the timing code alone, or a run
    that recorded none, is no difference."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_db(a, BASE)
    make_db(b, SLOWER)
    with_code(a, "4f1c9a2e0b7d")
    with_code(b, "9d03b5e1c2aa", "29e29346")
    proc = dlperf("compare", str(a), str(b))
    said = "differences: dlperf's timing code 4f1c9a2e0b7d (commit 11eef592) -> 9d03b5e1c2aa (commit 29e29346)"
    assert said in proc.stdout.splitlines(), proc.stdout
    out = json.loads(dlperf("compare", str(a), str(b), "--format", "json").stdout)
    assert out["same_machine"] is False and out["b"]["fingerprint"]["dlperf_code"]["commit"].startswith("29e29346")
    with_code(b, "4f1c9a2e0b7d", "29e29346")  # another commit, the same timing code
    assert "differences:" not in dlperf("compare", str(a), str(b)).stdout
    with_code(b, None)
    assert "differences:" not in dlperf("compare", str(a), str(b)).stdout
