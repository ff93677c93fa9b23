"""`dlperf crossover` through the command line: a tiny workload measured at two batches and stored with its GPU
predictions, the answer printed; the paper's check; bad input as one line before anything runs."""

from __future__ import annotations

import re
from types import SimpleNamespace

import pytest

from conftest import FAST, dlperf, gone, interrupt_once, one_line_error, rows
from dlperf.predict import roofline
from dlperf.report import crossover
from dlperf.report.figure_style import PALETTE
from dlperf.store import Store
from dlperf.workloads import BUILTIN
from report.pictures import assert_png_draws


@pytest.mark.parametrize(
    ("args", "fragment"),
    [
        (["tiny-fcn-r", "--gpu", "Z9000"], "unknown GPU"),
        (["tiny-fcn-r", "--gpu", "T4,H100-SXM9"], "H100-SXM9"),
        (["tiny-fcn-r", "--batches", "0"], "--batches"),
        (["tiny-fcn-r", "--batches", f"1,{2**62}"], f"--batches '{2**62}': expected a batch, a whole number from 1"),
        (["tiny-fcn-r", "--batch", str(2**62)], "--batch '4611686018427387904': expected a batch, a whole number"),
        (["tiny-fcn-r", "--max-batch", str(2**62)], "--max-batch '4611686018427387904': expected a batch"),
        (["no-such-net"], "unknown workload 'no-such-net'"),
        (["models.py"], "models.py:FACTORY"),
        (["tiny-fcn-r", "--mode", "tf32"], "--mode"),
        (["tiny-fcn-r", "--paper"], "--paper"),
        (["tiny-fcn-r", "--plot", "x.gif"], "--plot"),
        (["tiny-fcn-r", "--plot", "no/such/dir/x.png"], "--plot 'no/such/dir/x.png': directory"),  # before measuring
        # `--plot "$OUT"`, $OUT unset: it measured every batch and drew nothing, exit 0, where `-o ''` is refused
        (["tiny-fcn-r", "--plot", ""], "--plot '': expected a file to draw into (png, svg or pdf), got nothing"),
        (["--paper", "--gpu", "T4"], "--gpu would be ignored"),  # --paper is the paper's GTX 1080
        ([], "WORKLOAD"),
    ],
)
def test_bad_input_is_one_line_and_stores_nothing(tmp_path, capsys, monkeypatch, args, fragment):
    from dlperf.cli import main

    db = tmp_path / "d.db"
    (tmp_path / "models.py").write_text("def tiny():\n    return None\n")
    monkeypatch.chdir(tmp_path)
    code = main(["crossover", *args, "--db", str(db)])
    one_line_error(SimpleNamespace(returncode=code, stderr=capsys.readouterr().err), fragment)
    assert not db.exists()


