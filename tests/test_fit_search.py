"""`dlperf fit`'s choice of batches (`fit_search.py`): guided by the tries' peak memory, fewer tries to the same exact
boundary, never more than the most it says up front; on a GPU as on the CPU."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dlperf.fit_search import line_of, next_batch, worst

MiB = 2**20


def tries_to(fits_up_to: int, start: int, max_batch: int, peak, budget: int | None, guided: bool = True):
    """The batches a search tries against a device where a batch fits up to `fits_up_to`, each fitted batch's peak
    `peak(batch)`, its guess from `budget`; asserted within the most it said before each try, and exact."""
    fits: dict[int, bool] = {}
    peaks: list[tuple[int, int]] = []
    said = worst(fits, start, max_batch)
    while (batch := next_batch(fits, start, max_batch, line_of(peaks, budget) if guided else None,
                               said - len(fits))) is not None:  # fmt: skip
        fits[batch] = batch <= fits_up_to
        peaks += [(batch, peak(batch))] if fits[batch] else []
    assert len(fits) <= said
    largest = max((b for b, ok in fits.items() if ok), default=0)
    assert largest == min(fits_up_to, max_batch) and (largest == max_batch or fits[largest + 1] is False)
    return list(fits)


def linear(batch: int) -> int:
    """A model's peak: 2 MiB of its own, 40 KiB a sample."""
    return 2 * MiB + 40 * 1024 * batch


def test_a_linear_model_reaches_its_boundary_in_fewer_tries_than_doubling():
    """The peaks of batches 16 and 32 say where the memory is reached: batch 26,163. Doubling step by step took 26
    tries to the boundary (16 ... 16384, 32768 out of memory, then 14 bisections); the guess brackets it in 3 tries
    (1/16 of the memory under it, at it, 1/16 over it) and bisects that span."""
    budget = linear(26_163)  # the boundary where the line says it is
    plain = tries_to(26_163, 16, 2**16, linear, budget, guided=False)
    guided = tries_to(26_163, 16, 2**16, linear, budget)
    assert len(plain) == 26 and plain[:12] == [16 * 2**k for k in range(12)]
    assert len(guided) == 15 and guided[:5] == [16, 32, 24_524, 26_163, 27_801]


def test_where_every_batch_fits_the_search_leaps_to_max_batch():
    """`dlperf fit tiny-fcn-r` without --max-memory doubled 13 times up to 65,536 (229 MiB at its peak, under 23 GiB
    available): the peaks of 16 and 32 say 65,536 is far within it."""
    budget = 23 * 2**30
    assert tries_to(2**30, 16, 2**16, linear, budget, guided=False) == [16 * 2**k for k in range(13)]
    assert tries_to(2**30, 16, 2**16, linear, budget) == [16, 32, 65536]


@pytest.mark.parametrize("share", [1.0, 0.95, 0.8, 0.557, 0.3, 1.3])  # 0.557: tiny-fcn-r under --max-memory 400MiB
def test_a_guess_off_by_the_processs_own_memory_still_finds_the_exact_boundary(share):
    """The peak leaves out what the process holds beside the tensors (on the CPU here, 44% of the memory at the
    boundary): the guess may be far off, the answer is exact either way, within the most tries said."""
    budget = linear(26_163)
    for fits_up_to in (0, 1, 15, 16, 17, 33, 1000, int(26_163 * share), 60_000, 2**16 + 5):
        tries_to(fits_up_to, 16, 2**16, linear, int(budget / share))


def test_a_model_of_mostly_its_own_memory_does_not_leap():
    """A model whose own memory (parameters, optimizer state) takes most of the limit: 1% off in the memory is 60x
    off in the batch, so the search doubles as before (it leapt to batch 473 where 15 fit: 13 tries, not 6)."""

    def heavy(batch: int) -> int:
        return 500 * MiB + 128 * 1024 * batch

    budget = int(heavy(15) / 0.9)
    assert tries_to(15, 4, 2**16, heavy, budget) == tries_to(15, 4, 2**16, heavy, budget, guided=False)


