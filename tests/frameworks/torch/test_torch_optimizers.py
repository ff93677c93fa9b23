"""A user's optimizer rebuilt over other parameters (frameworks/torch/optimizers.py): every optimizer of torch.optim
and a custom one, from the keyword arguments its constructor takes, with the factory's own values; foreach and fused
asked of one that has them, told apart from one that has none; and the commands that rebuild it (predict's operator
count, optimize's foreach/fused) on a user's model trained with AdamW."""

import inspect

import pytest

from conftest import dlperf, mlp_factory, require

torch = require("torch")

from dlperf.frameworks.torch import backend as tb  # noqa: E402
from dlperf.frameworks.torch.optimizers import NoSuchArgument, rebuild_optimizer  # noqa: E402
from dlperf.workloads.base import InputSpec, OptimizerSpec, Workload  # noqa: E402

# every optimizer class torch.optim exports, whatever this build adds (2.13: Adafactor, Muon)
TORCH_OPTIMIZERS = sorted(
    (c for c in vars(torch.optim).values() if isinstance(c, type) and issubclass(c, torch.optim.Optimizer)),
    key=lambda c: c.__name__,
)
TORCH_OPTIMIZERS.remove(torch.optim.Optimizer)


class Lion(torch.optim.Optimizer):
    """A custom optimizer as users write them: its own arguments, and a key in `defaults` it does not take."""

    def __init__(self, params, lr=1e-4, betas=(0.9, 0.99), weight_decay=0.0):
        super().__init__(params, {"lr": lr, "betas": betas, "weight_decay": weight_decay, "sign_update": True})

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.add_(p.grad.sign(), alpha=-group["lr"])


def params_for(cls) -> list[torch.nn.Parameter]:
    """Parameters every optimizer can update (Muon updates matrices only)."""
    return [torch.nn.Parameter(torch.randn(4, 3))]


def factory_kwargs(cls) -> dict:
    """A learning rate other than the constructor's default, to see the factory's own value kept."""
    return {"lr": 0.0123} if "lr" in inspect.signature(cls).parameters else {}


def stepped(opt, params) -> None:
    """One update. LBFGS re-evaluates the loss: it is given the closure it requires (dlperf's timed step calls
    `optimizer.step()` without one, so a user workload trained with LBFGS fails its cell with LBFGS's own message)."""
    if isinstance(opt, torch.optim.SparseAdam):
        params[0].grad = torch.ones_like(params[0]).to_sparse()
        opt.step()
        return

    def closure():
        opt.zero_grad()
        loss = sum((p**2).sum() for p in params)
        loss.backward()
        return loss

    if isinstance(opt, torch.optim.LBFGS):
        opt.step(closure)
    else:
        closure()
        opt.step()


OPTIMIZERS = [*TORCH_OPTIMIZERS, Lion]


def test_every_optimizer_of_torch_optim_is_covered():
    names = {c.__name__ for c in TORCH_OPTIMIZERS}
    assert {"SGD", "Adam", "AdamW", "LBFGS", "SparseAdam"} <= names
    torchs = torch.optim.Optimizer.__subclasses__()
    assert names >= {c.__name__ for c in torchs if c.__module__.startswith("torch.optim")}


@pytest.mark.parametrize("cls", OPTIMIZERS, ids=lambda c: c.__name__)
def test_an_optimizer_is_rebuilt_over_new_parameters_with_its_factorys_values(cls):
    old = params_for(cls)
    opt = cls(old, **factory_kwargs(cls))
    new = params_for(cls)
    rebuilt = rebuild_optimizer(opt, new)
    assert type(rebuilt) is cls and rebuilt.param_groups[0]["params"] == new
    assert {k: v for k, v in rebuilt.defaults.items() if k != "params"} == opt.defaults
    stepped(rebuilt, new)


