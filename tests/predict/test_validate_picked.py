"""`dlperf predict --validate` dropped a --gpu or --modes given beside it without a word, and validated every row:
they pick the rows on those GPUs, in those modes (none picked is one line); a workload, --batch, --memory or --cost
beside it are refused. `predict --db` without --cost was ignored too: only --cost reads the store."""

import pytest

from dlperf.cli import main
from dlperf.frameworks.common.ops import Count
from dlperf.predict import count
from dlperf.predict import validate as v

HEADER = "gpu,model,task,framework,precision,batch_per_gpu,metric,value,unit,source,notes\n"
ROWS = [
    "A100-SXM4-80GB,ResNet-50 v1.5,ImageNet,PyTorch,TF32,256,train_throughput,1000,img/s,s,n",
    "A100-SXM4-80GB,ResNet-50 v1.5,ImageNet,PyTorch,AMP,256,train_throughput,2400,img/s,s,n",
    "V100-SXM2-16GB,ResNet-50 v1.5,ImageNet,PyTorch,FP32,128,train_throughput,400,img/s,s,n",
    "V100-SXM2-16GB,MobileNet,ImageNet,PyTorch,AMP,64,train_throughput,900,img/s,s,n",  # not built: skipped
    "A100-SXM4-80GB,MobileNet,ImageNet,PyTorch,TF32,64,train_throughput,900,img/s,s,n",  # not built: skipped
    "T4,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,abc,img/s,s,n",  # bad: said whatever is picked
]


@pytest.fixture
def rows(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "\n".join(ROWS) + "\n")
    return path


@pytest.fixture
def counted(monkeypatch):
    """The count replaced: every (workload, mode, batch) asked is kept, each a step of no operators."""
    asked = []

    def counts(requests, timeout, flag):
        asked.extend((w.name, mode, w.batch) for w, mode in requests)
        return [Count(w.name, mode, w.batch, (), 0, 1000) for w, mode in requests]

    monkeypatch.setattr(count, "counts", counts)
    return asked


def test_gpu_and_modes_pick_the_rows_a_row_that_does_not_parse_is_kept(rows):
    from dlperf.predict import gpus

    cases, skipped = v.read(rows, known=lambda name: name != "mobilenet")
    a100 = gpus.parse_gpus("A100-SXM4-80GB")
    picked, left = v.pick(cases, skipped, a100, None)
    assert [c.line for c in picked] == [2, 3] and [(s.line, s.bad) for s in left] == [(6, False), (7, True)]
    picked, left = v.pick(cases, skipped, None, ("fp16",))
    assert [c.line for c in picked] == [3] and [s.line for s in left] == [5, 7]
    picked, left = v.pick(cases, skipped, a100, ("fp32",))
    assert picked == [] and [s.line for s in left] == [7]


def test_validate_counts_and_reports_only_the_rows_picked(rows, counted, capsys):
    assert main(["predict", "--validate", str(rows), "--gpu", "A100-SXM4-80GB", "--modes", "fp16,fp32"]) == 0
    out = capsys.readouterr().out
    assert counted == [("resnet-50-v1.5", "fp16", 256)]  # the A100's fp16 row, no other
    assert "V100" not in out and "bad row, line 7" in out
    note = " ".join(out.split())  # the note as one line, however the console wrapped it
    assert "--gpu A100-SXM4-80GB --modes fp16,fp32: 1 row on A100-SXM4-80GB in fp16, fp32 of the 6 of rows.csv" in note
    assert "1 row predicted, 1 not" in note


def test_no_row_picked_is_one_line_before_anything_is_counted(rows, counted, capsys):
    assert main(["predict", "--validate", str(rows), "--gpu", "T4"]) == 2
    assert capsys.readouterr().err.strip() == "dlperf: error: --gpu T4: none of the 6 rows of rows.csv is on T4"
    assert main(["predict", "--validate", str(rows), "--modes", "bf16"]) == 2
    assert capsys.readouterr().err.strip() == "dlperf: error: --modes bf16: none of the 6 rows of rows.csv is in bf16"
    assert counted == []


@pytest.mark.parametrize(
    ("args", "extra"),
    [(["tiny-fcn-r"], "WORKLOAD"), (["--batch", "8"], "--batch"), (["--memory"], "--memory"), (["--cost"], "--cost")],
)
def test_what_validate_would_drop_is_refused(args, extra, rows, counted, capsys):
    assert main(["predict", "--validate", str(rows), *args]) == 2
    said = capsys.readouterr().err.strip()
    assert said == ("dlperf: error: --validate CSV predicts the CSV's rows, each at its own batch (--gpu and --modes "
                    f"pick rows): give no {extra}")  # fmt: skip
    assert counted == []


