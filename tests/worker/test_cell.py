"""The cell worker, in process, on a fake backend: what it reports when the framework's optional analyses fail."""

from __future__ import annotations

import types

import pytest

from dlperf.measure.timer import SYNCHRONIZED, HostClock, TimerConfig, pipelined, timed_step
from dlperf.protocol import (
    Built,
    Cell,
    CellTask,
    Done,
    Flops,
    Memory,
    Reporter,
    Sample,
    Sampled,
    all_of,
    first,
    read_events,
)
from dlperf.runner.collect import cell_figures, measurement
from dlperf.runner.launch import ChildResult
from dlperf.worker import cell as worker
from dlperf.workloads import BUILTIN


class Step:
    """A train step whose counters fail as XLA's did on CUDA (jax 0.11.2: cost_analysis() gave None)."""

    params, compiles = 10, False

    def step(self):
        return 0.0

    def sync(self):
        pass

    def device_clock(self):
        return None

    def compile_stats(self):
        return {}

    def count_flops(self):
        raise TypeError("'NoneType' object is not subscriptable")

    def memory_of_step(self):
        raise RuntimeError("no memory analysis on this backend")

    def settings(self):
        return {}


def fake_backend(monkeypatch, step: type = Step) -> None:
    module = types.SimpleNamespace(
        configure_threads=lambda n: {"threads": n}, build=lambda w, d, m: step(), version=lambda: "0.0"
    )
    monkeypatch.setattr(worker, "backend", lambda framework: module)


def test_optional_analyses_that_fail_give_no_figure_and_a_note_never_a_failed_cell(monkeypatch):
    fake_backend(monkeypatch)
    task = CellTask(Cell("tiny-fcn-r", "fake", "cpu", 1, "fp32"), 0, BUILTIN["tiny-fcn-r"].to_json(),
                    TimerConfig(min_steps=3, min_time=0, max_time=0.2, max_warmup=2))  # fmt: skip
    events = []
    worker.measure(task, events.append)
    assert first(events, Built).settings["timing"] == SYNCHRONIZED  # a CPU step: no clock of the device's own
    flops, memory = first(events, Flops), first(events, Memory)
    assert flops.flops_per_step is None and "no FLOP count" in flops.note and "NoneType" in flops.note
    assert memory.figures == {} and "no memory figure" in memory.note
    assert first(events, Done) is not None and first(events, Sample) is not None
    m = measurement(events, ChildResult(0, False, 1.0, ""), timeout=60)
    assert m.status == "ok" and m.detail.flops_per_step is None
    figures = cell_figures([m], batch=16, threads=1, cores=2, device="cpu")
    assert figures.status == "ok" and any(w.startswith("no FLOP count") for w in figures.warnings)


class Diverged(Step):
    """A step whose loss is nan from the first step on, as a model whose weights became nan trains."""

    def step(self):
        return float("nan")


@pytest.mark.parametrize(("step", "loss"), [(Step, 0.0), (Diverged, "nan")])
def test_a_step_whose_loss_is_not_finite_keeps_its_time_and_is_marked(monkeypatch, step, loss):
    """Issue 30: an fp32 cell whose loss was nan read `ok`, and the table said nothing. Its time is kept (the cell
    stays ok, its samples stored) and it is marked: the last timed step's loss, and a warning the table shows."""
    fake_backend(monkeypatch, step)
    task = CellTask(Cell("tiny-fcn-r", "fake", "cpu", 1, "fp32"), 0, BUILTIN["tiny-fcn-r"].to_json(),
                    TimerConfig(min_steps=3, min_time=0, max_time=0.2, max_warmup=2))  # fmt: skip
    events = []
    worker.measure(task, events.append)
    assert first(events, Sampled).loss == loss
    m = measurement(events, ChildResult(0, False, 1.0, ""), timeout=60)
    assert m.status == "ok" and m.samples and m.detail.loss == loss
    figures = cell_figures([m], batch=16, threads=1, cores=2, device="cpu")
    assert figures.status == "ok" and figures.median_s is not None
    warned = [w for w in figures.warnings if w.startswith("loss not finite")]
    assert figures.loss_finite is (loss != "nan") and len(warned) == (loss == "nan")
    assert not warned or warned[0].startswith("loss not finite: nan after the timed steps")


