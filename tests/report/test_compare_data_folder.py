"""`dlperf compare`: the folder a user workload read (--data DIR, or its factory's default) is its data, not its model:
two runs of one factory over the same folder compare, and over different folders they compare with a line saying so
(helper 124: a run with --data photos against one without, whose factory defaulted to that folder, was refused as
"not comparable: the workloads differ: extra {'data_dir': ...} -> {}"). The factory's default is what the run
recorded of it (the probe evaluates the `data_dir` default, `extra.default_data_dir`), not its source read again at
compare time, which saw only a literal absolute path."""

import os
from dataclasses import replace

from conftest import require
from dlperf.protocol import Cell
from dlperf.report.compare import Verdict, compare, summary_lines
from dlperf.store.records import PlannedCell
from report.runs import processes, record

FACTORY = """import os
from pathlib import Path

import torch
import dlperf


def make(data_dir=Path(os.environ.get("H137_DATA_ROOT", Path(__file__).parent)) / "photos"):
    def batch(n, device):
        return torch.randn(n, 4, device=device), torch.randint(0, 2, (n,), device=device)

    return dlperf.user_workload("jpeg-cnn", torch.nn.Linear(4, 2), batch, torch.nn.functional.cross_entropy,
                                batch_size=8)
"""


def user_cell(source: str, data_dir: str | None = None, default: str | None = None) -> PlannedCell:
    extra = {"data_dir": data_dir} if data_dir else {"default_data_dir": default} if default else {}
    return PlannedCell(Cell("jpeg-cnn", "torch", "cpu", 1, "fp32"), {"batch": 32, "source": source, "extra": extra})


def compared(a, b):
    pa, pb = processes(1, 3, 0.1), processes(2, 3, 0.1)
    return compare([record(a, pa)], [record(b, pb)], {a.cell.key: pa}, {b.cell.key: pb})


def test_a_computed_default_folder_is_recorded_by_the_probe_and_compares_as_data_dir(tmp_path, monkeypatch):
    """A factory whose default folder is computed (from its file's folder and an environment variable), which no
    reading of its source can tell: --data <that folder> against the default is one folder, no note."""
    from dlperf.plan.workloads import resolve_workload

    require("torch")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "cnn.py").write_text(FACTORY)
    source = f"{tmp_path / 'model' / 'cnn.py'}:make"
    monkeypatch.setenv("H137_DATA_ROOT", str(tmp_path / "elsewhere"))  # the probe child reads it as the user's shell
    photos = tmp_path / "elsewhere" / "photos"
    photos.mkdir(parents=True)
    default = resolve_workload(source, "torch", 120)  # the probe child builds the factory
    assert {k: v for k, v in default.extra.items() if "data_dir" in k} == {"default_data_dir": str(photos)}
    given = replace(default, extra={"data_dir": str(photos)})  # --data DIR: the folder given, as stored before
    cell = Cell("jpeg-cnn", "torch", "cpu", 1, "fp32")
    result = compared(PlannedCell(cell, given.to_json()), PlannedCell(cell, default.to_json()))
    [only] = result.cells
    assert only.verdict == Verdict.SAME and not only.reason
    assert not result.data and not any("data" in line for line in summary_lines(result))


def test_data_given_against_the_recorded_default_of_the_same_folder_compares_without_a_note(tmp_path):
    photos = tmp_path / "photos"
    photos.mkdir()
    os.symlink(photos, tmp_path / "link")  # one folder by two names
    result = compared(user_cell("cnn.py:make", str(tmp_path / "link")), user_cell("cnn.py:make", default=str(photos)))
    [only] = result.cells
    assert only.verdict == Verdict.SAME and not only.reason and not result.data


