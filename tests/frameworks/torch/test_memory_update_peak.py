"""`dlperf predict --memory` of a 3.2-billion-parameter MLP under AdamW at batch 32 showed 12 GiB of "activations",
where its activations are some MiB: the step peaks in the optimizer's update, and what is alive beyond the weights,
gradients, states and batch then is the foreach update's parameter-sized temporaries. bf16 and checkpointing lower
none of it ("+0%"), which the table did not say. The trace now knows when the step peaks in the update."""

from conftest import require

torch = require("torch")

from test_user_mistakes import user  # noqa: E402

from dlperf.frameworks.torch import memcount  # noqa: E402
from dlperf.predict import memory  # noqa: E402
from dlperf.report import memory as view  # noqa: E402

FILE = """
import torch

import dlperf


def batch(b, device):
    return torch.randn(b, 512, device=device), torch.randint(0, 4, (b,), device=device)


def make():
    model = torch.nn.Sequential(torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),
                                torch.nn.ReLU(), torch.nn.Linear(512, 4))
    return dlperf.user_workload("wide", model, batch, torch.nn.functional.cross_entropy, batch_size=2,
                                optimizer=lambda p: torch.optim.AdamW(p, lr=1e-4))
"""

CONV = FILE.replace("torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Linear(512, 512),",
                    "torch.nn.Unflatten(1, (2, 16, 16)), torch.nn.Conv2d(2, 64, 3, padding=1), torch.nn.Flatten(), "
                    "torch.nn.Linear(16384, 512),").replace("batch_size=2", "batch_size=256")  # fmt: skip


def test_a_step_that_peaks_in_its_update_is_said_so_and_one_that_peaks_in_backward_is_not(tmp_path):
    (tmp_path / "wide.py").write_text(FILE)
    (tmp_path / "conv.py").write_text(CONV)
    [wide] = memcount.memory_count(user(f"{tmp_path / 'wide.py'}:make"), "fp32", [2])
    assert wide["in_update"] is True
    assert wide["activations"] >= wide["params"] // 2  # parameter-sized temporaries, not a batch of 2's activations
    [conv] = memcount.memory_count(user(f"{tmp_path / 'conv.py'}:make"), "fp32", [256])
    assert conv["in_update"] is False  # 256 x 64 x 16 x 16 floats saved for backward outweigh the update's


def test_the_table_marks_the_update_s_temporaries_and_says_what_lowers_them():
    def line(mode: str, in_update: bool) -> memory.Line:
        def peak(batch):
            return memory.Peak("wide", mode, batch, 2**20, 2**20, 2**21, 4096 * batch, 2**20, in_update)

        return memory.Line(peak(2), peak(4))

    found = {"fp32": line("fp32", True), "bf16": line("bf16", True)}
    said = view.notes(found)
    assert said[1] == f"activations (update) (fp32, bf16): {view.UPDATE_PEAK}"
    assert "a fused one (fused=True) holds fewer" in view.UPDATE_PEAK
    verdicts = {m: [] for m in found}
    assert view.lines(found, verdicts) == ["bf16 against fp32: the update's temporaries +0%, peak +0%"]
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(view.parts_table(type("W", (), {"name": "wide", "batch": 2}), found))
    assert "│ 1 MiB (update) │" in console.export_text()
    plain = {"fp32": line("fp32", False)}
    assert not [n for n in view.notes(plain) if "(update)" in n]


def test_the_update_is_traced_in_the_implementation_the_optimizer_was_given():
    """A user's `AdamW(fused=True)` was traced as foreach, its parameter-sized temporaries counted (1 GiB of a 2M-row
    embedding's); `foreach=False` updates one tensor at a time. Where none is given, foreach: CUDA's default."""
    import tempfile
    from pathlib import Path

    peaks = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, given in (("default", ""), ("fused", "fused=True"), ("loop", "foreach=False")):
            path = Path(folder) / f"{name}.py"
            path.write_text(FILE.replace("lr=1e-4", f"lr=1e-4, {given}" if given else "lr=1e-4"))
            [found] = memcount.memory_count(user(f"{path}:make"), "fp32", [2])
            assert "error" not in found, found
            peaks[name] = found["peak"]
    assert peaks["fused"] < peaks["default"] and peaks["loop"] < peaks["default"], peaks
