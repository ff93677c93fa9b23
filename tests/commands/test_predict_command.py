"""`dlperf predict` end to end: the operator count in a probe child, the prediction, --validate on a small CSV."""

from conftest import dlperf, one_line_error

HEADER = "gpu,model,task,framework,precision,batch_per_gpu,metric,value,unit,source,notes\n"
ROWS = (
    "GTX 1080 Ti,ResNet-20 v1,CIFAR-10 32x32 train (50k imgs),Keras,FP32,32,epoch_time,35,s,s,n\n"
    "GRID K520,MLP 784-512-512-10 (ReLU; dropout),MNIST train (60k),Keras,FP32,128,epoch_time,2,s,s,n\n"
    "GRID K520,CNN conv32-conv64-pool-fc128,MNIST train (60k),Keras,FP32,128,epoch_time,16,s,s,n\n"
    "T4,ResNet-20 v1,CIFAR-10 32x32 train,PyTorch,FP32,32,train_throughput,n/a,img/s,s,n\n"
)


def test_a_tiny_model_is_predicted_launch_bound_with_its_uncertainty():
    proc = dlperf("predict", "tiny-fcn-r", "--gpu", "H100-SXM5-80GB", "--modes", "fp32,bf16", env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if "H100-SXM5-80GB" in line]
    assert len(rows) == 2 and all("launch" in row for row in rows), proc.stdout
    assert "uncertainty: ±" in proc.stdout and "median error on" in proc.stdout


def test_validate_predicts_the_rows_it_can_and_reports_the_others(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text(HEADER + ROWS)
    proc = dlperf("predict", "--validate", str(path), env={"COLUMNS": "200"})
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "ResNet-20 v1" in out and "MLP 784-512-512-10" in out and "Prediction error" in out
    assert "Pascal" in out and "Kepler" in out and "CIFAR ResNet" in out  # by generation and by family
    assert "bad row, line 5 (ResNet-20 v1 on T4): value 'n/a' is not a number" in out
    assert "skipped 1: dlperf does not build this network: CNN conv32-conv64-pool-fc128" in out
    assert "2 rows predicted, 2 not" in out


def test_bad_input_is_one_line():
    one_line_error(dlperf("predict", "tiny-fcn-r"), "--gpu")
    one_line_error(dlperf("predict", "tiny-fcn-r", "--gpu", "T4", "--modes", "fp8"), "--modes", "fp8")
    one_line_error(dlperf("predict", "no-such-net", "--gpu", "T4"), "no-such-net")
    one_line_error(dlperf("predict", "--validate", "/nonexistent.csv"), "cannot read")
