"""Threads mean the same in every framework: a cell at N threads keeps about N cores busy.

Shown with back-to-back matrix products in a child set up exactly like a worker (thread variables from the parent, then
the backend's own `configure_threads`), not with step times, which a shared machine makes flaky: the threads ready to
run on average, their waits for a CPU counted as theirs, so other processes on the machine do not change the figure
(`conftest.cores_kept_busy`). Every framework runs in its own interpreter; the test process imports none.
"""

from __future__ import annotations

import os

import pytest

from conftest import cores_kept_busy

FRAMEWORKS = ["torch", "jax", "tensorflow", "mxnet"]
pytestmark = pytest.mark.serial  # alone on the machine, after the parallel tests: a quiet machine's figures are cleaner


@pytest.mark.timeout(240)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_one_thread_keeps_one_core_busy(framework):
    answer = cores_kept_busy(framework, 1)
    assert answer["cores"] < 1.3, answer


@pytest.mark.timeout(240)
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_two_threads_keep_two_cores_busy(framework):
    if len(os.sched_getaffinity(0)) < 2:
        pytest.skip("this machine lets the tests use fewer than 2 CPUs")
    answer = cores_kept_busy(framework, 2)
    assert answer["cores"] > 1.5, answer  # above halfway from one thread's 1: two threads at once most of the time
