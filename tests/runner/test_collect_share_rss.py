"""A step's memory is shared between the thread counts of one cell, but not a process's resident set: TensorFlow's
and MXNet's cpu:2 cells had been given their cpu:1 sibling's RSS byte for byte, where their thread pools differ."""

from conftest import make_cell
from dlperf.runner.collect import share
from dlperf.store.records import CellFigures


def test_a_resident_set_is_not_shared_between_thread_counts_and_a_steps_tensors_are():
    rss = make_cell("tiny-fcn-r", framework="tensorflow", threads=1, peak_mem_bytes=543 * 2**20,
                    peak_mem_kind="process_rss")  # fmt: skip
    tensors = make_cell("tiny-fcn-r", threads=1, peak_mem_bytes=375_000, peak_mem_kind="live_tensors")
    mine = CellFigures()
    share(mine, [rss])
    assert mine.peak_mem_bytes is None and "memory" not in mine.shared_from
    share(mine, [tensors])
    assert (mine.peak_mem_bytes, mine.peak_mem_kind, mine.shared_from["memory"]) == (
        375_000,
        "live_tensors",
        tensors.key,
    )