def test_different_folders_compare_with_one_line_naming_both(tmp_path):
    result = compared(user_cell("cnn.py:make", str(tmp_path / "photos")),
                      user_cell("cnn.py:make", default=str(tmp_path / "more")))  # fmt: skip
    [only] = result.cells
    assert only.verdict == Verdict.SAME
    [line] = [line for line in summary_lines(result) if "data differs" in line]
    assert line == (f"note: jpeg-cnn: the data differs: A read {tmp_path / 'photos'}, B read {tmp_path / 'more'}; "
                    "each ratio compares the data too")  # fmt: skip


def test_a_default_the_run_did_not_record_is_named_as_such(tmp_path):
    # a factory defaulting to None (its folder chosen in its body), or a run stored before the default was recorded
    result = compared(user_cell("cnn.py:make", str(tmp_path / "photos")), user_cell("cnn.py:make"))
    assert result.cells[0].verdict == Verdict.SAME
    assert result.data == [f"jpeg-cnn: the data may differ: A read {tmp_path / 'photos'}, B read the folder its "
                           "factory chose, which the run does not record; each ratio compares the data "
                           "too"]  # fmt: skip
    assert not compared(user_cell("cnn.py:make"), user_cell("cnn.py:make")).data  # neither says: no note


def test_the_default_is_the_data_dir_parameters_as_evaluated_and_absolute(tmp_path, monkeypatch):
    from pathlib import Path

    from dlperf.workloads.user import default_data_dir

    monkeypatch.chdir(tmp_path)

    def literal(data_dir="/data/photos"): ...
    def relative(data_dir=Path("photos")): ...  # from the working directory, where every child builds the factory
    def unsaid(data_dir=None): ...
    def number(data_dir=3): ...
    def none(): ...

    assert [default_data_dir(f) for f in (literal, relative, unsaid, number, none, print)] == [
        "/data/photos", str(tmp_path / "photos"), None, None, None, None]  # fmt: skip


def test_a_model_that_differs_besides_the_data_is_still_not_comparable(tmp_path):
    a, b = user_cell("cnn.py:make", str(tmp_path / "a")), user_cell("cnn.py:make", default=str(tmp_path / "b"))
    b = PlannedCell(b.cell, {**b.workload, "batch": 64})
    [only] = compared(a, b).cells
    assert only.verdict == Verdict.NOT_COMPARABLE and only.reason == "the workloads differ: batch 32 -> 64"


def test_what_one_dlperf_recorded_of_the_workload_and_the_other_did_not_is_no_difference(tmp_path):
    """A run's probe records more of a user's workload in a later dlperf (`extra.no_checkpoint`, `input_names`): the
    run before it, without those keys, compares with the run after, while a key both record and differ on does not."""
    a, b = user_cell("cnn.py:make", str(tmp_path / "a")), user_cell("cnn.py:make", str(tmp_path / "a"))
    recorded = {"no_checkpoint": "checkpoint needs ...", "input_names": ["x"]}
    said = {**b.workload, "extra": {**b.workload["extra"], **recorded}}
    [only] = compared(a, PlannedCell(b.cell, said)).cells
    assert only.verdict == Verdict.SAME and not only.reason
    other = {**said, "extra": {**said["extra"], "input_names": ["ids"]}}
    result = compared(PlannedCell(b.cell, said), PlannedCell(b.cell, other))
    [only] = result.cells  # the model changed under its name: compared, tested, and said
    assert only.verdict == Verdict.SAME and result.data == [
        "jpeg-cnn: the model differs (extra.input_names ['x'] -> ['ids']): its ratio compares the two definitions"
    ]


def test_a_long_change_of_the_workload_is_named_not_spelled_out(tmp_path):
    """The checkpoint mode's refusal changes with the model, and both its sentences (about 250 characters each)
    filled the note beside the change that tells: params 68 -> 1348."""
    a = user_cell("cnn.py:make", str(tmp_path / "a"))
    refusal = "checkpoint needs an nn.Sequential of 3 or more modules ... " * 4
    before = {**a.workload, "params": 68, "extra": {**a.workload["extra"], "no_checkpoint": refusal + "none"}}
    after = {**before, "params": 1348, "extra": {**before["extra"], "no_checkpoint": refusal}}
    [note] = compared(PlannedCell(a.cell, before), PlannedCell(a.cell, after)).data
    assert note == (
        "jpeg-cnn: the model differs (extra.no_checkpoint changed, params 68 -> 1348): its ratio compares the two "
        "definitions"
    )


