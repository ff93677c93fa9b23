"""Threads mean the same in every framework: a cell at N threads keeps about N cores busy.

Shown with the CPU time / wall time of back-to-back matrix products in a child set up exactly like a worker (thread
variables from the parent, then the backend's own `configure_threads`), not with step times, which a shared machine
makes flaky. Every framework runs in its own interpreter; the test process imports none.
"""

from __future__ import annotations

import os

import pytest

from conftest import cpu_ratio

FRAMEWORKS = ["torch", "jax", "tensorflow", "mxnet"]
pytestmark = pytest.mark.serial  # a ratio of CPU to wall time: alone on the machine, after the parallel tests


@pytest.mark.timeout(240)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_thread_keeps_one_core_busy(framework):
    answer = cpu_ratio(framework, 1)
    assert answer["ratio"] < 1.3, answer


@pytest.mark.timeout(240)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_threads_keep_two_cores_busy(framework):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("this machine lets the tests use fewer than 2 CPUs")
    answer = cpu_ratio(framework, 2)
    assert answer["ratio"] > 1.6, answer
