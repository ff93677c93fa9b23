"""A workload named as `module:function` whose function is no factory is refused before the probe calls it: dlperf's
own `run` ran a whole sweep inside the probe (and wrote a dlperf.db where it stood); a function of the standard
library, a builtin, a class, a generator, or one that needs arguments, each in one line that says what a factory is."""

import pytest

from dlperf.errors import UsageError
from dlperf.workloads.user import build_user_workload, load_factory

FILE = """
import dlperf
from subprocess import run

def needs(a, b=1):
    return None

def gen():
    yield 1

class Model:
    pass

def takes_data(data_dir):
    return 3

def returns_three():
    return 3

def flexible(*args, **kwargs):
    return 3

import operator
getter = operator.itemgetter(1)

class Module:  # stands for torch.nn.Module, told by its name and module: this test imports no framework
    def __call__(self, x):
        return x

Module.__module__ = "torch.nn.modules.module"

class Net(Module):
    pass

model = Net()
"""


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "models.py"
    path.write_text(FILE)
    return lambda name: f"{path}:{name}"


FOREIGN = {
    "dlperf:run": "run is dlperf.api.run, dlperf's own, not yours",
    "dlperf:user_workload": "dlperf's own",
    "subprocess:run": "run is subprocess.run, subprocess's own",
    "os:getcwd": "getcwd is a builtin function",
}
# functions of the user's file that are no factory, and why
NOT_FACTORIES = {
    "run": "subprocess's own",  # imported into the user's file, still not theirs
    "needs": "needs requires a, which dlperf cannot give it",
    "gen": "gen is a generator",
    "Model": "Model is a class",
    "getter": "getter is an instance of operator.itemgetter, operator's own",  # read as the class alone
    # a model built at the file's top level, named in place of a factory: read as "is torch...Linear, of the installed
    # package torch", as if it were torch's class
    "model": r"model is a torch.nn.Module \(a Net\), not a factory: build it in one, def make\(\): return "
    r"dlperf.user_workload\('my-model', model, make_batch, loss, batch_size=...\)",
}


@pytest.mark.parametrize(("name", "why"), FOREIGN.items())
def test_a_function_of_dlperf_or_the_standard_library_is_refused(name, why):
    with pytest.raises(UsageError) as caught:
        load_factory(name)
    message = str(caught.value)
    assert why in message and "returns dlperf.user_workload(...)" in message and "\n" not in message


@pytest.mark.parametrize(("name", "why"), NOT_FACTORIES.items())
def test_what_the_users_file_holds_that_is_no_factory_is_refused(source, name, why):
    with pytest.raises(UsageError, match=why) as caught:
        load_factory(source(name))
    assert "\n" not in str(caught.value)


def test_a_factory_of_data_dir_or_of_no_required_argument_is_loaded(source):
    assert callable(load_factory(source("takes_data")))
    assert callable(load_factory(source("flexible")))


def test_a_factory_that_returns_no_user_workload_is_one_line(source):
    with pytest.raises(UsageError) as caught:
        build_user_workload(source("returns_three"))
    assert str(caught.value).endswith("must return dlperf.user_workload(...), got int")
    assert "\n" not in str(caught.value)
