"""A search's budget estimates its next processes from its own: a sibling group's first process counts the FLOPs and
measures the memory step (fcn-r at 1 thread: 9.2 s of a 34 s process, later ones none), so it is no guide to a
later one; a new mode's first process runs them again, once."""

from types import SimpleNamespace

import pytest

from dlperf.runner.session import COMPILE_GUESS_S, Budget, extras_s, later

FIRST = (20.0, {"startup_s": 0.5, "timed_s": 5.0, "flops_s": 4.0, "memory_s": 5.0})
LATER = (10.0, {"startup_s": 0.2, "timed_s": 5.0})


def _budget(lives: dict[str, list[tuple[float, dict]]], modes: dict[str, str]) -> Budget:
    cells = [SimpleNamespace(key=key, mode=mode) for key, mode in modes.items()]
    return Budget(600.0, SimpleNamespace(lives=lambda: lives, cells=lambda: cells))


def test_a_later_process_is_estimated_from_the_later_ones():
    assert later([FIRST, LATER]) == [10.0]
    assert later([FIRST]) == [11.0]  # none later yet: the first less its extras
    assert _budget({"a": [FIRST, LATER]}, {"a": "fp32"}).per_process() == 10.0  # the median of both was 15 s


def test_each_new_mode_is_charged_its_first_process_extras_once():
    budget = _budget({"a": [FIRST, LATER, LATER]}, {"a": "fp32"})
    assert extras_s([FIRST, LATER, LATER]) == 9.0
    # the baseline's extra process, then per mode: 2 processes of 10 s and the first one's 9 s of extras
    assert budget.modes_s(["bf16", "fused"], 2) == 10.0 + 2 * (2 * 10.0 + 9.0)


def test_extras_kept_from_an_earlier_run_are_charged_nothing():
    assert extras_s([LATER, LATER]) == 0.0
    assert _budget({"a": [LATER]}, {"a": "fp32"}).modes_s(["bf16"], 3) == 10.0 + 3 * 10.0


def test_the_wait_for_a_warm_parent_is_no_process_cost():
    """optimize fcn-r, 1 thread: the baseline's second process waited 15.4 s for the warm parent's import of torch
    (its start; 0.1-0.2 s the others'), once a run: not what a candidate's process will take."""
    waited = (26.3, {"startup_s": 15.4, "timed_s": 5.0})
    lives = [FIRST, waited, (11.3, {"startup_s": 0.14}), (9.2, {"startup_s": 0.12})]
    usual = (0.14 + 0.5) / 2  # the median start of the four
    assert later(lives) == pytest.approx([26.3 - (15.4 - usual), 11.3, 9.2])
    assert _budget({"a": lives}, {"a": "fp32"}).per_process() == pytest.approx(26.3 - (15.4 - usual))  # not 26.3


def test_each_mode_is_charged_the_processes_of_the_mode_it_builds_on_not_fp32s():
    """optimize alexnet-r@b256, 2 threads: the channels_last round's processes took 5.4 s, the baseline's 4.6-12.4 s
    (its first waited for the warm parent); every candidate was charged the eager processes' median (6.3 s), fp32's
    mostly, so channels_last+foreach and +fused were charged 48.4 s for a round that took 32.1 s (42.5 s now)."""
    fp32, fast = (12.0, {"startup_s": 0.1}), (4.0, {"startup_s": 0.1})
    budget = _budget({"a": [fp32, fp32, fp32], "b": [fast, fast]}, {"a": "fp32", "b": "bf16"})
    assert budget.modes_s(["bf16+channels_last"], 2) == 12.0 + 2 * 4.0  # the baseline's extra process is fp32's
    assert budget.modes_s(["channels_last"], 2) == 12.0 + 2 * 12.0  # it builds on fp32
    assert budget.modes_s(["bf16"], 1) == 12.0 + 4.0  # measured: its own
    assert budget.modes_s(["bf16+compile"], 1) == 12.0 + 4.0 + COMPILE_GUESS_S  # no compiled process yet
    assert budget.per_process("bf16") == 4.0 and budget.per_process("fp32") == 12.0  # a loader setting of bf16's
    assert budget.per_process() == 12.0 and budget.per_process("fused") == 12.0  # all of them: none of its own
