"""`dlperf optimize FILE:make --data DIR` for a factory that takes `data_dir`: the recipe it prints gives
`training_parts` that folder (without it the pasted recipe raised 'make takes data_dir'), and a loader search that
tried no setting prints no empty 'Loaders tried' heading."""

import textwrap

from dlperf.commands.optimize import loader_lines
from dlperf.optimize_loader import LoaderChoice, recipe

FACTORY = """
import torch
import dlperf


class Rows(torch.utils.data.Dataset):
    def __init__(self, root):
        self.width = len((root / "width.txt").read_text())

    def __len__(self):
        return 8

    def __getitem__(self, i):
        return torch.randn(self.width), i % 2


def make(data_dir):
    rows = Rows(data_dir)
    model = torch.nn.Linear(rows.width, 2)
    return dlperf.user_workload("rows", model, None, torch.nn.functional.cross_entropy, batch_size=4, dataset=rows)
"""


def test_the_recipe_gives_a_factory_its_data_dir():
    lines = recipe("bf16", "cpu", "/m/mine.py:make", None, "/data/tokens")
    assert (
        "model, optimizer, loss_fn, x, y = training_parts('/m/mine.py:make', 'cpu', data_dir='/data/tokens')" in lines
    )
    assert "model, optimizer, loss_fn, x, y = training_parts('resnet-56', 'cpu')" in recipe("bf16", "cpu", "resnet-56")
    # seeded first: the weights of dlperf's cells (a fresh script's generator gave others at every run)
    assert lines[lines.index("torch.manual_seed(0)  # the weights of dlperf's cells") + 1].startswith("model, ")


def test_the_recipes_first_lines_run_for_a_factory_that_takes_data_dir(tmp_path):
    from conftest import run_in

    (tmp_path / "mine.py").write_text(FACTORY)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "width.txt").write_text("abcdef")
    head = recipe("fp32", "cpu", f"{tmp_path}/mine.py:make", None, str(tmp_path / "data"))[:6]
    script = "\n".join([*head, "import json", "print(json.dumps(list(x.shape)))"])
    assert run_in("torch", textwrap.dedent(script)) == [4, 6]


def test_a_loader_search_that_tried_nothing_prints_no_heading():
    assert loader_lines(LoaderChoice("bf16", 0.845, [])) == []
    assert loader_lines(None) == []


def test_what_the_budget_lacks_is_said_in_seconds_under_a_minute():
    """`loader: w0 and after not measured: about 0.0 min needed, 0.0 min of the budget left` read as needing nothing
    (a 3-minute optimize of a JPEG CNN here); under a minute it is said in seconds."""
    from dlperf.optimize_loader import needed_and_left

    assert needed_and_left(2.4, -0.3) == "about 2 s needed, 0 s of the budget left"
    assert needed_and_left(102, 18) == "about 1.7 min needed, 18 s of the budget left"
    assert needed_and_left(192, 72) == "about 3.2 min needed, 1.2 min of the budget left"
    # advise on a 4-layer GPT read "about 25 s needed, 25 s of the budget left" and did not measure it
    assert needed_and_left(25.4, 24.8) == "about 25.4 s needed, 24.8 s of the budget left"
    assert needed_and_left(102.0, 100.0) == "about 1.70 min needed, 1.67 min of the budget left"
    assert needed_and_left(5.0, 5.0) == "about 5 s needed, 5 s of the budget left"  # alike to the last figure


def test_a_loader_searched_for_another_mode_than_the_recommended_one_says_so():
    """A CNN's search here ended its rounds on fp32 (channels_last not yet reliably faster), searched the loader for
    fp32, then recommended channels_last against all five fp32 processes: 'Loaders tried for fp32' stood above
    'Recommended: channels_last' with no word between them."""
    from dlperf.optimize_loader import LoaderTrial

    tried = LoaderTrial("w1", "ok", None, 0.446, wait_share=0.026, of_synthetic=0.71, enough=True)
    loader = LoaderChoice("fp32", 0.315, [tried], tried)
    lines = loader_lines(loader, "channels_last")
    assert lines[-1] == (
        "    (searched for fp32, the best mode when the rounds ended; channels_last, recommended below against every "
        "fp32 process, was not measured with a loader)"
    )
    assert not loader_lines(loader, "fp32")[-1].startswith("    (searched for")
