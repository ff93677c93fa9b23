"""`dlperf predict --memory` of a 36-parameter nn.Linear showed its gradients as 0 B. The figure is right: the step
peaks in backward at the loss's gradient, before any parameter's gradient is made (the last step's were freed by
zero_grad(set_to_none=True) as it started); torch.profiler's own memory timeline of the same step on real CPU tensors
puts no byte in its GRADIENT category at its peak, and the same bytes as dlperf in the others. The table now says
why."""

from conftest import require

torch = require("torch")

from test_user_mistakes import user  # noqa: E402
from torch.profiler import ProfilerActivity, profile  # noqa: E402
from torch.profiler._memory_profiler import Action, Category  # noqa: E402

from dlperf.frameworks.torch import memcount  # noqa: E402
from dlperf.predict import memory  # noqa: E402
from dlperf.report import memory as view  # noqa: E402

FILE = """
import torch

import dlperf


def batch(b, device):
    return torch.randn(b, 8, device=device), torch.randint(0, 4, (b,), device=device)


def make():
    return dlperf.user_workload("lin36", torch.nn.Linear(8, 4), batch, torch.nn.functional.cross_entropy,
                                batch_size=32)
"""


def profiled_peak() -> dict[Category | None, int]:
    """The bytes by torch.profiler's category at the peak of one steady step of the same model, on real tensors."""
    model = torch.nn.Linear(8, 4)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, foreach=True)
    x, y = torch.randn(32, 8), torch.randint(0, 4, (32,))

    def step():
        optimizer.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        optimizer.step()

    step()
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True, record_shapes=True, with_stack=True) as prof:
        step()
    timeline = prof._memory_profile()
    live, peak, at = {}, 0, {}
    for _, action, (key, version), size in timeline.timeline:
        if action == Action.DESTROY:
            live.pop((key, version), None)
            continue
        if action == Action.INCREMENT_VERSION:
            live.pop((key, version - 1), None)
        live[(key, version)] = (timeline._categories.get(key, version), size)
        if (now := sum(s for _, s in live.values())) > peak:
            peak, at = now, {}
            for category, s in live.values():
                at[category] = at.get(category, 0) + s
    return at


def test_a_small_linears_gradients_are_none_at_its_peak_as_torch_profiler_counts_them(tmp_path):
    (tmp_path / "lin36.py").write_text(FILE)
    [traced] = memcount.memory_count(user(f"{tmp_path / 'lin36.py'}:make"), "fp32", [32])
    at = profiled_peak()
    assert traced["grads"] == at.get(Category.GRADIENT, 0) == 0
    batch = 32 * 8 * 4 + 32 * 8  # the inputs (fp32) and the targets (int64)
    assert (traced["params"], traced["data"]) == (at[Category.PARAMETER], at[Category.INPUT]) == (144, batch)
    rest = sum(s for c, s in at.items() if c not in (Category.PARAMETER, Category.INPUT))
    assert traced["activations"] == rest and traced["peak"] == sum(at.values())


def line(mode: str, grads: int) -> memory.Line:
    def peak(batch):
        return memory.Peak("lin36", mode, batch, 144, grads, 0, 1280 * batch // 32, 1544 * batch // 32)

    return memory.Line(peak(32), peak(64))


def test_the_table_says_why_gradients_are_0_b_at_the_peak():
    said = view.notes({"fp32": line("fp32", 0), "bf16": line("bf16", 0), "checkpoint": "not predicted"})
    assert said[1] == ("gradients 0 B (fp32, bf16): the step peaks before any parameter's gradient is made (the "
                       "last step's are freed as it starts, zero_grad(set_to_none=True)), so none is alive "
                       "then")  # fmt: skip
    assert not [n for n in view.notes({"fp32": line("fp32", 144)}) if n.startswith("gradients")]
