"""A command's output that cannot be written (a full disk, a closed terminal, a reader gone): standard output's
failure is one line on stderr and exit code 74 (`ExitCode.OUTPUT_FAILED`), never a traceback; standard error's is
no failure at all: the warnings and the progress display are dropped and the measurement goes on."""

import os
import pty
import subprocess
import sys
import time

import pytest

from conftest import FAST, ROOT, cells, require, rows
from dlperf.vocab import ExitCode

FULL = "/dev/full"  # every write fails with ENOSPC
needs_full = pytest.mark.skipif(not os.path.exists(FULL), reason="no /dev/full here to make a write fail")


def start(*args: str, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen([sys.executable, "-m", "dlperf", *args], env=env, text=True, **popen)


def to_full(*args: str) -> subprocess.CompletedProcess:
    with open(FULL, "w") as full:
        proc = start(*args, stdout=full, stderr=subprocess.PIPE)
        _, err = proc.communicate(timeout=300)
    return subprocess.CompletedProcess(args, proc.returncode, "", err)


def said_once(proc: subprocess.CompletedProcess) -> str:
    assert proc.returncode == ExitCode.OUTPUT_FAILED == 74, proc.stderr
    [line] = proc.stderr.strip().splitlines()[-1:]
    assert line.startswith("dlperf: error: could not write") and "standard output" in line, proc.stderr
    assert "Traceback" not in proc.stderr
    return line


@needs_full
@pytest.mark.parametrize("view", [["table"], ["list", "--runs"], ["env", "show"], ["export"], ["run", "--help"]])
def test_a_command_whose_stdout_fails_says_so_in_one_line(view, report_db):
    proc = to_full(*view, "--db", str(report_db))
    assert len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    said_once(proc)


def test_a_reader_gone_is_no_fault(report_db):
    """`dlperf table | head -0`: the pipe's reader left before the table was written (rich would exit 1)."""
    read, write = os.pipe()
    proc = start("table", "--db", str(report_db), stdout=write, stderr=subprocess.PIPE)
    os.close(read)
    os.close(write)
    _, err = proc.communicate(timeout=120)
    assert (proc.returncode, err) == (0, "")


def test_a_reader_gone_leaves_the_exit_code_the_command_decided(tmp_path):
    """`dlperf compare A B | true` (or `| head -1`) exited 0 for a regression once the pipe closed: a CI job with
    `set -o pipefail` passed it. The exit code is decided before the output, which the closed pipe only cuts short."""
    from report.runs import BASE, SLOWER, make_db

    db = tmp_path / "c.db"
    make_db(db, BASE, SLOWER)
    for fmt in ("text", "json"):
        read, write = os.pipe()
        os.close(read)
        proc = start("compare", "1", "2", "--db", str(db), "--format", fmt, stdout=write, stderr=subprocess.PIPE)
        os.close(write)
        _, err = proc.communicate(timeout=120)
        assert (proc.returncode, err) == (1, ""), err


@pytest.mark.parametrize("closed", ["stdout", "stderr"])
def test_a_command_started_with_a_standard_stream_closed_is_no_traceback(closed, report_db, tmp_path):
    """`dlperf table >&-` was a traceback (Python's sys.stdout is None), and `dlperf run ... 2>&-` stopped its run with
    no word anywhere, exit 1. Standard output closed is said once, exit 74; standard error closed is no failure."""
    stream = {"stdout": subprocess.PIPE, "stderr": subprocess.PIPE, closed: subprocess.DEVNULL}
    table = start("table", "--db", str(report_db), **stream, preexec_fn=lambda: os.close(1 + (closed == "stderr")))
    out, err = table.communicate(timeout=120)
    if closed == "stdout":
        assert table.returncode == 74 and err.strip() == (
            "dlperf: error: could not write to standard output (it is closed): the output is cut short"
        )
    else:
        assert table.returncode == 0 and "Run 1" in out
    missing = start("table", "--db", str(tmp_path / "none.db"), stdout=subprocess.DEVNULL,
                    preexec_fn=lambda: os.close(2))  # fmt: skip
    assert missing.wait(timeout=120) == 2  # bad input still exit 2, said nowhere


def test_a_run_started_with_standard_error_closed_measures_and_stores_its_run(tmp_path):
    require("torch")
    db = tmp_path / "e.db"
    run = start("run", "--db", str(db), "--workloads", "tiny-fcn-r", "--threads", "1", *FAST, stdout=subprocess.PIPE,
                preexec_fn=lambda: os.close(2))  # fmt: skip
    out, _ = run.communicate(timeout=300)
    assert run.returncode == 0 and f"stored as run 1 in {db}" in out
    assert [r["status"] for r in rows(db, "SELECT status FROM runs")] == ["complete"]


@needs_full
def test_a_run_whose_stdout_fails_is_stored_complete_and_says_so(tmp_path):
    require("torch")
    db = tmp_path / "d.db"
    proc = to_full("run", "--db", str(db), "--workloads", "tiny-fcn-r", "--threads", "1", *FAST)
    said_once(proc)  # 74, not 1: no cell failed
    assert [r["status"] for r in rows(db, "SELECT status FROM runs")] == ["complete"]
    assert [c["status"] for c in cells(db)] == ["ok"]


def test_a_run_whose_terminal_closes_measures_on_and_stores_its_run(tmp_path):
    """stderr a terminal that goes away after the first lines (an SSH session closed): each later write to it fails
    with EIO. The live display and the warnings stop; the run is measured, stored complete, its table printed."""
    require("torch")
    db = tmp_path / "d.db"
    master, slave = pty.openpty()
    proc = start("run", "--db", str(db), "--workloads", "tiny-fcn-r", "--threads", "1,2", *FAST,
                 stdout=subprocess.PIPE, stderr=slave)  # fmt: skip
    os.close(slave)
    seen, deadline = b"", time.monotonic() + 120
    while b"cell 1 of 2" not in seen and b"[1/2]" not in seen and time.monotonic() < deadline:
        seen += os.read(master, 4096)
    os.close(master)  # the terminal is gone
    out, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, seen.decode(errors="replace")
    assert [r["status"] for r in rows(db, "SELECT status FROM runs")] == ["complete"]
    assert [c["status"] for c in cells(db)] == ["ok", "ok"]
    assert "tiny-fcn-r" in out


def test_the_progress_display_ends_where_its_stream_fails_and_the_sweep_goes_on(monkeypatch):
    from rich.console import Console

    from dlperf.progress import Progress

    class Gone:
        """A terminal closed: every write fails with EIO."""

        def write(self, text):
            raise OSError(5, "Input/output error")

        def flush(self):
            pass

        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stderr", Gone())
    for console in (Console(file=Gone(), force_terminal=True), Console(file=Gone(), force_terminal=False)):
        progress = Progress(2, console)
        with progress:
            progress.start(0, Task())
            progress.refresh()
            progress._say("a line")
        assert progress.lost


class Task:
    repeat = 0

    class cell:
        label = "tiny-fcn-r torch cpu:1 fp32"


@needs_full
def test_a_failing_stream_fails_once_and_then_writes_nowhere():
    from dlperf.cli import Stream
    from dlperf.errors import OutputFailed

    with open(FULL, "w") as full:
        err = Stream(full, fails=False)
        err.write("x" * 100_000)  # past the buffer: the write itself fails
        err.flush()
        assert err.failed is not None and os.readlink(f"/proc/self/fd/{full.fileno()}") == os.devnull
        full.write("y" * 100_000)  # what is written later goes nowhere, and no flush fails, at exit neither
        full.flush()
    with open(FULL, "w") as full:
        out = Stream(full, fails=True)
        out.write("x")  # buffered: the flush finds it out
        with pytest.raises(OutputFailed, match="No space left on device"):
            out.flush()
        out.write("more")  # said once: the command then ends
        out.flush()


def test_an_unrecognized_value_after_a_comma_list_flag_says_how_to_give_several(capsys, tmp_path):
    from dlperf.cli import main

    for args, said in [
        (["run", "--threads", "1", "2"], "--threads takes a comma list: --threads 1,2"),
        (["run", "--threads=1", "2", "4", "--max-time", "1"], "--threads takes a comma list: --threads 1,2,4"),
        (["run", "--modes", "fp32", "bf16"], "--modes takes a comma list: --modes fp32,bf16"),
        (["table", "--runs", "1", "2"], "--runs takes a comma list: --runs 1,2"),
    ]:
        assert main([*args, "--db", str(tmp_path / "d.db")]) == ExitCode.BAD_INPUT
        assert capsys.readouterr().err.strip() == f"dlperf: error: {said}"
    assert main(["table", "5", "--db", str(tmp_path / "d.db")]) == ExitCode.BAD_INPUT  # no flag before it
    assert capsys.readouterr().err.strip() == "dlperf: error: unrecognized arguments: 5"


def test_ctrl_c_while_a_finished_runs_table_prints_says_the_run_is_stored(monkeypatch, capsys, tmp_path):
    from dlperf import api
    from dlperf.cli import main
    from dlperf.commands import table

    def cut_short(*args, **kwargs):
        print("Run 3: seconds per mini-batch")
        raise KeyboardInterrupt

    monkeypatch.setattr(api, "run", lambda *args, **kwargs: api.Outcome(ExitCode.OK, run_id=3))
    monkeypatch.setattr(table, "print_table", cut_short)
    db = tmp_path / "my runs.db"
    assert main(["run", "--db", str(db), "--workloads", "tiny-fcn-r", "--threads", "1"]) == ExitCode.INTERRUPTED
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "run 3 is complete and stored" in last and f"dlperf table --run 3 --db '{db}'" in last, last


def test_a_finished_run_ends_naming_where_it_is_stored(monkeypatch, capsys, tmp_path):
    """A sweep of minutes ended with its table and notes, no word of the store or run it went to (advise and crossover
    said theirs)."""
    from dlperf import api
    from dlperf.cli import main
    from dlperf.commands import table

    monkeypatch.setattr(api, "run", lambda *args, **kwargs: api.Outcome(ExitCode.OK, run_id=3))
    monkeypatch.setattr(table, "print_table", lambda *args, **kwargs: print("Run 3: seconds per mini-batch"))
    db = tmp_path / "my runs.db"
    assert main(["run", "--db", str(db), "--workloads", "tiny-fcn-r", "--threads", "1"]) == ExitCode.OK
    last = capsys.readouterr().out.strip().splitlines()[-1]
    assert last == (f"stored as run 3 in {db}: dlperf table --run 3 --db '{db}' shows it again, dlperf report --run 3 "
                    f"--db '{db}' -o run3.html draws it")  # fmt: skip


def _searched(monkeypatch, command: str, code: int):
    """`dlperf COMMAND` whose search (or run) ended with `code` in run 3, faked, and whose printing is cut short by a
    Ctrl-C: the command line to give `main`."""
    from types import SimpleNamespace

    from dlperf import api, fit, optimize
    from dlperf.commands import fit as fit_command
    from dlperf.commands import optimize as optimize_command
    from dlperf.commands import profile as profile_command

    def cut_short(*args, **kwargs):
        print("the final table, its first line")
        raise KeyboardInterrupt

    found = SimpleNamespace(exit_code=code, run_id=3)
    if command == "optimize":
        monkeypatch.setattr(optimize, "optimize", lambda *args, **kwargs: found)
        monkeypatch.setattr(optimize_command, "print_text", cut_short)
    elif command == "fit":
        monkeypatch.setattr(fit, "fit", lambda *args, **kwargs: found)
        monkeypatch.setattr(fit_command, "show", cut_short)
    else:
        monkeypatch.setattr(api, "run", lambda *args, **kwargs: api.Outcome(code, run_id=3))
        monkeypatch.setattr(profile_command, "print_profiles", cut_short)
    return [command, "tiny-fcn-r", "--threads", "1"]


@pytest.mark.parametrize(
    ("command", "stored", "then"),
    [
        ("optimize", "the search is complete and stored in run 3", "See it with: dlperf table --run 3 --db"),
        ("fit", "the search is complete and its tries are stored in run 3", "See it with: dlperf table --run 3 --db"),
        ("profile", "run 3 is complete and stored", "See it with: dlperf table --run 3 --explain --db"),
    ],
)
def test_ctrl_c_while_a_finished_search_prints_says_what_is_stored(monkeypatch, capsys, tmp_path, command, stored,
                                                                     then):  # fmt: skip
    """It said only "dlperf: interrupted", as if nothing had been kept."""
    from dlperf.cli import main

    db = tmp_path / "my runs.db"
    assert main([*_searched(monkeypatch, command, ExitCode.OK), "--db", str(db)]) == ExitCode.INTERRUPTED
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last == f"dlperf: interrupted; {stored}. {then} '{db}'", last


@pytest.mark.parametrize("command", ["optimize", "fit"])
def test_ctrl_c_while_an_interrupted_search_prints_says_how_to_search_again(monkeypatch, capsys, tmp_path, command):
    from dlperf.cli import main

    argv = [*_searched(monkeypatch, command, ExitCode.INTERRUPTED), "--db", str(tmp_path / "d.db")]
    assert main(argv) == ExitCode.INTERRUPTED
    [last] = [line for line in capsys.readouterr().err.splitlines() if "interrupted" in line]  # said once
    assert "stored in run 3" in last and "run it again (it starts over)" in last, last


def test_a_stream_that_cannot_write_unicode_gets_ascii_look_alikes_not_a_traceback(report_db):
    """PYTHONIOENCODING=ascii: "µs" in a table raised UnicodeEncodeError out of rich, mid-table, with a traceback."""
    import io

    from dlperf.cli import encodable

    stream = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    encodable(stream)
    stream.write("12.3 µs → 4.5 ms ✓")
    stream.flush()
    assert stream.buffer.getvalue() == b"12.3 us -> 4.5 ms ?"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "PYTHONIOENCODING": "ascii"}
    proc = subprocess.run([sys.executable, "-m", "dlperf", "table", "--db", str(report_db), "--explain"], env=env,
                          capture_output=True, text=True, encoding="ascii", timeout=120)  # fmt: skip
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr
    assert "in ms or us)" in proc.stdout  # the legend's "µs" in UTF-8