def test_the_most_tries_said_is_the_plain_searchs_worst_case():
    def plain(fits_up_to: int, start: int, max_batch: int) -> int:
        return len(tries_to(fits_up_to, start, max_batch, linear, None, guided=False))

    for start, max_batch in ((1, 64), (4, 100), (16, 16), (5, 37)):
        assert worst({}, start, max_batch) == max(plain(n, start, max_batch) for n in range(max_batch + 2))
    assert worst({}, 16, 2**16) == 28 and worst({16: True, 32: True, 65536: False}, 16, 2**16) == 16


class Guided:
    """A fit search's tries without a process: a batch fits while its peak is within 90% of the device's memory."""

    def __new__(cls, device: str, memory: int, peak, pace: float = 0.0):
        from dlperf.fit import Search, Try, budget

        class Faked(Search):
            def try_batch(self, mode: str, batch: int) -> Try:
                self.made.append(batch)
                if peak(batch) > 0.9 * memory:
                    return Try(batch, "failed", True, None, None, None, f"out of memory at batch {batch}")
                stepping = pace * batch  # seconds in steps; the process's start 1 s
                return Try(batch, "ok", False, peak(batch), "cuda_allocator", 1e5, None, 50, 1 + stepping,
                           stepping_s=stepping)  # fmt: skip

        search = Faked.__new__(Faked)
        env = {"frameworks": {"torch": {"devices": [{"name": "cpu"}, {"name": device, "memory_bytes": memory}]}}}
        search.budget = budget(device, None, None, env)  # a GPU's limit: its memory, as the devices' probe said
        search.session = SimpleNamespace(spec=SimpleNamespace(timeout=300))
        search.answers, search.made, search.fits = {}, [], {}
        return search


def wide(batch: int) -> int:
    """A model of big activations: 300 MiB of its own, 4 MiB a sample."""
    return 300 * MiB + 4 * MiB * batch


def test_on_a_gpu_the_guess_aims_by_its_memory():
    """CUDA's peaks (max_memory_allocated) against the GPU's memory (141 GiB), 90% of which the tensors can take."""
    memory = 141 * 2**30
    search = Guided("cuda:0", memory, wide)
    answer = search.search("fp32", 64, 2**16)
    assert answer.ended == "boundary" and answer.largest == int((0.9 * memory - 300 * MiB) / (4 * MiB)) == 32_411
    plain = tries_to(32_411, 64, 2**16, wide, None, guided=False)
    assert search.made[:4] == [64, 128, 33_765, 31_509]  # 15/16 of the memory: out of it; 7/8: fits
    assert len(search.made) == 15 and len(plain) == 24
    assert answer.at_most == 17  # the progress's `[k/≤N]`, down from the 26 said up front


def test_a_gpu_without_its_memory_known_searches_as_before():
    from dlperf.fit import budget

    assert budget("cuda:1", None, None, {"frameworks": {"torch": {"devices": [{"name": "cuda:0"}]}}}) is None
    assert budget("cpu", 400 * MiB, 234 * MiB, {}) == 166 * MiB
    search = Guided("cuda:0", 141 * 2**30, wide)
    search.budget = None
    search.search("fp32", 64, 2**14)
    assert search.made == [64 * 2**k for k in range(9)]


def test_a_leap_stops_where_the_timeout_would_end_its_try():
    """Each try here is 1 s of start and 1/32 s a sample in steps: a leap to 65,536 would take 34 min, so the search
    goes to the largest batch --timeout 300 allows, 9,568, and ends there as the doubling ended at the timeout."""
    from dlperf.fit import NOT_TRIED

    search = Guided("cuda:0", 2**40, linear, pace=1 / 32)
    answer = search.search("fp32", 64, 2**16)
    assert search.made == [64, 128, 9568] and answer.largest == 9568
    assert answer.ended.startswith(f"batch 19136 {NOT_TRIED}: at batch 9568's pace (5 min a try)")