class AsyncDevice:
    """A simulated asynchronous device (as CUDA is) with simulated time, so the test is exact and instant: a step
    costs the host `host_s` to launch and the device `device_s` to run, and the device runs a step once it has
    been launched and the device is free. Its marks are the times the device reaches them (CUDA events)."""

    def __init__(self, host_s: float, device_s: float):
        self.host_s, self.device_s = host_s, device_s
        self.now = 0.0  # the host's clock
        self.free_at = 0.0  # when the device finishes what it has been given

    def step(self):
        self.now += self.host_s  # launching
        self.free_at = max(self.free_at, self.now) + self.device_s

    def sync(self):
        self.now = max(self.now, self.free_at)

    # the DeviceClock protocol
    def mark(self):
        return max(self.free_at, self.now)

    def seconds(self, start, end):
        self.now = max(self.now, end)  # waits until the device reaches `end`
        return end - start


class AsyncStep(Step):
    def __init__(self, device: AsyncDevice):
        self.device = device

    def step(self):
        self.device.step()

    def sync(self):
        self.device.sync()

    def device_clock(self):
        return self.device


@pytest.mark.parametrize(("host_s", "device_s"), [(5.0, 5.0), (2.0, 5.0), (5.0, 2.0)])
def test_a_device_with_its_own_clock_is_timed_as_a_training_loop_runs_it_not_synchronized_every_step(host_s, device_s):
    """Issue 14: on an H100 dlperf's LSTM step took 5.92 ms against 4.98 ms in a plain loop, 1.19x; the conv nets
    1.07x at most. Syncing every step adds the host's launch time to the device's where the two are close, as with an
    LSTM's many small kernels. A plain loop's step takes max(host, device) in steady state; that is what is timed."""
    plain = AsyncDevice(host_s, device_s)
    for _ in range(100):
        plain.step()
    plain.sync()
    loop_step = plain.now / 100  # a plain training loop: no sync until the end
    assert loop_step == pytest.approx(max(host_s, device_s), rel=0.01)
    run = worker.step_timer(AsyncStep(AsyncDevice(host_s, device_s)))
    times = [run() for _ in range(20)]
    assert times[5:] == [pytest.approx(loop_step, rel=0.01)] * 15
    synced = AsyncDevice(host_s, device_s)
    bracketed = timed_step(synced.step, synced.sync, clock=lambda: synced.now)
    assert bracketed == pytest.approx(host_s + device_s)  # what syncing every step measured


class HostSeen(Step):
    """JAX's way: a step is dispatched and returns its output at once; the host can only wait for an output to be
    ready (no events in the device's queue). Here an output is the time the device finishes that step."""

    def __init__(self, device: AsyncDevice):
        self.device, self.output = device, None

    def step(self):
        self.device.step()
        self.output = self.device.free_at
        return self.output

    def sync(self):
        self.device.sync()

    def wait(self, output):
        self.device.now = max(self.device.now, output)

    def device_clock(self):
        return HostClock(lambda: self.output, self.wait, clock=lambda: self.device.now)


@pytest.mark.parametrize(("host_s", "device_s"), [(5.0, 5.0), (2.0, 5.0), (5.0, 2.0), (1.0, 9.0), (9.0, 1.0)])
def test_a_step_whose_output_the_host_sees_ready_is_timed_as_a_training_loop_runs_it(host_s, device_s):
    """JAX synchronized every step measured tiny-resnet-56 on the CPU 1.12x a plain loop and tiny-fcn-r 1.5x: its
    dispatch runs ahead of the device as CUDA's does. With the host's view of when each output is ready, the steady
    step is max(host, device), what a plain loop gets, whichever of the two is the slower."""
    run = worker.step_timer(HostSeen(AsyncDevice(host_s, device_s)))
    assert worker.timing_of(HostSeen(AsyncDevice(host_s, device_s))) == HostClock.HOW  # stored with the cell
    times = [run() for _ in range(20)]
    assert times[5:] == [pytest.approx(max(host_s, device_s), rel=0.01)] * 15
    # from an idle device: the first step's launch and run, and where the host is the slower, its launching of the
    # steps the pipeline fills with before it looks (a warm-up step: --max-warmup 0 would keep it)
    assert times[0] == pytest.approx(max(host_s + device_s, 3 * host_s))


def test_pipelined_times_every_step_in_order_and_launches_only_depth_more():
    device = AsyncDevice(1.0, 1.0)
    launched = []
    step = device.step

    def counted():
        launched.append(1)
        step()

    run = pipelined(counted, device, depth=2)
    times = [run() for _ in range(10)]
    assert len(launched) == 12 and len(times) == 10
    assert times[0] == pytest.approx(2.0)  # the first step from an idle device: its launch and its run
    assert times[1:] == [pytest.approx(1.0)] * 9


