"""Published rows read as steps: conversions, skipped rows with their reasons, bad rows reported, not crashed on."""

import pytest

from dlperf.errors import UsageError
from dlperf.predict import validate as v
from dlperf.predict.roofline import Prediction

HEADER = "gpu,model,task,framework,precision,batch_per_gpu,metric,value,unit,source,notes\n"
ROWS = [
    "V100-SXM2-16GB,ResNet-50 v1.5,ImageNet-1k train 224px,PyTorch,FP32,128,train_throughput,400,img/s,s,n",
    "A100-SXM4-80GB,ResNet-50 v1.5,ImageNet-1k train 224px (synthetic data),PyTorch,TF32,256,train_throughput,1000,"
    "img/s,s,n",
    "A100-SXM4-40GB,GNMTv2 (LSTM),WMT16 En-De,PyTorch,AMP,128,train_throughput,76800,tok/s,s,n",
    "GTX 1080,VGG-16,ImageNet-shape 224px (random input),Torch7,FP32,16,fwd_bwd_time_per_batch,182.79,ms,s,n",
    "K80 (1 GK210 die),ResNet-164 bottleneck,CIFAR-10 32x32 train,PyTorch,FP32,128,epoch_time,237.8,s,s,n",
    "Quadro GP100,AWD-LSTM (3x1150 LSTM),PTB word LM,PyTorch,FP32,20,epoch_time,65,s,s,n",
    "Quadro GP100,MobileNet,training step,PyTorch,FP32,64,train_throughput,463,img/s,s,n",  # not built
    "Quadro GP100,ResNet-50,training step,PyTorch,FP32,,train_throughput,212,img/s,s,n",  # no batch
    "Imaginary 9000,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,100,img/s,s,n",  # GPU unknown
    "T4,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,abc,img/s,s,n",  # bad: not a number
    "T4,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,-3,img/s,s,n",  # bad: negative
    ",ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,100,img/s,s,n",  # bad: no GPU
    "T4,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,100,furlongs/s,s,n",  # unit not converted
]


@pytest.fixture
def csv_path(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "\n".join(ROWS) + "\n")
    return path


def test_rows_become_steps_in_seconds(csv_path):
    cases, skipped = v.read(csv_path)
    by_model = {c.model: c for c in cases}
    assert len(cases) == 6 and len(skipped) == 7
    r50 = cases[0]
    assert (r50.workload, r50.mode, r50.batch, r50.transfer) == ("resnet-50-v1.5", "fp32", 128, True)
    assert r50.measured_s == pytest.approx(128 / 400) and r50.line == 2
    a100 = next(c for c in cases if c.gpu.name == "A100-SXM4-80GB")
    assert a100.mode == "tf32" and not a100.transfer  # synthetic data: made on the GPU
    gnmt = by_model["GNMTv2 (LSTM)"]
    assert gnmt.mode == "fp16" and gnmt.seq_len == v.GNMT_TOKENS
    assert gnmt.measured_s == pytest.approx(128 * 2 * v.GNMT_TOKENS / 76800)
    vgg = by_model["VGG-16"]
    assert vgg.phases == ("forward", "backward") and vgg.measured_s == pytest.approx(0.18279)
    cifar = by_model["ResNet-164 bottleneck"]
    assert cifar.workload == "resnet-164" and cifar.measured_s == pytest.approx(237.8 / 391)  # ceil(50000 / 128)
    awd = by_model["AWD-LSTM (3x1150 LSTM)"]
    assert awd.measured_s == pytest.approx(65 / (929_589 / (20 * 70)))


def test_rows_dlperf_cannot_predict_are_skipped_with_the_reason_and_bad_rows_are_reported(csv_path):
    _, skipped = v.read(csv_path)
    reasons = {s.line: (s.reason, s.bad) for s in skipped}
    assert reasons[8] == ("dlperf does not build this network", False)
    assert reasons[9] == ("no batch size published", False)
    assert reasons[10] == ("the GPU is not in dlperf's table", False)
    assert reasons[11][1] and "not a number" in reasons[11][0]
    assert reasons[12][1] and "not a positive number" in reasons[12][0]
    assert reasons[13][1] and "no model or no gpu" in reasons[13][0]
    assert not reasons[14][1] and "furlongs/s" in reasons[14][0]


