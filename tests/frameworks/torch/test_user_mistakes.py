"""A user's own model file with a mistake in it says what is wrong in one line, naming the user's function or line:
a `make_batch` that returns one tensor (a batch of 2 was taken apart as inputs and targets, and failed as 'expected
target dtype to be Long'), `user_workload(model=None)` ('torch probe failed: AttributeError'), and a forward that
raises under `predict --memory` (which named neither file nor line, where plain `predict` did). And the memory trace
builds a (workload, mode) once per process, on fake tensors: a 1.3B-parameter model's search rebuilt its 5 GB of
weights for every batch asked."""

from dataclasses import replace

import pytest

from conftest import dlperf as command
from conftest import one_line_error, require

torch = require("torch")

from dlperf.errors import UsageError  # noqa: E402
from dlperf.frameworks.torch import memcount  # noqa: E402
from dlperf.frameworks.torch.user import build_user, load_user, probe_workload  # noqa: E402
from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload  # noqa: E402

MISTAKES = """
import os

import torch
from torch import nn
from torch._subclasses.fake_tensor import is_fake
import dlperf


class Boom(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 2)

    def forward(self, x):
        return self.l(x[:, :7])


class Counted(nn.Linear):
    def __init__(self):
        with open(os.environ["MISTAKES_BUILT"], "a") as f:  # each build, and whether its tensors are fake
            f.write("fake\\n" if is_fake(torch.empty(1)) else "real\\n")
        super().__init__(8, 2)


def pair(b, device):
    return torch.randn(b, 8, device=device), torch.randint(0, 2, (b,), device=device)


def device_left_aside(b, device):
    return torch.randn(b, 8), {"y": torch.randint(0, 2, (b,))}


def one_tensor(b, device):
    return torch.randn(b, 8, device=device)


def three_samples(b, device):
    return torch.randn(3, 8, device=device), torch.randint(0, 2, (3,), device=device)


def batch_ignored():
    return dlperf.user_workload("ignored", nn.Linear(8, 2), three_samples, nn.functional.cross_entropy, batch_size=8)


def forward_raises():
    return dlperf.user_workload("boom", Boom(), pair, nn.functional.cross_entropy, batch_size=4)


def batch_wrong():
    return dlperf.user_workload("single", nn.Linear(8, 2), one_tensor, nn.functional.cross_entropy, batch_size=4)


def no_model():
    return dlperf.user_workload("nomodel", None, pair, nn.functional.cross_entropy, batch_size=4)


def counted():
    return dlperf.user_workload("counted", Counted(), pair, nn.functional.cross_entropy, batch_size=4)


class CountedBoom(Boom):
    def __init__(self):
        super().__init__()
        Counted()  # notes the build, fake or real


class Reads(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 2)

    def forward(self, x):
        if x.sum().item() > -1e9:  # a value read: no fake tensor has one
            raise ValueError(f"read a value at a batch of {len(x)}")
        return self.l(x)


def counted_boom():
    return dlperf.user_workload("cboom", CountedBoom(), pair, nn.functional.cross_entropy, batch_size=4)


class ReadsNormed(nn.Module):
    def __init__(self):
        super().__init__()
        self.l, self.norm = nn.Linear(8, 2), nn.BatchNorm1d(2)

    def forward(self, x):
        if x.sum().item() != x.sum().item():  # a value read (NaN only): fake tensors cannot run the step
            raise ValueError("NaN input")
        return self.norm(self.l(x))


def reads_normed():
    return dlperf.user_workload("rnorm", ReadsNormed(), pair, nn.functional.cross_entropy, batch_size=4)


def reads():
    return dlperf.user_workload("reads", Reads(), pair, nn.functional.cross_entropy, batch_size=4)


class Masked(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 2)

    def forward(self, x, mask):
        return self.l(x) * mask


class MaybeMasked(Masked):
    def forward(self, x, mask=None):
        return self.l(x) if mask is None else self.l(x) * mask


def two_inputs(b, device):
    return (torch.randn(b, 8, device=device), torch.ones(b, 2, device=device)), torch.randint(0, 2, (b,), device=device)


def named_inputs(b, device):
    (x, mask), y = two_inputs(b, device)
    return {"x": x, "mask": mask}, y


def two_in_a_tuple():
    return dlperf.user_workload("masked", Masked(), two_inputs, nn.functional.cross_entropy, batch_size=4)


def misnamed_inputs(b, device):
    (x, mask), y = two_inputs(b, device)
    return {"input": x, "mask": mask}, y


def two_misnamed():
    return dlperf.user_workload("misnamed", Masked(), misnamed_inputs, nn.functional.cross_entropy, batch_size=4)


def two_by_name():
    return dlperf.user_workload("named", Masked(), named_inputs, nn.functional.cross_entropy, batch_size=4)


def one_required():
    return dlperf.user_workload("maybe", MaybeMasked(), pair, nn.functional.cross_entropy, batch_size=4)


def per_sample_loss():
    loss = lambda out, y: nn.functional.cross_entropy(out, y, reduction="none")
    return dlperf.user_workload("persample", nn.Linear(8, 2), pair, loss, batch_size=4)


def compiled():
    return dlperf.user_workload("compiled", torch.compile(nn.Linear(8, 2)), pair, nn.functional.cross_entropy,
                                batch_size=4)


class SparseBag(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.l = nn.Embedding(50, 8, sparse=True), nn.Linear(8, 2)

    def forward(self, x):
        return self.l(self.emb(x).mean(1))


def sparse_bag():
    ids = lambda b, device: (torch.randint(0, 50, (b, 3), device=device), torch.randint(0, 2, (b,), device=device))
    return dlperf.user_workload("sparse", SparseBag(), ids, nn.functional.cross_entropy, batch_size=4)


def on_the_cpu():
    loss = lambda out, y: nn.functional.cross_entropy(out, y["y"])
    return dlperf.user_workload("cpu", nn.Linear(8, 2), device_left_aside, loss, batch_size=4)


def optimizer_built():
    model = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2))
    groups = [{"params": model[0].parameters(), "lr": 0.5}, {"params": model[1].parameters()}]
    built = torch.optim.SGD(groups, lr=0.1, momentum=0.9)
    return dlperf.user_workload("built", model, pair, nn.functional.cross_entropy, batch_size=4, optimizer=built)


def optimizer_of_another_model():
    built = torch.optim.SGD(nn.Linear(8, 2).parameters(), lr=0.1)
    return dlperf.user_workload("other", nn.Linear(8, 2), pair, nn.functional.cross_entropy, batch_size=4,
                                optimizer=built)


def loss_class():
    return dlperf.user_workload("losscls", nn.Linear(8, 2), pair, nn.CrossEntropyLoss, batch_size=4)


def model_class():
    return dlperf.user_workload("modelcls", nn.Linear, pair, nn.CrossEntropyLoss(), batch_size=4)


def loss_and_logits():
    loss = lambda out, y: (nn.functional.cross_entropy(out, y), out)
    return dlperf.user_workload("pairloss", nn.Linear(8, 2), pair, loss, batch_size=4)


def all_frozen():
    return dlperf.user_workload("frozen", nn.Linear(8, 2).requires_grad_(False), pair, nn.functional.cross_entropy,
                                batch_size=4)


def no_parameters():
    return dlperf.user_workload("relu", nn.ReLU(), pair, nn.functional.cross_entropy, batch_size=4)


def half_frozen():
    model = nn.Sequential(nn.Linear(8, 8).requires_grad_(False), nn.Linear(8, 2))
    return dlperf.user_workload("half", model, pair, nn.functional.cross_entropy, batch_size=4)


def numpy_batch():
    import numpy as np

    made = lambda b, device: (np.ones((b, 8), "float32"), torch.zeros(b, dtype=torch.long))
    return dlperf.user_workload("numpy", nn.Linear(8, 2), made, nn.functional.cross_entropy, batch_size=4)


class Logits(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 2)

    def forward(self, x):
        return {"hidden": x, "logits": self.l(x)}


def dict_output():
    loss = lambda out, y: nn.functional.cross_entropy(out, y)
    return dlperf.user_workload("dictout", Logits(), pair, loss, batch_size=4)


def scripted():
    model = torch.jit.script(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)))
    return dlperf.user_workload("scripted", model, pair, nn.functional.cross_entropy, batch_size=4)


def traced():
    model = torch.jit.trace(nn.Sequential(nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2)), torch.randn(2, 8))
    return dlperf.user_workload("traced", model, pair, nn.functional.cross_entropy, batch_size=4)


def dict_output_picked():
    loss = lambda out, y: nn.functional.cross_entropy(out["logits"], y)
    return dlperf.user_workload("picked", Logits(), pair, loss, batch_size=4)
"""