def test_a_users_model_changed_under_its_name_or_moved_is_compared_as_a_gate_asks(tmp_path):
    """A CI gate compares a user's model one commit later, or checked out in another folder: its parameters and its
    file's path differ, and the runs were "not comparable", exit 2, every time. Compared and tested, the change said;
    a different batch or input is still another workload's work."""
    a = user_cell("/ci/main/cnn.py:make", str(tmp_path / "a"))
    a = PlannedCell(a.cell, {**a.workload, "params": 399370, "input": {"shape": [256]}})
    wider = {**a.workload, "params": 662026, "source": "/ci/pr/cnn.py:make"}
    result = compared(a, PlannedCell(a.cell, wider))
    [only] = result.cells
    assert only.verdict == Verdict.SAME and not only.reason
    assert result.data == [
        "jpeg-cnn: the model differs (source /ci/main/cnn.py:make -> /ci/pr/cnn.py:make, params "
        "399370 -> 662026): its ratio compares the two definitions"
    ]
    other_input = {**wider, "input": {"shape": [3, 64, 64]}}
    [only] = compared(a, PlannedCell(a.cell, other_input)).cells
    assert only.verdict == Verdict.NOT_COMPARABLE and only.reason.startswith("the workloads differ: input.shape")


def test_a_dict_of_inputs_of_another_shape_is_not_comparable_and_an_optimizer_change_is_named(tmp_path):
    """A HuggingFace-like model's sequence changed from 32 to 128 under one name (same parameters, 5.5 times the
    FLOPs): its input, a dict, was stored as `{"shape": [], "dtype": "float32"}`, and compare said nothing. And the
    user's AdamW(lr=3e-4) was stored as SGD's defaults, so a change of it was never named."""
    a = user_cell("lm.py:make", str(tmp_path / "a"))

    def said(seq: int, lr: float) -> PlannedCell:
        extra = {**a.workload["extra"], "input_shapes": {"input_ids": [seq, "int64"]},
                 "optimizer": {"name": "AdamW", "lr": lr}}  # fmt: skip
        return PlannedCell(a.cell, {**a.workload, "extra": extra})

    [longer] = compared(said(32, 3e-4), said(128, 3e-4)).cells
    assert longer.verdict == Verdict.NOT_COMPARABLE
    assert longer.reason == "the workloads differ: extra.input_shapes.input_ids [32, 'int64'] -> [128, 'int64']"
    result = compared(said(32, 3e-4), said(32, 1e-3))
    assert result.cells[0].verdict == Verdict.SAME and result.data == [
        "jpeg-cnn: the model differs (extra.optimizer.lr 0.0003 -> 0.001): its ratio compares the two definitions"
    ]


def test_the_probe_records_a_dict_of_inputs_and_the_optimizer(tmp_path):
    from dlperf.plan.workloads import resolve_workload

    require("torch")
    (tmp_path / "lm.py").write_text("""
import torch
import dlperf


class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(100, 8)
        self.head = torch.nn.Linear(8, 2)

    def forward(self, input_ids, attention_mask):
        return self.head((self.emb(input_ids) * attention_mask.unsqueeze(-1)).mean(1))


def batch(b, d):
    ids = torch.randint(0, 100, (b, 12), device=d)
    return {"input_ids": ids, "attention_mask": torch.ones(b, 12, device=d)}, torch.randint(0, 2, (b,), device=d)


def make():
    return dlperf.user_workload("lm", LM(), batch, torch.nn.functional.cross_entropy, batch_size=4,
                                optimizer=lambda p: torch.optim.AdamW(p, lr=3e-4))
""")
    w = resolve_workload(f"{tmp_path / 'lm.py'}:make", "torch", 120)
    assert w.extra["input_shapes"] == {"input_ids": [12, "int64"], "attention_mask": [12, "float32"]}
    assert w.extra["optimizer"] == {"name": "AdamW", "lr": 0.0003, "betas": [0.9, 0.999], "eps": 1e-08,
                                    "weight_decay": 0.01}  # fmt: skip


