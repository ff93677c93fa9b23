"""Issue 32, item 1: the GPU table covers today's GPUs, each Volta-or-later row with its tensor figures, one clock rule;
and `--gpu-specs FILE.csv` adds a user's GPUs (or replaces a built-in row) with the table's own validation."""

from __future__ import annotations

import pytest

from conftest import dlperf, one_line_error
from dlperf.errors import UsageError
from dlperf.predict import gpus
from predict.conftest import BEFORE_CUDA_GIB

NEW = (
    "B200", "GB200 (per GPU)", "B300", "GH200", "H200 NVL", "H100 NVL", "H20", "H800-SXM5-80GB",
    "L40S", "L40", "L4", "A30", "A10G", "A16 (1 of 4 GPUs)",
    "RTX 5090", "RTX 5080", "RTX PRO 6000 Blackwell", "RTX 6000 Ada", "RTX 4000 Ada",
)  # fmt: skip
TENSOR = ("Volta", "Turing", "Ampere", "Ada", "Hopper", "Blackwell")
BF16_TF32 = ("Ampere", "Ada", "Hopper", "Blackwell")
FP8 = ("Ada", "Hopper", "Blackwell")
HEADER = BEFORE_CUDA_GIB  # the rows below leave cuda_gib out, as a file of before may


def test_the_table_covers_todays_gpus():
    names = gpus.names()
    assert [n for n in NEW if n not in names] == []
    assert len(names) == len(set(names)) == 41 + len(NEW) - 2  # L4 and RTX 6000 Ada were rows already


def test_every_volta_or_later_row_has_its_tensor_figures_and_every_row_its_source():
    """The issue: RTX A4500, RTX A5500, RTX 6000 Ada (and TF32/BF16 of RTX A4000) had no tensor figures, so their
    fp16 and tf32 rows were predicted at FP32 rates."""
    lacking = []
    for g in gpus.table():
        wanted = {"fp16": g.generation in TENSOR, "bf16": g.generation in BF16_TF32,
                  "tf32": g.generation in BF16_TF32, "fp8": g.generation in FP8}  # fmt: skip
        lacking += [f"{g.name} {unit}" for unit, needed in wanted.items() if needed and not getattr(g, unit)]
        if not g.source.strip():
            lacking.append(f"{g.name} source")
    assert lacking == []


def test_every_row_states_its_clock_and_the_rule_is_boost():
    """The issue: GTX 1080 was at its boost clock, 1080 Ti, Titan X (Pascal) and GTX 980 at base. Every row now says
    which clock its peaks use; boost unless the row's source says otherwise."""
    assert {g.peak_clock for g in gpus.table()} <= {"boost", "base", "unstated"}
    for name in ("GTX 1080", "GTX 1080 Ti", "Titan X (Pascal)", "GTX 980", "Titan X (Maxwell)"):
        g = gpus.lookup(name)
        assert g.peak_clock == "boost" and g.boost_clock_mhz and g.sm_count
        cores = g.sm_count * 128  # Maxwell and Pascal GP102/GP104: 128 FP32 cores per SM
        assert g.fp32 == pytest.approx(cores * 2 * g.boost_clock_mhz * 1e6, rel=0.01), name
    for g in gpus.table():
        if g.peak_clock != "boost":
            assert "clock" in g.source, g.name  # the source says which clock, and why not boost


def write(tmp_path, *rows: str, header: str = HEADER):
    path = tmp_path / "mine.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


MINE = "My GPU,50,100,200,200,400,1000,32,PCIe Gen5 x16,63,Hopper,100,2000,40,boost,my datasheet"


def test_a_users_new_gpu_is_predicted(tmp_path):
    done = dlperf("predict", "tiny-fcn-r", "--gpu", "my gpu", "--modes", "fp32,bf16",
                  "--gpu-specs", str(write(tmp_path, MINE)))  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "My GPU" in done.stdout and "has no bf16 unit" not in done.stdout


def test_a_users_row_replaces_the_built_in_one_of_the_same_name(tmp_path):
    path = write(tmp_path, "T4,9.9,,70,,,330,16,PCIe Gen3 x16,15.75,Turing,40,1590,4,boost,my own T4 figures")
    gpus.use_specs(str(path))
    t4 = gpus.lookup("T4")
    assert t4.fp32 == pytest.approx(9.9e12) and t4.source == "my own T4 figures"
    assert gpus.names().count("T4") == 1 and len(gpus.names()) == len(set(gpus.names()))
    listed = dlperf("predict", "--list-gpus", "--gpu-specs", str(path), env={"COLUMNS": ""})
    assert listed.returncode == 0, listed.stderr
    assert next(r for r in listed.stdout.splitlines() if r.startswith("│ T4 ")).split("│")[3].strip() == "9.9"