@pytest.fixture
def mistakes(tmp_path):
    path = tmp_path / "mistakes.py"
    path.write_text(MISTAKES)
    return path


def line_of(text: str) -> int:
    return next(i for i, line in enumerate(MISTAKES.splitlines(), 1) if text in line)


def user(source: str) -> Workload:
    a = probe_workload(source)
    return Workload(name=a["name"], arch="user", config={}, input=InputSpec("user", tuple(a["input_shape"] or ())),
                    outputs=0, batch=a["batch"], optimizer=OptimizerSpec("user"), params=a["params"],
                    data="synthetic (user batch maker)", source=source)  # fmt: skip


def test_a_batch_maker_that_returns_one_tensor_is_named_with_what_it_returned(mistakes):
    source = f"{mistakes}:batch_wrong"
    with pytest.raises(UsageError) as caught:
        probe_workload(source)  # the plan's probe: before any cell or count
    said = str(caught.value)
    assert said == (
        f"workload {source!r}: make_batch (one_tensor at {mistakes}:{line_of('def one_tensor')}) must "
        "return an (inputs, targets) pair; asked for a batch of 1, it returned one Tensor of shape [1, 8]"
    )
    with pytest.raises(UsageError, match=r"asked for a batch of 2, it returned one Tensor of shape \[2, 8\]"):
        load_user(source).make_batch(2, torch.device("cpu"))  # a batch of 2 is no pair either