@pytest.mark.slow  # an end-to-end run of the command: with the sweeps (make test-slow), keeping make test short
def test_a_crossover_is_measured_stored_and_answered(tmp_path):
    db, png = tmp_path / "d.db", tmp_path / "x.png"
    proc = dlperf(
        "crossover",
        "tiny-fcn-r",
        "--batches",
        "1,8",
        "--max-batch",
        "8",
        "--threads",
        "1",
        "--gpu",
        "T4",
        "--plot",
        str(png),
        "--min-steps",
        "3",
        "--min-time",
        "0.1",
        "--max-time",
        "2",
        db=db,
        timeout=300,
        env={"COLUMNS": "300"},
    )  # fmt: skip  (an answer line whole: rich wraps at 80 columns through a pipe
    assert proc.returncode == 0, proc.stderr
    store = Store.open(db, create=False)
    [run] = store.runs()
    cells = store.cells(run.id)
    assert sorted((c.workload, c.batch, c.threads) for c in cells) == [("tiny-fcn-r@b1", 1, 1), ("tiny-fcn-r@b8", 8, 1)]
    assert all(c.ok and c.median_s for c in cells)
    predictions = store.predictions(run.id)
    assert sorted(p.batch for ps in predictions.values() for p in ps) == [1, 8]
    gpu = {p.batch: p for ps in predictions.values() for p in ps}
    assert all(p.gpu == "T4" and p.step_s == pytest.approx(p.device_s + p.transfer_s) for p in gpu.values())
    assert 0 < gpu[1].transfer_s < gpu[8].transfer_s <= 8 * gpu[1].transfer_s  # 8x the bytes over the same link
    [x] = crossover.read(store, [run.id])
    assert [r.batch for r in x.rows] == [1, 8] and x.gpus == ["T4"]
    # the answer, from the stored steps: predicted faster from the smallest batch after which it always is
    cpu = {r["batch"]: r["median_s"] for r in rows(db, "SELECT batch, median_s FROM cells")}

    def bound(b: int) -> str:  # the copy when it is most of the step, else the device's bound
        p = gpu[b]
        return "bound by the batch's copy" if p.transfer_s > p.step_s / 2 else f"{p.bound}-bound"

    faster = tuple(b for b in (1, 8) if gpu[b].step_s < cpu[b])
    answer = {
        (1, 8): f"predicted faster than this CPU from batch 1, {bound(1)} there",
        (8,): f"predicted faster than this CPU from batch 8, {bound(8)} there",
        (1,): f"not predicted faster than this CPU at batch 8, the largest measured (it is at 1; {bound(8)} at 8)",
        (): f"not predicted faster than this CPU up to batch 8 ({bound(8)} there)",
    }[faster] + f"; uncertainty {roofline.uncertainty()}"
    assert [line for line in proc.stdout.splitlines() if line.startswith("T4: ")] == [f"T4: {answer}"], (cpu, gpu)
    out = " ".join(proc.stdout.split())
    assert f"your batch {BUILTIN['tiny-fcn-r'].batch} was not measured: it is above --max-batch 8" in out
    assert "mostly a fixed cost, the host issuing each kernel" in out  # at small batches: this machine's
    colours = [c.lower() for c in PALETTE[:2]]  # the CPU measured, T4 predicted
    assert_png_draws(png, 1, colours=colours, legend_beside=True)
    table = dlperf("table", db=db, timeout=60)
    assert table.returncode == 0 and "tiny-fcn-r@b8" in table.stdout, table.stderr


@pytest.mark.slow  # an end-to-end run of the command: with the sweeps (make test-slow), keeping make test short
def test_the_paper_check_sets_seven_predictions_beside_the_papers_gtx_1080(tmp_path):
    proc = dlperf("crossover", "--paper", timeout=300, cwd=tmp_path, env={"COLUMNS": "200"})  # a row a line
    assert proc.returncode == 0, proc.stderr
    networks = ("FCN-S", "AlexNet-S", "ResNet-50", "FCN-R", "AlexNet-R", "ResNet-56", "LSTM")
    rows = {w[1]: line for line in proc.stdout.splitlines() if (w := line.split())[1:2] and w[1] in networks}
    assert list(rows) == list(networks), proc.stdout
    for line in rows.values():  # the prediction, the paper's best and its range's two ends
        assert len(re.findall(r"\d (?:ms|s|µs)\b", line)) == 4, line
    assert "CUDA 8, cuDNN 5.1" in " ".join(proc.stdout.split())
    assert not list(tmp_path.iterdir())  # no store: nothing was measured


@pytest.mark.slow
def test_a_count_that_never_ends_is_stopped_at_the_timeout_and_stores_nothing(tmp_path):
    """The operators are counted before anything is measured, within --timeout as every process of the command."""
    from commands.test_predict_command import SLEEPY

    source, db = tmp_path / "sleepy.py", tmp_path / "d.db"
    source.write_text(SLEEPY)
    proc = dlperf("crossover", f"{source}:make", "--gpu", "T4", "--threads", "1", "--timeout", "3", db=db, timeout=90)
    one_line_error(proc, "--timeout 3 s")
    assert not db.exists()