@pytest.mark.parametrize(
    ("rows", "header", "fragments"),
    [
        ([MINE.replace(",50,", ",fifty,", 1)], HEADER, ("line 2, column fp32_tflops", "'fifty' is not a number")),
        ([MINE.replace(",1000,", ",-5,", 1)], HEADER, ("line 2, column mem_bw_gbs", "above 0")),
        ([MINE.replace(",Hopper,", ",Hoppr,", 1)], HEADER, ("line 2, column generation", "'Hoppr'", "Hopper")),
        ([MINE.replace(",50,", ",,", 1)], HEADER, ("line 2, column fp32_tflops", "empty")),
        ([MINE.replace("my datasheet", "")], HEADER, ("line 2, column source", "empty")),
        ([MINE.replace(",boost,", ",turbo,", 1)], HEADER, ("line 2, column peak_clock", "boost, base")),
        ([MINE.replace(",32,", ",0.3,", 1)], HEADER, ("line 2, column mem_gib", "0.3 GiB", "CUDA context")),
        # float() takes 1e309, inf and nan; 1e300 GiB was taken and every prediction on it was a traceback
        ([MINE.replace(",32,", ",1e300,", 1)], HEADER, ("line 2, column mem_gib", "1e300 is outside 0.01 to 16,384")),
        ([MINE.replace(",32,", ",1e309,", 1)], HEADER, ("line 2, column mem_gib", "'1e309' is not a finite number")),
        ([MINE.replace(",50,", ",inf,", 1)], HEADER, ("column fp32_tflops", "'inf' is not a finite number")),
        ([MINE.replace(",1000,", ",8e12,", 1)], HEADER, ("column mem_bw_gbs", "outside 1 to 100,000 GB/s")),  # B/s
        ([MINE.replace(",100,2000,", ",100,2e9,", 1)], HEADER, ("column boost_clock_mhz", "to 10,000 MHz")),
        ([MINE.replace(",100,2000,", ",1.5,2000,", 1)], HEADER, ("line 2, column sm_count", "whole number")),
        ([MINE, MINE.replace("My GPU", "my-gpu")], HEADER, ("line 3, column gpu", "line 2")),
        ([MINE + ",extra"], HEADER, ("line 2", "17 fields", "16")),
        ([MINE], HEADER.replace("fp32_tflops", "fp32"), ("line 1", "fp32_tflops")),
        ([MINE], HEADER + ",fp4_tflops", ("line 1", "'fp4_tflops'")),
        ([], HEADER, ("no GPU rows",)),
    ],
)
def test_a_wrong_spec_row_is_one_line_naming_file_line_and_column(tmp_path, rows, header, fragments):
    path = write(tmp_path, *rows, header=header)
    with pytest.raises(UsageError) as caught:
        gpus.use_specs(str(path))
    message = str(caught.value)
    assert message.startswith(f"--gpu-specs {path}") and "\n" not in message
    for fragment in fragments:
        assert fragment in message, message
    assert gpus.lookup("T4").source != "my own T4 figures"  # a refused file changes nothing


def test_a_missing_or_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(UsageError, match=r"--gpu-specs .*nope\.csv: no such file"):
        gpus.use_specs(str(tmp_path / "nope.csv"))
    (tmp_path / "bin.csv").write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UsageError, match=r"--gpu-specs .*bin\.csv: .*UTF-8"):
        gpus.use_specs(str(tmp_path / "bin.csv"))


def test_the_command_lines_refuse_a_wrong_file_before_anything_runs(tmp_path):
    path = write(tmp_path, MINE.replace(",50,", ",fifty,", 1))
    one_line_error(dlperf("predict", "tiny-fcn-r", "--gpu", "T4", "--gpu-specs", str(path)),
                   f"--gpu-specs {path}, line 2, column fp32_tflops")  # fmt: skip
    db = tmp_path / "x.db"
    one_line_error(dlperf("crossover", "tiny-fcn-r", "--gpu-specs", str(path), db=db), "line 2, column fp32_tflops")
    one_line_error(dlperf("run", "--workloads", "tiny-fcn-r", "--gpu-specs", str(path), db=db), "column fp32_tflops")
    one_line_error(dlperf("run", "--resume", "--gpu-specs", str(write(tmp_path, MINE)), db=db), "a resumed run keeps")
    assert not db.exists()  # nothing measured, nothing written