def test_a_batch_maker_that_ignores_its_batch_size_is_refused_before_anything_runs(mistakes):
    """A make_batch that always made 3 samples was timed at every batch: fit's rates climbed from 69,118 to 9.3
    million samples/s at a flat step, and predict --memory fit a batch of a million on a T4."""
    source = f"{mistakes}:batch_ignored"
    with pytest.raises(UsageError) as caught:
        probe_workload(source)
    assert str(caught.value) == (
        f"workload {source!r}: make_batch (three_samples at {mistakes}:{line_of('def three_samples')}) ignores its "
        "batch size: asked for a batch of 2, it made tensors of shapes [3, 8], [3], none with a dimension of 2: make "
        "batch_size samples"
    )
    made = load_user(f"{mistakes}:forward_raises").make_batch(5, torch.device("cpu"))  # one that makes them: as made
    assert made[0].shape == (5, 8)


def test_no_model_names_the_argument(mistakes):
    with pytest.raises(UsageError) as caught:
        probe_workload(f"{mistakes}:no_model")
    said = str(caught.value)
    assert "model is None: pass your model (a torch.nn.Module) as dlperf.user_workload's second argument" in said
    assert said.endswith(f"(at {mistakes}:{line_of('nomodel')}, in no_model)") and "AttributeError" not in said