@pytest.mark.slow  # an end-to-end run of the command: with the sweeps (make test-slow), keeping make test short
def test_max_batch_bounds_every_batch_measured_the_thread_search_too(tmp_path):
    """tiny-fcn-r trains at 16; --max-batch 2 measures no batch above 2, so the thread count is searched at 2."""
    db = tmp_path / "d.db"
    proc = dlperf("crossover", "tiny-fcn-r", "--max-batch", "2", "--gpu", "T4", "--min-steps", "3", "--min-time",
                  "0.1", "--max-time", "1", db=db, timeout=300)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    measured = rows(db, "SELECT batch, threads FROM cells")
    assert {r["batch"] for r in measured} == {1, 2}, measured
    assert len({r["threads"] for r in measured if r["batch"] == 2}) == len(measured) - 1  # the search, then batch 1
    out = " ".join(proc.stdout.split())
    assert "at batch 2 (your batch 16 is above --max-batch 2)" in out and "your batch 16 was not measured" in out


def test_your_batch_is_among_the_batches_measured_unless_max_batch_is_below_it():
    """`--batches 4 --batch 32`: batch 32 was measured (the thread search's) but had no GPU beside it, and a note
    said it was not measured."""
    from dlperf import crossover as x

    assert x.batches_for(32, (4,), None) == [4, 32]
    assert x.batches_for(16, None, None) == [1, 2, 4, 8, 16, 32, 64, 128, 256]
    assert x.batches_for(16, (1, 8), 8) == [1, 8]


@pytest.mark.parametrize(
    ("user", "batches", "most", "searched"),
    [(16, None, None, 16), (16, (1, 2), None, 16), (16, None, 2, 2), (16, (1, 4, 64), 8, 4), (2, None, 8, 2)],
)
def test_the_thread_count_is_searched_at_your_batch_unless_max_batch_is_below_it(user, batches, most, searched):
    from dlperf import crossover as x

    assert x.search_batch(user, x.batches_for(user, batches, most), most) == searched


@pytest.mark.slow  # a crossover interrupted once its batch cells have started: 10-30 s on 2 shared cores
def test_ctrl_c_keeps_the_cells_measured_answers_from_them_and_leaves_no_process(tmp_path):
    db = tmp_path / "d.db"
    args = ["crossover", "tiny-fcn-r", "--gpu", "T4", "--threads", "1", *FAST, "--db", str(db)]
    code, out, seen = interrupt_once(args, tmp_path / "err.txt", "tiny-fcn-r@b2 torch cpu:1 fp32: median")
    assert code == 130, out
    assert seen and gone(seen), seen  # seen: read while it ran; none would pass unchecked
    said = r"interrupted: the answer is from the \d+ of \d+ batches measured before the interrupt"
    assert re.search(said, " ".join(out.split())), out  # as said, not as a narrow console wraps it
    answered = r"T4: (not )?predicted faster than this CPU (from|up to|at) batch"
    assert re.search(answered, out), out  # answered from what was measured
    ok = {r["workload"] for r in rows(db, "SELECT workload FROM cells WHERE status = 'ok'")}
    assert {"tiny-fcn-r@b1", "tiny-fcn-r@b2"} <= ok  # what was measured is kept
    assert "tiny-fcn-r@b256" not in ok