@pytest.mark.parametrize(
    "words",
    [("predict", "tiny-fcn-r", "--gpu", "My GPU"), ("predict", "tiny-fcn-r", "--gpu", "My GPU", "--memory"),
     ("predict", "tiny-fcn-r", "--gpu", "My GPU", "--cost"), ("advise", "tiny-fcn-r", "--gpu", "My GPU"),
     ("crossover", "tiny-fcn-r", "--gpu", "My GPU")],
)  # fmt: skip
def test_a_huge_figure_is_refused_before_anything_is_counted_or_measured(tmp_path, words):
    """A row of 1e300 GiB was taken: predict, advise and crossover (after measuring every batch, its run stored) then
    failed with OverflowError in `memory.usable`. The file is refused up front, in one line, nothing stored."""
    path = write(tmp_path, MINE.replace(",32,", ",1e300,", 1))
    db = tmp_path / "x.db"
    stores = words[0] != "predict" or "--cost" in words  # predict refuses a --db it does not read
    said = f"--gpu-specs {path}, line 2, column mem_gib: 1e300 is outside 0.01 to 16,384 GiB, the range a GPU's figure"
    one_line_error(dlperf(*words, "--gpu-specs", str(path), db=db if stores else None), said)
    assert not db.exists()


def test_a_run_on_a_gpu_the_table_lacks_is_predicted_from_the_users_row(tmp_path, monkeypatch):
    """`dlperf run --gpu-specs`: the cells of a GPU CUDA names "NVIDIA My GPU" get their prediction from the user's
    row (the run's own prediction step, with a fake count: no GPU here)."""
    from dlperf.frameworks.common.ops import Count, Op
    from dlperf.predict import cells, count
    from dlperf.protocol import Cell
    from dlperf.workloads import BUILTIN

    w = BUILTIN["tiny-fcn-r"]
    cell = Cell(w.name, "torch", "cuda:0", 1, "fp32")
    machine = {"frameworks": {"torch": {"devices": [{"name": "cuda:0", "model": "NVIDIA My GPU"}]}}}
    op = Op("matmul", "fp32", 2 * 1024**3, 4 * 1024**2)
    monkeypatch.setattr(count, "counts", lambda requests, timeout=None: [Count(w.name, "fp32", 16, (op,), 1, 1)])
    rows, warnings = cells.predictions([cell], {cell.key: w.to_json()}, machine)
    assert rows == [] and "--gpu-specs FILE.csv" in warnings[0]  # not in the table: say how to add it
    gpus.use_specs(str(write(tmp_path, MINE)))
    rows, warnings = cells.predictions([cell], {cell.key: w.to_json()}, machine)
    assert warnings == [] and [r.gpu for r in rows] == ["My GPU"] and rows[0].step_s > 0


def test_the_predictor_runs_on_every_new_gpu():
    done = dlperf("predict", "tiny-fcn-r", "--gpu", ",".join(NEW), "--modes", "fp32,tf32,bf16,fp16",
                  env={"COLUMNS": "250"})  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "has no" not in done.stdout  # every new GPU has its tensor units
    for name in NEW:
        assert name.split(" (")[0] in done.stdout, name


@pytest.mark.parametrize(
    ("cuda", "name"),
    [("NVIDIA GH200 480GB", "GH200"), ("NVIDIA H100 NVL", "H100 NVL"), ("NVIDIA H200 NVL", "H200 NVL"),
     ("NVIDIA B200", "B200"), ("NVIDIA L40S", "L40S"), ("NVIDIA A10G", "A10G"), ("NVIDIA H20", "H20"),
     ("NVIDIA RTX 6000 Ada Generation", "RTX 6000 Ada"), ("NVIDIA GeForce RTX 5090", "RTX 5090"),
     ("NVIDIA RTX PRO 6000 Blackwell Workstation Edition", "RTX PRO 6000 Blackwell"),
     ("NVIDIA H800", "H800-SXM5-80GB")],
)  # fmt: skip
def test_what_cuda_calls_the_new_gpus_is_found(cuda, name):
    assert gpus.for_device(cuda).name == name


def test_crossover_takes_a_users_gpu_once_the_file_is_loaded(tmp_path):
    from dlperf import crossover

    opts = crossover.Options("tiny-fcn-r", gpus=("My GPU", "T4"))
    with pytest.raises(UsageError, match="unknown GPU"):
        crossover.check(opts)
    gpus.use_specs(str(write(tmp_path, MINE)))
    assert [g.name for g in crossover.check(opts)] == ["My GPU", "T4"]