def test_a_workload_dlperf_lacks_is_skipped(csv_path):
    cases, skipped = v.read(csv_path, known=lambda name: name != "vgg-16")
    assert "VGG-16" not in {c.model for c in cases}
    assert any(s.model == "VGG-16" and s.reason == "dlperf does not build this network" for s in skipped)


def test_a_file_that_is_not_a_measurements_csv_is_one_usage_error(tmp_path):
    with pytest.raises(UsageError, match="no column"):
        (tmp_path / "x.csv").write_text("a,b\n1,2\n")
        v.read(tmp_path / "x.csv")
    with pytest.raises(UsageError, match="cannot read"):
        v.read(tmp_path / "absent.csv")


@pytest.mark.parametrize(
    ("text", "mode"),
    [("FP32", "fp32"), ("TF32 (FP32 mode; NGC default on Ampere+)", "tf32"), ("AMP (fp16) NHWC", "fp16"),
     ("FP16 mixed (DLE GNMT --math fp16)", "fp16"), ("TF32 + XLA", "tf32"), ("FP32 + XLA", "fp32"),
     ("FP16 (half)", "fp16"), ("AMP + XLA", "fp16")],
)  # fmt: skip
def test_published_precisions_map_to_modes(text, mode):
    assert v.mode_of(text) == mode


def test_mixed_precision_is_predicted_as_fp16_and_tf32_said_off_is_fp32(tmp_path):
    """A user's CSV: "Mixed precision" was skipped as a precision not predicted, though dlperf predicts mixed precision
    (as fp16 autocast, as AMP is read), and "FP32 (TF32 disabled)" was scored as tf32."""
    said = {"Mixed precision": "fp16", "mixed": "fp16", "mixed bf16": "bf16", "Mixed (BF16)": "bf16",
            "FP32 (TF32 disabled)": "fp32", "TF32 off": "fp32", "no TF32": "fp32", "FP32, allow_tf32=False": "fp32",
            "AMP (TF32 disabled)": "fp16", "TF32 (published as FP32)": "tf32", "TF32 + XLA": "tf32"}  # fmt: skip
    assert {text: v.mode_of(text) for text in said} == said
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "".join(GOOD.replace(",FP32,", f",{p},") + "\n" for p in ("Mixed precision", "TF32 off")))
    cases, skipped = v.read(path)
    assert [c.mode for c in cases] == ["fp16", "fp32"] and skipped == []


def test_a_precision_dlperf_does_not_predict_is_skipped_and_an_ambiguous_gpu_said_so(tmp_path):
    """INT8 was read as fp32 and scored ("fp32 ... -74%"); a row on "A100" was skipped as a GPU not in the table,
    where `--gpu A100` says the name is ambiguous."""
    assert [v.mode_of(p) for p in ("INT8", "FP8", "", "bfloat16", "float32")] == [None, None, None, "bf16", "fp32"]
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + "\n".join([
        "A100-SXM4-80GB,ResNet-50 v1.5,ImageNet,PyTorch,INT8,64,train_throughput,100,img/s,s,n",
        "A100,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,100,img/s,s,n",
    ]) + "\n")  # fmt: skip
    cases, skipped = v.read(path)
    assert cases == [] and [(s.line, s.bad, s.mode) for s in skipped] == [(2, False, ""), (3, False, "fp32")]
    assert skipped[0].reason == "precision 'INT8' is not predicted (dlperf predicts fp32, tf32, bf16, fp16)"
    assert skipped[1].reason == ("the GPU name 'A100' is ambiguous: A100-SXM4-40GB, A100-SXM4-80GB, A100-PCIe-40GB, "
                                 "A100-PCIe-80GB (name one of them)")  # fmt: skip


def test_the_summary_is_the_median_and_mean_of_absolute_errors(csv_path):
    cases, _ = v.read(csv_path)

    def result(case, ratio):
        p = Prediction(case.gpu.name, case.workload, case.mode, case.batch, case.measured_s * ratio, 0.0, "compute")
        return v.Result(case, p)

    results = [result(c, r) for c, r in zip(cases, (1.1, 0.8, 1.3, 1.0, 0.95, 1.5), strict=True)]
    [overall] = v.summarize(results)
    assert overall.rows == 6
    assert overall.median_abs_pct == pytest.approx(15) and overall.mean_abs_pct == pytest.approx(115 / 6)
    assert overall.median_pct == pytest.approx(5.0)
    by_gen = {s.group: s.rows for s in v.summarize(results, lambda r: r.case.gpu.generation)}
    assert by_gen == {"Volta": 1, "Ampere": 2, "Pascal": 2, "Kepler": 1}
    assert v.percentile_abs(results, 0.8) == pytest.approx(30)


