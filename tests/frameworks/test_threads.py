"""Threads mean the same in every framework: a cell at N threads keeps about N cores busy.

Shown with the CPU time / wall time of back-to-back matrix products in a child set up exactly like a worker (thread
variables from the parent, then the backend's own `configure_threads`), not with step times, which a shared machine
makes flaky. Every framework runs in its own interpreter; the test process imports none.
"""

from __future__ import annotations

import os

import pytest

from conftest import framework_python
from dlperf.runner import probe

FRAMEWORKS = ["torch", "jax", "tensorflow", "mxnet"]
BUSY = 0.15  # others' share of the machine above which a low ratio says more about them than about the framework


def cpu_ratio(framework: str, threads: int, python: str) -> dict:
    """The ratio, measured again (up to 3 times) while other processes keep the machine busy; a machine that stays
    busy is a skip that says how busy, since no ratio measured on it could tell about the framework."""
    for _ in range(3):
        answer = probe.ask(framework, {"what": "threads", "threads": threads, "seconds": 1.5}, python, threads=threads)
        if (answer["others_cpu_share"] or 0) < BUSY:
            return answer
    pytest.skip(f"other processes kept {100 * answer['others_cpu_share']:.0f}% of the CPUs busy in 3 tries")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_thread_keeps_one_core_busy(framework):
    answer = cpu_ratio(framework, 1, framework_python(framework))
    assert answer["ratio"] < 1.3, answer


@pytest.mark.timeout(240)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_threads_keep_two_cores_busy(framework):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("this machine lets the tests use fewer than 2 CPUs")
    answer = cpu_ratio(framework, 2, framework_python(framework))
    assert answer["ratio"] > 1.6, answer
