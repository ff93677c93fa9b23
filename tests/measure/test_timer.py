import itertools
import math
import random
from unittest import mock

import pytest

from dlperf.measure import timer
from dlperf.measure.timer import TimerConfig, enough, is_steady, sample, timed_step, warm_up


class FakeClock:
    """A clock that advances only when a step runs: timing logic tested without real time."""

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def stepper(clock, durations):
    it = iter(durations)

    def run():
        t = next(it)
        clock.now += t
        return t

    return run


def test_warm_up_stops_when_steady_and_counts_the_steps():
    clock = FakeClock()
    durations = [5.0, 3.0, 2.0, 1.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    result = warm_up(stepper(clock, durations), TimerConfig(max_warmup=30), clock=clock)
    assert result.steady
    # after 8 steps the window [1, 1, 1] follows [2, 1.5, 1] (median 1.5: not steady); after 9 it follows [1.5, 1, 1]
    assert result.steps == 9
    assert result.times == durations[: result.steps]


def test_warm_up_gives_up_at_max_warmup():
    clock = FakeClock()
    result = warm_up(stepper(clock, [float(2**-i) for i in range(100)]), TimerConfig(max_warmup=7), clock=clock)
    assert result.steps == 7 and not result.steady


def test_is_steady_compares_the_last_window_with_the_one_before():
    assert is_steady([9, 1.0, 1.0, 1.0, 1.02, 1.01, 0.99], window=3, tolerance=0.05)
    assert not is_steady([1.0, 1.0, 1.0, 1.2, 1.2, 1.2], window=3, tolerance=0.05)
    assert not is_steady([1.0] * 5, window=3, tolerance=0.05)  # needs two full windows


def test_sampling_stops_once_the_median_is_tight():
    clock = FakeClock()
    seen = []
    cfg = TimerConfig(min_steps=10, min_time=0.0, max_time=1e9)
    samples = sample(stepper(clock, itertools.repeat(0.01)), cfg, on_sample=seen.append, clock=clock)
    assert len(samples) == 10  # identical steps: the CI is zero-width as soon as min_steps are in
    assert seen == samples


def test_sampling_respects_min_time_and_max_time():
    clock = FakeClock()
    cfg = TimerConfig(min_steps=1, min_time=1.0, max_time=2.0)
    samples = sample(stepper(clock, itertools.repeat(0.1)), cfg, clock=clock)
    assert len(samples) == pytest.approx(10, abs=1)
    noisy = itertools.cycle([0.1, 0.3])  # never tight enough: max_time ends it
    samples = sample(stepper(clock, noisy), TimerConfig(min_steps=1, min_time=0, max_time=2.0), clock=clock)
    assert 9 <= len(samples) <= 11


def every_step(run, cfg, clock):
    """The stopping rule checked after every step, in the plainest way: what `sample` must agree with."""
    samples, start = [], clock()
    while not enough(sorted(samples), clock() - start, cfg):
        samples.append(run())
    return samples


@pytest.mark.parametrize("spread", [0.02, 0.2, 1.0])
def test_the_rule_is_checked_at_most_a_sixty_fourth_apart_and_never_stops_before_every_step_would(spread):
    """Beyond 64 samples the rule is checked each time their number has grown by 1/64: the run ends at the first
    such check where it holds, never before the first step where it does, and the checks grow with log(n)."""
    rng = random.Random(7)
    durations = [1.0 + spread * rng.random() ** 3 for _ in range(200_000)]
    cfg = TimerConfig(min_steps=10, min_time=0.0, max_time=1e9, ci_target=0.002)
    reference = every_step(stepper(FakeClock(), iter(durations)), cfg, FakeClock()) if spread < 0.5 else None
    clock, checked = FakeClock(), []
    with mock.patch.object(timer, "enough", side_effect=lambda *a: checked.append(len(a[0])) or enough(*a)):
        samples = timer.sample(stepper(clock, iter(durations)), cfg, clock=clock)
    assert samples == durations[: len(samples)] and checked[-1] == len(samples)
    assert enough(sorted(samples), clock.now, cfg)
    assert all(b - a <= max(1, a // timer.SPACING) for a, b in itertools.pairwise(checked))
    if reference is not None:
        assert len(samples) >= len(reference)
    n = len(samples)
    assert len(checked) <= timer.SPACING * (2 + math.log(max(n, timer.SPACING) / timer.SPACING)), n  # 64 per e-fold


def test_the_time_limit_is_checked_after_every_step_however_sparse_the_rule():
    clock = FakeClock()
    cfg = TimerConfig(min_steps=1, min_time=0.0, max_time=5000.2, ci_target=0.0)  # the rule never holds
    samples = sample(stepper(clock, itertools.cycle([0.5, 1.5])), cfg, clock=clock)
    assert len(samples) == 5001 and clock.now == pytest.approx(5000.5)  # the first step past the limit is the last


def test_enough_takes_a_sorted_list():
    cfg = TimerConfig(min_steps=6, min_time=0, max_time=10, ci_target=0.02)
    assert not enough([1.0] * 5, 0.1, cfg)
    assert enough([1.0] * 6, 0.1, cfg)
    assert not enough([0.5, 0.7, 1.0, 1.2, 1.5, 2.0], 0.1, cfg)
    assert enough([], 10.0, cfg)


def test_timed_step_synchronizes_on_both_sides():
    calls = []
    clock = FakeClock()

    def step():
        calls.append("step")
        clock.now += 2.0

    def sync():
        calls.append("sync")
        clock.now += 0.5  # work still queued from before the step must not count

    t = timed_step(step, sync, clock=clock)
    assert calls == ["sync", "step", "sync"]
    assert t == 2.5  # the sync after the step is part of it (the device finishing the step's work)


def test_config_rejects_nonsense_naming_the_field_as_a_python_caller_wrote_it():
    """`dlperf.TimerConfig(max_time=0.5)` said "--min-time 1 is above --max-time 0.5", flags the caller never typed,
    and not that min_time is 1 unless given."""
    with pytest.raises(ValueError) as caught:
        TimerConfig(max_time=0.5)
    assert str(caught.value) == ("TimerConfig: min_time 1 (its default) is above max_time 0.5: give a min_time of at "
                                 "most 0.5 too, or a longer max_time")  # fmt: skip
    with pytest.raises(ValueError, match=r"^TimerConfig: min_time 5 is above max_time 1: "):
        TimerConfig(min_time=5, max_time=1)
    with pytest.raises(ValueError, match=r"^TimerConfig: min_steps -1: expected a whole number, 0 or more$"):
        TimerConfig(min_steps=-1)
    with pytest.raises(ValueError, match=r"^TimerConfig: min_time nan: expected a number of seconds, 0 or more$"):
        TimerConfig(min_time=float("nan"))


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"max_time": "1"}, "max_time '1': expected a number"),  # was a TypeError from a comparison inside
        ({"min_steps": 1.5}, "min_steps 1.5: expected a whole number, 0 or more"),  # was taken
        ({"max_warmup": True}, "max_warmup True: expected a whole number, 0 or more"),
        ({"ci_target": -1}, "ci_target -1: expected a fraction, 0 or more (0.02: 2%)"),  # was taken
        ({"warmup_tolerance": float("nan")}, "warmup_tolerance nan: expected a fraction, 0 or more (0.02: 2%)"),
    ],
)
def test_config_refuses_a_value_of_the_wrong_type_or_sign_naming_the_field(given, said):
    with pytest.raises(ValueError) as caught:
        TimerConfig(**given)
    assert str(caught.value) == f"TimerConfig: {said}"