# ----------------------------------------------------------------------------------------------------------------------
# Files as spreadsheets and editors write them, and files that are not measurements at all (issue 30)

GOOD = "T4,ResNet-50 v1.5,ImageNet,PyTorch,FP32,64,train_throughput,100,img/s,s,n"


def test_a_byte_order_mark_crlf_line_ends_and_a_quoted_line_break_are_read(tmp_path):
    path = tmp_path / "excel.csv"
    quoted = GOOD.removesuffix(",n") + ',"two\r\nlines"'
    path.write_bytes(b"\xef\xbb\xbf" + "\r\n".join([HEADER.strip(), GOOD, quoted, GOOD]).encode() + b"\r\n")
    cases, skipped = v.read(path)
    assert skipped == [] and [c.line for c in cases] == [2, 4, 5]  # the quoted row spans lines 3 and 4


def test_a_bad_row_is_named_by_its_line_in_the_file(tmp_path):
    path = tmp_path / "gaps.csv"
    path.write_text(HEADER + "\n" + GOOD + "\n\n" + GOOD.replace(",100,", ",abc,") + "\n")
    _, [bad] = v.read(path)
    assert bad.bad and bad.line == 5  # after a blank line: the file's line, not the row's count


def test_a_file_that_is_not_utf8_is_one_usage_error_naming_the_line(tmp_path):
    path = tmp_path / "latin1.csv"
    path.write_bytes((HEADER + GOOD + "\n").encode() + "T4,ResNet-50 v1.5 (Müller),x\n".encode("latin-1"))
    with pytest.raises(UsageError, match=r"line 3 is not UTF-8 text \(byte b'\\xfc'\)"):
        v.read(path)


@pytest.mark.parametrize("cell", ["gpu", "model", "precision", "unit"])
@pytest.mark.parametrize("start", ["=", "+", "-", "@"])
def test_a_cell_a_spreadsheet_would_take_for_a_formula_is_a_bad_row(tmp_path, cell, start):
    """`=T4` is a spreadsheet's reference to cell T4, not the GPU T4: never matched to a name."""
    row = dict(zip(HEADER.strip().split(","), GOOD.split(","), strict=True))
    row[cell] = start + row[cell]
    path = tmp_path / "formula.csv"
    path.write_text(HEADER + ",".join(row.values()) + "\n")
    cases, [bad] = v.read(path)
    assert cases == [] and bad.bad and bad.reason.startswith(f"{cell} '{start}") and "spreadsheet formula" in bad.reason


@pytest.mark.parametrize(
    ("batch", "reason"),
    [("1.5", "not a whole number"), ("1e3", "not a whole number"), ("nan", "not a whole number"),
     ("-8", "not a whole number"), ("0", "from 1 to 1,048,576"), (str(2**20 + 1), "from 1 to 1,048,576"),
     ("10000000000000000000000", "from 1 to 1,048,576")],
)  # fmt: skip
def test_a_batch_is_a_whole_number_from_1_to_the_largest_counted(tmp_path, batch, reason):
    path = tmp_path / "batch.csv"
    path.write_text(HEADER + GOOD.replace(",64,", f",{batch},") + "\n" + GOOD.replace(",64,", f",{2**20},") + "\n")
    [case], [bad] = v.read(path)
    assert case.batch == 2**20 and bad.bad and reason in bad.reason and f"'{batch}'" in bad.reason


@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1_000", "٣", "0", "-3"])
def test_a_value_that_is_not_a_finite_positive_number_is_a_bad_row(tmp_path, value):
    path = tmp_path / "value.csv"
    path.write_text(HEADER + GOOD.replace(",100,", f",{value},") + "\n")
    [], [bad] = v.read(path)
    assert bad.bad and f"value {value!r} is not a" in bad.reason