def test_the_progress_counts_tries_of_at_most_what_the_search_can_still_make(capsys):
    from dlperf.fit import ModeAnswer, Search
    from dlperf.progress import Running

    search = Search.__new__(Search)
    search.progress_factory, search.later = Running(at_most=True), 28
    search.answers = {"fp32": ModeAnswer("fp32", [None] * 3, ended="boundary"), "bf16": ModeAnswer("bf16", at_most=19)}
    search.count()
    progress = search.progress_factory(1)
    assert progress._item(0) == "[1/≤50]"  # 3 made, 19 at most under way, 28 for the mode to come


def test_the_search_says_its_bounds_before_its_first_try():
    from dlperf.fit import Options, Search

    search = Search.__new__(Search)
    search.workload, search.session = SimpleNamespace(batch=16), SimpleNamespace(spec=SimpleNamespace(modes=("fp32",)))
    line = search.outline(Options("tiny-fcn-r"), "--max-memory 400 MiB (a start needs 234 MiB)")
    assert line == ("fp32: from batch 16 up to --max-batch 65,536 under --max-memory 400 MiB (a start needs 234 MiB): "
                    "at most 28 tries, each up to --timeout 5 min")  # fmt: skip


def test_a_call_that_failed_without_an_error_under_the_limit_did_not_fit():
    """A leap far past the boundary ran out of memory while importing torch._dynamo in the model's build, which
    CPython said as 'SystemError: error return without exception set': the search stopped there (exit 1) with the
    answer unknown. Above a batch of the mode that fitted, under a CPU limit, it is the batch not fitting."""
    from dlperf.fit import Try, no_kernel_is_memory

    lost = Try(41_339, "failed", False, None, None, None, "SystemError: error return without exception set")
    read = no_kernel_is_memory(lost, {3506: True, 44_298: False}, 400 * MiB)
    assert read.out_of_memory and read.status == "failed"
    assert read.reason == ("out of memory at batch 41339 under --max-memory 400 MiB: a call failed without an error "
                           "under the limit, where batch 3506 of this mode ran (SystemError: error return without "
                           "exception set)")  # fmt: skip
    assert no_kernel_is_memory(lost, {3506: True}, None) is lost  # a GPU's: not this
    assert no_kernel_is_memory(lost, {50_000: True}, 400 * MiB) is lost  # no smaller batch ran


class OnTheCpu:
    """A fit search's tries on the CPU without a process, under a data limit: a batch fits while the process's data
    segment at its peak (a start, the memory the built model takes beyond its tensors, and the tensors) is within
    the limit; each fitted try says its live tensors' peak and, unless `data_said` is off, that data peak. `grows`:
    the data's growth with the batch where it is not the tensors'."""

    def __new__(cls, limit: int, start: int, built: int, tensors, data_said: bool = True, grows=None):
        from dlperf.fit import Search, Try, budget

        class Faked(Search):
            def try_batch(self, mode: str, batch: int) -> Try:
                self.made.append(batch)
                data = start + built + (grows or tensors)(batch)
                if data > limit:
                    return Try(batch, "failed", True, None, None, None, f"out of memory at batch {batch}")
                return Try(batch, "ok", False, tensors(batch), "live_tensors", 1e5, None, 50, 1.0,
                           data_peak_bytes=data if data_said else None)  # fmt: skip

        search = Faked.__new__(Faked)
        search.budget, search.limit = budget("cpu", limit, start, {}), limit
        search.session = SimpleNamespace(spec=SimpleNamespace(timeout=300))
        search.answers, search.made, search.fits = {}, [], {}
        return search


