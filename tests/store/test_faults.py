"""Storage faults: each is one line and exit 2 (1 where only some cells are hit), no traceback, the database as it
was, no output file cut short, and no measurement lost.

Permissions: the tests and CI run as root, whom no file mode stops. A child that must meet a file mode runs with
CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped from its capability bounding set (`prctl`, before exec): root then
obeys file modes like any user, and still reaches the interpreter under /root (an unprivileged user such as nobody
cannot). A directory a user may not enter is met by a plain user, nobody, in a process forked from the test once the
modules are loaded (`as_plain_user`). Not root: the modes apply as they are. A full disk: RLIMIT_FSIZE (`ulimit -f`)
in the child, SIGXFSZ ignored, so a write past the limit fails with EFBIG as on a full disk.
"""

from __future__ import annotations

import ctypes
import json
import os
import resource
import shlex
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

import pytest

from conftest import FAST, ROOT, cells, one_line_error, rows
from dlperf import envinfo
from dlperf.errors import UsageError
from dlperf.measure.system import descendants
from dlperf.plan import framework_info
from dlperf.spec import make_spec
from dlperf.store import Store, spill
from dlperf.store.process import ProcessMeasurement
from dlperf.vocab import Status

PR_CAPBSET_DROP = 24
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 1, 2
TINY = ["--workloads", "tiny-fcn-r", "--threads", "1", "--no-loss-check", *FAST]
# TINY with FAST's --max-time 0.5 as 0.1 (a flag is given once: a second value is refused)
SHORT = [*TINY[:-4], "--max-time", "0.1", *TINY[-2:]]
assert TINY[-4] == "--max-time" and TINY[-2] == "--max-warmup", TINY