def builtin_cell(loader: str | None) -> PlannedCell:
    return PlannedCell(Cell("tiny-alexnet-s", "torch", "cpu", 1, "fp32", loader=loader), {"batch": 4, "extra": {}})


def test_a_builtin_workloads_loader_cells_over_two_folders_are_said_to_read_different_data(tmp_path):
    """Built-in workloads' loader cells of runs over --data photos and --data more were paired with no note, where a
    user workload's said 'the data differs': their folder is the run's --data (`spec.data`), not the cell's."""
    pa, pb = processes(1, 3, 0.1), processes(2, 3, 0.1)
    loaded, s = builtin_cell("w0"), builtin_cell(None)
    a, b = (replace(record(loaded, procs), loader="w0") for procs in (pa, pb))  # a loader cell, as the store's
    runs = (str(tmp_path / "photos"), str(tmp_path / "more"))
    result = compare([a, record(s, pa)], [b, record(s, pb)], {a.key: pa, s.cell.key: pa}, {b.key: pb, s.cell.key: pb},
                     data=runs)  # fmt: skip
    assert len(result.cells) == 2
    assert result.data == [f"tiny-alexnet-s: the data differs: A read {runs[0]}, B read {runs[1]}; each ratio compares "
                           "the data too"]  # fmt: skip
    assert not compare([a], [b], {a.key: pa}, {b.key: pb}, data=(runs[0], runs[0])).data
    synthetic = compare([record(s, pa)], [record(s, pb)], {s.cell.key: pa}, {s.cell.key: pb}, data=runs)
    assert not synthetic.data  # a step on synthetic data read neither folder


def test_a_dataset_of_another_size_is_its_data_not_its_model(tmp_path):
    """A user Dataset of 18 samples against one of 320 read 'the model differs (extra.dataset_samples 18 -> 320)'."""
    photos = str(tmp_path / "photos")
    sized = [user_cell("cnn.py:make", photos) for _ in range(2)]
    for planned, n in zip(sized, (18, 320), strict=True):
        planned.workload["extra"]["dataset_samples"] = n
    result = compared(*sized)
    assert result.data == [f"jpeg-cnn: the data differs: A read 18 samples of {photos}, B read 320 samples of "
                           f"{photos}; each ratio compares the data too"]  # fmt: skip


def test_two_names_of_one_image_folder_are_one_folder_read(tmp_path):
    """--data goodlink (a link to good, which holds train/) against --data good/train: both runs said 'reads the
    image folder .../good/train', and compare said 'the data differs'. The folder each read is compared (the run
    stores --data, so a folder gone since falls back to it)."""
    for name in ("train/n1/a.jpg", "train/n2/b.jpg"):
        (tmp_path / "good" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "good" / name).write_bytes(b"\xff\xd8")
    os.symlink(tmp_path / "good", tmp_path / "goodlink")
    pa, pb = processes(1, 3, 0.1), processes(2, 3, 0.1)
    a, b = (replace(record(builtin_cell("w0"), procs), loader="w0") for procs in (pa, pb))
    runs = (str(tmp_path / "goodlink"), str(tmp_path / "good" / "train"))
    assert not compare([a], [b], {a.key: pa}, {b.key: pb}, data=runs).data
    gone = (str(tmp_path / "gone"), str(tmp_path / "gone" / "train"))
    assert compare([a], [b], {a.key: pa}, {b.key: pb}, data=gone).data == [
        f"tiny-alexnet-s: the data differs: A read {gone[0]}, B read {gone[1]}; each ratio compares the data too"
    ]
