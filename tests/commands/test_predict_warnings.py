"""Plain `dlperf predict` at a batch no GPU asked can hold says so, naming the memory the step needs; `--kwh-price 0`
(free power: solar, a flat-rate lab) is taken; and every `dlperf predict` command the GPU guide shows is one the
flags accept (the guide's `--memory --cost --epochs 1` on synthetic data exited 2)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from conftest import dlperf

ROOT = Path(__file__).resolve().parents[2]
HEADER = (
    "gpu,fp32_tflops,tf32_tflops,fp16_tensor_tflops,bf16_tensor_tflops,fp8_tensor_tflops,mem_bw_gbs,mem_gib,"
    "host_link,host_link_gbs,generation,sm_count,boost_clock_mhz,l2_mib,peak_clock,source"
)


def test_times_for_a_step_that_fits_no_gpu_come_with_a_note_naming_the_memory(tmp_path):
    specs = tmp_path / "tiny.csv"
    specs.write_text(HEADER + "\nTiny-512MB,1,,,,,50,0.5,PCIe Gen3 x16,15.75,Turing,,,,boost,a GPU nothing fits\n")
    proc = dlperf("predict", "tiny-fcn-r", "--gpu", "Tiny-512MB,T4", "--modes", "fp32", "--gpu-specs", str(specs),
                  env={"COLUMNS": "250"})  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    found = re.search(r"does not fit: at batch 16 the fp32 step needs ([0-9.]+) GiB \(predicted peak\), more than "
                      r"Tiny-512MB \(0\.0 GiB\) has for it", out)  # fmt: skip
    assert found, out
    assert "T4 (" not in out.split("does not fit:")[1].split("note:")[0]  # the T4 holds it: not named


def test_the_memory_note_names_each_mode_and_the_gpus_short_of_it():
    from dlperf.commands.predict import memory_notes
    from dlperf.predict import gpus
    from dlperf.workloads import BUILTIN

    chosen = gpus.parse_gpus("T4,H100-SXM5-80GB")
    notes = memory_notes(BUILTIN["resnet-50"], chosen, {"fp32": 70 * 2**30, "bf16": 10 * 2**30})
    assert len(notes) == 1 and "the fp32 step needs 70.0 GiB" in notes[0] and "T4 (14.1 GiB)" in notes[0]
    assert "H100" not in notes[0]
    assert memory_notes(BUILTIN["resnet-50"], chosen, "the trace failed")[0].startswith("memory: not checked")


@pytest.mark.parametrize("typed", ["0", "0.0"])
def test_a_kwh_price_of_zero_is_free_power(typed):
    from dlperf.cli import build_parser

    assert build_parser().parse_args(["predict", "fcn-r", "--cost", "--kwh-price", typed]).kwh_price == 0


def guide_commands() -> list[list[str]]:
    """Every `dlperf predict` command of docs/guides/gpu.md, in a block or after a `$ ` prompt."""
    found = []
    for line in (ROOT / "docs" / "guides" / "gpu.md").read_text().splitlines():
        text = line.removeprefix("$ ").split("  #")[0].strip()
        if text.startswith("dlperf predict "):
            found.append(shlex.split(text)[2:])
    return found


def test_every_predict_command_of_the_gpu_guide_is_accepted():
    from dlperf.cli import build_parser
    from dlperf.commands import predict
    from dlperf.predict import cost
    from dlperf.workloads import BUILTIN

    commands = guide_commands()
    assert len(commands) >= 5
    for argv in commands:
        args = build_parser().parse_args(["predict", *argv])
        predict.check_cost_flags(args)  # flag combinations: exit 2 before anything runs
        if args.cost and args.workload in BUILTIN:  # the work: an epoch of data that has none is exit 2
            cost.work(BUILTIN[args.workload], args.samples, args.epochs)
