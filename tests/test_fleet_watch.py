"""The driver of `dlperf run --ray` in a child of dlperf (fleet_watch.watched): the interrupts dlperf is sent reach
it, and a driver gone without an answer is said for what it is known to be. Without a cluster: the driver here is a
function that behaves as Ray's does; the same on a real cluster: tests/test_ray.py (slow)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

# dlperf's CLI around the sweep (its interrupt handling), and a driver that, as Ray's, takes SIGTERM as sys.exit
DRIVER = textwrap.dedent("""
    import signal, sys, time
    from dlperf.fleet_watch import watched
    from dlperf.runner.lifeline import sigterm_as_interrupt

    def driver():
        signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(signum))  # what ray.init sets in a driver
        try:
            print("ready", flush=True)
            while True:
                time.sleep(0.05)
        except KeyboardInterrupt:
            time.sleep(0.5)  # the nodes stopped, the runs left interrupted: a second interrupt must not cut it short
            return 130, [7]

    with sigterm_as_interrupt(to_the_end=True):
        try:
            print("answer", watched(driver, sys.argv[1], "auto"), flush=True)
        except KeyboardInterrupt:
            print("dlperf: interrupted", flush=True)
""")


@pytest.mark.parametrize(
    ("to", "sig"),
    [("pid", signal.SIGINT), ("pid", signal.SIGTERM), ("pid", signal.SIGHUP), ("group", signal.SIGINT)],
)
def test_an_interrupt_sent_to_dlperf_stops_the_driver_as_ctrl_c_does(tmp_path, to, sig):
    """`kill -INT <dlperf's pid>` (a script, a job scheduler) never reached the driver: the parent ignored SIGINT and
    only a terminal's Ctrl-C, sent to the whole process group, did; SIGTERM was passed on as SIGTERM, which Ray's
    driver takes as sys.exit (exit 15, no resume line). Each now stops the sweep as Ctrl-C does; Ctrl-C itself
    (`group`: the driver gets it twice) still does."""
    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(tmp_path / "x.db")], stdout=subprocess.PIPE,
                            text=True, start_new_session=True)  # fmt: skip
    try:
        assert proc.stdout.readline() == "ready\n"
        os.kill(proc.pid, sig) if to == "pid" else os.killpg(proc.pid, sig)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert (proc.returncode, out) == (0, "answer (130, [7])\n")


def test_a_fork_refused_leaves_dlperfs_interrupts_unblocked(tmp_path, monkeypatch):
    """The interrupts were blocked across the fork and unblocked only by each side: a fork refused (no process to be
    had) left Ctrl-C and SIGTERM blocked in dlperf for good."""
    from dlperf import fleet_watch

    def refused():
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(fleet_watch.os, "fork", refused)
    try:
        with pytest.raises(BlockingIOError):
            fleet_watch.watched(lambda: None, str(tmp_path / "runs.db"), "auto")
        assert not set(signal.pthread_sigmask(signal.SIG_BLOCK, [])) & set(fleet_watch.INTERRUPTS)
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, fleet_watch.INTERRUPTS)


ORPHANED = textwrap.dedent("""
    import os, sys, time
    from dlperf.fleet_watch import watched
    from dlperf.runner.lifeline import sigterm_as_interrupt

    def driver():
        try:
            print(os.getpid(), flush=True)
            while True:
                time.sleep(0.05)
        except KeyboardInterrupt:
            with open(sys.argv[2], "w") as f:
                f.write("interrupted")
            return 130, []

    with sigterm_as_interrupt(to_the_end=True):
        watched(driver, sys.argv[1], "auto")
""")


def test_dlperf_killed_outright_interrupts_its_driver(tmp_path):
    """dlperf killed by SIGKILL (nothing left to pass an interrupt on) left its driver measuring on, an orphan
    nobody read: the driver now takes its parent's end as Ctrl-C (PR_SET_PDEATHSIG), stops the sweep and leaves."""
    import time

    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    marker = tmp_path / "driver.out"
    proc = subprocess.Popen([sys.executable, "-c", ORPHANED, str(tmp_path / "x.db"), str(marker)],
                            stdout=subprocess.PIPE, text=True, start_new_session=True)  # fmt: skip
    try:
        driver = int(proc.stdout.readline())
        proc.kill()
        proc.wait()
        deadline = time.monotonic() + 30
        while not (marker.exists() and marker.read_text()) and time.monotonic() < deadline:  # opened, then written
            time.sleep(0.05)
        assert marker.read_text() == "interrupted"
        while os.path.exists(f"/proc/{driver}") and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not os.path.exists(f"/proc/{driver}"), "the driver lived on after dlperf was killed"
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_an_interrupt_that_came_just_before_the_read_is_passed_on_within_a_turn():
    """A signal's Python handler (`_forwarding`'s, which passes it on to the driver) runs between bytecodes: one that
    came after the last check and before the blocking read of the driver's answer waited for that read, which the
    driver, never told, never ended: dlperf hung (test_an_interrupt_sent_to_dlperf..., 1 in about 60 under load).
    Here the signal is taken by another thread while the main one reads, the same state: its handler is pending,
    the read not interrupted. The handler answers, as the driver would once told."""
    import threading
    import time

    from dlperf import fleet_watch

    read, write = os.pipe()
    told = threading.Event()

    def handler(signum, frame):
        os.write(write, b"answer")
        os.close(write)
        told.set()

    def sender():  # its thread's mask leaves SIGUSR1 open: the kernel gives it the signal, not the main thread
        time.sleep(0.3)
        os.kill(os.getpid(), signal.SIGUSR1)
        if not told.wait(10):  # never handled: end the read, and the test with it
            os.close(write)

    previous = signal.signal(signal.SIGUSR1, handler)
    thread = threading.Thread(target=sender)
    thread.start()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR1})
    try:
        started = time.monotonic()
        answer = fleet_watch._read_all(read)
        took = time.monotonic() - started
    finally:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGUSR1})
        thread.join()
        signal.signal(signal.SIGUSR1, previous)
    assert answer == b"answer" and took < 0.3 + 5 * fleet_watch.READ_TURN_S + 2, took
