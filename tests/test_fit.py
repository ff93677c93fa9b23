"""`dlperf fit`'s parts: the search's next batch, the size of --max-memory, and the child's memory limit."""

from __future__ import annotations

import subprocess
import sys
from types import SimpleNamespace

import pytest

from conftest import LIBC_BLOCK
from dlperf.errors import UsageError
from dlperf.fit import next_batch
from dlperf.flagtext import parse_size
from dlperf.frameworks.common import heap


def search(fits_up_to: int, start: int, max_batch: int = 2**16) -> list[int]:
    """The batches tried against a device where every batch up to `fits_up_to` fits."""
    tried: dict[int, bool] = {}
    while (batch := next_batch(tried, start, max_batch)) is not None:
        tried[batch] = batch <= fits_up_to
    return list(tried)


@pytest.mark.parametrize(
    ("fits_up_to", "start", "max_batch", "tried"),
    [
        (5, 4, 2**16, [4, 8, 6, 5]),  # doubling, then bisection down to neighbours
        (12, 4, 2**16, [4, 8, 16, 12, 14, 13]),
        (2, 8, 2**16, [8, 4, 2, 3]),  # the workload's batch does not fit: bisection below it
        (0, 4, 2**16, [4, 2, 1]),  # nothing fits
        (100, 4, 20, [4, 8, 16, 20]),  # every batch fits up to --max-batch
        (17, 4, 20, [4, 8, 16, 20, 18, 17]),
    ],
)
def test_the_search_doubles_then_bisects_to_neighbours(fits_up_to, start, max_batch, tried):
    assert search(fits_up_to, start, max_batch) == tried


def test_the_answer_is_the_boundary_whatever_it_is():
    for fits_up_to in range(0, 70):
        tried = search(fits_up_to, 4, 64)
        assert fits_up_to >= 64 or fits_up_to + 1 in tried
        assert fits_up_to < 1 or min(fits_up_to, 64) in tried


@pytest.mark.parametrize(
    ("text", "size"),
    [("2GiB", 2 * 2**30), ("512M", 512 * 2**20), ("1.5G", 3 * 2**29), ("500MB", 500 * 10**6), ("4096", 4096),
     ("7 MiB", 7 * 2**20), ("1k", 1024)],
)  # fmt: skip
def test_sizes_in_binary_and_decimal_units(text, size):
    assert parse_size(text, "--max-memory") == size


@pytest.mark.parametrize("text", ["3XB", "", "GiB", "5i", "iB", "0", "-1G", "1e3", "nan", "2 GiB 2"])
def test_a_bad_size_names_the_flag(text):
    with pytest.raises(UsageError, match="--max-memory"):
        parse_size(text, "--max-memory")


# After a 16 MiB block is freed, glibc raises its mmap threshold to 16 MiB (up to 32 MiB it follows what is freed):
# the blocks of 4 to 10 MiB that follow come from the heap, each below a small block still alive, so the heap cannot
# shrink when they are freed (measured here: 10 MiB held without the fixed threshold, 0 with it).
HISTORY = """
from dlperf.measure.system import data_bytes
from dlperf.worker.cell import limit_memory
limit_memory(2**40)
base = data_bytes()
big = bytearray(16 * 2**20)
del big
kept = []
for mib in (4, 6, 8, 10):
    block = bytearray(mib * 2**20)
    kept.append(bytearray(4096))  # above the block in the heap
    del block
print((data_bytes() - base) // 2**20)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA and glibc's mallopt are Linux's")
def test_under_a_limit_freed_memory_leaves_the_data_segment():
    """What a try holds follows its live memory, not the allocations before: a batch fits or not whatever ran
    before it in the process."""
    held = subprocess.run([sys.executable, "-c", HISTORY], capture_output=True, text=True, check=True).stdout
    assert int(held) < 4, f"{held} MiB held after every block was freed"


# A step that allocates (and touches) a 1 MiB tensor and frees it: under the limit its pages are mapped afresh.
STEPS = """
import resource
from types import SimpleNamespace
from dlperf.worker.cell import fit_verdict, limit_memory

def step():
    tensor = b"x" * 2**20
    del tensor

def faults_a_step():
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):
        step()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 50

