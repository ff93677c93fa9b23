"""A model whose memory grows step by step (it keeps each loss as a tensor, say) grew 855 MiB over its timed steps,
a step's peak 1.9 MiB, and nothing said so: a longer run than the timed one may run out of memory."""

from dlperf.runner.collect import growing
from dlperf.store.process import ProcessDetail

MIB = 2**20


def detail(grew: int | None) -> ProcessDetail:
    return ProcessDetail(process_hwm_increase_bytes=grew)


def test_growth_far_beyond_a_steps_peak_is_said():
    [said] = growing([detail(0), detail(855 * MIB)], int(1.9 * MIB))
    assert said.startswith("memory grew over the timed steps: the process's peak rose 855 MiB, against a step's "
                           "peak of 1.9 MiB")  # fmt: skip


def test_a_first_steps_allocations_and_small_growth_are_not():
    assert growing([detail(11 * MIB)], 10 * MIB) == []  # its first steps' tensors, as large as a step's
    assert growing([detail(60 * MIB)], None) == []  # under the floor
    assert growing([detail(300 * MIB)], 100 * MIB) == []  # within 4 steps' peak: the allocator's caching
    assert growing([detail(None)], None) == []
