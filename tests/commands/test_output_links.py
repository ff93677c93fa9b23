"""`-o` where a shell or a user put a link: `export -o /dev/stdout > out.csv` (a CI job's form) renamed its file over
the link (as root, over /dev/stdout itself) and the redirect got only the 'wrote' line; a link to a file was replaced
by a file of its own, the file it named left as it was."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT, dlperf


def test_a_link_to_a_file_stays_a_link_and_the_file_it_names_gets_the_output(report_db, tmp_path):
    (tmp_path / "real").mkdir()
    target = tmp_path / "real" / "target.csv"
    target.write_text("old\n")
    link = tmp_path / "latest.csv"
    link.symlink_to(target)
    proc = dlperf("export", "-o", str(link), "--format", "csv", db=report_db)
    assert proc.returncode == 0, proc.stderr
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_text().startswith("run_id,") and f"wrote {link}" in proc.stdout


def test_standard_output_redirected_to_a_file_gets_the_data_and_the_line_goes_to_standard_error(report_db, tmp_path):
    """/dev/stdout -> /proc/self/fd/1 -> the shell's file; a link of the user's to it is taken alike (as root,
    /dev/stdout itself would have been replaced)."""
    fd_link = tmp_path / "stdout.csv"
    fd_link.symlink_to("/proc/self/fd/1")
    out = tmp_path / "out.csv"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "DLPERF_DB": str(report_db)}
    with open(out, "w") as f:
        proc = subprocess.run([sys.executable, "-m", "dlperf", "export", "-o", str(fd_link), "--format", "csv"],
                              stdout=f, stderr=subprocess.PIPE, text=True, env=env, timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert fd_link.is_symlink() and os.readlink(fd_link) == "/proc/self/fd/1"
    text = out.read_text()
    assert text.startswith("run_id,") and "wrote" not in text and f"wrote {fd_link}" in proc.stderr
    piped = subprocess.run([sys.executable, "-m", "dlperf", "export", "-o", "/dev/stdout", "--format", "csv"],
                           capture_output=True, text=True, env=env, timeout=120)  # fmt: skip
    assert piped.returncode == 0 and piped.stdout == text and "wrote /dev/stdout" in piped.stderr


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full here, the device whose writes fail")
def test_a_write_in_place_that_fails_is_one_line_saying_it_is_cut_short(report_db):
    """`export -o /dev/full` (or `-o /dev/stdout` at `ulimit -f`) ended in an OSError's traceback, exit 1: such an
    output is written in place, and what went before the failure is there, as at a failed write to standard output."""
    proc = dlperf("export", "-o", "/dev/full", "--format", "csv", db=report_db)
    assert proc.returncode == 74, proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == ("dlperf: error: -o '/dev/full': could not write it (No space left "
                                                    "on device): it is cut short")  # fmt: skip
    assert "Traceback" not in proc.stderr


def test_a_chart_with_nothing_left_to_draw_names_the_cells_it_left_out(report_db, tmp_path):
    """Every cell's row damaged: `plot` said only that no workload was measured, as if nothing had been, where table,
    export and report name each cell they leave out."""
    import sqlite3

    with sqlite3.connect(report_db) as conn:
        n = conn.execute("UPDATE cells SET extra_json = '{not json'").rowcount
    proc = dlperf("plot", "scaling", "-o", str(tmp_path / "s.png"), db=report_db)
    assert proc.returncode == 2 and not (tmp_path / "s.png").exists()
    *warnings, last = proc.stderr.strip().splitlines()
    assert len(warnings) == n and all(w.endswith("left out of the charts") for w in warnings)
    assert last.startswith("dlperf: error: plot scaling: nothing to draw") and last.endswith(f"({n} cells left out)")


def test_a_path_under_proc_or_dev_fd_that_is_no_open_file_is_one_line_not_a_traceback(report_db):
    """`report -o /proc/x.html` was taken for an open file, written in place, and ended in FileNotFoundError's
    traceback (exit 1)."""
    from conftest import one_line_error

    for out in ("/proc/x.html", "/dev/fd/97.html"):
        one_line_error(dlperf("report", "-o", out, db=report_db), f"-o {out!r}: could not write it")