limit_memory(2**40)
under = faults_a_step()
fit_verdict(SimpleNamespace(step=step, sync=lambda: None))
soft, hard = resource.getrlimit(resource.RLIMIT_DATA)
print(under, faults_a_step(), soft == hard)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA and glibc's mallopt are Linux's")
def test_a_try_is_timed_after_its_verdict_with_the_limit_lifted_and_no_memory_mapped_afresh():
    """fit timed its steps under the limit's fixed mmap threshold, which maps every allocation above 128 KiB afresh
    each step: tiny-fcn-r at batch 4096 faulted 1,350 pages a step and took 16-17 ms against 9 ms in dlperf run,
    tiny-resnet-56 at 256 21,170 and 88 ms against 31 ms. The verdict's steps run under the limit; the timed ones
    after it, as a plain process's allocator runs them."""
    out = subprocess.run([sys.executable, "-c", STEPS], capture_output=True, text=True, check=True).stdout.split()
    under, after, lifted = float(out[0]), float(out[1]), out[2] == "True"
    assert under >= 200, f"{under} page faults a step under the limit: the 1 MiB block was not mapped afresh"
    assert after < 10 and lifted, f"{after} page faults a step after the verdict; limit lifted: {lifted}"


# A step that writes a 96 MiB block and frees it, in a fit try of MODE: the page faults a step after the verdict.
KEPT_AFTER_THE_VERDICT = (
    LIBC_BLOCK
    + """
import resource, sys
from types import SimpleNamespace
from dlperf.frameworks.common import heap
from dlperf.worker.cell import fit_verdict, limit_memory

def step():
    write_block(96)

limit_memory(2**40)  # as run_cell does, before the worker applies the mode
heap.applied(sys.argv[1])
fit_verdict(SimpleNamespace(step=step, sync=lambda: None), sys.argv[1])
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
"""
)