def test_rows_past_the_cap_refuse_the_file_and_a_line_past_its_cap_too(tmp_path, monkeypatch):
    monkeypatch.setattr(v, "MAX_ROWS", 3)
    path = tmp_path / "many.csv"
    path.write_text(HEADER + "\n".join([GOOD] * 3) + "\n")
    assert len(v.read(path)[0]) == 3
    path.write_text(HEADER + "\n".join([GOOD] * 4) + "\n")
    with pytest.raises(UsageError, match="more than 3 rows"):
        v.read(path)
    monkeypatch.setattr(v, "MAX_LINE", 200)
    path.write_text(HEADER + GOOD + ",x" * 100 + "\n")
    with pytest.raises(UsageError, match="line 2 is longer than 200 characters"):
        v.read(path)


# ----------------------------------------------------------------------------------------------------------------------
# Out of scope by metadata, never by error (issue 32): the `scope` column, and the rule that wrote the shipped one

SCOPED = "gpu,model,task,framework,precision,batch_per_gpu,metric,value,unit,source,notes,scope\n"


def test_a_row_out_of_scope_by_its_scope_column_keeps_its_reason_and_the_others_are_in(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(SCOPED + f"{GOOD},out: an epoch's time\n{GOOD},in\n{GOOD},\n")
    cases, skipped = v.read(path)
    assert skipped == [] and [c.scope for c in cases] == ["an epoch's time", "", ""]
    assert [c.in_scope for c in cases] == [False, True, True]
    path.write_text(HEADER + GOOD + "\n")  # a file without the column: every row in scope
    [case], [] = v.read(path)
    assert case.in_scope


@pytest.mark.parametrize("scope", ["maybe", "out:", "out:  ", "OUT because"])
def test_a_scope_that_is_neither_in_nor_out_with_a_reason_is_a_bad_row(tmp_path, scope):
    path = tmp_path / "rows.csv"
    path.write_text(SCOPED + f"{GOOD},{scope}\n")
    [], [bad] = v.read(path)
    assert bad.bad and "scope" in bad.reason and "'out: REASON'" in bad.reason


def test_every_shipped_row_has_the_scope_the_stated_rule_gives_it():
    import csv

    with open(v.shipped(), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["scope"] for r in rows] == [v.scope_rule(r) for r in rows]
    out = [r for r in rows if r["scope"] != "in"]
    cifar = [r for r in rows if "CIFAR" in r["task"]]
    assert cifar and all(r["scope"].startswith("out: ") for r in cifar)  # DAWNBench-style epochs, 2017 TF, loaders
    torch7 = [r for r in rows if r["framework"].startswith("Torch7")]
    assert torch7 and all("2015-17 software" in r["scope"] for r in torch7)
    ngc = [r for r in rows if r["source"].startswith("github:NVIDIA/DeepLearningExamples")]
    assert ngc and all(r["scope"] == "in" for r in ngc)  # today's containers, throughput over a run
    assert 0 < len(out) < len(rows)


@pytest.mark.parametrize(
    ("row", "reason"),
    [
        ({"metric": "epoch_time", "framework": "PyTorch 2.3"}, "an epoch's wall time"),
        ({"metric": "time_to_train_24ep"}, "an epoch's wall time"),
        ({"framework": "Torch7 + cuDNN 5.1.05"}, "2015-17 software"),
        ({"framework": "TensorFlow 1.x (tf_cnn_benchmarks, 2017)"}, "2015-17 software"),
        ({"framework": "PyTorch 0.3"}, "2015-17 software"),
        ({"notes": "K80 ResNet-20/56 differ EC2 vs GCE -> host/input-pipeline bound"}, "data loader"),
        ({"notes": "real-data loader capped throughput at 2,400 img/s"}, "data loader"),
        ({"notes": "real-data loader may cap throughput (esp. A100 AMP)"}, ""),  # a hedge is not a statement
        ({"framework": "PyTorch (NGC 21.03)", "notes": "real ImageNet, DLE DALI/pytorch loader"}, ""),
        ({"framework": "TensorFlow 1.15 (NGC 20.06)"}, ""),
    ],
)
def test_the_scope_rule_reads_the_metric_the_framework_and_the_notes(row, reason):
    full = {"metric": "train_throughput", "framework": "PyTorch", "notes": "", "task": "", "source": ""} | row
    got = v.scope_rule(full)
    assert got == "in" if not reason else got.startswith("out: ") and reason in got
