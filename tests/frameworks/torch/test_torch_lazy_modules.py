"""A model of lazy modules (torch.nn.LazyLinear), returned before its first forward, failed the plan's probe with
torch's "Attempted to use an uninitialized parameter" ValueError, which does not say what to do: it is refused in one
line that names the lazy modules and how to materialise them; one materialised in the factory is probed and built."""

import pytest

from conftest import require

torch = require("torch")

from dlperf.errors import UsageError  # noqa: E402
from dlperf.frameworks.torch.user import load_user, probe_workload  # noqa: E402

FILE = """
import torch
import dlperf


def batch(n, device):
    return torch.randn(n, 16, device=device), torch.randint(0, 4, (n,), device=device)


def net():
    return torch.nn.Sequential(torch.nn.LazyLinear(32), torch.nn.ReLU(), torch.nn.Linear(32, 4))


def lazy():
    return dlperf.user_workload("lazy", net(), batch, torch.nn.functional.cross_entropy, batch_size=8)


def two_lazy():
    model = torch.nn.Sequential(torch.nn.LazyLinear(32), torch.nn.ReLU(), torch.nn.LazyLinear(4))
    return dlperf.user_workload("lazy", model, batch, torch.nn.functional.cross_entropy, batch_size=8)


def materialised():
    model = net()
    model(batch(1, "cpu")[0])
    return dlperf.user_workload("lazy", model, batch, torch.nn.functional.cross_entropy, batch_size=8)
"""


@pytest.fixture
def source(tmp_path):
    (path := tmp_path / "lazy_models.py").write_text(FILE)
    return lambda name: f"{path}:{name}"


def test_a_lazy_model_is_refused_by_the_probe_in_one_line_that_says_what_to_do(source):
    with pytest.raises(UsageError) as caught:
        probe_workload(source("lazy"))
    message = str(caught.value)
    assert (
        "the lazy module model.0 (LazyLinear) has no parameters yet" in message
        and "one forward on a dummy batch" in message
    )
    assert "\n" not in message and "uninitialized" not in message
    with pytest.raises(UsageError, match=r"lazy modules model\.0 \(LazyLinear\), model\.2 \(LazyLinear\) have no "):
        probe_workload(source("two_lazy"))


def test_a_lazy_model_materialised_in_the_factory_is_probed_and_trains(source):
    assert probe_workload(source("materialised"))["params"] == 16 * 32 + 32 + 32 * 4 + 4
    user = load_user(source("materialised"))
    inputs, targets = user.make_batch(8, torch.device("cpu"))
    torch.nn.functional.cross_entropy(user.model(inputs), targets).backward()
    assert user.model[0].weight.grad.shape == (32, 16)
