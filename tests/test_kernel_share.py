"""The worker's figure of the kernel's share of a cell's CPU time over its timed steps (`Sampled.kernel_cpu_share`),
against two steps measured in the same process: one that maps memory afresh and touches every page, as glibc's large
blocks are each step without `malloc_keep`, and one that only computes."""

import mmap
import time

from dlperf.measure.timer import TimerConfig
from dlperf.worker.cell import timed_samples

CFG = TimerConfig(min_steps=40, min_time=0.2, max_time=10.0)  # 40 steps: 0.1 s of CPU time or more, the ticks
PAGE = mmap.PAGESIZE


def remaps() -> None:
    block = mmap.mmap(-1, 32 * 2**20)  # anonymous: zero pages the kernel faults in as they are first written
    for offset in range(0, len(block), PAGE):
        block[offset] = 1
    block.close()


def computes() -> None:
    total = 0
    for i in range(200_000):
        total += i * i


def timed(step):
    def run() -> float:
        start = time.perf_counter()
        step()
        return time.perf_counter() - start

    return run


def test_a_step_that_maps_memory_afresh_spends_more_of_its_cpu_in_the_kernel_than_one_that_computes():
    mapped = timed_samples(timed(remaps), CFG, emit=lambda event: None)
    computed = timed_samples(timed(computes), CFG, emit=lambda event: None)
    assert mapped.minor_faults_per_step >= 0.9 * 32 * 2**20 / PAGE, mapped  # every page, every step
    assert computed.minor_faults_per_step < 100, computed
    assert 0 <= computed.kernel_cpu_share < mapped.kernel_cpu_share <= 1, (computed, mapped)
    assert mapped.kernel_cpu_share > 0.3, mapped  # faulting in and zeroing pages is the kernel's work


def test_the_high_water_marks_increase_is_never_negative(monkeypatch):
    """export gave a cell process_hwm_increase_bytes -131072: the resident set was read before the mark was reset to
    it, and a page freed between the two reads put the mark below the reading. The set is read after the reset, and
    an increase is at least 0."""
    from dlperf.measure import system

    rss = iter([10_000_000, 9_000_000])  # the process frees pages as it goes: the set shrinks
    monkeypatch.setattr(system, "reset_rss_hwm", lambda: True)
    monkeypatch.setattr(system, "rss_bytes", lambda: next(rss))
    monkeypatch.setattr(system, "rss_hwm_bytes", lambda: 9_500_000)  # the mark as reset, at most the set then
    sampled = timed_samples(timed(computes), TimerConfig(min_steps=2, min_time=0.0, max_time=0.5), emit=lambda e: None)
    assert sampled.process_hwm_increase_bytes == 0


def test_the_high_water_marks_increase_is_the_mark_less_the_set_after_the_reset(monkeypatch):
    """The figure itself: the mark after the timed steps less the resident set read after the reset; none where the
    kernel could not reset the mark (an increase since the process began says nothing of the steps)."""
    from dlperf.measure import system

    monkeypatch.setattr(system, "reset_rss_hwm", lambda: True)
    monkeypatch.setattr(system, "rss_bytes", lambda: 10_000_000)
    monkeypatch.setattr(system, "rss_hwm_bytes", lambda: 12_000_000)  # the steps raised the mark by 2 MB
    config = TimerConfig(min_steps=2, min_time=0.0, max_time=0.5)
    assert timed_samples(timed(computes), config, emit=lambda e: None).process_hwm_increase_bytes == 2_000_000
    monkeypatch.setattr(system, "reset_rss_hwm", lambda: False)
    assert timed_samples(timed(computes), config, emit=lambda e: None).process_hwm_increase_bytes is None


def test_the_cpu_utilization_is_over_the_timed_steps_not_the_scans_of_the_load_after_them(monkeypatch):
    """The own CPU's share of the wall time: the wall time ran on to the end of the scan of /proc that reads the
    process family's CPU time after the steps, so where that scan is slow (a host of many processes) a step that
    keeps its core busy read as partly idle. Here the steps sleep for 0.3 s in all and the process's CPU time is made
    to grow by as much (a core kept busy: a share of 1), and the scan after them takes 0.3 s more: counted, the share
    read 0.5."""
    from dlperf.measure import system
    from dlperf.worker import cell

    real = system.family_cpu_s

    def slow_scan() -> float:
        time.sleep(0.3)
        return real()

    stepped = []  # the CPU time grows by the steps' 0.3 s once they have run
    monkeypatch.setattr(system, "family_cpu_s", slow_scan)
    monkeypatch.setattr(cell.time, "process_time", lambda: 0.3 if stepped else 0.0)
    sleeps = timed(lambda: stepped.append(time.sleep(0.1)))
    sampled = timed_samples(sleeps, TimerConfig(min_steps=3, min_time=0.0, max_time=0.25), emit=lambda e: None)
    assert sampled.n == 3 and 0.75 < sampled.cpu_utilization <= 1.01, sampled  # over a wall of 0.6 s: 0.5


def test_a_window_of_a_few_milliseconds_reads_no_more_cores_than_the_process_kept_busy_nor_a_kernel_share(monkeypatch):
    """Over a 2 ms window the own CPU time in the kernel's 10 ms ticks read one tick or none: cpu_utilization 5.18 on a
    2-core machine (a note "more cores busy than threads"), and 100% in the kernel. Here a tick falls in the window
    (in the kernel); the CPU time is read to the nanosecond now, and the kernel's share given over ten ticks or more."""
    import os

    from dlperf.worker import cell

    stepped = []
    ticks = [os.times_result((0.0, 0.0, 0.0, 0.0, 0.0)), os.times_result((0.0, 0.01, 0.0, 0.0, 0.0))]
    monkeypatch.setattr(cell.os, "times", lambda: ticks[bool(stepped)])
    config = TimerConfig(min_steps=2, min_time=0.0, max_time=0.002)
    sampled = timed_samples(timed(lambda: stepped.append(1)), config, emit=lambda e: None)
    assert 0 <= sampled.cpu_utilization <= 1.05, sampled  # one thread, on one core at most
    assert sampled.kernel_cpu_share is None, sampled


def test_a_cells_cores_busy_faults_and_kernel_share_are_its_processes_median_not_the_first_ones():
    """The cell's figures of what its timed steps did came from its first process alone: one process disturbed, or
    timed over a window too short, made the cell's figure (a "more cores busy than threads" note on 5.18)."""
    from dlperf.runner.collect import _static
    from dlperf.store.process import ProcessDetail

    details = [ProcessDetail(cpu_utilization=5.18, minor_faults_per_step=900.0, kernel_cpu_share=1.0),
               ProcessDetail(cpu_utilization=0.98, minor_faults_per_step=10.0, kernel_cpu_share=0.02),
               ProcessDetail(cpu_utilization=1.0, minor_faults_per_step=12.0, kernel_cpu_share=None),
               ProcessDetail(cpu_utilization=None, minor_faults_per_step=None, kernel_cpu_share=0.04)]  # fmt: skip
    figures = _static(details)
    assert (figures.cpu_utilization, figures.minor_faults_per_step, figures.kernel_cpu_share) == (1.0, 12.0, 0.04)