def test_a_synchronous_step_is_bracketed_by_syncs():
    calls = []

    class Synchronous(Step):
        def step(self):
            calls.append("step")

        def sync(self):
            calls.append("sync")

    worker.step_timer(Synchronous())()
    assert calls == ["sync", "step", "sync"]


class Ticks:
    """A clock that moves only when told."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_samples_are_written_a_few_times_a_second_in_one_write_each(tmp_path):
    """Between two timed steps the worker appends a float; every `every_s` the samples so far go out in one write,
    so a process killed while sampling keeps all but its last `every_s`."""
    path, clock = tmp_path / "events.jsonl", Ticks()
    batch = worker.SampleBatch(Reporter(path), every_s=0.25, clock=clock)
    for t in (0.1, 0.2, 0.3):
        batch.add(t)
        clock.now += 0.1
    assert read_events(path) == []  # 0.2 s after the last write: nothing yet
    batch.add(0.4)  # 0.3 s: out they go, together
    assert [e.t for e in read_events(path)] == [0.1, 0.2, 0.3, 0.4]
    batch.add(0.5)
    batch.flush()
    batch.flush()  # nothing new: nothing written
    assert [e.t for e in read_events(path)] == [0.1, 0.2, 0.3, 0.4, 0.5]


class FailsAtStep(Step):
    def __init__(self):
        self.steps = 0

    def step(self):
        self.steps += 1
        if self.steps > 12:
            raise RuntimeError("boom")
        return 0.0


def test_a_step_that_raises_keeps_the_samples_before_it(monkeypatch, tmp_path):
    fake_backend(monkeypatch, FailsAtStep)
    task = CellTask(Cell("tiny-fcn-r", "fake", "cpu", 1, "fp32"), 0, BUILTIN["tiny-fcn-r"].to_json(),
                    TimerConfig(min_steps=100, min_time=0, max_time=60, max_warmup=2))  # fmt: skip
    path = tmp_path / "events.jsonl"
    with pytest.raises(RuntimeError, match="boom"):
        worker.measure(task, Reporter(path))
    assert len(all_of(read_events(path), Sample)) == 10  # 12 steps, two of them warm-up


@pytest.mark.parametrize("when", ["configure_threads", "build"])
def test_a_cell_whose_backend_pins_itself_stores_the_cpus_it_ran_on(monkeypatch, when):
    """A JAX cell stored the affinity taken before its backend pinned it to its threads' CPUs ([0, 1] for a cell that
    ran on [0]; its settings' cpu_affinity was right): the affinity stored is the one the cell ran on. TensorFlow
    holds them as it builds the step, after its threads are set: the same."""
    import os

    before = sorted(os.sched_getaffinity(0))
    if len(before) < 2:
        pytest.skip("needs two CPUs to pin one of")

    def pins_itself(threads):  # as the jax backend's configure_threads does at one thread
        os.sched_setaffinity(0, before[:threads])
        return {"cpu_affinity": sorted(os.sched_getaffinity(0))}

    def holds_as_it_builds(workload, device, mode):  # as the tensorflow backend's build does at one thread
        os.sched_setaffinity(0, before[:1])
        return Step()

    fake_backend(monkeypatch)
    backend = worker.backend("fake")
    monkeypatch.setattr(backend, when, pins_itself if when == "configure_threads" else holds_as_it_builds)
    task = CellTask(Cell("tiny-fcn-r", "fake", "cpu", 1, "fp32"), 0, BUILTIN["tiny-fcn-r"].to_json(),
                    TimerConfig(min_steps=3, min_time=0, max_time=0.2, max_warmup=2))  # fmt: skip
    events = []
    try:
        worker.run_cell(task, events.append)
    finally:
        os.sched_setaffinity(0, before)
    m = measurement(events, ChildResult(0, False, 1.0, ""), timeout=60)
    assert m.detail.affinity == before[:1]
    if when == "configure_threads":
        assert first(events, Built).settings["cpu_affinity"] == before[:1]


def test_a_loss_check_not_run_gives_its_times_in_the_units_of_the_table_beside_it():
    """optimize's table printed `385 µs` in its step column and `not checked: 0.0003853 s per step is not faster than
    0.0003276 s` in its loss-check column, on the same row."""
    from dlperf.protocol import LossCheck, StopRule

    task = CellTask(Cell("tiny-fcn-r", "fake", "cpu", 1, "foreach"), 0, BUILTIN["tiny-fcn-r"].to_json(),
                    TimerConfig(), loss_check=True, check_if_faster_than_s=0.0003276)  # fmt: skip
    events = []
    worker.check_loss(task, 0.0003853, None, BUILTIN["tiny-fcn-r"], events.append)
    assert first(events, LossCheck).reason == "not checked: 385 µs per step is not faster than 328 µs"
    slow = CellTask(task.cell, 0, task.workload, task.timer, loss_check=True, stop=StopRule(0.000317, 2.0, "fp32"))
    events = []
    worker.stop_early(slow, 0.00143, events.append)
    assert first(events, LossCheck).reason == "not checked: 4.5x slower than 317 µs"


def reading(at: float, busy: float, family: float = 0.0) -> worker.Since:
    """The counters at `at`: `busy` CPU-seconds of the machine's, `family` of this process's family."""
    return worker.Since({"user": busy, "idle": 1000.0}, family, at)


def test_a_timed_window_too_short_to_read_the_load_is_read_from_the_warm_ups_start_or_said_not_read():
    """A cell timed for 0.25 s on 2 CPUs had no share of other processes' load (0.3 s needed there), which read as
    quiet while a loop held a CPU: it won the thread-count star. The warm-up's start gives a longer window; where even
    that is too short, the share is None and the reason says so, never a quiet 0."""
    need, cpus = worker.system.share_window_s(), worker.os.cpu_count() or 1
    timed, end = reading(10.0, 100.0), reading(10.0 + need / 2, 100.0 + cpus * need / 2)  # every CPU busy throughout
    share, why = worker.load(timed, end)
    assert share is None and why.startswith(f"its timed steps took {need / 2:.2f} s, under the {need:.2f} s")
    warm = reading(10.0 - need, 100.0 - cpus * need)
    assert worker.load(timed, end, warm) == (pytest.approx(1.0), None)  # the whole machine, read from the warm-up
    share, why = worker.load(timed, end, reading(9.99, 100.0 - cpus * 0.01))
    assert share is None and why.startswith("its warm-up and timed steps took")
    long_end = reading(10.0 + need, 100.0, family=0.0)
    assert worker.load(timed, long_end, warm) == (0.0, None)  # long enough alone: the timed steps' own, quiet


def test_a_cell_timed_too_briefly_says_its_load_was_not_read_and_is_marked_disturbed(monkeypatch):
    """In process, through `measure`: a cell of instant steps timed for 0.05 s stores no share and why, and its
    figures carry the note that makes it `?` and withholds a star (`charts.disturbances`)."""
    from dlperf.report.charts import disturbances
    from dlperf.vocab import LOAD_UNREAD

    fake_backend(monkeypatch)
    task = CellTask(Cell("tiny-fcn-r", "fake", "cpu", 1, "fp32"), 0, BUILTIN["tiny-fcn-r"].to_json(),
                    TimerConfig(min_steps=3, min_time=0, max_time=0.05, max_warmup=2))  # fmt: skip
    events = []
    worker.measure(task, events.append)
    sampled = first(events, Sampled)
    assert sampled.others_cpu_share is None and sampled.others_unread.startswith("its warm-up and timed steps took")
    m = measurement(events, ChildResult(0, False, 1.0, ""), timeout=60)
    figures = cell_figures([m], batch=16, threads=1, cores=2, device="cpu")
    [said] = [w for w in figures.warnings if w.startswith(LOAD_UNREAD)]
    assert said == f"{LOAD_UNREAD}: {sampled.others_unread}"
    cell = types.SimpleNamespace(warnings=figures.warnings)
    assert said in disturbances(cell)


@pytest.mark.parametrize("cpus", [2, 4, 64])
def test_a_fit_try_of_instant_steps_reads_other_processes_load(monkeypatch, cpus):
    """fit's timer timed 0.2 s, under the 0.3 s the counters need on 2 CPUs: each try of a small model was stored
    "other processes' load not read", and `dlperf table` of a fit's run marked every cell `?`, advising --min-time
    0.3. Its timer now times as long as the counters need on 2 CPUs or more."""
    from dlperf.spec import FIT_TIMER

    monkeypatch.setattr(worker.system.os, "cpu_count", lambda: cpus)
    assert FIT_TIMER.min_time >= worker.system.share_window_s()
    fake_backend(monkeypatch)
    task = CellTask(Cell("tiny-fcn-r", "fake", "cpu", 1, "fp32"), 0, BUILTIN["tiny-fcn-r"].to_json(), FIT_TIMER)
    events = []
    worker.measure(task, events.append)
    sampled = first(events, Sampled)
    assert sampled.others_unread is None and sampled.others_cpu_share is not None