def test_the_memory_trace_names_the_users_line_as_the_operator_count_does(mistakes):
    w = user(f"{mistakes}:forward_raises")
    [a, b] = memcount.memory_count(w, "fp32", [4, 8])
    assert a["error"] == b["error"]
    assert a["error"].startswith("the model's own step raises RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert f"(at {mistakes}:{line_of('x[:, :7]')}, in forward)" in a["error"]


@pytest.mark.slow
def test_predict_memory_says_the_models_error_as_plain_predict_does(mistakes, tmp_path):
    source = f"{mistakes}:forward_raises"
    where = f"(at {mistakes}:{line_of('x[:, :7]')}, in forward)"
    env = {"DLPERF_NO_COUNT_CACHE": "1"}
    for memory in ((), ("--memory",)):
        proc = command("predict", source, "--gpu", "T4", *memory, env=env)
        one_line_error(proc, "boom (fp32, batch 4): the model's own step raises RuntimeError: mat1 and mat2", where)


def test_the_trace_builds_each_workload_and_mode_once_in_a_process_on_fake_tensors(mistakes, tmp_path, monkeypatch):
    built = tmp_path / "built.txt"
    monkeypatch.setenv("MISTAKES_BUILT", str(built))
    w = user(f"{mistakes}:counted")
    built.unlink()
    first = memcount.memory_count(w, "fp32", [3])
    again = [memcount.memory_count(w, "fp32", [b]) for b in (3, 5)]
    assert built.read_text().split() == ["fake"]  # once for the three asks, its weights never allocated
    assert again[0] == first and again[1][0]["batch"] == 5 and "error" not in again[1][0]
    memcount.memory_count(w, "bf16", [3])  # another mode: built again
    assert built.read_text().split() == ["fake", "fake"]


def test_a_trace_equals_the_one_of_a_step_built_for_real(mistakes, tmp_path, monkeypatch):
    """The fake build is a shortcut: the figures are those of the real build, which a factory that cannot run on fake
    tensors still gets."""
    monkeypatch.setenv("MISTAKES_BUILT", str(tmp_path / "built.txt"))
    w = replace(user(f"{mistakes}:counted"), batch=2)
    fake = memcount.memory_count(w, "fp32", [2, 6])
    monkeypatch.setattr(memcount, "_STEPS", {})
    monkeypatch.setattr(memcount, "_fake_built", lambda w, mode, _: memcount.build(replace(w, batch=1), "cpu", mode))
    assert memcount.memory_count(w, "fp32", [2, 6]) == fake
    assert (tmp_path / "built.txt").read_text().split()[-1] == "real"


def test_the_models_own_error_is_found_on_fake_tensors_once_per_workload_and_mode(mistakes, tmp_path, monkeypatch):
    """own_error ran one real step at a batch of 2: a 1.3B-parameter model's held 10 GB, more than some machines have,
    for the line of an error the fake step shows as well; and once per workload, in fp32 whatever the mode failed."""
    built = tmp_path / "built.txt"
    monkeypatch.setenv("MISTAKES_BUILT", str(built))
    w = user(f"{mistakes}:counted_boom")
    built.unlink()
    [a] = memcount.memory_count(w, "fp32", [4])
    [b] = memcount.memory_count(w, "fp32", [8])
    assert a["error"] == b["error"] and f"(at {mistakes}:{line_of('x[:, :7]')}, in forward)" in a["error"]
    assert "RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x7 and 8x2)" in a["error"]  # the CPU's words
    assert a["error"].endswith("(run on fake tensors, a batch of 2)")
    assert set(built.read_text().split()) == {"fake"}  # nothing built for real
    builds = len(built.read_text().split())
    memcount.memory_count(w, "bf16", [4])  # another mode: its own step, once
    memcount.memory_count(w, "bf16", [8])
    assert set(built.read_text().split()) == {"fake"} and len(built.read_text().split()) == 2 * builds


def test_a_step_that_reads_a_value_is_run_for_real_on_a_batch_of_2(mistakes):
    w = user(f"{mistakes}:reads")
    said = memcount.own_error(w, "fp32")
    assert said.startswith("the model's own step raises ValueError: read a value at a batch of 2")
    assert said.endswith(f"(at {mistakes}:{line_of('read a value')}, in forward) (run for real on a batch of 2)")


def test_a_step_run_for_real_is_no_error_of_batchnorms_at_a_batch_of_1(mistakes):
    """The real step where fake tensors cannot run one was at a batch of 1, which BatchNorm refuses in training
    ('Expected more than 1 value per channel'): a model that runs was said to raise that error."""
    assert memcount.own_error(user(f"{mistakes}:reads_normed"), "fp32") is None


def refused(source: str) -> str:
    """What the plan's probe says of a workload it refuses, before any cell."""
    with pytest.raises(UsageError) as caught:
        probe_workload(source)
    return str(caught.value)


def test_a_forward_of_two_inputs_given_one_tuple_is_refused_with_the_dict_that_passes_them_by_name(mistakes):
    """A tuple of inputs is one argument, model(inputs): a forward(x, mask) failed in every cell with torch's
    'missing 1 required positional argument'. The probe says so before any cell, with the fix."""
    source = f"{mistakes}:two_in_a_tuple"
    assert refused(source) == (
        f"workload {source!r}: Masked.forward takes 2 inputs (x, mask), and a batch's inputs other than a dict are "
        "passed as one, model(inputs): make them a dict, {'x': ..., 'mask': ...}, to have them passed by name, "
        "model(**inputs)"
    )
    assert probe_workload(f"{mistakes}:two_by_name")["input_names"] == ["x", "mask"]  # the fix runs
    assert refused(f"{mistakes}:two_misnamed").endswith(
        "Masked.forward(x, mask) cannot take the batch's inputs by name, model(**inputs), as input, mask: "
        "missing a required argument: 'x'"
    )
    assert probe_workload(f"{mistakes}:one_required")["input_shape"] == [8]  # a second input with a default: one


@pytest.mark.parametrize(("factory", "said"), [
    ("per_sample_loss", "the loss function returned a tensor of shape [4], not one number to call backward on: "
                        "reduce it (.mean() or .sum())"),
    ("loss_and_logits", "the loss function returned a tuple, not a tensor: return the loss, one number to call "
                        "backward on"),
])  # fmt: skip
def test_a_loss_that_is_not_one_number_is_said_so(mistakes, factory, said):
    """torch says only 'grad can be implicitly created only for scalar outputs' (or a tuple's AttributeError); fp16's
    scaled loss alike."""
    from dlperf.frameworks.torch.build import build

    for mode in ("fp32", "fp16"):
        step = build(user(f"{mistakes}:{factory}"), "cpu", mode)
        with pytest.raises(TypeError) as caught:
            step.step()
        assert str(caught.value) == said, mode


def test_a_model_compiled_by_the_factory_is_refused_naming_the_mode_that_compiles_it(mistakes):
    """Its fp32 and bf16 cells ran compiled (the compile time in their warm-up), and compile compiled it again."""
    source = f"{mistakes}:compiled"
    assert refused(source) == (
        f"workload {source!r}: the model is compiled already (torch.compile), so every cell would run it compiled, "
        "its fp32 cell too: return the model itself, and --modes compile (or bf16+compile...) measures it compiled"
    )


def test_fused_is_unsupported_for_sparse_gradients_saying_whose(mistakes):
    """torch's fused SGD refused them at the first update, a failed cell ('`_fused_sgd` does not support sparse
    gradients'); foreach takes them."""
    from dlperf.frameworks.torch.build import build

    w = user(f"{mistakes}:sparse_bag")
    with pytest.raises(NotImplementedError) as caught:
        build(w, "cpu", "fused")
    said = "fused: SGD's fused implementation takes no sparse gradients: those of emb (sparse=True)"
    assert str(caught.value) == said
    build(w, "cpu", "foreach").step()


def test_a_batch_made_on_the_cpu_is_moved_to_the_cells_device(mistakes):
    """`make_batch(b, device)` that leaves `device` aside: on a GPU every cell failed on torch's 'Expected all tensors
    to be on the same device'. The meta device stands for a GPU here: a device the batch was not made on."""
    step = build_user(user(f"{mistakes}:on_the_cpu"), torch.device("meta"), 0)
    assert step.inputs.device.type == step.targets["y"].device.type == "meta"
    step.step()  # the step runs there, model and batch alike


@pytest.mark.parametrize("device", ["cpu", "meta"])
def test_an_optimizer_given_built_is_made_again_over_the_steps_parameters_with_its_groups(mistakes, device):
    """`optimizer=torch.optim.SGD(model.parameters(), ...)` failed every cell ("'SGD' object is not callable"). The
    meta device stands for a GPU: moving there replaces the parameters, which are found again by name."""
    step = build_user(user(f"{mistakes}:optimizer_built"), torch.device(device), 0)
    assert isinstance(step.optimizer, torch.optim.SGD) and not step.optimizer.state
    assert [g["lr"] for g in step.optimizer.param_groups] == [0.5, 0.1]
    assert [g["momentum"] for g in step.optimizer.param_groups] == [0.9, 0.9]
    held = [p for g in step.optimizer.param_groups for p in g["params"]]
    assert len(held) == 4 and all(any(p is q for q in step.model.parameters()) for p in held)
    step.step()
    assert len(step.optimizer.state) == 4  # its momentum, for the step's own parameters


def test_an_optimizer_built_over_another_models_parameters_is_refused(mistakes):
    source = f"{mistakes}:optimizer_of_another_model"
    assert refused(source) == (
        f"workload {source!r}: the SGD given as optimizer holds 2 parameters that are not the model's: build it over "
        "model.parameters(), or give a function of the parameters, optimizer=lambda params: ..."
    )


@pytest.mark.parametrize(("factory", "said"), [
    ("loss_class", "the loss is the class CrossEntropyLoss: give an instance, CrossEntropyLoss(), or a function of "
                   "(outputs, targets)"),
    ("model_class", "the model is the class Linear: give an instance, Linear(...)"),
])  # fmt: skip
def test_a_class_given_for_an_instance_is_refused(mistakes, factory, said):
    """loss=nn.CrossEntropyLoss (no parentheses) failed every cell: the class took the outputs and targets as its
    constructor's arguments ('Boolean value of Tensor with more than one value is ambiguous')."""
    source = f"{mistakes}:{factory}"
    assert refused(source) == f"workload {source!r}: {said}"


def test_a_model_with_nothing_to_train_is_refused(mistakes):
    """Every cell failed on torch's 'element 0 of tensors does not require grad and does not have a grad_fn' (or the
    optimizer's 'empty parameter list'), naming no line; a model frozen in part trains."""
    frozen = "its 2 are all frozen, requires_grad=False"
    for factory, said in ("all_frozen", frozen), ("no_parameters", "it holds none"):
        source = f"{mistakes}:{factory}"
        assert refused(source) == (
            f"workload {source!r}: the model has no parameter to train ({said}): a training step would update nothing"
        )
    assert probe_workload(f"{mistakes}:half_frozen")["params"] == 2 * 8 + 2


def test_a_batch_of_numpy_arrays_is_refused_naming_the_part_and_the_fix(mistakes):
    """torch's 'linear(): argument 'input' must be Tensor, not numpy.ndarray' failed every cell."""
    where = f"numpy_batch.<locals>.<lambda> at {mistakes}:{line_of('made = lambda')}"
    said = refused(f"{mistakes}:numpy_batch")
    assert said.endswith(f"numpy_batch': make_batch ({where}) returned NumPy arrays as its inputs: return tensors, "
                         "torch.from_numpy(array).to(device)")  # fmt: skip


def test_a_loss_given_the_models_dict_says_what_it_was_given_and_where(mistakes):
    """A forward returning a dict (a Hugging Face ModelOutput) given to F.cross_entropy: torch said only 'must be
    Tensor, not dict'. The failure names the keys, the fix, and the user's loss line (found in the cause)."""
    from dlperf.errors import where_in_user_code
    from dlperf.frameworks.torch.build import build

    step = build(user(f"{mistakes}:dict_output"), "cpu", "fp32")
    with pytest.raises(TypeError) as caught:
        step.step()
    said = str(caught.value)
    assert said.startswith("the loss failed on the model's output, a dict with keys 'hidden', 'logits', which it is "
                           "given as the forward returns it (TypeError: ")  # fmt: skip
    assert said.endswith("take the tensor it needs in the loss, loss=lambda outputs, targets: "
                         "your_loss(outputs['logits'], targets)")  # fmt: skip
    line = next(i for i, text in enumerate(MISTAKES.splitlines(), 1) if "cross_entropy(out, y)\n" in text + "\n")
    raised_in_dlperf = caught.value.with_traceback(None)  # its own frames are dlperf's, and this test's
    assert where_in_user_code(raised_in_dlperf) == f" (at {mistakes}:{line}, in <lambda>)"
    build(user(f"{mistakes}:dict_output_picked"), "cpu", "fp32").step()


@pytest.mark.filterwarnings("ignore:.*torch.jit")  # TorchScript is deprecated: the user's model is scripted anyway
def test_a_torchscript_model_has_compile_and_checkpoint_unsupported_saying_why_and_the_search_leaves_them_out(mistakes):
    """compile of a torch.jit.script model failed its cell (torch: 'does not support compiling torch.jit.script ...
    models directly'), and checkpoint said the scripted nn.Sequential had none. The probe reads both refusals, the
    build's words, and the plan's Fit leaves the modes out with them; a traced model compiles."""
    from dlperf.frameworks.torch.build import build
    from dlperf.modes import Fit, left_out

    cases = (("scripted", "script", ("checkpoint", "compile")), ("traced", "trace", ("checkpoint",)))
    for factory, how, refuses in cases:
        w = user(f"{mistakes}:{factory}")
        described = probe_workload(f"{mistakes}:{factory}")
        fit = Fit.of("cpu", {"extra": {k: described.get(k) for k in ("no_checkpoint", "no_compile")}})
        for mode in refuses:
            with pytest.raises(NotImplementedError) as caught:
                build(w, "cpu", mode)
            said = (f"{factory} is a TorchScript module (torch.jit.{how}), and {mode} works on a model's Python "
                    "modules: give dlperf the model unscripted")  # fmt: skip
            assert str(caught.value) == described[f"no_{mode}"] == left_out(mode, fit) == said
        build(w, "cpu", "fp32").step()
    assert "no_compile" not in described and left_out("compile", fit) is None
    build(w, "cpu", "compile")  # the traced model: torch.compile takes it


@pytest.mark.parametrize(("ends", "said"), [("raise SystemExit(3)", "code 3"), ("import sys; sys.exit('stop')",
                                                                                 "code 1: stop")])  # fmt: skip
def test_a_file_that_exits_says_so_alike_from_a_warm_child_and_a_cold_one(tmp_path, ends, said):
    """A factory's file raising SystemExit(3): run's probe (a cold child) said "worker exited with code 3", advise's
    (forked from the warm parent, which caught every exception) "worker exited with code 1: SystemExit: 3". A forked
    child now ends as the interpreter ends a cold one, with the code, or 1 and the message."""
    path = tmp_path / "ends.py"
    path.write_text(f"{ends}\n")
    db = tmp_path / "x.db"
    line = f"workload '{path}:make': the torch probe failed: worker exited with {said}"
    one_line_error(command("run", "--workloads", f"{path}:make", "--threads", "1", db=db), line)
    one_line_error(command("advise", f"{path}:make", db=db), line)
    assert not db.exists()
