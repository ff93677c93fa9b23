"""What dlperf does on each signal a terminal or a scheduler sends: SIGHUP (the terminal closed) is an interrupt as
Ctrl-C and SIGTERM are, unless dlperf was started ignoring it (nohup); a second interrupt while the first is handled
is dropped; Ctrl-Z (SIGTSTP) stops the cells' processes with dlperf, and a cell suspended while it ran is measured
again. Each test kills what it started in a `finally`."""

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from conftest import FAST, FAULTY_MODELS, ROOT, cells, gone, require, rows
from dlperf.measure.system import descendants

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads process states in /proc")


def child_env(extra: dict | None = None) -> dict[str, str]:
    """This environment and `extra`, dlperf's own source first on the path."""
    path = os.pathsep.join([str(ROOT / "src"), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, **(extra or {}), "PYTHONPATH": path}


def start(*args: str, env: dict | None = None, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "dlperf", *args], env=child_env(env), text=True, **popen)


def state(pid: int) -> str | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def cmdline(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def wait_until(ready, what: str, within_s: float = 120) -> None:
    deadline = time.monotonic() + within_s
    while not ready():
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.02)


def in_a_child(script: str) -> subprocess.CompletedProcess:
    """`script` in a fresh interpreter's main thread, where signal handlers are set (a test runner's may not be)."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True,
                          timeout=60, env=child_env())  # fmt: skip


def test_a_second_interrupt_while_the_first_is_handled_is_dropped_and_sighup_is_one():
    proc = in_a_child("""
        import os, signal, time
        from dlperf.runner.lifeline import sigterm_as_interrupt

        def send(sig):
            os.kill(os.getpid(), sig)
            time.sleep(0.05)  # its handler runs

        for first in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            with sigterm_as_interrupt():
                try:
                    send(first)
                    raise SystemExit(f"{first!r} was no interrupt")
                except KeyboardInterrupt:
                    for again in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # the cleanup goes on
                        send(again)
            print("handled", first.name)
        try:  # outside, Ctrl-C is Python's again
            send(signal.SIGINT)
        except KeyboardInterrupt:
            print("restored")
    """)
    assert proc.stdout.split() == ["handled", "SIGINT", "handled", "SIGTERM", "handled", "SIGHUP", "restored"], proc


def test_once_the_cli_is_interrupted_more_interrupts_are_dropped_to_its_exit():
    """The CLI's handling lasts to the process's end: its exit closes the warm parents (atexit), which a second
    Ctrl-C would cut short with a traceback."""
    proc = in_a_child("""
        import atexit, os, signal, time
        from dlperf.runner.lifeline import sigterm_as_interrupt

        def send(sig):
            os.kill(os.getpid(), sig)
            time.sleep(0.05)

        atexit.register(lambda: (send(signal.SIGINT), print("exit's cleanup done")))
        with sigterm_as_interrupt(to_the_end=True):
            try:
                send(signal.SIGTERM)
            except KeyboardInterrupt:
                print("interrupted")
        send(signal.SIGINT)
        print("dropped")
    """)
    assert proc.stdout.split("\n")[:3] == ["interrupted", "dropped", "exit's cleanup done"], proc
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc


def test_one_more_interrupt_as_the_interpreter_ends_does_not_kill_the_cli():
    """The interpreter's end sets every handler Python set back to the default before it frees the modules (100s of ms
    for dlperf's): a second Ctrl-C then killed the interrupted CLI, its exit -2 in place of 130 (seen in a loop of
    double Ctrl-C on dlperf fit). Once interrupted, the CLI ignores them."""
    for again in ("SIGINT", "SIGTERM", "SIGHUP"):
        proc = in_a_child(f"""
            import os, signal, sys, time
            from dlperf.runner.lifeline import sigterm_as_interrupt

            class Late:
                def __del__(self):  # run as the modules are freed, after the handlers were set back
                    os.kill(os.getpid(), signal.{again})

            late = Late()
            with sigterm_as_interrupt(to_the_end=True):
                try:
                    os.kill(os.getpid(), signal.SIGINT)
                    time.sleep(5)
                except KeyboardInterrupt:
                    print("interrupted")
            sys.exit(130)
        """)
        assert (proc.returncode, proc.stdout.strip()) == (130, "interrupted"), (again, proc)


def test_the_cli_called_in_process_gives_the_callers_handlers_back_once_interrupted():
    """`dlperf.cli.main([...])` in a test or a program embedding it left SIGINT, SIGTERM and SIGHUP ignored after an
    interrupt (the console script's drop to its exit, 16c577b): the caller's Ctrl-C did nothing, and the next
    command could not be interrupted. Given argv, the caller's handlers are back when it returns; called as the
    console script is (`main()`, this process's command line), it still ignores them to the exit."""
    proc = in_a_child("""
        import signal, sys, time
        from dlperf import cli
        from dlperf.commands import env

        def ctrl_c(args):
            signal.raise_signal(signal.SIGINT)
            time.sleep(3)

        env.run = ctrl_c
        signal.signal(signal.SIGTERM, lambda *a: print("the host's own"))
        interrupts = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
        before = [signal.getsignal(s) for s in interrupts]
        print(cli.main(["env"]), [signal.getsignal(s) for s in interrupts] == before)
        print(cli.main(["env"]))  # interrupted again
        signal.raise_signal(signal.SIGTERM)
        try:
            signal.raise_signal(signal.SIGINT)
            time.sleep(3)
        except KeyboardInterrupt:
            print("the host's Ctrl-C")
        sys.argv = ["dlperf", "env"]
        print(cli.main(), [signal.getsignal(s) for s in interrupts] == [signal.SIG_IGN] * 3)
    """)
    assert proc.stdout.splitlines() == ["130 True", "130", "the host's own", "the host's Ctrl-C", "130 True"], proc


def test_a_signal_dlperf_was_started_ignoring_stays_ignored():
    """nohup's SIGHUP, a shell's background job's SIGINT: dlperf goes on."""
    proc = in_a_child("""
        import os, signal, time
        from dlperf.runner.lifeline import sigterm_as_interrupt

        signal.signal(signal.SIGHUP, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        with sigterm_as_interrupt():
            os.kill(os.getpid(), signal.SIGHUP)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
        print("went on")
    """)
    assert proc.stdout.strip() == "went on", proc


def test_sighup_during_a_cell_interrupts_the_run_resumably_and_leaves_nothing(tmp_path):
    require("torch")
    models, hang_file, tmp, db = tmp_path / "models.py", tmp_path / "hang", tmp_path / "tmp", tmp_path / "d.db"
    models.write_text(FAULTY_MODELS)
    hang_file.write_text("")
    tmp.mkdir()
    env = {"HANG_FILE": str(hang_file), "TMPDIR": str(tmp)}
    parent = start("run", "--db", str(db), "--threads", "1", *FAST, "--workloads", f"{models}:hang", env=env,
                   stdout=subprocess.PIPE, stderr=subprocess.PIPE)  # fmt: skip
    try:
        wait_until(lambda: hang_file.read_text() or parent.poll() is not None, "the cell's worker hangs")
        worker = int(hang_file.read_text())
        parent.send_signal(signal.SIGHUP)  # the terminal closed
        _, err = parent.communicate(timeout=60)
    finally:
        parent.kill()
    assert parent.returncode == 130, err
    assert err.strip().splitlines()[-1].endswith(f"Continue with: dlperf run --resume --db {db}"), err
    assert gone([worker])
    assert [r["status"] for r in rows(db, "SELECT status FROM runs")] == ["interrupted"]
    assert [c["status"] for c in cells(db)] == ["pending"] and rows(db, "SELECT * FROM leases") == []
    assert not [n for n in os.listdir(tmp) if n.startswith(f"dlperf-{parent.pid}-")]  # the children's directories


@pytest.mark.slow  # 9 s
def test_ctrl_z_stops_the_cells_process_with_dlperf_and_the_cell_is_measured_again(tmp_path):
    """SIGTSTP to dlperf, in a process group of its own as a shell's job: the cell's process, in a session of its
    own that the terminal's SIGTSTP does not reach, stops too, and goes on with dlperf at SIGCONT (`fg`); the
    process timed across the pause is not kept."""
    require("torch")
    db, err = tmp_path / "d.db", tmp_path / "err"
    with err.open("w") as stderr:
        parent = start("run", "--db", str(db), "--workloads", "tiny-fcn-r", "--threads", "1", "--min-time", "0",
                       "--max-time", "2", "--no-loss-check", stdout=subprocess.DEVNULL, stderr=stderr,
                       process_group=0)  # fmt: skip
    try:
        wait_until(lambda: any("dlperf.worker.cell" in cmdline(p) for p in descendants(parent.pid)),
                   "the cell's process runs")  # fmt: skip
        parent.send_signal(signal.SIGTSTP)
        wait_until(lambda: state(parent.pid) == "T", "dlperf stops", 30)
        children = [p for p in descendants(parent.pid) if state(p) not in (None, "Z")]
        assert children
        wait_until(lambda: all(state(p) == "T" for p in children), "the children are stopped", 10)
        time.sleep(0.2)  # a pause, as a user's: one under NO_PAUSE_S (10 ms) is read as a stop that did not happen
        parent.send_signal(signal.SIGCONT)
        wait_until(lambda: all(state(p) != "T" for p in children), "the children go on with dlperf", 30)
        assert parent.wait(timeout=300) == 0, err.read_text()
    finally:
        parent.kill()
    [cell] = cells(db)
    assert cell["status"] == "ok"
    assert "measured again: 1 process suspended (Ctrl-Z)" in cell["extra_json"], cell["extra_json"]
