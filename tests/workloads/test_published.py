"""The published benchmarks' networks as workloads: names, static data, and kept out of the default sweep."""

import json

import pytest

from dlperf.cli import main
from dlperf.workloads import BUILTIN, PUBLISHED, SUITE
from dlperf.workloads.published import torch_only

# The names of the design (seam18.md), with each reference benchmark's default mini-batch.
BATCHES = {
    "resnet-50-v1.5": 256, "resnet-50-v1": 64, "resnet-18": 64, "resnet-34": 64, "resnet-101": 64, "resnet-152": 64,
    "vgg-16": 64, "vgg-19": 64, "inception-v3": 64, "alexnet-owt": 512, "gnmt": 128, "awd-lstm": 20,
    "resnet-20": 128, "resnet-32": 128, "resnet-44": 128, "resnet-110": 128, "resnet-164": 128,
    "resnet-164-basic": 128, "resnet-9": 512, "mlp-mnist": 128,
}  # fmt: skip
DATASETS = {"ImageNet", "CIFAR-10", "WMT16 En-De", "Penn Treebank", "MNIST"}


def test_the_published_names_with_their_reference_batches():
    assert {w.name: w.batch for w in PUBLISHED} == BATCHES
    assert len(PUBLISHED) == len(BATCHES)  # no name twice


@pytest.mark.parametrize("workload", PUBLISHED, ids=lambda w: w.name)
def test_static_data_of_each(workload):
    assert BUILTIN[workload.name] is workload
    assert not workload.hidden and workload.paper is None
    assert isinstance(workload.params, int) and workload.params > 0
    assert workload.data in DATASETS
    assert workload.notes  # the reference it follows
    image = workload.config.get("image")
    if workload.input.kind == "image":
        assert workload.input.shape == (3, image, image)
    else:
        assert workload.input.shape[0] == workload.config.get("seq_len", workload.input.shape[0])
    assert type(workload).from_json(json.loads(json.dumps(workload.to_json()))) == workload  # as a task carries it


def test_not_in_the_default_sweep():
    assert not {w.name for w in SUITE} & set(BATCHES)
    assert len(SUITE) == 7


def test_other_backends_get_unsupported_with_the_reason():
    with pytest.raises(NotImplementedError, match="resnet-18 is defined for PyTorch only"):
        torch_only(BUILTIN["resnet-18"])
    for workload in SUITE:
        torch_only(workload)  # the paper's seven: every backend builds them


def test_list_shows_them_under_their_own_heading(capsys):
    assert main(["list"]) == 0
    text = capsys.readouterr().out
    paper, published = text.split("published networks (for dlperf predict --validate)")
    assert "resnet-56" in paper and "gnmt" not in paper
    assert "gnmt" in published and "160,671,297" in published and "resnet-56 " not in published
    assert main(["list", "--format", "json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["vgg-16"]["published"] and not rows["resnet-50"]["published"]
