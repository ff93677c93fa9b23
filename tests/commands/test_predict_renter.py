"""`dlperf predict` read by someone choosing a GPU to rent: --list-gpus gives each GPU's $/GPU-hour (the prices
--cost uses), the plain table keeps a slow step's samples/s, and --cost says whether this CPU can measure the step by
the rule advise uses (the memory available now, not the machine's total)."""

from __future__ import annotations

import json
from types import SimpleNamespace

from conftest import dlperf, one_line_error
from dlperf.commands import predict as command
from dlperf.commands.common import console
from dlperf.predict import roofline
from dlperf.workloads import BUILTIN

GIB = 2**30
NO_FILE = {"DLPERF_PRICES": "", "COLUMNS": ""}


def cells(out: str, gpu: str) -> list[str]:
    row = next(line for line in out.splitlines() if line.startswith(f"│ {gpu} "))
    return [c.strip() for c in row.split("│")[1:-1]]


def test_list_gpus_gives_each_gpus_price_a_gpu_hour_and_says_what_a_missing_one_means(tmp_path):
    """Issue: --list-gpus had no $/GPU-hour column, the first place a renter looks; a price is now the range --cost
    ranks by ("-" where none was found, the note saying what that means), and --prices (or $DLPERF_PRICES) shows
    the user's own, as --cost would use it."""
    done = dlperf("predict", "--list-gpus", env=NO_FILE)
    assert done.returncode == 0, done.stderr
    head = cells(done.stdout.replace("┃", "│"), "GPU")
    at = head.index("$/GPU-hour")
    assert cells(done.stdout, "T4")[at] == "$0.590-$0.810" and cells(done.stdout, "H200-SXM-141GB")[at] == "$2.25"
    assert cells(done.stdout, "GTX 1080")[at] == "-"
    said = " ".join(done.stdout.split())
    assert "$/GPU-hour: on-demand US dollars per GPU-hour, the lowest and highest seen, read 2026-11-26" in said
    assert "- where no price was found: predict --cost times such a GPU but ranks it by no cost" in said
    mine = tmp_path / "mine.csv"
    mine.write_text("gpu,usd_per_hour_low,usd_per_hour_high\nT4,0.05,0.05\nGTX 1080,0.1,0.2\n")
    own = dlperf("predict", "--list-gpus", "--prices", str(mine), env=NO_FILE)
    assert own.returncode == 0, own.stderr
    assert cells(own.stdout, "T4")[at] == "$0.0500" and cells(own.stdout, "GTX 1080")[at] == "$0.100-$0.200"
    assert "your prices (--prices or $DLPERF_PRICES): GTX 1080, T4" in " ".join(own.stdout.split())
    one_line_error(dlperf("predict", "tiny-fcn-r", "--gpu", "T4", "--prices", str(mine), env=NO_FILE), "add --cost")


def test_list_gpus_at_80_columns_keeps_every_price_whole():
    done = dlperf("predict", "--list-gpus", env={**NO_FILE, "COLUMNS": "80"})
    assert done.returncode == 0, done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 80 and "…" not in done.stdout
    assert "$3.75-$10.57" in done.stdout  # the widest range (the B200's), on one line


def test_a_slow_steps_samples_a_second_keep_three_figures_in_the_plain_table():
    """Issue: the plain table rounded samples/s whole: lm-1.3b at batch 8 on an A100 (5.40 s a step) read "1", the
    H100's 1.71 s "5"; as --cost's table (2e2037d), below 100 a rate keeps three significant figures."""
    steps = (("A100", 5.40), ("H100", 1.71))
    found = [roofline.Prediction(g, "lm-1.3b", "fp32", 8, s, 0.0, "compute") for g, s in steps]
    out = console(160)
    with out.capture() as captured:
        out.print(command.prediction_table(SimpleNamespace(name="lm-1.3b", batch=8), found))
    text = captured.get()
    assert [cells(text, g)[3] for g in ("A100", "H100")] == ["1.48", "4.68"]


def test_cost_says_this_cpu_cannot_measure_a_step_that_fits_its_total_memory_but_not_what_is_available(
    monkeypatch, capfd
):
    """Issue: predict --cost set the step's predicted peak against the machine's total memory, advise against the
    memory available now: a step between the two (21 GiB; 20 available of 23) got "`dlperf run ...` measures one"
    from predict and "not measured" from advise. Both say it cannot be measured here, in advise's words."""
    from dlperf.measure import system
    from dlperf.predict import memory

    monkeypatch.setattr(system, "memory_available_bytes", lambda root="/": 20 * GIB)
    monkeypatch.setattr(system, "memory_total_bytes", lambda root="/": 23 * GIB)
    monkeypatch.setattr(command, "predicted_peaks", lambda *a, **k: {"fp32": 21 * GIB})
    monkeypatch.setattr(command, "stored_cells", lambda args, name: ([], {}, "dlperf.db", []))
    monkeypatch.setattr(memory, "largest_left_out", lambda *a: {})
    workload = BUILTIN["resnet-50"]
    args = SimpleNamespace(format="json", timeout=60, cpu_watts=100.0, kwh_price=0.15)
    step = roofline.Prediction("H200-SXM-141GB", workload.name, "fp32", workload.batch, 0.05, 0.0, "compute")
    assert command.show_cost(args, workload, [step], (1000, "1,000 samples", 1000 // 16), None, []) == 0
    how = json.loads(capfd.readouterr().out)["cpu_how"]
    advise_says = memory.no_room_here(workload, 21 * GIB)
    assert advise_says.startswith("not measured: the fp32 step at batch 16 needs about 21.0 GiB (predicted)")
    assert how == (f"no measured step of resnet-50 at batch 16 in dlperf.db, and none can be measured here: "
                   f"{advise_says.removeprefix('not measured: ')}")  # fmt: skip
    assert "`" not in how and "20.0 GiB of 23.0" in how
