"""The device gate of `run --compile-at-once` (measure/gate.py): shared holds go side by side, the exclusive one
waits for every other hold and holds off every new one. Each hold is a process of its own, as a cell's is."""

from __future__ import annotations

import subprocess
import sys

from conftest import ROOT
from dlperf.measure.gate import Gate

HOLD = """
import sys, time
from dlperf.measure.gate import Gate
gate = Gate(sys.argv[1])
gate.timing() if sys.argv[2] == "timing" else gate.work()
print("held", flush=True)
time.sleep(float(sys.argv[3]))
"""


def hold(path, how: str, seconds: float = 0.0) -> subprocess.Popen:
    env = {"PYTHONPATH": str(ROOT / "src")}
    return subprocess.Popen([sys.executable, "-c", HOLD, str(path), how, str(seconds)], stdout=subprocess.PIPE,
                            text=True, env=env)  # fmt: skip


def still_waiting(proc: subprocess.Popen, for_s: float = 0.5) -> bool:
    """True when `proc` has not finished within `for_s`: a hold it is still waiting for (were the machine slow to
    start it, it would be unfinished all the same, never finished early)."""
    try:
        proc.wait(timeout=for_s)
    except subprocess.TimeoutExpired:
        return True
    return False


def test_shared_holds_go_side_by_side(tmp_path):
    here = Gate(str(tmp_path / "gate"))
    here.work()
    other = hold(tmp_path / "gate", "work")
    assert other.wait(timeout=60) == 0 and other.stdout.read() == "held\n"


def test_timing_waits_for_every_shared_hold_and_holds_off_new_ones(tmp_path):
    here = Gate(str(tmp_path / "gate"))
    here.work()  # a cell still compiling
    timer = hold(tmp_path / "gate", "timing", seconds=1.0)
    assert still_waiting(timer)
    here.release()  # the compiling cell is done (or ended): the timer goes
    assert timer.stdout.readline() == "held\n"
    late = hold(tmp_path / "gate", "work")  # a cell that would compile while the other times
    assert still_waiting(late, 0.3) and timer.wait(timeout=60) == 0
    assert late.wait(timeout=60) == 0


def test_a_cell_of_no_group_holds_nothing_and_waits_for_nothing():
    gate = Gate(None)
    gate.work()
    gate.timing()
    gate.release()
    assert gate.fd is None
