"""What every backend shares (`frameworks/common/`), checked with stand-in steps: no framework is imported."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from dlperf.frameworks.common import comm, losscheck, profiling, speed
from dlperf.frameworks.common.strategy import StrategyStep
from dlperf.measure.timer import timed_step
from dlperf.vocab import Category
from dlperf.workloads import BUILTIN

# ----------------------------------------------------------------------------------------------------------------------
# Exposed communication


@pytest.mark.parametrize(
    ("local_s", "step_s", "share", "bound"),
    [(1.0, 4.0, 0.75, "communication"), (3.0, 4.0, 0.25, "compute"), (2.0, 4.0, 0.5, "communication"),
     (5.0, 4.0, 0.0, "compute"), (0.0, 0.0, None, None)],
)  # fmt: skip
def test_the_exposed_share_says_what_bounds_the_step(local_s, step_s, share, bound):
    figures = comm.figures(local_s, step_s)
    assert (figures.local_step_s, figures.step_s) == (local_s, step_s)
    assert figures.exposed_comm_s == max(0.0, step_s - local_s) and figures.comm_share == share
    assert figures.bound == bound and (bound is None or isinstance(figures.bound, str))


def test_a_pipeline_is_bound_by_its_pipeline():
    assert comm.figures(1.0, 4.0, comm.CommBound.PIPELINE).bound == "pipeline"


class Clock:
    """Steps that take a set time by a clock the one timer reads, and a log of what ran."""

    def __init__(self, monkeypatch) -> None:
        self.now, self.log = 0.0, []
        monkeypatch.setattr(comm, "timed_step", lambda step, sync: timed_step(step, sync, clock=lambda: self.now))
        monkeypatch.setattr(profiling, "time", SimpleNamespace(perf_counter=lambda: self.now))

    def step(self, name: str, seconds: float):
        def run() -> None:
            self.log.append(name)
            self.now += seconds

        return run, lambda: self.log.append(f"sync {name}")


def test_the_steps_alternate_each_after_the_barrier_and_the_medians_are_agreed(monkeypatch):
    clock = Clock(monkeypatch)
    agreed = []

    def agree(local_s: float, step_s: float) -> tuple[float, float]:  # as if another process's step took twice as long
        agreed.append((local_s, step_s))
        return local_s, 2 * step_s

    barrier = lambda: clock.log.append("|")  # noqa: E731
    exposed = comm.measure(clock.step("local", 1.0), clock.step("together", 3.0), before=barrier, agree=agree)
    pair = ["|", "sync local", "local", "sync local", "|", "sync together", "together", "sync together"]
    assert clock.log == pair * comm.LOCAL_STEPS
    assert agreed == [(1.0, 3.0)]
    assert (exposed.local_step_s, exposed.step_s, exposed.exposed_comm_s) == (1.0, 6.0, 5.0)


def test_one_process_keeps_its_own_medians(monkeypatch):
    clock = Clock(monkeypatch)
    exposed = comm.measure(clock.step("local", 2.0), clock.step("together", 2.5))
    assert (exposed.local_step_s, exposed.step_s, exposed.bound) == (2.0, 2.5, "compute")
    assert clock.log.count("local") == clock.log.count("together") == comm.LOCAL_STEPS


# ----------------------------------------------------------------------------------------------------------------------
# The strategies' base


class Inner:
    params = 1_000

    def __init__(self) -> None:
        self.calls: list[str] = []

    def iteration(self) -> float:
        self.calls.append("iteration")
        return 1.5

    def sync(self) -> None:
        self.calls.append("sync")

    def state_tensors(self) -> dict[str, list]:
        return {"params": ["p"], "grads": [], "optimizer": []}

    def memory_of_step(self) -> dict[str, int]:
        return {"live_tensor_peak_bytes": 7}

    def count_flops(self) -> dict | None:
        return {"flops_per_step": 100, "flops_by_dtype": {"fp32": 100}}

    def settings(self) -> dict:
        return {"torch_threads": 1}


class Group:
    backend, world = "gloo", 4


class Sharded(StrategyStep):
    def communication(self) -> dict:
        return {"step_s": 1.0}

    def strategy_settings(self) -> dict:
        return {"plan": "rows"}


def test_a_strategy_forwards_to_the_step_it_wraps():
    inner = Inner()
    train = Sharded(Group(), inner.params, inner)
    assert (train.params, train.compiles, train.step()) == (1_000, False, 1.5)
    train.sync()
    assert inner.calls == ["iteration", "sync"]
    assert train.state_tensors()["params"] == ["p"] and train.memory_of_step() == {"live_tensor_peak_bytes": 7}
    assert train.settings() == {"torch_threads": 1, "ddp_backend": "gloo", "world_size": 4, "plan": "rows"}


def test_a_strategys_flops_are_every_computing_ranks_and_none_without_a_count():
    inner = Inner()
    assert Sharded(Group(), 1, inner).count_flops() == {"flops_per_step": 400, "flops_by_dtype": None}

    class OneComputes(Sharded):
        computing_ranks = 1

    assert OneComputes(Group(), 1, inner).count_flops() == {"flops_per_step": 100, "flops_by_dtype": None}
    inner.count_flops = lambda: None
    assert Sharded(Group(), 1, inner).count_flops() is None


def test_a_strategy_must_say_where_its_time_goes():
    class Silent(StrategyStep):
        pass

    with pytest.raises(TypeError, match="communication"):
        Silent(Group(), 1, Inner())


# ----------------------------------------------------------------------------------------------------------------------
# The planning probe's products


def test_each_dtypes_product_is_timed_in_turns_and_its_best_against_fp32s(monkeypatch):
    now, log = [0.0], []
    monkeypatch.setattr(speed, "time", SimpleNamespace(perf_counter=lambda: now[0]))
    # fp32 takes 1 s, 9 s once (the host stalled in round 2); bf16 takes 4 s, fp16 0.5 s
    taken = {"fp32": iter([3.0, 1.0, 9.0, 1.0]), "bf16": iter([7.0, 4.0, 4.0, 4.0]), "fp16": iter([2.0, 0.5, 0.5, 0.5])}

    def product(dtype):
        def run():
            log.append(dtype)
            now[0] += next(taken[dtype])

        return run

    got = speed.relative_speed({d: product(d) for d in taken}, rounds=3)
    assert got == {"bf16": 0.25, "fp16": 2.0}
    assert log == ["fp32", "bf16", "fp16"] * 4  # each once untimed (its kernel prepared), then in turns
    with pytest.raises(ValueError, match="fp32"):
        speed.relative_speed({"bf16": product("bf16")}, rounds=3)


# ----------------------------------------------------------------------------------------------------------------------
# The profilers' scaffold


def test_the_window_times_the_steps_and_syncs_once_at_the_end(monkeypatch):
    clock = Clock(monkeypatch)
    step, sync = clock.step("step", 0.5)
    assert profiling.window(step, sync, 4) == 0.5
    assert clock.log == ["step"] * 4 + ["sync step"]
    each: list[float] = []
    assert profiling.window(step, sync, 3, each) == 0.5 and each == [0.5] * 3


def test_one_disturbed_step_of_the_profiled_window_is_said():
    """One step of five descheduled (16 ms of loss among 0.1 ms ones) made tiny-alexnet-r's profile read pooling 44%
    and loss 18%, memory-bound, where two fresh profiles read compute-bound; nothing said the window was uneven."""
    assert profiling.uneven([0.010, 0.011, 0.0105, 0.012, 0.0115]) is None
    assert profiling.uneven([0.010, 0.2]) is None  # too few to tell
    said = profiling.uneven([0.0257, 0.194, 0.0157, 0.0062, 0.0105])
    assert said == ("uneven profile: one of the 5 profiled steps took 194 ms, 12.4x their median of 15.7 ms "
                    "(disturbed: another process on the cores?), and the shares above count it as a typical step; "
                    "profile again for a steady one")  # fmt: skip


def test_the_top_operators_are_the_most_time_first_and_at_most_top_ops():
    spent = {f"op{i}": float(i) for i in range(profiling.TOP_OPS + 5)}
    assert profiling.ranked(spent) == [f"op{i}" for i in range(profiling.TOP_OPS + 4, 4, -1)]
    assert profiling.ranked({"a": 1.0, "b": 3.0}) == ["b", "a"]


def test_a_trace_above_the_cap_is_not_kept_and_a_note_says_why():
    notes: list[str] = []
    assert profiling.within_cap(100, 100, notes) and notes == []
    assert not profiling.within_cap(101, 100, notes)
    assert notes == [
        "no trace kept: 101 bytes compressed, above the cap of 100 bytes (9.5e-05 MiB: --max-trace-mib "
        "raises it); the figures above are the whole profile's"
    ]


def test_the_categories_fill_the_step():
    assert profiling.fill_to_step({"matmul": 1.0, "copy": 0.0}, 2.0, Category.HOST) == {"matmul": 1.0, "host": 1.0}
    assert profiling.fill_to_step({"matmul": 3.0, "loss": 1.0}, 2.0, Category.IDLE) == {
        "matmul": 1.5, "loss": 0.5, "idle": 0.0,
    }  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------------
# The loss check's comparison


def test_the_mode_trains_first_then_the_reference_and_the_judgement_is_the_json():
    order = []

    def judge(reference, mode):
        order.append(("judge", reference, mode))
        return losscheck.Judgement(False, "it diverged", {"steps": 8, "mode_losses": [1.0]})

    result = losscheck.compare(lambda: order.append("mode") or "m", lambda: order.append("ref") or "r", judge)
    assert order == ["mode", "ref", ("judge", "r", "m")]
    assert list(result) == ["ok", "reason", "steps", "mode_losses", "seconds"]
    assert result["ok"] is False and result["reason"] == "it diverged" and result["seconds"] >= 0


def test_the_curves_are_compared_by_their_fall():
    assert losscheck.fall([4.0, 2.0, 3.0]) == 2.0  # to the lowest, not the last: momentum bounces
    assert losscheck.progress([4.0, 2.0], [4.0, 3.0]) == 0.5
    assert losscheck.progress([4.0, 4.0], [4.0, 3.0]) is None and losscheck.progress([4.0, 2.0], []) is None
    assert losscheck.first_not_finite([1.0, float("nan"), float("inf")]) == 1
    assert losscheck.first_not_finite([1.0, 2.0]) is None


def test_the_check_trains_on_a_small_batch():
    assert losscheck.small(BUILTIN["fcn-r"]).batch == losscheck.BATCH
    assert losscheck.small(BUILTIN["fcn-r"], batch=10**9).batch == BUILTIN["fcn-r"].batch


# ----------------------------------------------------------------------------------------------------------------------
# The bf16 check of the backends whose parameters read as numpy arrays (jax, tensorflow)


def test_weights_round_to_the_nearest_bf16_ties_to_even():
    from dlperf.frameworks.precision import to_bf16

    one = 1.0
    values = np.array([one, one + 2**-8, one + 3 * 2**-8, one + 2**-8 + 2**-20, -(one + 2**-9), 3.0e-40], np.float32)
    # a tie goes to the even neighbour (1.0; 1 + 2**-6), anything above a tie goes up, below it down
    want = np.array([one, one, one + 2**-6, one + 2**-7, -one, 0.0], np.float32)
    rounded = to_bf16(values)
    assert rounded.dtype == np.float32 and (rounded.view(np.uint32) & 0xFFFF).max() == 0
    assert rounded[:5].tolist() == want[:5].tolist()
    assert abs(rounded[5]) < 1e-39  # a subnormal keeps its top bits: within bf16's own subnormals


class Quadratic:
    """A stand-in step: gradient descent on sum((w - 1)^2), weights from `seed`, its rate `lr`."""

    def __init__(self, seed: int, lr: float = 0.1) -> None:
        self.w, self.lr = [np.random.default_rng(seed).normal(size=(3, 4)).astype(np.float32)], lr

    def step(self) -> float:
        w = self.w[0]
        self.w = [w - self.lr * 2 * (w - 1)]
        return float(((w - 1) ** 2).sum())


def test_the_bf16_check_passes_the_same_training_and_fails_a_tripled_rate():
    from dlperf.frameworks import precision

    def read(step):
        return [a.copy() for a in step.w]

    def write(step, values):
        step.w = [a.copy() for a in values]

    same = precision.check(Quadratic, Quadratic, read=read, write=write)
    assert same["ok"] is True and same["cosine"] == pytest.approx(1.0) and same["size_ratio"] == pytest.approx(1.0)
    assert same["changed_fraction"] == same["fp32_changed_fraction"] == 1.0 and len(same["spread_losses"]) == 2
    assert 0.99 < same["rounding_cosine"] < 1.0  # rounding the weights to bf16 turns the first update a little
    tripled = precision.check(Quadratic, lambda seed: Quadratic(seed, lr=0.3), read=read, write=write)
    assert tripled["ok"] is False and tripled["reason"].startswith("first update is 3x the size of fp32's")