def test_on_the_cpu_the_guess_aims_by_the_data_segment_the_limit_counts():
    """tiny-fcn-r under --max-memory 400MiB, as measured: a start 180 MiB, 75 MiB more once its model is built, 3.5
    KiB a sample of tensors. The tensors' line against the limit less the start leapt to where they alone would take
    15/16 of 220 MiB, 1.4 times the boundary (out of memory; 20 tries); the line through the data segment's peak,
    which the limit counts, aims at 63/64 of the limit, then 65/64, and bisects between them (15)."""

    def tensors(batch: int) -> int:
        return 3584 * batch + 256 * 1024

    limit, start, built = 400 * MiB, 180 * MiB, 75 * MiB
    boundary = (limit - start - built - 256 * 1024) // 3584
    by_data = OnTheCpu(limit, start, built, tensors)
    answer = by_data.search("fp32", 16, 2**16)
    assert answer.ended == "boundary" and answer.largest == boundary == 42_349
    assert by_data.made[:5] == [16, 32, 40_521, 44_178, 42_349] and len(by_data.made) == 15
    by_tensors = OnTheCpu(limit, start, built, tensors, data_said=False)
    assert by_tensors.search("fp32", 16, 2**16).largest == boundary
    assert by_tensors.made[:3] == [16, 32, 60_269] and len(by_tensors.made) == 20


def test_a_data_line_near_the_limit_brackets_it_rather_than_creeping_up_to_it():
    """tiny-lstm under 400MiB: its tensors' slope (30 KiB a sample) a little steeper than its data's (28.2), the
    first aim fitted 5 MiB under 63/64 of the limit. Aiming under again and then at the limit itself, both fitted
    (4,959 and 5,185, the data at 99.9% of the limit), which spent the tries a guess may add (`SLACK`): the search
    doubled to 10,370 and bisected down from there (19 tries). Within two margins of the limit, the next aim is a
    margin past it, which brackets the boundary (here 14 tries, not 18)."""
    limit, start, built = 400 * MiB, 180 * MiB, int(76.7 * MiB)
    search = OnTheCpu(limit, start, built, lambda batch: 30_720 * batch, grows=lambda batch: 28_900 * batch)
    answer = search.search("fp32", 4, 2**16)
    assert answer.largest == (limit - start - built) // 28_900 == 5_199
    assert search.made[:5] == [4, 8, 4_678, 4_955, 5_398] and len(search.made) == 14  # not 5,184 then 10,368: 18


def test_the_limit_says_what_a_start_leaves_of_it(monkeypatch):
    """`fit tiny-resnet-56 --max-memory 256MiB` said "no batch fits: batch 1 runs out of memory" under "limit:
    --max-memory 256 MiB (a start needs 235 MiB)": the 21 MiB left for the model and its step went unsaid."""
    from dlperf import fit

    monkeypatch.setattr(fit, "start_bytes", lambda framework, threads: 235 * 2**20)
    limit, words, needed = fit.memory_limit(fit.Options("tiny-resnet-56", max_memory=256 * 2**20), "torch", 1)
    assert (limit, needed) == (256 * 2**20, 235 * 2**20)
    assert words == "--max-memory 256 MiB (a start needs 235 MiB, leaving 21 MiB)"


def test_a_limit_above_this_machines_memory_says_the_kernel_not_the_limit_would_stop_a_try(monkeypatch):
    """`fit tiny-fcn-r --max-memory 1TB` on a 23.5 GiB machine searched on, saying nothing: a try that needed more
    than the machine has would meet the out-of-memory killer or swap, never the limit."""
    from dlperf import fit
    from dlperf.measure import system

    monkeypatch.setattr(fit, "start_bytes", lambda framework, threads: 235 * 2**20)
    monkeypatch.setattr(system, "memory_total_bytes", lambda root="/": 2 * 2**30)
    _, words, _ = fit.memory_limit(fit.Options("tiny-fcn-r", max_memory=2**40), "torch", 1)
    assert words.endswith("; above the 2,048 MiB this machine has, so the kernel's out-of-memory killer or swap, not "
                          "the limit, would stop a try that needs more)")  # fmt: skip
    _, words, _ = fit.memory_limit(fit.Options("tiny-fcn-r", max_memory=2**30), "torch", 1)
    assert "above the" not in words