@pytest.mark.parametrize("cls", OPTIMIZERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_foreach_and_fused_where_the_constructor_takes_them_no_such_argument_where_not(cls, impl):
    opt = cls(params_for(cls), **factory_kwargs(cls))
    new = params_for(cls)
    if impl not in inspect.signature(cls).parameters:
        with pytest.raises(NoSuchArgument, match=f"{cls.__name__} has no {impl} implementation"):
            rebuild_optimizer(opt, new, **{impl: True})
        return
    try:  # every optimizer that takes fused= has a CPU kernel in this torch: a refusal is a failure, not a pass
        rebuilt = rebuild_optimizer(opt, new, **{impl: True})
    except NoSuchArgument:
        pytest.fail(f"{cls.__name__} takes {impl}=")
    assert rebuilt.defaults[impl] is True and rebuilt.defaults["lr"] == opt.defaults["lr"]
    stepped(rebuilt, new)


def test_adamw_has_foreach_and_fused_on_the_cpu_with_its_factorys_values():
    opt = torch.optim.AdamW(params_for(torch.optim.AdamW), lr=3e-4, weight_decay=0.05, betas=(0.8, 0.95))
    for impl in ("foreach", "fused"):
        rebuilt = rebuild_optimizer(opt, opt.param_groups, **{impl: True})
        group = rebuilt.param_groups[0]
        assert group[impl] is True and (group["lr"], group["weight_decay"], group["betas"]) == (3e-4, 0.05, (0.8, 0.95))


def test_param_groups_keep_their_own_values_and_lose_the_overridden_implementation():
    a, b = torch.nn.Parameter(torch.randn(3)), torch.nn.Parameter(torch.randn(3))
    opt = torch.optim.AdamW([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1, foreach=False)
    rebuilt = rebuild_optimizer(opt, opt.param_groups, fused=True, foreach=None)
    assert [g["lr"] for g in rebuilt.param_groups] == [0.1, 0.5]
    assert all(g["fused"] is True and g["foreach"] is None for g in rebuilt.param_groups)


class Tied(torch.nn.Module):
    """AWD-LSTM's shape in small: an embedding, a layer, and a decoder whose weight is the embedding's."""

    def __init__(self):
        super().__init__()
        self.embed, self.mid, self.decoder = torch.nn.Embedding(10, 4), torch.nn.Linear(4, 4), torch.nn.Linear(4, 10)
        self.decoder.weight = self.embed.weight

    def forward(self, x):
        return self.decoder(torch.relu(self.mid(self.embed(x))))


def test_a_pipeline_stage_updates_a_tied_parameter_it_holds_under_its_decoders_name():
    """awd-lstm's last gpipe stage held 4,010,000 trainable parameters and its optimizer updated 10,000 (the decoder's
    bias): the tied weight, named by the embedding's name alone, was not found in the stage."""
    from dlperf.frameworks.torch.optimizers import parameter_names, regrouped
    from dlperf.frameworks.torch.pipeline import stage_module, trace

    model = Tied()
    opt = torch.optim.SGD([{"params": [model.embed.weight], "lr": 0.5}, {"params": list(model.mid.parameters())},
                           {"params": [model.decoder.bias], "weight_decay": 0.1}], lr=0.1)  # fmt: skip
    stages = [stage_module(trace(model), ["relu"], rank) for rank in (0, 1)]
    for stage in stages:
        groups = regrouped(opt, parameter_names(model), stage)
        assert sorted(id(p) for g in groups for p in g["params"]) == sorted(id(p) for p in stage.parameters())
    last = regrouped(opt, parameter_names(model), stages[1])
    assert [(g["lr"], g["weight_decay"], len(g["params"])) for g in last] == [(0.5, 0, 1), (0.1, 0.1, 1)]
    whole = regrouped(opt, parameter_names(model), model)  # the tied weight once, in its own group
    assert [len(g["params"]) for g in whole] == [1, 2, 1]


def test_a_constructor_that_fails_is_not_told_as_no_such_argument():
    class Picky(torch.optim.SGD):
        def __init__(self, params, lr=0.1, foreach=None):
            if foreach:
                raise RuntimeError("foreach is broken here")
            super().__init__(params, lr=lr, foreach=foreach)

    with pytest.raises(RuntimeError, match="broken here"):
        rebuild_optimizer(Picky(params_for(Picky)), params_for(Picky), foreach=True)


def test_a_constructor_of_keyword_arguments_is_given_every_default():
    class Open(torch.optim.SGD):
        def __init__(self, params, **kwargs):
            super().__init__(params, **kwargs)

    rebuilt = rebuild_optimizer(Open(params_for(Open), lr=0.2, momentum=0.5), params_for(Open), foreach=True)
    assert (rebuilt.defaults["lr"], rebuilt.defaults["momentum"], rebuilt.defaults["foreach"]) == (0.2, 0.5, True)


# ----------------------------------------------------------------------------------------------------------------------
# A user's model trained with AdamW, through what rebuilds its optimizer

ADAMW = "optimizer=lambda ps: torch.optim.AdamW(ps, lr=3e-4, weight_decay=0.05)"


@pytest.fixture
def adamw_user(tmp_path):
    source = tmp_path / "mini.py"
    source.write_text(mlp_factory(16, 4, ADAMW))
    return Workload("mini", "user", {}, InputSpec("vector", (8,)), 3, 4, OptimizerSpec(), source=f"{source}:make")


@pytest.mark.parametrize("impl", ["foreach", "fused"])
def test_optimize_measures_adamws_foreach_and_fused(adamw_user, impl):
    step = tb.build(adamw_user, "cpu", impl)  # what optimize's candidate cell builds
    assert isinstance(step.optimizer, torch.optim.AdamW) and step.settings()[f"optimizer_{impl}"] is True
    assert step.optimizer.defaults["lr"] == 3e-4 and step.optimizer.defaults["weight_decay"] == 0.05
    step.step()


def test_predicts_operator_count_of_an_adamw_model(adamw_user):
    answer = tb.op_count(adamw_user, "fp32", 4)
    assert "error" not in answer, answer
    assert any(op["phase"] == "optimizer" for op in answer["ops"])


@pytest.mark.slow
def test_predict_of_an_adamw_model_end_to_end(tmp_path):
    source = tmp_path / "mine.py"
    source.write_text(mlp_factory(16, 4, ADAMW))
    proc = dlperf("predict", f"{source}:make", "--gpu", "H100-SXM5-80GB", env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    assert "H100-SXM5-80GB" in proc.stdout and "decoupled_weight_decay" not in proc.stdout + proc.stderr


@pytest.mark.slow  # measures two cells: with the sweeps (make test-slow)
def test_crossover_of_an_adamw_model_end_to_end(tmp_path):
    source = tmp_path / "mine.py"
    source.write_text(mlp_factory(16, 4, ADAMW))
    proc = dlperf("crossover", f"{source}:make", "--batches", "1,4", "--threads", "1", "--gpu", "T4",
                  "--min-steps", "3", "--min-time", "0.1", "--max-time", "1",
                  db=tmp_path / "d.db", timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "decoupled_weight_decay" not in proc.stdout + proc.stderr and "T4" in proc.stdout