def without_dac() -> None:
    """In the child before exec: file modes apply to it, root included."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
            if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
                raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def file_limit(nbytes: int):
    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the child at the limit
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))

    return limit


def env() -> dict[str, str]:
    """No bytecode written: under RLIMIT_FSIZE, importlib's _write_atomic takes write(2)'s partial count as done and
    renames a .pyc cut at the limit into place, and every later import of that module (the checkout's, other tests')
    fails with 'EOFError: marshal data too short' (a 4096-byte peak.cpython-311.pyc broke every command once)."""
    path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "PYTHONDONTWRITEBYTECODE": "1"}


def dlperf(*args, preexec=None, stdout=subprocess.PIPE, timeout: float = 120):
    cmd = [sys.executable, "-m", "dlperf", *map(str, args)]
    return subprocess.run(cmd, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=timeout, env=env(),
                          preexec_fn=preexec)  # fmt: skip


def test_a_child_under_a_file_size_limit_leaves_no_bytecode_cut_short(tmp_path, monkeypatch):
    """A module first imported by a capped child: the next plain import of it, which reads bytecode, still works."""
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    (tmp_path / "big.py").write_text("".join(f"def f{i}(x):\n    return x + {i}\n" for i in range(400)))
    capped = {**env(), "PYTHONPATH": str(tmp_path)}
    subprocess.run([sys.executable, "-c", "import big"], env=capped, preexec_fn=file_limit(4096), check=True,
                   timeout=60)  # fmt: skip
    plain = subprocess.run([sys.executable, "-c", "import big; print(big.f399(1))"], env={**os.environ,
                           "PYTHONPATH": str(tmp_path)}, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert plain.returncode == 0 and plain.stdout == "400\n", plain.stderr


@pytest.fixture
def modes_apply():
    """A child that obeys file modes, or a skip saying why none can be had."""
    try:
        subprocess.run([sys.executable, "-c", ""], preexec_fn=without_dac, check=True, timeout=60)
    except (subprocess.SubprocessError, OSError) as exc:
        pytest.skip(f"cannot drop CAP_DAC_OVERRIDE for a child, and root ignores file modes ({exc})")
    return without_dac


# --- opening -------------------------------------------------------------------------------------------------------
def test_read_only_directory_new_and_existing_database(report_db, tmp_path, modes_apply):
    folder = tmp_path / "ro"
    folder.mkdir()
    existing = folder / "old.db"
    existing.write_bytes(report_db.read_bytes())
    folder.chmod(0o555)
    try:
        one_line_error(dlperf("run", *TINY, "--db", folder / "new.db", preexec=modes_apply), "not writable (permission")
        before = existing.read_bytes()
        proc = dlperf("run", *TINY, "--db", existing, preexec=modes_apply)
        one_line_error(proc, "old.db", "is not writable", "journal")
        assert existing.read_bytes() == before and sorted(p.name for p in folder.iterdir()) == ["old.db"]
        ok = dlperf("table", "--db", existing, preexec=modes_apply)  # reading needs no journal
        assert ok.returncode == 0 and "fcn-r" in ok.stdout, ok.stderr
    finally:
        folder.chmod(0o755)


def test_unreadable_database(report_db, modes_apply):
    report_db.chmod(0o200)
    try:
        for command in (["table"], ["export"], ["run", *TINY]):
            one_line_error(dlperf(*command, "--db", report_db, preexec=modes_apply), "cannot read it")
    finally:
        report_db.chmod(0o644)


# --- a directory the user may not enter ------------------------------------------------------------------------------
PLAIN_USER = 65534  # nobody: the user the command runs as when root runs the test


def as_plain_user(*args: str, cwd: Path, **env_vars: str) -> subprocess.CompletedProcess:
    """`dlperf ARGS` run by a user without privileges: nobody when the test runs as root, the test's own user
    otherwise. Forked from this process, not started afresh: a plain user may not reach every interpreter (this
    machine's lives under /root), so the modules are loaded first and the process then drops to that user, whose
    file modes apply to everything the command does."""
    from dlperf import api, cli  # noqa: F401 - loaded before the switch, as the commands' own modules are below
    from dlperf.report import compare, format, load  # noqa: F401
    from dlperf.store import merge  # noqa: F401

    cli.build_parser()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        code = _forked(args, cwd, env_vars, out.fileno(), err.fileno())
        out.seek(0)
        err.seek(0)
        return subprocess.CompletedProcess(args, code, out.read().decode(), err.read().decode())


def _forked(args: tuple[str, ...], cwd: Path, env_vars: dict[str, str], out: int, err: int) -> int:
    """`dlperf ARGS` in a forked child that drops to PLAIN_USER (when root) first; its exit code."""
    from dlperf import cli

    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 99
        try:
            os.dup2(out, 1)
            os.dup2(err, 2)
            sys.stdout, sys.stderr = open(1, "w", closefd=False), open(2, "w", closefd=False)  # noqa: SIM115
            os.chdir(cwd)
            os.environ.update(env_vars)
            if os.geteuid() == 0:
                os.setgroups([])
                os.setgid(PLAIN_USER)
                os.setuid(PLAIN_USER)
            code = cli.main(list(args))
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status)


@pytest.fixture
def shared(report_db):
    """A directory every user may enter (pytest's own are its user's alone), holding `locked/`, whose mode 0 lets no
    plain user enter it, with a database inside; beside it `ok.db`."""
    folder = Path(tempfile.mkdtemp(prefix="dlperf-test-"))
    try:
        folder.chmod(0o777)
        (folder / "locked").mkdir()
        shutil.copy(report_db, folder / "locked" / "x.db")
        shutil.copy(report_db, folder / "ok.db")
        (folder / "ok.db").chmod(0o666)
        (folder / "locked").chmod(0)
        yield folder
    finally:
        (folder / "locked").chmod(0o755)
        shutil.rmtree(folder)


def test_a_database_in_a_directory_the_user_may_not_enter(shared):
    """Python 3.11's Path.exists() raises PermissionError where a directory on the way may not be entered: every
    command that opens a store (or writes a file) there says so in one line, naming the directory, and starts
    nothing."""
    where = str(shared / "locked")
    for command in (["table"], ["export", "--samples"], ["report", "-o", "r.html"], ["plot", "scaling", "-o", "p.svg"],
                    ["run", *TINY], ["run", "--resume"]):  # fmt: skip
        proc = as_plain_user(*command, "--db", "locked/x.db", cwd=shared)
        one_line_error(proc, "--db 'locked/x.db'", "may not enter", where)
    one_line_error(as_plain_user("table", cwd=shared, DLPERF_DB="locked/x.db"), "'locked/x.db'", "may not enter")
    one_line_error(as_plain_user("compare", "locked/x.db:1", "ok.db", cwd=shared), "A 'locked/x.db:1'", "may not enter")
    proc = as_plain_user("merge", "locked/x.db", "--db", "all.db", cwd=shared)
    one_line_error(proc, "merge 'locked/x.db'", "may not enter", where)
    one_line_error(as_plain_user("merge", "ok.db", "--db", "locked/new.db", cwd=shared), "'locked/new.db'", where)
    one_line_error(as_plain_user("report", "-o", "locked/r.html", "--db", "ok.db", cwd=shared), "-o 'locked/r.html'",
                   "may not enter")  # fmt: skip
    assert sorted(p.name for p in shared.iterdir()) == ["locked", "ok.db"]  # nothing written, nothing run


def test_a_directory_where_the_journal_goes(report_db):
    before = report_db.read_bytes()
    (report_db.parent / f"{report_db.name}-journal").mkdir()
    for create in (True, False):
        with pytest.raises(UsageError, match="-journal' is a directory, where SQLite keeps"):
            Store.open(report_db, create=create)
    one_line_error(dlperf("export", "--db", report_db), "is a directory, where SQLite keeps")
    assert report_db.read_bytes() == before


@pytest.mark.parametrize("value", ["garbage", "-3", "5.0", ""])
def test_a_garbage_schema_version(report_db, value):
    conn = sqlite3.connect(report_db)
    with conn:
        conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (value,))
    conn.close()
    before = report_db.read_bytes()
    for create in (True, False):
        with pytest.raises(UsageError, match=f"schema version {value!r} is not one dlperf writes"):
            Store.open(report_db, create=create)
    if value == "garbage":  # the command line once: a child process per value would cost seconds
        one_line_error(dlperf("run", *TINY, "--db", report_db), str(report_db), repr(value))
    assert report_db.read_bytes() == before


# --- a damaged data page -------------------------------------------------------------------------------------------
def damage(db, sql: str) -> dict:
    """Overwrite the first bytes of one stored JSON text in the file itself, as a bad sector would: the b-tree stays
    whole (`PRAGMA integrity_check` says ok), the text no longer decodes. Returns the row (run_id, key)."""
    row = rows(db, sql)[0]
    data = db.read_bytes()
    text = row.pop("text").encode()
    assert data.count(text) == 1
    db.write_bytes(data.replace(text, b"\x00garbled" + text[8:]))
    assert rows(db, "PRAGMA integrity_check") == [{"integrity_check": "ok"}]
    return row


def damaged_samples(db) -> dict:
    return damage(db, "SELECT run_id, cell_key AS key, samples_json AS text FROM measurements"
                      " WHERE samples_json != '[]' ORDER BY rowid LIMIT 1")  # fmt: skip


def warned(proc, row) -> None:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert lines[0].startswith("dlperf: warning: ") and f"run {row['run_id']}, cell {row['key']}" in lines[0]


def test_a_damaged_row_is_named_and_left_out_by_every_view(report_db, tmp_path):
    row = damaged_samples(report_db)
    export = dlperf("export", "--samples", "--db", report_db)
    assert export.returncode == 1
    warned(export, row)
    keys = [line.split('"key": "')[1].split('"')[0] for line in export.stdout.splitlines()]
    assert row["key"] not in keys and len(keys) == len(cells(report_db)) - 1
    assert dlperf("export", "--db", report_db).returncode == 0  # without --samples the damaged text is not read
    report = dlperf("report", "-o", tmp_path / "r.html", "--db", report_db)
    assert report.returncode == 1 and (tmp_path / "r.html").exists()
    warned(report, row)
    best = dlperf("table", "--best", "--db", report_db)
    assert best.returncode == 1
    warned(best, row)
    plot = dlperf("plot", "scaling", "-o", tmp_path / "p.svg", "--db", report_db)
    assert plot.returncode == 1 and (tmp_path / "p.svg").read_text().startswith("<?xml")
    warned(plot, row)


def test_compare_stops_at_a_damaged_row(report_db):
    """A comparison without one of its cells could miss the regression a CI job gates on: it stops, exit 2."""
    row = damaged_samples(report_db)
    one_line_error(
        dlperf("compare", report_db, report_db, "--db", report_db), f"run {row['run_id']}, cell {row['key']}"
    )


def test_a_damaged_cell_row_is_left_out_of_the_table(report_db):
    row = damage(report_db, "SELECT run_id, key, extra_json AS text FROM cells WHERE length(extra_json) > 20 LIMIT 1")
    proc = dlperf("table", "--format", "csv", "--db", report_db)
    assert proc.returncode == 1 and proc.stdout.count("\n") > 2
    warned(proc, row)


def not_utf8(db, column: str) -> dict:
    """Bytes that are not UTF-8 in one stored JSON text, written by SQLite itself: `PRAGMA integrity_check` still says
    ok, and reading the text fails in SQLite ("Could not decode to UTF-8 column ..."), before any JSON is decoded.
    Returns the row (run_id, key)."""
    table, key = ("cells", "key") if column == "extra_json" else ("measurements", "cell_key")
    row = rows(db, f"SELECT rowid, run_id, {key} AS key FROM {table} WHERE {column} != '[]' ORDER BY rowid LIMIT 1")[0]
    conn, text = sqlite3.connect(db), b"[0.1,\x80\xff]"
    with conn:
        conn.execute(f"UPDATE {table} SET {column} = CAST(? AS TEXT) WHERE rowid = ?", (text, row["rowid"]))
    conn.close()
    assert rows(db, "PRAGMA integrity_check") == [{"integrity_check": "ok"}]
    return row


@pytest.mark.parametrize("column", ["samples_json", "detail_json", "extra_json"])
def test_a_stored_text_that_is_not_utf8_is_damage_like_any_other(report_db, tmp_path, column, capsys):
    """The views leave the cell out, warn naming it and exit 1; compare and merge stop, exit 2 (in process: the
    command line's own path is the test above)."""
    from dlperf.cli import main

    row = not_utf8(report_db, column)

    def run(*args: str, db=report_db) -> subprocess.CompletedProcess:
        code = main([*args, "--db", str(db)])
        out, err = capsys.readouterr()
        return subprocess.CompletedProcess(args, code, out, err)

    export = run("export", "--samples", "-o", str(tmp_path / "e.jsonl"))
    written = (tmp_path / "e.jsonl").read_text()
    assert export.returncode == 1 and f'"key": "{row["key"]}"' not in written and written.count("\n") > 2
    warned(export, row)
    for command in (["report", "-o", str(tmp_path / "r.html")], ["table", "--best"],
                    ["plot", "scaling", "-o", str(tmp_path / "p.svg")]):  # fmt: skip
        proc = run(*command)
        assert proc.returncode == 1, proc.stderr
        warned(proc, row)
    where = f"run {row['run_id']}, cell {row['key']}"
    one_line_error(run("compare", str(report_db), str(report_db)), where)
    one_line_error(run("merge", str(report_db), db=tmp_path / "all.db"), where)
    assert not (tmp_path / "all.db").exists()


# --- a full disk ---------------------------------------------------------------------------------------------------
def test_export_to_a_full_stdout_says_it_is_cut_short(report_db, tmp_path):
    out = tmp_path / "export.jsonl"
    with open(out, "w") as f:
        proc = dlperf("export", "--samples", "--db", report_db, stdout=f, preexec=file_limit(4096))
    assert proc.returncode == 74, proc.stderr  # ExitCode.OUTPUT_FAILED: not bad input, what it read was fine
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("dlperf: error: could not write the export to standard output") and "cut short" in line
    assert out.stat().st_size <= 4096


@pytest.mark.parametrize(  # the report's: 7 s, with the slow tests
    ("command", "name"),
    [(["export", "--samples"], "file.jsonl"), pytest.param(["report"], "file.html", marks=pytest.mark.slow)],
)
def test_an_output_file_is_whole_or_absent(report_db, tmp_path, command, name):
    """A full disk under -o exits 74, as at /dev/full or under standard output: it was 2, bad input, where no input
    was wrong. A file that cannot be made (its folder missing) is still bad input."""
    out = tmp_path / "out" / name
    out.parent.mkdir()
    proc = dlperf(*command, "-o", out, "--db", report_db, preexec=file_limit(4096))
    output_failed(proc, str(out), "File too large", "nothing was written")
    assert list(out.parent.iterdir()) == []  # no temporary file left either
    out.write_text("the previous one")
    proc = dlperf(*command, "-o", out, "--db", report_db, preexec=file_limit(4096))
    output_failed(proc, "nothing was written")
    assert out.read_text() == "the previous one" and list(out.parent.iterdir()) == [out]
    assert dlperf(*command, "-o", out, "--db", report_db).returncode == 0 and out.stat().st_size > 4096
    one_line_error(dlperf(*command, "-o", tmp_path / "none" / name, "--db", report_db), "does not exist")


def output_failed(proc, *fragments) -> None:
    """An output that could not be written: exit 74 (`ExitCode.OUTPUT_FAILED`), one line, no traceback."""
    assert proc.returncode == 74, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith("dlperf: error: ") and all(f in line for f in fragments), line


def test_a_cell_the_store_refuses_is_kept_and_resume_stores_it(tmp_path):
    """The parent's files are capped once its worker runs (the worker keeps its own limits): the database cannot
    take the cell, the small spill line can. Its samples are capped by time: at --max-time 0.5 an idle machine timed
    tiny-fcn-r's 0.1 ms steps into 19 KB of samples, over the 16 KB cap, and the line could not be kept either."""
    db = tmp_path / "s.db"
    cmd = [sys.executable, "-m", "dlperf", "run", *SHORT, "--db", str(db)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                            preexec_fn=file_limit(resource.RLIM_INFINITY))  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not (planned(db) and worker_runs(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        resource.prlimit(proc.pid, resource.RLIMIT_FSIZE, (16384, 16384))
        _, stderr = proc.communicate(timeout=120)
    finally:
        proc.kill()
        proc.wait()
    kept = spill.path_for(db)
    assert proc.returncode == 2 and "Traceback" not in stderr, stderr
    *before, last = stderr.strip().splitlines()  # the sweep's warnings and progress, then the one line that stops it
    assert last.startswith("dlperf: error: ") and f"is kept in {kept}" in last
    assert f"`dlperf run --resume --db {shlex.quote(str(db))}` stores it" in last
    assert not [line for line in before if not line.startswith(("dlperf: warning: ", "[1/1] "))], stderr
    assert rows(db, "SELECT * FROM measurements") == [] and cells(db)[0]["status"] == "pending"
    (line,) = spill.kept(db, 1)
    resumed = dlperf("run", "--resume", "--db", db)
    assert resumed.returncode == 0, resumed.stderr
    assert f"stored 1 measurement kept in {kept}" in resumed.stderr and not kept.exists()
    (stored,) = rows(db, "SELECT * FROM measurements")
    assert stored["samples_json"] == json.dumps(line.measurement.samples)
    assert cells(db)[0]["status"] == "ok"


def worker_runs(pid: int) -> bool:
    """Whether a cell's worker runs under `pid`: its child, or forked from its warm parent (named dlperf-cell)."""
    for child in descendants(pid):
        try:
            comm = Path(f"/proc/{child}/comm").read_text().strip()
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes()
        except OSError:
            continue
        if comm == "dlperf-cell" or b"dlperf.worker.cell" in cmdline:
            return True
    return False


def planned(db) -> bool:
    """Whether the run is in the file (read-only: the test must not write to the store it watches)."""
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.Error:
        return False
    try:
        return bool(conn.execute("SELECT id FROM runs").fetchall())
    except sqlite3.Error:
        return False
    finally:
        conn.close()


def test_a_new_run_reminds_of_measurements_kept_beside_the_store(tmp_path, monkeypatch):
    from dlperf import api

    db = str(tmp_path / "d.db")
    spill.keep(db, 3, "tiny-fcn-r|torch|cpu|1|fp32", 0, ProcessMeasurement(status=Status.OK, samples=[0.1]))
    monkeypatch.setattr(api, "for_plan", lambda plan, db, say: None)  # no pilot step: only the warnings matter
    said = []
    api.run("tiny-fcn-r", threads=[1], dry_run=True, db=db, warn=said.append)
    assert any("keeps measurements the store refused (run 3: 1)" in w for w in said), said
    assert any(f"`dlperf.resume(db={db!r})`" in w for w in said), said  # to a Python caller, the call


@pytest.mark.parametrize(
    ("db", "from_env", "hint"),
    [
        ("runs/a b.db", False, "dlperf run --resume --db 'runs/a b.db'"),
        ("dlperf.db", False, "dlperf run --resume --db dlperf.db"),
        ("/data/it's.db", True, "DLPERF_DB='/data/it'\"'\"'s.db' dlperf run --resume"),
    ],
)
def test_the_resume_hint_names_the_same_database_as_the_user_did(monkeypatch, db, from_env, hint):
    """Followed literally, in a shell, the hint opens the database that was interrupted: --db quoted, or $DLPERF_DB
    where that is what named it."""
    from dlperf.store.location import resume_command

    monkeypatch.delenv("DLPERF_DB", raising=False)
    if from_env:
        monkeypatch.setenv("DLPERF_DB", db)
    assert resume_command(db) == hint


def test_a_read_only_file_system_is_named_as_such_not_as_permissions(tmp_path, monkeypatch):
    """A store on a read-only mount said "not writable", and --trace-dir "(its permissions)": no chmod would help."""
    import os
    from types import SimpleNamespace

    from dlperf.errors import why_unwritable

    assert why_unwritable(tmp_path) == "permission denied"  # a writable mount: only permissions could refuse here
    monkeypatch.setattr(os, "statvfs", lambda path: SimpleNamespace(f_flag=os.ST_RDONLY))
    assert why_unwritable(tmp_path) == "its file system is read-only"


def test_a_resume_the_store_cannot_lease_is_one_line_and_writes_nothing(tmp_path):
    """--resume takes the run's lease first, its first write: on a full disk (or a store locked past the timeout)
    that was a traceback from SQLite (sqlite3.OperationalError: disk I/O error), now one line naming the lease."""
    db = tmp_path / "d.db"
    store = Store.open(db, create=True)
    spec = make_spec("tiny-fcn-r", threads=[1])  # a run --resume can take up (`api._resumable`, before the lease)
    here = envinfo.capture(framework_info(spec.frameworks))
    store.create_run(spec.to_json(), here, envinfo.fingerprint(here), ["dlperf", "run"], [])
    store.close()  # released: its process is gone, as a killed dlperf's
    before = db.read_bytes()
    proc = dlperf("run", "--resume", "--db", db, preexec=file_limit(1000))  # no journal fits
    one_line_error(proc, f"--db '{db}'", "could not store run 1's lease")
    assert db.read_bytes() == before


@pytest.mark.slow
def test_a_cell_refused_by_a_directory_made_read_only_is_kept_in_the_data_dir(tmp_path, modes_apply, monkeypatch):
    """Nothing could be written beside the database (its directory made read-only mid-run), so the spill line could
    not be either, and the measurement was lost ("it could not be kept either"); it is now kept in DATA_DIR/unsaved/,
    and --resume, once the directory is writable again, stores it from there."""
    folder, data = tmp_path / "runs", tmp_path / "data"
    folder.mkdir()
    monkeypatch.setenv("DLPERF_DATA_DIR", str(data))
    db = folder / "s.db"
    cmd = [sys.executable, "-m", "dlperf", "run", *SHORT, "--db", str(db)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env(),
                            preexec_fn=modes_apply)  # fmt: skip
    try:
        deadline = time.monotonic() + 90
        while not (planned(db) and worker_runs(proc.pid)):
            assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
            time.sleep(0.01)
        folder.chmod(0o555)
        _, stderr = proc.communicate(timeout=120)
    finally:
        folder.chmod(0o755)
        proc.kill()
        proc.wait()
    assert proc.returncode == 2 and stderr.strip().splitlines()[-1].startswith("dlperf: error: "), stderr
    assert "is kept in" in stderr and "is lost" not in stderr, stderr
    (kept,) = spill.holding(db)
    assert kept.parent == data / "unsaved" and sorted(p.name for p in folder.iterdir()) == ["s.db"]
    assert f"is kept in {kept}: `dlperf run --resume --db {db}` stores it" in stderr and "Traceback" not in stderr
    (line,) = spill.kept(db, 1)
    resumed = dlperf("run", "--resume", "--db", db)
    assert resumed.returncode == 0 and f"stored 1 measurement kept in {kept}" in resumed.stderr, resumed.stderr
    assert not kept.exists() and spill.holding(db) == []
    (stored,) = rows(db, "SELECT * FROM measurements")
    assert stored["samples_json"] == json.dumps(line.measurement.samples) and cells(db)[0]["status"] == "ok"


def test_a_line_that_cannot_be_kept_beside_the_store_goes_to_the_data_dir_else_the_temporary_one(tmp_path, monkeypatch):
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    (tmp_path / "data").write_text("")  # a file where the data dir should be: nothing can be kept there
    db, m = tmp_path / "gone" / "d.db", ProcessMeasurement(status=Status.OK, samples=[0.1])  # no folder beside it
    in_tmp = spill.keep(db, 1, "a", 0, m)
    (tmp_path / "data").unlink()
    in_data = spill.keep(db, 2, "b", 1, m, session=2)
    assert in_tmp.parent == tmp_path / "tmp" and in_data.parent == tmp_path / "data" / "unsaved"
    assert spill.holding(db) == [in_data, in_tmp] and spill.runs_kept(db) == {1: 1, 2: 1}
    assert [(k.key, k.repeat, k.session) for k in spill.kept(db, 2)] == [("b", 1, 2)]
    spill.forget(db, 1)
    assert not in_tmp.exists() and spill.holding(db) == [in_data]
    link = spill.places(db)[2]
    link.symlink_to(tmp_path / "elsewhere")  # never written through a link in the shared temporary directory
    (tmp_path / "data").rename(tmp_path / "moved")
    (tmp_path / "data").write_text("")
    with pytest.raises(FileNotFoundError):
        spill.keep(db, 3, "c", 0, m)
    assert not (tmp_path / "elsewhere").exists()


def test_a_place_of_kept_measurements_that_cannot_be_read_keeps_nothing(tmp_path, monkeypatch):
    """Reading what a refusing store left (every command's end, `table`, `--resume`) went through each place: a
    directory where the DATA_DIR file goes, or a file of bytes that are not UTF-8 beside the store, was a traceback
    (IsADirectoryError, UnicodeDecodeError), and the line the third place kept was never taken up."""
    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    db = tmp_path / "t.db"
    beside, in_data, in_tmp = spill.places(db)
    beside.write_bytes(b"\xff\xfe not a line\n")
    in_data.mkdir(parents=True)
    m = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, duration_s=1.0)
    try:
        in_tmp.write_text(json.dumps({"run_id": 1, "key": "k", "repeat": 0, "measurement": m.to_json()}) + "\n")
        assert spill.runs_kept(db) == {1: 1} and spill.holding(db, 1) == [in_tmp]
        assert [k.key for k in spill.kept(db, 1)] == ["k"]
        spill.forget(db, 1)
        assert not in_tmp.exists() and beside.exists()
    finally:
        in_tmp.unlink(missing_ok=True)


def test_a_new_store_a_full_disk_refuses_is_said_so_and_not_left_empty(tmp_path, monkeypatch):
    """A new --db on a full disk (or under `ulimit -f`) was "the file was emptied while this command ran, so SQLite
    could not store ...; the runs it held went with what was in it", of a file nobody emptied that never held a run,
    and the empty file left made the next command say "no dlperf runs in it (schema version 0)"."""
    import sqlite3

    from dlperf.store import Store
    from dlperf.store.location import EMPTIED, gone, identity

    def full(self):
        raise sqlite3.OperationalError("database or disk is full")

    monkeypatch.setattr(Store, "_migrate", full)
    db = tmp_path / "new.db"
    with pytest.raises(UsageError) as caught:
        Store.open(db, create=True)
    assert str(caught.value) == f"--db {str(db)!r}: cannot make its tables (database or disk is full)"
    assert not db.exists()
    db.write_bytes(b"")  # one the user made empty themselves is theirs: kept
    with pytest.raises(UsageError, match="cannot make its tables"):
        Store.open(db, create=True)
    assert db.exists()
    assert gone(db, identity(db), had_content=False) is None and gone(db, identity(db)) == (EMPTIED, None)