@pytest.mark.parametrize("threads", [1, None])  # each batch at --threads, or the thread counts searched first
def test_the_warm_parent_starts_before_the_operators_are_counted(tmp_path, monkeypatch, threads):
    """Its imports overlap the count's (on a GPU machine's host, 9 s that the first cell waited after the count)."""
    from dlperf import crossover as xo
    from dlperf.predict import count
    from dlperf.runner import warm

    started, seen = [], []
    monkeypatch.setattr(warm, "start", lambda python, framework: started.append(framework))

    def counted(*args, **kwargs):  # a second start of one framework finds its parent (warm.start): one parent
        seen.append(sorted({str(framework) for framework in started}))
        raise KeyboardInterrupt  # nothing is measured: what matters is what had started by now

    monkeypatch.setattr(count, "counts", counted)
    with pytest.raises(KeyboardInterrupt):
        xo.crossover(xo.Options("tiny-fcn-r", gpus=("T4",), batches=(1, 8), threads=threads), str(tmp_path / "d.db"))
    assert seen == [["torch"]] and not (tmp_path / "d.db").exists()


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"max_batch": 0}, "max_batch=0: expected a batch, a whole number from 1 to 65,536"),
        ({"batches": (1, 2**62)}, f"batches={2**62}: expected a batch"),
        ({"batches": (4, 8), "max_batch": 2}, "batches 4,8 names 4,8, above max_batch=2: give the batches up to it"),
        ({"batches": (4, 8), "batch": 2}, "batch=2 is not among batches 4,8: your batch is measured"),
        ({"batch": 32, "max_batch": 8}, "batch=32 is above max_batch=8: your batch is measured"),
        ({"mode": "tf32"}, "mode='tf32': expected fp32, bf16, fp16"),
        ({"repeats": 0}, "repeats must be at least 1"),
        ({"gpus": ("Z9000",)}, "'Z9000' in gpus: unknown GPU"),
        ({"gpus": ("H100",)}, "'H100' in gpus is ambiguous: H100-SXM5-80GB"),
        ({"gpus": ()}, "gpus: expected one or more GPU names, e.g. gpus=('H100-SXM5-80GB', 'T4')"),
    ],
)
def test_the_python_api_names_its_arguments_not_the_flags(tmp_path, options, said):
    """dlperf.crossover's errors named --max-batch, --mode, ...: flags a Python caller never typed."""
    from dlperf import crossover as x
    from dlperf.errors import UsageError

    with pytest.raises(UsageError) as caught:
        x.crossover(x.Options("tiny-fcn-r", **options), str(tmp_path / "d.db"))
    assert str(caught.value).startswith(said) and not any(flag in str(caught.value) for flag in x.FLAGS.values())
    assert not (tmp_path / "d.db").exists()


def test_the_plot_is_written_whole_or_not_at_all(tmp_path, monkeypatch):
    """--plot wrote the picture in place (savefig to the path), so Ctrl-C, a kill or a full disk while it was drawn
    left part of one, an earlier picture there lost; written beside and renamed, as `dlperf plot` does."""
    from dlperf.commands import crossover as command
    from dlperf.commands import plot
    from dlperf.report import crossover as view
    from dlperf.report import figures

    class Stored:
        def run(self, run_id):
            return run_id

        def close(self):
            pass

    def cut_short(charts, path, **_):
        with open(path, "wb") as f:
            f.write(b"\x89PNG part of one")
        raise KeyboardInterrupt

    monkeypatch.setattr(Store, "open", lambda *a, **k: Stored())
    monkeypatch.setattr(plot, "where", lambda runs: "run 1")
    monkeypatch.setattr(view, "chart", lambda answer: answer)
    monkeypatch.setattr(figures, "save", cut_short)
    png = tmp_path / "x.png"
    png.write_bytes(b"an earlier picture")
    with pytest.raises(KeyboardInterrupt):
        command.plot("answer", str(png), str(tmp_path / "d.db"), 1)
    assert png.read_bytes() == b"an earlier picture" and [p.name for p in tmp_path.iterdir()] == ["x.png"]


def test_the_answer_says_which_cpu_steps_it_rests_on_are_not_to_rely_on(tmp_path, monkeypatch, capsys):
    """A crossover on a busy machine (load 4.5 on 2 cores) measured small-convnet's step at 0.42-1.6 s where it takes
    74 ms (n=1 and 2 at most batches), and said 'predicted 285 times faster' with no word of it: `dlperf table` of the
    same run noted the few steps, the load and the noise. The answer carries those notes. Children faked: 3 steps."""
    from dlperf.cli import main
    from dlperf.runner import sweep
    from dlperf.store.process import ProcessMeasurement
    from dlperf.vocab import Status

    def run_task(task, ctx, poll):
        return ProcessMeasurement(status=Status.OK, samples=[1e-3, 1.1e-3, 0.9e-3], duration_s=0.1)

    monkeypatch.setattr(sweep, "run_task", run_task)
    monkeypatch.setenv("COLUMNS", "300")
    args = ["crossover", "tiny-fcn-r", "--gpu", "T4", "--threads", "1", "--batches", "1", "--batch", "1"]
    assert main([*args, "--db", str(tmp_path / "x.db")]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "T4: at your batch 1: GPU predicted" in out, out
    assert "note: tiny-fcn-r@b1 torch cpu:1: few samples: the median of 3 timed steps" in out, out