def test_config_takes_numpy_numbers():
    np = pytest.importorskip("numpy")
    config = TimerConfig(min_steps=np.int64(3), max_time=np.float32(2.0))  # held as Python's: the task's JSON
    assert (config.min_steps, config.max_time) == (3, 2.0) and type(config.min_steps) is int  # was a TypeError there
    assert type(config.max_time) is float


@pytest.mark.parametrize(
    ("flags", "blamed"),
    [
        (["--max-time", "0.5"], "--max-time 0.5 is below --min-time 1 (its default)"),
        (["--min-time", "90"], "--min-time 90 is above --max-time 60 (its default)"),
        (["--min-time", "9", "--max-time", "1"], "--min-time 9 is above --max-time 1"),
        (["--max-time", "1", "--min-time", "9"], "--min-time 9 is above --max-time 1"),
    ],
)
def test_a_time_flag_out_of_order_is_blamed_on_the_flag_given(flags, blamed, tmp_path, capsys):
    """--max-time 0 alone was refused as "--min-time must be between 0 and --max-time", a flag the user never typed."""
    from dlperf.cli import main

    assert main(["run", "--workloads", "fcn-r", *flags, "--db", str(tmp_path / "x.db")]) == 2
    [line] = capsys.readouterr().err.strip().splitlines()
    assert line.startswith(f"dlperf: error: {blamed}"), line
    assert not (tmp_path / "x.db").exists()


def test_every_command_with_the_timer_flags_blames_the_one_given(tmp_path, capsys):
    from dlperf.cli import main

    for command in (["optimize", "fcn-r"], ["profile", "fcn-r"]):  # their own defaults: --min-time 2 and 0.5
        assert main([*command, "--max-time", "0.1", "--db", str(tmp_path / "x.db")]) == 2
        assert capsys.readouterr().err.startswith("dlperf: error: --max-time 0.1 is below --min-time "), command