@pytest.mark.skipif(heap.glibc() is None, reason="malloc_keep sets glibc's malloc")
def test_a_malloc_keep_try_is_timed_with_its_heap_kept_after_the_verdict():
    """The verdict's lift sets glibc's thresholds as a plain process has them (mmap over 32 MiB, the heap's top
    trimmed over 64 MiB): a malloc_keep try's timed steps gave a freed 96 MiB block back to the kernel and faulted it
    in again each step, as fp32's do. The mode's settings are made again after the lift."""

    def faults(mode: str) -> float:
        done = subprocess.run([sys.executable, "-c", KEPT_AFTER_THE_VERDICT, mode], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr[-2000:]
        return float(done.stdout)

    pages = 96 * 2**20 / 4096
    assert faults("fp32") > pages / 2  # a plain process's threshold: mapped afresh each step
    assert faults("malloc_keep") < pages / 100


def test_an_out_of_memory_reason_names_the_batch_and_the_limit():
    from dlperf.worker.cell import oom_reason

    reason = oom_reason(RuntimeError("DefaultCPUAllocator: can't allocate memory: 64 bytes"), 16, 300 * 2**20)
    assert reason == "out of memory at batch 16 under --max-memory 300 MiB: RuntimeError: DefaultCPUAllocator: " \
                     "can't allocate memory: 64 bytes"  # fmt: skip
    assert oom_reason(MemoryError(), 2, None) == "out of memory at batch 2: MemoryError"


def test_a_batch_whose_try_would_outlast_the_timeout_is_not_tried_and_the_answer_so_far_stands():
    """A CPU fit without --max-memory doubles up to batches whose steps take minutes: at the pace of the largest
    batch that fitted, the next try's process would outlast --timeout, so it is not started (it was, and timed out
    after --timeout: 5 minutes lost to say what the pace said)."""
    from types import SimpleNamespace

    from dlperf.fit import NOT_TRIED, Search, Try

    class Paced(Search):
        def __init__(self, timeout: float) -> None:
            self.session, self.answers, self.made = SimpleNamespace(spec=SimpleNamespace(timeout=timeout)), {}, []

        def try_batch(self, mode: str, batch: int) -> Try:
            self.made.append(batch)
            return Try(batch, "ok", False, batch * 2**20, "live", 10.0, None, 3, 0.25 * batch)  # 0.25 s a sample

    search = Paced(timeout=300)
    answer = search.search("fp32", 64, 2**16)
    assert search.made == [64, 128, 256, 512, 1024]  # 1024: 256 s; 2048 would take 512 s
    assert answer.largest == 1024 and answer.ended.startswith(f"batch 2048 {NOT_TRIED}: at batch 1024's pace")
    assert "about 9 min, past --timeout 5 min" in answer.ended
    assert Paced(timeout=1e6).search("fp32", 64, 4096).ended == "max-batch"  # within the timeout: tried as before


def test_a_mode_unsupported_here_ends_its_search_saying_so_and_is_no_failure():
    """fit --modes fp32,tf32 on a CPU exited 1 ('tf32: the search stopped, batch 16 unsupported: ...') where run's
    unsupported cell exits 0."""
    from types import SimpleNamespace

    from dlperf.commands.fit import headline
    from dlperf.fit import UNSUPPORTED, Search, Try

    why = "tf32 applies to CUDA GPUs only; this cell runs on cpu"

    class Unsupported(Search):
        def __init__(self) -> None:
            self.session, self.answers, self.made = SimpleNamespace(spec=SimpleNamespace(timeout=300)), {}, []

        def try_batch(self, mode: str, batch: int) -> Try:
            return Try(batch, "unsupported", False, None, None, None, why)

    answer = Unsupported().search("tf32", 16, 32)
    assert answer.ended == f"{UNSUPPORTED}: {why}" and answer.ended.startswith(UNSUPPORTED)
    assert headline(answer) == f"tf32: unsupported: {why}"


def test_only_a_tries_time_in_steps_grows_with_the_batch_not_its_processs_start():
    """A fast model's try is the framework's start and --max-time's timing at any batch: 6 s at batch 64, of which
    0.6 s in steps. Scaling the whole 6 s said batch 128 would take 11 s, past --timeout 10, and the search ended
    there (`dlperf fit tiny-fcn-r --timeout 10`: every try took 6 s)."""
    from dlperf.fit import Try, too_long

    fast = Try(64, "ok", False, 2**20, "live", 64 / 0.0006, None, 997, 6.0, 3)  # 1,000 steps of 0.6 ms
    assert too_long([fast], 128, timeout=10) is None
    assert too_long([fast], 2**16, timeout=10).startswith("batch 65536 not tried")  # 1,024x the steps: 620 s
    slow = Try(1024, "ok", False, 2**30, "live", 1024 / 62, None, 1, 240.0, 1)  # two 62 s steps and a 116 s start
    assert "it would take about 6 min" in too_long([slow], 2048, timeout=300)  # 116 s + 2 x 124 s


def test_the_table_marks_a_rate_of_few_steps_and_says_its_limit_on_a_line_of_its_own(capsys, monkeypatch):
    from dlperf.commands.fit import show
    from dlperf.fit import ModeAnswer, Result, Try

    monkeypatch.setenv("COLUMNS", "200")
    tries = [Try(64, "ok", False, 2**20, "live", 24.3, None, 12, 17.0), Try(1024, "ok", False, 2**30, "live", 16.4,
             None, 1, 230.0), Try(2048, "failed", True, None, None, None, "out of memory at batch 2048")]  # fmt: skip
    limit = "the memory available when fit started (23,273 MiB)"
    show(Result(1, {"fp32": ModeAnswer("fp32", tries, 1024, "boundary")}, 0, limit))
    out = capsys.readouterr().out
    assert "24.3?" not in out and "16.4?" in out  # 12 steps behind one rate, one step behind the other
    assert "? = a rate of fewer than 6 timed steps" in out
    assert f"limit: {limit}" in out.splitlines()  # whole, not folded into the table's title


def test_a_ctrl_c_between_two_tries_ends_the_search_as_one_during_a_try_does():
    """The interrupt can land after a try's cell is stored and before the next one's sweep begins (a store read):
    it raised out of fit, which then printed no table, only 'dlperf: interrupted' (seen in CI)."""
    from types import SimpleNamespace

    from dlperf.fit import Search, Try
    from dlperf.vocab import ExitCode

    class Cut(Search):
        def __init__(self) -> None:
            self.answers, self.workload, self.ended, self.threads = {}, SimpleNamespace(batch=8, name="w"), [], 1
            spec = SimpleNamespace(modes=("fp32",), timeout=300, frameworks=("torch",), devices=("cpu",))
            self.session = SimpleNamespace(spec=spec, workloads={},  # batch 16's try was not added: nothing to read
                                           interrupted=lambda: self.ended.append("interrupted"))  # fmt: skip

        def try_batch(self, mode: str, batch: int) -> Try:
            if batch > 8:
                raise KeyboardInterrupt
            return Try(batch, "ok", False, 2**20, "live", 10.0, None, 9, 1.0)

    search = Cut()
    assert search.run(SimpleNamespace(max_batch=2**16)) == ExitCode.INTERRUPTED
    assert search.ended == ["interrupted"] and search.answers["fp32"].largest == 8
    assert search.answers["fp32"].ended == "interrupted"


OTHERS = "other processes used 82% of the CPUs while this cell was timed"


def stored(**figures):
    """A measured CPU cell as `Try.of` reads it."""
    from types import SimpleNamespace

    from dlperf.vocab import Status

    known = dict(status=Status.OK, ok=True, error=None, device="cpu", peak_mem_bytes=2**20, peak_mem_kind="live",
                 memory_figures={})  # fmt: skip
    return SimpleNamespace(**{**known, **figures})


def test_a_try_keeps_the_median_and_what_run_notes_of_its_timing_not_its_other_warnings():
    """fit printed a rate per batch and nothing of how it was timed: on a busy machine the rates jumped 450x between
    batches (210.8 to 93,597.9 samples/s) while each cell's stored notes said other processes used 80% of the CPUs."""
    from types import SimpleNamespace

    from dlperf.fit import Try

    warnings = [OTHERS, "noisy: IQR is 244% of the median", "oversubscribed: 4 threads on 2 cores",
                "warm-up did not settle within --max-warmup steps or --max-time"]  # fmt: skip
    cell = stored(median_s=0.02, n=40, warmup_steps=3, warnings=warnings, minor_faults_per_step=0.5)
    tried = Try.of(cell, 512, 6.0)
    assert tried.samples_per_s == 512 / 0.02 and tried.median_s == 0.02 and tried.steps == 40
    assert tried.timing == (OTHERS, "noisy: IQR is 244% of the median")
    assert tried.disturbed == list(tried.timing)
    few = Try.of(SimpleNamespace(**{**vars(cell), "n": 3, "warnings": ["few samples: the median of 3 timed ..."]}), 512)
    assert few.timing and not few.disturbed  # few steps has its own mark
    nan = "loss not finite: nan after the timed steps; the time is kept, but the steps did not train"
    diverged = Try.of(SimpleNamespace(**{**vars(cell), "warnings": [nan]}), 512)
    assert diverged.timing == (nan,) and not diverged.disturbed  # fit said nothing of a model that did not train


def test_the_table_marks_a_disturbed_rate_and_names_why_under_it(capsys, monkeypatch):
    from dlperf.commands.fit import show
    from dlperf.fit import ModeAnswer, Result, Try

    monkeypatch.setenv("COLUMNS", "200")
    quiet = Try(32, "ok", False, 2**20, "live", 40_000.0, None, 73, 5.0, 3, 0.0008)
    fast = Try(33, "ok", False, 2**20, "live", 198_527.2, None, 60, 5.0, 3, 33 / 198_527.2)
    busy = Try(64, "ok", False, 2**20, "live", 421.1, None, 23, 6.0, 3, 0.152, (OTHERS, "noisy: IQR is 244% of the "
               "median"))  # fmt: skip
    oom = Try(128, "failed", True, None, None, None, "out of memory at batch 128")
    show(Result(1, {"fp32": ModeAnswer("fp32", [quiet, fast, busy, oom], 64, "boundary")}, 0, "--max-memory 1 GiB"))
    out = capsys.readouterr().out
    rows = {line.split()[1]: line for line in out.splitlines() if line.startswith("│")}
    assert "40000 │" in rows["32"] and "800 µs" in rows["32"] and " 73 " in rows["32"]
    assert " 199000 │" in rows["33"]  # three significant figures, as every view's rates: 198,527.2 claimed seven
    assert " 421~ │" in rows["64"] and "0.152 s" in rows["64"]
    assert "~ = not this batch's own speed, nor a rate to compare batches by (notes below): timed while other " \
           "processes used the CPUs" in out  # fmt: skip
    assert f"note: batch 64: {OTHERS}" in out and "note: batch 64: noisy: IQR is 244% of the median" in out
    assert "fp32: the largest batch that fits is 64; batch 65 runs out of memory" in out  # the answer as it was


def test_a_batch_not_tried_at_a_disturbed_pace_says_the_pace_was_disturbed():
    from dlperf.fit import Try, too_long

    calm = Try(1024, "ok", False, 2**30, "live", 1024 / 62, None, 1, 240.0, 1)
    assert "disturbed" not in too_long([calm], 2048, timeout=300)
    busy = Try(1024, "ok", False, 2**30, "live", 1024 / 62, None, 1, 240.0, 1, 62.0, (OTHERS,))
    assert f"(4 min a try; its steps timed while disturbed: {OTHERS})" in too_long([busy], 2048, timeout=300)


def test_a_tries_warm_up_can_settle():
    """fit warmed up at most 3 steps, but the warm-up is steady only when the median of the last 3 steps matches the
    3 before (6 steps): every try of every fit was stored 'warm-up did not settle', its first timed steps possibly
    still warming (`dlperf table` of a fit's run printed the note for each batch)."""
    from dlperf.measure.timer import warm_up
    from dlperf.spec import FIT_TIMER

    assert warm_up(lambda: 0.001, FIT_TIMER, clock=lambda: 0.0).steady  # steps of one time: steady at once


def test_a_rate_of_many_page_faults_is_not_marked_nor_noted(capsys, monkeypatch):
    """The rate is timed after the verdict, the limit lifted: a step's page faults are those of a plain process (a
    tensor above glibc's 32 MiB ceiling is mapped afresh there too), not fit's, and are no reason for ~."""
    from dlperf.commands.fit import show
    from dlperf.fit import ModeAnswer, Result, Try

    monkeypatch.setenv("COLUMNS", "200")
    faulted = Try.of(stored(median_s=0.2, n=20, warmup_steps=6, warnings=[], minor_faults_per_step=9437.9), 1024)
    assert faulted.faults_per_step == 9437.9
    show(Result(1, {"fp32": ModeAnswer("fp32", [faulted], 1024, "max-batch")}, 0, "--max-memory 1 GiB"))
    out = capsys.readouterr().out
    assert " 5120 │" in out and "~" not in out and "page faults" not in out


def test_the_timeout_guard_counts_a_cpu_tries_verdict_steps():
    """A CPU try's first 3 steps run under the limit (the verdict), every allocation above 128 KiB mapped afresh:
    slower than its timed steps (tiny-resnet-56 at 256: 88 ms against 20-24), and neither warm-up nor timed steps.
    The guard scaled only the warm-up's and timed steps' time, so it started a try that ran past --timeout and was
    killed: the search ended 'batch 512 timeout' (exit 1) where the pace said 'not tried'. Each try here is a
    process on a counted clock: a 20 s start, 3 verdict steps at 4 times the pace, 1 warm-up and 1 timed step."""
    from types import SimpleNamespace

    from dlperf.fit import NOT_TRIED, Search, Try

    class Clocked(Search):
        def __init__(self, timeout: float) -> None:
            self.session, self.answers, self.made = SimpleNamespace(spec=SimpleNamespace(timeout=timeout)), {}, []

        def try_batch(self, mode: str, batch: int) -> Try:
            self.made.append(batch)
            step = 0.05 * batch
            phases = {"compile_s": None, "warmup_s": 3 * 4 * step + step, "timed_s": step}
            took = 20 + sum(p or 0 for p in phases.values())
            if took > self.session.spec.timeout:  # killed at --timeout
                return Try(batch, "timeout", False, None, None, None, "timed out", duration_s=300.0)
            return Try.of(stored(median_s=step, n=1, warmup_steps=1, warnings=[], minor_faults_per_step=0.0), batch,
                          took, phases)  # fmt: skip

    search = Clocked(timeout=300)
    answer = search.search("fp32", 64, 2**16)
    assert search.made == [64, 128, 256]  # 256: 199 s; 512 would take 378 s, which the old guard said was 225 s
    assert answer.largest == 256 and answer.ended.startswith(f"batch 512 {NOT_TRIED}: at batch 256's pace")


def test_a_try_that_ran_past_the_timeout_after_its_timed_steps_fits_and_ends_the_search_there():
    """`dlperf fit alexnet-r --threads 2`: batch 39,762 ran its steps under the limit and one timed step (41 s), then
    ran past --timeout 300 s measuring the step's memory; the search stopped 'batch 39762 timeout', its answer 2,048.
    Its batch fits: the answer is 39,762, and no larger batch is tried (its try would run longer still)."""
    from types import SimpleNamespace

    from dlperf.fit import NOT_TRIED, Search, Try
    from dlperf.report import fit as view
    from dlperf.vocab import Status

    cut = dict(status=Status.TIMEOUT, ok=False, peak_mem_bytes=None, peak_mem_kind=None, warnings=[])
    after = "exceeded --timeout 300 s after the timed steps (counting FLOPs, measuring memory) (kept 1 sample)"
    late = stored(**cut, median_s=41.3, n=1, warmup_steps=1, minor_faults_per_step=9.6e6, error=after)
    early = stored(**cut, median_s=None, n=0, warmup_steps=0, error="exceeded --timeout 300 s")
    assert view.fitted(late) and not view.fitted(early) and Try.of(late, 39762).fitted
    assert not Try.of(early, 39762).fitted

    class Made(Search):
        def __init__(self) -> None:
            self.session, self.answers, self.made = SimpleNamespace(spec=SimpleNamespace(timeout=300)), {}, []

        def try_batch(self, mode: str, batch: int) -> Try:
            self.made.append(batch)
            found = (
                late
                if batch > 2048
                else stored(median_s=0.6 * batch / 1024, n=10, warmup_steps=3, warnings=[], minor_faults_per_step=0.0)
            )
            return Try.of(found, batch, 330.0 if batch > 2048 else 15.0, None)

    search = Made()
    answer = search.search("fp32", 1024, 2**16)
    assert search.made == [1024, 2048, 4096]
    assert answer.largest == 4096 and answer.ended.startswith(f"batch 8192 {NOT_TRIED}: batch 4096 fits, yet its try")
    named = SimpleNamespace(**{**vars(late), "workload": "alexnet-r@b39762"})
    [row] = view.Search(1, "alexnet-r", "torch", "cpu:2", "fp32", None, [named]).rows()
    assert row[1] == view.FITTED_TIMEOUT and row[3] == "41.3 s" and row[4] == "1"


def test_a_tries_time_in_steps_is_its_processs_from_the_first_step_to_the_last_timed_one():
    from dlperf.fit import stepping

    assert stepping({"build_s": 9.0, "compile_s": 2.0, "gate_s": 5.0, "warmup_s": 3.0, "timed_s": 1.0}) == 6.0
    assert stepping({"compile_s": None, "warmup_s": 3.0, "timed_s": 1.0}) == 4.0
    assert stepping(None) is None and stepping({"compile_s": 1.0, "warmup_s": None}) is None  # failed before


# A fit try's step on a counted number of steps: after the verdict's 3 steps, `held.check` after the timed ones.
HELD = """
import sys
from types import SimpleNamespace
from dlperf.measure.system import data_bytes
from dlperf.worker.cell import GrewPastTheLimit, fit_verdict, held_bytes, limit_memory

limit_memory(data_bytes() + 48 * 2**20)
kept = []

def grows():  # a cache that fills: 1 MiB kept each step
    kept.append(bytearray(2**20))

def steady():  # 24 MiB each step and freed: kept in the heap once the limit is lifted (below glibc's 32 MiB)
    block = bytearray(24 * 2**20)
    kept.append(bytearray(64))  # above it in the heap: the heap cannot shrink below it
    del block

step = {"grows": grows, "steady": steady}[sys.argv[1]]
held = fit_verdict(SimpleNamespace(step=step, sync=lambda: None))
before = data_bytes(), held_bytes()
for _ in range(100):
    step()
grew = (data_bytes() - before[0]) // 2**20, (held_bytes() - before[1]) // 2**20
try:
    held.check(100)
except GrewPastTheLimit as exc:
    print(*grew, exc)
else:
    print(*grew, "fits")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA and glibc's mallinfo2 are Linux's")
def test_a_try_whose_memory_grows_past_the_limit_once_it_is_lifted_does_not_fit():
    """The limit holds for the verdict's 3 steps only: a try whose memory grew later (a cache that fills) was
    reported as fitting. What it holds between steps at the end of its timed steps, past the limit, is the batch
    not fitting; a step's memory that the heap keeps once the limit is lifted is not held (the data segment is)."""

    def run(kind: str) -> list[str]:
        return subprocess.run([sys.executable, "-c", HELD, kind], capture_output=True, text=True, check=True).stdout

    data, held, *said = run("grows").split(maxsplit=2)
    assert int(held) >= 99 and said[0].startswith("its memory grew past the limit over its 100 timed steps")
    data, held, said = run("steady").split()
    assert int(data) >= 20 and int(held) < 4 and said == "fits"  # 24 MiB in the data segment, not held


# A step whose tensors take 64 MiB at its peak and nothing between steps.
PEAK = """
from types import SimpleNamespace
from dlperf.measure.system import data_bytes
from dlperf.worker.cell import fit_verdict, limit_memory, measure_memory

def step():
    tensor = b"x" * (64 * 2**20)
    del tensor

limit_memory(2**40)
before = data_bytes()
train = SimpleNamespace(step=step, sync=lambda: None, memory_of_step=lambda: {"live_tensor_peak_bytes": 64 * 2**20})
held = fit_verdict(train)
figures, kept = measure_memory(train, held).figures, measure_memory(train, held, counted=False).figures
said = figures["data_peak_bytes"] == held.data_peak and kept == {"data_peak_bytes": held.data_peak}
print((held.data_peak - before) // 2**20, (data_bytes() - before) // 2**20, said)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="RLIMIT_DATA and /proc/self/status are Linux's")
def test_a_cpu_try_says_the_most_its_data_segment_held_under_the_limit():
    """What the limit counts at the verdict's peak, which fit's guess aims by (`fit.reach`): the step's 64 MiB
    counted, though the data segment is back where it was once the steps are over; said also where the step's
    memory figures are kept from an earlier run (a batch fit tried before), not counted again."""
    out = subprocess.run([sys.executable, "-c", PEAK], capture_output=True, text=True, check=True).stdout.split()
    peak, after, stored = int(out[0]), int(out[1]), out[2] == "True"
    assert 64 <= peak < 72 and after < 4 and stored, out


def test_a_tries_data_peak_is_read_only_where_it_fitted():
    from dlperf.fit import Try
    from dlperf.vocab import Status

    cell = stored(median_s=0.02, n=50, warmup_steps=5, warnings=[], minor_faults_per_step=1.0,
                  memory_figures={"live_tensor_peak_bytes": 6 * 2**20, "data_peak_bytes": 297 * 2**20})  # fmt: skip
    assert Try.of(cell, 1818).data_peak_bytes == 297 * 2**20
    failed = SimpleNamespace(**{**vars(cell), "status": Status.FAILED, "ok": False, "error": "out of memory at ..."})
    assert Try.of(failed, 59_866).data_peak_bytes is None


def test_a_mode_that_fitted_smaller_refused_by_onednn_at_a_larger_batch_did_not_fit():
    """Under the limit, oneDNN's "could not create a primitive" is also memory it could not get: fit tiny bf16 at
    batch 16 (batch 8 had fitted) was 'unsupported: no bf16 kernel', and the search ended there, exit 1 (fresh-clone
    CI, test_each_mode_is_searched_on_its_own_and_stored_with_its_mode)."""
    from dlperf.fit import OUT_OF_MEMORY, Try, no_kernel_is_memory

    refused = "bf16: no bf16 kernel for this op on this device (could not create a primitive)"
    tried = Try(16, "unsupported", False, None, None, None, refused)
    said = no_kernel_is_memory(tried, {4: True, 8: True}, 316 * 2**20)
    assert said.out_of_memory and said.status == "failed"
    assert said.reason == (f"{OUT_OF_MEMORY} at batch 16 under --max-memory 316 MiB: oneDNN refused under the limit, "
                           "where batch 8 of this mode ran (could not create a primitive)")  # fmt: skip
    assert no_kernel_is_memory(tried, {}) is tried  # nothing ran: no kernel for this dtype here, unsupported
    assert no_kernel_is_memory(tried, {32: False, 64: False}) is tried  # nothing smaller fitted
    other = Try(16, "unsupported", False, None, None, None, "compile: needs a C++ compiler")
    assert no_kernel_is_memory(other, {8: True}) is other


def test_under_the_limit_a_refusal_in_backward_and_an_abort_above_a_batch_that_fitted_did_not_fit():
    """Two ways a leap past the boundary failed otherwise than out of memory and ended the search, exit 1:
    tiny-resnet-56 at batch 2,370 under 400 MiB (2,343 fitted) raised oneDNN's refusal as a plain RuntimeError in its
    backward pass; tiny-fcn-r at 55,875 (1,818 fitted) aborted in pybind11 ('Invalid clear_patients() call')."""
    from dlperf.fit import OUT_OF_MEMORY, Try, no_kernel_is_memory

    limit, fits = 400 * 2**20, {1818: True, 2343: True, 59_872: False}
    backward = Try(2370, "failed", False, None, None, None, "RuntimeError: could not create a primitive")
    said = no_kernel_is_memory(backward, fits, limit)
    assert said.out_of_memory and said.reason == (f"{OUT_OF_MEMORY} at batch 2370 under --max-memory 400 MiB: oneDNN "
                                                  "refused under the limit, where batch 2343 of this mode ran "
                                                  "(RuntimeError: could not create a primitive)")  # fmt: skip
    aborted = Try(55_875, "failed", False, None, None, None, "worker killed by SIGABRT (aborted): what():  FATAL: "
                  "Internal consistency check failed: Invalid clear_patients() call.")  # fmt: skip
    said = no_kernel_is_memory(aborted, fits, limit)
    aborted_said = f"{OUT_OF_MEMORY} at batch 55875 under --max-memory 400 MiB: the process aborted under the limit"
    assert said.out_of_memory and said.reason.startswith(f"{aborted_said}, where batch 2343 of this mode ran")
    assert no_kernel_is_memory(backward, fits, None) is backward  # no CPU limit: a failure of its own
    assert no_kernel_is_memory(aborted, {60_000: True}, limit) is aborted  # nothing smaller fitted


class Refused:
    """A fit search's session over a real store, its tries measured without a child: a batch up to `fits_up_to` fits,
    a larger one oneDNN refuses, as under the memory limit (frameworks/torch/step.py words it)."""

    REASON = "fp32: no fp32 kernel for this op on this device (could not create a primitive descriptor for a conv)"

    def __init__(self, store, fits_up_to: int) -> None:
        self.store, self.fits_up_to = store, fits_up_to

    def measure(self, session, tasks) -> None:
        from dlperf.runner.sweep import store_result
        from dlperf.store.process import ProcessMeasurement
        from dlperf.vocab import Status

        [task] = tasks
        if session.workloads[task.cell.key]["batch"] <= self.fits_up_to:
            m = ProcessMeasurement(status=Status.OK, samples=[0.01] * 5, duration_s=1.0)
        else:
            m = ProcessMeasurement(status=Status.UNSUPPORTED, error=self.REASON, duration_s=1.0)
        store_result(session, task, m)


def test_a_refusal_fit_reads_as_out_of_memory_is_stored_as_such(tmp_path, monkeypatch):
    """fit went on past oneDNN's refusal under the limit as past a batch that did not fit (305db77), but the try stayed
    stored 'unsupported' ('fp32: no fp32 kernel ...'): dlperf table and its notes said unsupported, list --runs
    '3 ok, 1 unsupported', where fit said 'batch 8 runs out of memory'. It is stored as fit reads it."""
    from contextlib import nullcontext
    from dataclasses import replace
    from types import SimpleNamespace

    from dlperf.fit import Options, Search, _spec
    from dlperf.report.run_list import cells_text
    from dlperf.store import Store
    from dlperf.workloads import BUILTIN

    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))  # the kept figures' cache: none of the shared one's
    store = Store.open(tmp_path / "f.db", create=True)
    spec = replace(_spec(Options("tiny-fcn-r"), 1), max_memory=316 * 2**20)
    workload = replace(BUILTIN["tiny-fcn-r"], batch=4)
    plan = SimpleNamespace(env={}, cores=2)
    search = Search(store, spec, plan, workload, 1, lambda items: nullcontext(), ["dlperf", "fit"])
    fake = Refused(store, fits_up_to=7)
    monkeypatch.setattr(search.session, "measure", lambda tasks, *a, **k: fake.measure(search.session, tasks))
    answer = search.search("fp32", 4, 64)
    assert answer.largest == 7 and answer.ended == "boundary"
    stored = {c.batch: c for c in store.cells(search.session.run_id)}
    assert stored[8].status.value == "failed" and stored[8].error == answer.tries[1].reason
    assert stored[8].error.startswith("out of memory at batch 8 under --max-memory 316 MiB: oneDNN refused")
    [m] = store.measurements(search.session.run_id, stored[8].key)
    assert (m.status.value, m.error) == ("failed", stored[8].error)
    row = {"cells": store.cell_counts()[1], "out_of_memory": store.out_of_memory_counts().get(1, 0)}
    assert cells_text(row) == "3 ok, 1 out of memory"  # batches 4, 8 (refused), 6, 7
    store.close()


def test_a_refusal_stored_as_an_interrupt_came_is_still_stored_as_out_of_memory(tmp_path, monkeypatch):
    """An interrupt that comes while the sweep stores a try is raised once the try is stored (`lifeline.held`), so
    fit's restating of a refusal under the limit (b66fd96) never ran: batch 8, refused after batch 4 fitted, stayed
    'unsupported: fp32: no fp32 kernel for this op' in the table, list --runs and the report ('the search stopped,
    batch 8 unsupported'). The interrupted search stores the try it cut short as fit reads it."""
    from contextlib import nullcontext
    from dataclasses import replace
    from types import SimpleNamespace

    from dlperf.fit import Options, Search, _spec
    from dlperf.runner.sweep import Interrupted
    from dlperf.store import Store
    from dlperf.workloads import BUILTIN

    monkeypatch.setenv("DLPERF_DATA_DIR", str(tmp_path / "data"))
    store = Store.open(tmp_path / "f.db", create=True)
    opts = Options("tiny-fcn-r", max_memory=316 * 2**20, max_batch=64)
    spec = replace(_spec(opts, 1), max_memory=opts.max_memory)
    search = Search(store, spec, SimpleNamespace(env={}, cores=2), replace(BUILTIN["tiny-fcn-r"], batch=4), 1,
                    lambda items: nullcontext(), ["dlperf", "fit"])  # fmt: skip
    fake = Refused(store, fits_up_to=7)

    def measure(tasks, *a, **k):
        fake.measure(search.session, tasks)
        if search.session.workloads[tasks[0].cell.key]["batch"] == 8:  # Ctrl-C while it was stored, as the sweep does
            store.set_run_status(search.session.run_id, "interrupted")
            raise Interrupted

    monkeypatch.setattr(search.session, "measure", measure)
    assert search.run(opts) == 130
    assert search.answers["fp32"].trying == 8 and search.answers["fp32"].ended == "interrupted"
    stored = {c.batch: c for c in store.cells(search.session.run_id)}
    assert stored[8].status.value == "failed", stored[8].error
    assert stored[8].error.startswith("out of memory at batch 8 under --max-memory 316 MiB: oneDNN refused")
    assert store.run(search.session.run_id).status == "interrupted"
    store.close()