@pytest.mark.parametrize(
    ("args", "fix"),
    [
        (["predict", "tiny-fcn-r", "--gpu", "T4", "--db", "{db}"], "add --cost, or give no --db"),
        (["--db", "{db}", "predict", "tiny-fcn-r", "--gpu", "T4"], "add --cost, or give no --db"),  # put first
        (["predict", "tiny-fcn-r", "--gpu", "T4", "--memory", "--db", "{db}"], "give no --db"),
        (["predict", "--validate", "--db", "{db}"], "give no --db"),
    ],
)
def test_db_without_cost_is_refused(args, fix, tmp_path, counted, capsys):
    """Only --cost reads the store (this CPU's measured steps): a --db beside anything else was ignored unsaid."""
    db = tmp_path / "x.db"
    assert main([a.format(db=db) for a in args]) == 2
    said = capsys.readouterr().err.strip()
    assert said == f"dlperf: error: --db is used only by --cost, which reads this CPU's measured steps from it: {fix}"
    assert counted == [] and not db.exists()


@pytest.mark.parametrize("flag", ["--cpu-watts", "--kwh-price"])
def test_the_cpus_energy_figures_without_cost_are_refused(flag, counted, capsys):
    """--samples, --epochs, --deadline and --prices without --cost were refused in one line; --cpu-watts and
    --kwh-price were ignored unsaid."""
    assert main(["predict", "tiny-fcn-r", "--gpu", "T4", flag, "50"]) == 2
    assert capsys.readouterr().err.strip() == f"dlperf: error: {flag} is a figure of the cost: add --cost"


def test_validate_says_which_errors_are_in_sample_and_prints_the_held_out_ones(rows, counted, capsys):
    """The shipped rows in scope fitted the efficiencies: --validate printed their errors ("median 15% (in scope)")
    without saying they are in sample, nor the held-out figure every prediction's uncertainty comes from."""
    from dlperf.predict import roofline

    held = f"median {roofline.FIT['median_abs_pct']:.0f}% over the {roofline.FIT['rows']} shipped rows in scope"
    assert main(["predict", "--validate", "--gpu", "A100-SXM4-80GB", "--modes", "fp16"]) == 0  # the shipped rows
    out = " ".join(capsys.readouterr().out.split())
    assert "Prediction error in sample (the rows in scope fitted the efficiencies)" in out
    assert "in sample: the rows in scope above fitted the efficiencies (benchmarks/predict_fit.py)" in out
    assert f"held out (each GPU left out of the fit in turn, as every prediction's uncertainty is): {held}" in out
    assert "by mode fp16 " in out and " fp32 " in out
    assert main(["predict", "--validate", str(rows)]) == 0  # a file of the user's: not fitted on
    out = " ".join(capsys.readouterr().out.split())
    assert "in sample" not in out.replace("(a row of it that repeats a shipped one is in sample)", "")
    assert (
        f"the efficiencies were fitted on dlperf's {roofline.FIT['rows']} shipped rows in scope, not on this file's"
        in out
    )
    assert held in out


def test_rows_not_predicted_for_their_precision_or_an_ambiguous_gpu_are_counted_with_the_reason(tmp_path, counted,
                                                                                                capsys):  # fmt: skip
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "\n".join([*ROWS[:3],
        "A100-SXM4-80GB,ResNet-50 v1.5,ImageNet,PyTorch,INT8,64,train_throughput,100,img/s,s,n",
        "A100,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,100,img/s,s,n",
        "A100x,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,100,img/s,s,n",
        "Z9000,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,100,img/s,s,n"]) + "\n")  # fmt: skip
    assert main(["predict", "--validate", str(path)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        "skipped 1: precision 'INT8' is not predicted (dlperf predicts fp32, tf32, bf16, fp16): ResNet-50 v1.5" in out
    )
    assert "skipped 1: the GPU name 'A100' is ambiguous: A100-SXM4-40GB, " in out and "them): A100 (line 6)" in out
    # the GPU dlperf does not know and its line, where it named the row's model: "...'s table: ResNet-50 v1.5"
    assert "skipped 2: the GPU is not in dlperf's table: A100x (line 7), Z9000 (line 8)" in out
    assert "3 rows predicted, 4 not" in out and ("resnet-50-v1.5", "fp32", 64) not in counted  # neither counted


@pytest.mark.parametrize(
    ("rows", "said"),
    [
        ([], "no rows (the header, then one per measurement)"),
        (["A100x,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,100,img/s,s,n",
          "T4,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,abc,img/s,s,n"],
         "none of its 2 rows could be predicted: bad row, line 3 (ResNet-50 v1.5 on T4): value 'abc' is not a number; "
         "skipped 1: the GPU is not in dlperf's table: A100x (line 2)"),
    ],
)  # fmt: skip
def test_a_file_of_no_row_predicted_is_refused(tmp_path, counted, capsys, rows, said):
    """A header alone, or rows none of which could be predicted, printed an empty table and "0 rows predicted, 1
    not", exit 0, where a --prices or --gpu-specs file of no rows is refused: one line saying why, exit 2."""
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(f"{row}\n" for row in rows))
    assert main(["predict", "--validate", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err == f"dlperf: error: --validate {path}: {said}\n" and counted == []