def test_every_character_dlperf_prints_beyond_ascii_has_a_look_alike():
    """PYTHONIOENCODING=ascii printed "measured on: vm ? Intel": "·" became "?", the doubtful median's mark."""
    import ast
    import unicodedata

    from dlperf.cli import PLAIN

    printed = set()
    for path in (ROOT / "src" / "dlperf").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(n.value) for n in ast.walk(tree) if isinstance(n, ast.Expr)}
        printed |= {ch for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)
                    and id(n) not in docstrings for ch in n.value
                    if not ch.isascii() and unicodedata.category(ch)[0] != "C"}  # fmt: skip
    assert "·" in printed and printed <= set(PLAIN), printed - set(PLAIN)
    assert all(v.isascii() and v != "?" for v in PLAIN.values())


@pytest.mark.parametrize("columns", ["0", "-3", "wide"])
def test_a_columns_variable_of_no_size_is_left_out(columns, report_db):
    """COLUMNS=0 made rich print nothing at all: `dlperf table` wrote 0 bytes, exit 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "COLUMNS": columns}
    done = subprocess.run([sys.executable, "-m", "dlperf", "table", "--db", str(report_db)], capture_output=True,
                          text=True, env=env, timeout=120)  # fmt: skip
    assert done.returncode == 0 and "seconds per mini-batch" in done.stdout, done.stderr


def test_a_program_embedding_the_cli_keeps_its_columns_variable(report_db, monkeypatch, capsys):
    """`main(argv)` in a program of its own left COLUMNS of no size out for the command, and out of the program's
    environment after it."""
    from dlperf.cli import main

    monkeypatch.setenv("COLUMNS", "0")
    assert main(["table", "--db", str(report_db)]) == 0
    assert "seconds per mini-batch" in capsys.readouterr().out and os.environ["COLUMNS"] == "0"


def test_a_tables_notes_are_whole_lines_in_a_file(tmp_path, monkeypatch):
    """In a CI log (160 columns) a note's resume command was folded: `grep -- --resume ci.log` found `run --resume
    --db` with its path on the next line. A width asked for ($COLUMNS) is kept."""
    from dlperf.commands.common import print_rich

    long = "run 4 is unfinished; `dlperf run --resume --db " + "/deep" * 40 + "/dlperf.db` measures them"
    out = tmp_path / "ci.log"

    def printed() -> list[str]:
        with open(out, "w") as log:
            sys.stdout, saved = log, sys.stdout
            try:
                print_rich("table", lines=["legend " * 40], notes=[long])
            finally:
                sys.stdout = saved
        return out.read_text().splitlines()

    monkeypatch.delenv("COLUMNS", raising=False)
    assert printed() == ["table", "legend " * 40, f"  note: {long}"]
    monkeypatch.setenv("COLUMNS", "80")
    assert max(map(len, printed())) <= 80
