"""A workload at a batch of its own, `resnet-50@b64`, as `dlperf fit` and `crossover` name their batches: `run`,
`profile` and `optimize` take it (a user found no way to measure a built-in, or their model, at another batch); the
commands that choose batches themselves, or take --batch, refuse it in one line."""

from __future__ import annotations

import pytest

from dlperf.errors import UsageError
from dlperf.plan.workloads import resolve_workload
from dlperf.spec import make_spec, parse_one_workload, parse_workload
from dlperf.workloads import BUILTIN
from dlperf.workloads.base import split_variant


def test_a_variant_is_its_workload_at_that_batch_under_a_name_of_its_own():
    assert split_variant("resnet-50@b64") == ("resnet-50", 64) and split_variant("resnet-50") == ("resnet-50", None)
    assert split_variant("/x@b1/m.py:make@b8") == ("/x@b1/m.py:make", 8)
    assert make_spec("tiny-fcn-r@b4,RESNET-50@b2").workloads == ("tiny-fcn-r@b4", "resnet-50@b2")
    assert parse_one_workload("tiny-fcn-r@b4") == "tiny-fcn-r@b4"  # optimize's and profile's WORKLOAD
    w = resolve_workload("resnet-50@b64", "torch", 60)
    base = BUILTIN["resnet-50"]
    assert (w.name, w.batch, w.params, w.config) == ("resnet-50@b64", 64, base.params, base.config)
    assert w.paper is None and w.ddp_batch is None  # neither the paper's cell nor its multi-GPU protocol


@pytest.mark.parametrize(
    ("item", "said"),
    [
        ("tiny-fcn-r@b0", "--workloads 'tiny-fcn-r@b0': the batch after @b must be from 1 to 65,536"),
        ("tiny-fcn-r@b99999999", "--workloads 'tiny-fcn-r@b99999999': the batch after @b must be from 1 to 65,536"),
        ("nope@b4", "--workloads: unknown workload 'nope'"),
        ("tiny-fcn-r@bx", "--workloads 'tiny-fcn-r@bx': the batch after @b must be a whole number from 1 to 65,536"),
        ("tiny-fcn-r@b-3", "--workloads 'tiny-fcn-r@b-3': the batch after @b must be a whole number from 1 to"),
        ("TINY-FCN-R@b", "--workloads 'TINY-FCN-R@b': the batch after @b must be a whole number from 1 to 65,536"),
        ("m.py:make@b2.5", "--workloads 'm.py:make@b2.5': the batch after @b must be a whole number from 1 to"),
        # `\d` took them, and int() read them: b16, where `--batch ١٦` is refused
        ("tiny-fcn-r@b١٦", "--workloads 'tiny-fcn-r@b١٦': the batch after @b must be a whole number from 1 to 65,536 "
         "in ASCII digits"),
        ("tiny-fcn-r@b１６", "--workloads 'tiny-fcn-r@b１６': the batch after @b must be a whole number from 1 to "
         "65,536 in ASCII digits"),
    ],
)  # fmt: skip
def test_a_bad_variant_is_one_line(item, said):
    with pytest.raises(UsageError) as refused:
        make_spec(item)
    assert str(refused.value).startswith(said)


def test_where_the_command_chooses_the_batch_a_variant_is_refused_naming_the_workload():
    """fit, crossover, predict and advise take the plain name (parse_workload without variant)."""
    with pytest.raises(UsageError) as refused:
        parse_workload("tiny-fcn-r@b4", None)
    assert str(refused.value) == (
        "workload 'tiny-fcn-r@b4': a batch of its own (NAME@bN) is for run, profile and optimize; here name "
        "tiny-fcn-r (with --batch where the command has one)"
    )


def test_optimizes_recipe_builds_a_variant_at_its_batch():
    """`dlperf optimize tiny-fcn-r@b4` prints `training_parts('tiny-fcn-r@b4')`: it runs as printed."""
    from conftest import ROOT, run_in

    shapes = run_in(
        "torch",
        f"""
import json
from dlperf import training_parts
print(json.dumps([list(training_parts(w)[3].shape) for w in ("tiny-fcn-r@b4", "{ROOT}/examples/my_model.py:make@b3")]))
""",
    )
    assert [s[0] for s in shapes] == [4, 3]


def test_two_batches_of_its_own_are_refused_as_such_not_as_a_variant_for_another_command():
    """`dlperf run --workloads 'NAME@b8@b16'` read 'a batch of its own (NAME@bN) is for run, profile and optimize'."""
    with pytest.raises(UsageError) as refused:
        make_spec("tiny-fcn-r@b8@b16")
    assert str(refused.value) == ("--workloads 'tiny-fcn-r@b8@b16': one batch of its own (NAME@bN), not several: "
                                  "list each, tiny-fcn-r@b8,tiny-fcn-r@b16")  # fmt: skip
