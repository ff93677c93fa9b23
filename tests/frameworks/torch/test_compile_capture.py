"""torch.compile of a model with an nn.LSTM: Dynamo traces it (allow_rnn, for the compile mode's calls alone), and a
compile cell whose first step captured no graph is `unsupported`, not eager steps under the compile label.

QA found `--modes compile` on tiny-lstm stored compile_s 0.09, graphs 0: Dynamo skips a frame that calls an nn.LSTM
while `torch._dynamo.config.allow_rnn` is False (torch's default), so the step ran eager."""

import pytest

from conftest import require

torch = require("torch")

from torch._dynamo.utils import counters  # noqa: E402

from dlperf.frameworks.torch import build as tbuild  # noqa: E402
from dlperf.frameworks.torch.step import NO_GRAPH  # noqa: E402
from dlperf.workloads.shi2016 import BUILTIN  # noqa: E402

LSTM = BUILTIN["tiny-lstm"]


@pytest.fixture(autouse=True)
def fresh_dynamo():
    """As in a cell's process: Dynamo has compiled nothing before the first step (its counters are process-wide)."""
    torch._dynamo.reset()
    counters.clear()
    yield
    torch._dynamo.reset()
    counters.clear()


def test_a_compiled_step_that_captured_no_graph_is_unsupported():
    step = tbuild.build(LSTM, "cpu", "fp32")
    step.compiles = step.check_capture = True  # as `_compile` leaves it, with a forward Dynamo never sees
    with pytest.raises(NotImplementedError, match=f"^{NO_GRAPH}$"):
        step.step()


def test_no_graph_under_checkpoint_says_the_checkpoint_is_why():
    """fused+checkpoint+compile read 'compile: ... captured no graph' though fused+compile captured one on the model:
    torch.utils.checkpoint's checkpoint_sequential, which the checkpoint mode's forward calls, is what Dynamo skips."""
    step = tbuild.build(BUILTIN["tiny-fcn-r"], "cpu", "fp32")
    step.compiles = step.check_capture = True
    step.mode_settings["checkpoint"] = {"module": "(model)", "blocks": 4, "segments": 2}  # as recompute.apply sets it
    with pytest.raises(NotImplementedError, match=r"with checkpoint its forward goes through torch\.utils\.checkpoint"):
        step.step()


def test_a_compiled_step_that_captured_a_graph_goes_on():
    step = tbuild.build(LSTM, "cpu", "fp32")
    step.compiles = step.check_capture = True
    counters["stats"]["unique_graphs"] = 1  # what Dynamo counts for a model it compiled
    assert torch.isfinite(step.step()) and torch.isfinite(step.step())
    assert not step.check_capture


def test_without_allow_rnn_the_lstm_compile_cell_is_unsupported_not_eager(monkeypatch):
    """torch's default, as before the fix: nothing compiles (a fraction of a second), and the first step says so."""
    monkeypatch.setattr(tbuild, "_rnn_allowed", lambda compiled: compiled)
    step = tbuild.build(LSTM, "cpu", "compile")
    with pytest.raises(NotImplementedError, match=f"^{NO_GRAPH}$"):
        step.step()
    assert counters["stats"]["unique_graphs"] == 0


def test_allow_rnn_is_on_for_the_compiled_lstms_calls_alone():
    assert tbuild._rnn_allowed(lambda: torch._dynamo.config.allow_rnn)() is True
    assert torch._dynamo.config.allow_rnn is False  # the process's own setting is torch's default still
    assert tbuild.build(LSTM, "cpu", "compile").mode_settings["dynamo_allow_rnn"] is True  # built, not compiled yet
    assert "dynamo_allow_rnn" not in tbuild.build(BUILTIN["tiny-fcn-r"], "cpu", "compile").mode_settings


@pytest.mark.slow  # a compile of tiny-lstm: 50-100 s on 2 shared cores with an empty Inductor cache
def test_the_lstm_compiles_and_trains_as_eager():
    """Dynamo captures the LSTM's step (forward, and backward through AOTAutograd), and the losses are eager's."""
    eager, compiled = tbuild.build(LSTM, "cpu", "fp32"), tbuild.build(LSTM, "cpu", "compile")
    losses = [[s.step().item() for _ in range(4)] for s in (eager, compiled)]
    stats = compiled.compile_stats()
    assert stats["graphs"] >= 1 and stats["graph_breaks"] == 0, stats
    assert counters["aot_autograd"]["ok"] >= 1  # the backward is compiled, not run by eager autograd
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
