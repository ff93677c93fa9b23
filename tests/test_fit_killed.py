"""A `dlperf fit` try whose process a signal ended is read as the cell's words say it (`launch.signal_reason`): out
of memory where they say so, a crash otherwise. A SIGABRT after an allocation failed (C++'s std::bad_alloc uncaught,
an allocator that aborts rather than raise: CUDA's, some CPU ones under pressure) and a SIGKILL the kernel's
out-of-memory killer counted were both a crash to fit, the search of that mode ended there, exit 1: the abort was
worded "(aborted)" whatever the process wrote, and fit read out of memory only in a reason that starts with it."""

import signal

import pytest

from dlperf.fit import Try, as_fit_reads
from dlperf.runner.launch import ChildResult, signal_reason
from dlperf.runner.outcome import outcome
from dlperf.vocab import OUT_OF_MEMORY

BAD_ALLOC = "terminate called after throwing an instance of 'std::bad_alloc'\n  what():  std::bad_alloc"
CUDA = (
    "RuntimeError: CUDA error: out of memory\nException raised from c10_cuda_check_implementation at ...\nframe #0: x"
)
ASSERTED = "python: ../nptl/pthread_mutex_lock.c:81: __pthread_mutex_lock: Assertion `mutex->__data.__owner == 0'."


def tried(batch: int, returncode: int, stderr: str = "", oom_kills: int | None = None) -> Try:
    """The try as fit reads it from the child's end, as stored (`collect.measurement`'s `outcome`)."""
    child = ChildResult(returncode, False, 1.0, stderr, oom_kills=oom_kills)
    found = outcome([], child, 60.0)
    return Try(batch, found.status.value, False, None, None, None, found.reason)


@pytest.mark.parametrize("stderr", [BAD_ALLOC, CUDA])
def test_an_abort_where_an_allocation_failed_is_out_of_memory(stderr):
    words = signal_reason(signal.SIGABRT, stderr=stderr)
    assert words == f"worker killed by SIGABRT ({OUT_OF_MEMORY}: an allocation failed and the process aborted)"
    first = tried(64, -signal.SIGABRT, stderr)  # the first try, on a GPU (no --max-memory): nothing fitted yet
    said = as_fit_reads(first, {}, None)
    assert said.out_of_memory and said.status == "failed"
    assert said.reason == f"{OUT_OF_MEMORY} at batch 64: {first.reason}" and first.reason.startswith(words)
    under = as_fit_reads(tried(64, -signal.SIGABRT, stderr), {}, 400 * 2**20)
    assert under.reason.startswith(f"{OUT_OF_MEMORY} at batch 64 under --max-memory 400 MiB: {words}")


def test_a_kill_the_out_of_memory_killer_counted_is_out_of_memory_as_the_cell_says():
    killed = tried(4096, -signal.SIGKILL, oom_kills=1)
    assert killed.reason.startswith(f"worker killed by SIGKILL ({OUT_OF_MEMORY}: the kernel's out-of-memory killer")
    said = as_fit_reads(killed, {2048: True}, None)
    assert said.out_of_memory and said.reason == f"{OUT_OF_MEMORY} at batch 4096: {killed.reason}"


def test_other_signals_stay_a_crash_that_ends_the_search():
    """An abort that says no allocation failed, a segmentation fault, a SIGKILL the killer did not count (sent by a
    process, or no count to read): a crash, as the cell says; the abort under the limit above a batch that fitted
    aside (`test_fit.test_under_the_limit_a_refusal_in_backward_and_an_abort_above_a_batch_that_fitted_did_not_fit`)."""
    assert signal_reason(signal.SIGABRT, stderr=ASSERTED) == "worker killed by SIGABRT (aborted)"
    for crash in (tried(64, -signal.SIGABRT, ASSERTED), tried(64, -signal.SIGSEGV, BAD_ALLOC),
                  tried(64, -signal.SIGKILL, oom_kills=0), tried(64, -signal.SIGKILL)):  # fmt: skip
        assert as_fit_reads(crash, {32: True}, None) is crash, crash.reason
        assert not crash.out_of_memory
