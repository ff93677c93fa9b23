"""The relations `benchmarks/gpu_check.py` asserts on a GPU machine, as pure functions of what it measured: each
returns PASS/FAIL lines with their figures, and `markdown` renders them. Nothing here runs or imports a framework, so
every relation is tested on a CPU against recorded inputs (tests/benchmarks/test_gpu_check.py).

The checks are relations measured in the same run (dlperf against a plain loop, tf32 against fp32, CUDA graphs against
eager), or fractions of the GPU's datasheet figures, never absolute times.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import asdict, dataclass, field
from typing import Any

SEVEN = ("fcn-s", "alexnet-s", "resnet-50", "fcn-r", "alexnet-r", "resnet-56", "lstm")
LOOP_RATIO = (0.97, 1.03)  # dlperf's median over a plain loop's step
MODES = ("fp32", "tf32", "bf16", "bf16+channels_last", "bf16+cuda_graphs", "bf16+compile")
PROFILE_SUM = 0.05  # the categories sum to the profiled step within 5%
PEAK_FRACTION = (0.6, 1.0)  # of the datasheet's dense figure
LAUNCH_S = (2e-6, 30e-6)  # the cost per operator launched
PIN_ADVICE = "pin_memory:"  # how report/data.py's advice begins
OTHER_SHARE = 0.10  # of an eager step, the device work no operator owns (it was 25-29% on an H100 before 9896fc4)
CHECK_S = 480.0  # the whole check, so that a rerun fits in the 15 minutes a GPU machine is lent for
PHASES = {  # a cell process's phases (`runner/collect.phases`), in words
    "startup_s": "starting (a warm parent's imports, waited for)", "framework_s": "importing the framework",
    "build_s": "building", "compile_s": "compiling", "gate_s": "waiting to be timed alone (compiled at once)",
    "warmup_s": "warming up", "timed_s": "timed steps",
    "flops_s": "counting FLOPs", "memory_s": "the memory step", "loss_check_s": "loss checks", "exit_s": "exiting",
}  # fmt: skip


@dataclass
class Line:
    section: str
    check: str
    passed: bool
    figures: str
    data: dict[str, Any] = field(default_factory=dict)
    at: str = ""  # the commit of an earlier check it was kept from (`gpu_check.py --resume`); "": measured now

    def __post_init__(self) -> None:
        self.passed = bool(self.passed)  # `a and b` of strings and dicts: a line is PASS or FAIL

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{1000 * seconds:.3g} ms"


def within(value: float | None, bounds: tuple[float, float]) -> bool:
    return value is not None and bounds[0] <= value <= bounds[1]


def unsteady(blocks: list[float], bounds: tuple[float, float] = LOOP_RATIO) -> bool:
    """A plain loop's blocks spread wider than `bounds` are wide: the host's speed drifted within the loop itself (a
    host-bound step: on the H200 at 10ba3bb, the LSTM's loop blocks in one process ran 5.3 to 7.3 ms), so a ratio to
    a figure from another process, taken a minute apart, measures that drift as much as dlperf."""
    return len(blocks) > 1 and max(blocks) / min(blocks) > bounds[1] / bounds[0]


def cell_of(cells: list[dict], workload: str, mode: str = "fp32", loader: str | None = None) -> dict | None:
    """The cell of `workload` in `mode` (one process, on synthetic data unless `loader` names one): the check runs
    each section's cells on its one device."""
    found = [
        c for c in cells
        if c["workload"] == workload and c["mode"] == mode and (c.get("loader") or None) == loader
        and not c.get("nproc")
    ]  # fmt: skip
    return found[-1] if found else None


def said(cell: dict | None) -> str:
    """A cell in a few words: its median, or why it has none."""
    if cell is None:
        return "no cell"
    if cell["status"] == "ok":
        return f"{ms(cell['median_s'])} (n={cell['n']})"
    return f"{cell['status']}: {(cell.get('error') or 'no reason given').splitlines()[0][:160]}"


# ----------------------------------------------------------------------------------------------------------------------
# The Table-7 GPU column against a plain loop


def seven_lines(cells: list[dict], loops: dict[str, dict], workloads=SEVEN, section="table7",
                label="fp32 against a plain loop") -> list[Line]:  # fmt: skip
    """Per network: dlperf's fp32 median over the plain loop's step of the same model, same run: within LOOP_RATIO.
    Where the loop's own blocks were unsteady, the ratio between the two processes is shown, and the verdict is the
    one from the loop's process: dlperf's timer and the loop in turns (`interleaved`). `section`, `label`: the same
    relation for another framework's cells (JAX's)."""
    lines = []
    for w in workloads:
        cell, loop = cell_of(cells, w), loops.get(w) or {}
        ours, theirs = (cell or {}).get("median_s"), loop.get("step_s")
        if not ours or not theirs:
            why = loop.get("error") or "no loop figure"
            lines.append(Line(section, f"{w} {label}", False, f"dlperf {said(cell)}; loop: {why}"))
            continue
        ratio = ours / theirs
        blocks = loop.get("blocks") or []
        spread = f", {ms(min(blocks))} to {ms(max(blocks))}" if len(blocks) > 1 else ""  # the host's steadiness
        figures = (f"dlperf {ms(ours)} (n={cell['n']}), plain loop {ms(theirs)} ({loop.get('steps')} steps in "
                   f"{len(blocks)} blocks{spread}), ratio {ratio:.3f}")  # fmt: skip
        data = {"dlperf_s": ours, "loop_s": theirs, "ratio": ratio, "loop_blocks_s": loop.get("blocks", [])}
        passed = within(ratio, LOOP_RATIO)
        if turns := loop.get("interleaved"):
            passed = within(turns["ratio"], LOOP_RATIO)
            figures += (f"; the loop's blocks unsteady, so judged in its process, dlperf's timer and the loop in "
                        f"turns: ratio {turns['ratio']:.3f} over {len(turns['loop_s'])} rounds of mean steps (loop "
                        f"{ms(min(turns['loop_s']))} to {ms(max(turns['loop_s']))})")  # fmt: skip
            data["interleaved"] = turns
        lines.append(Line(section, f"{w} {label}", passed, figures, data))
    return lines


# ----------------------------------------------------------------------------------------------------------------------
# Modes


def forked_line(rows: list[dict]) -> Line:
    """The GPU cells of a run forked from a warm parent (dlperf's default), with the median time their processes
    took to import the framework and build (a cold GPU cell's was 7-13 s on the H100)."""
    gpu = [r for r in rows if str(r.get("device")).startswith("cuda")]
    forked = [r for r in gpu if r.get("started") == "warm"]
    setup = [(r["phases"].get("framework_s") or 0) + (r["phases"].get("build_s") or 0) for r in gpu if r.get("phases")]
    figures = f"{len(forked)} of {len(gpu)} forked"
    if setup:
        figures += f"; import and build: median {statistics.median(setup):.2f} s"
    if why := sorted({str(r.get("cold_because")) for r in gpu if r.get("started") != "warm"}):
        figures += f"; cold: {'; '.join(why)}"
    data = {"forked": len(forked), "gpu_cells": len(gpu), "setup_s": setup}
    return Line("table7", "GPU cells forked from a warm parent", bool(gpu) and len(forked) == len(gpu), figures, data)


def spans(row: dict) -> dict[str, tuple[float, float]] | None:
    """A compiled process's phases as wall-clock intervals (its `timeline` from its `started_at`): its work before
    (import, build, compilation), its compilation, its warm-up and timed steps (from `gated`), and its work after
    (FLOP count, memory step, loss check); None where its timeline lacks any of them."""
    at = {name: row["started_at"] + t for name, t in row.get("timeline") or []} if row.get("started_at") else {}
    if not {"affinity", "compiling", "compiled", "gated", "sampled"} <= set(at):
        return None
    return {
        "before": (at["affinity"], at["compiled"]),
        "compiling": (at["compiling"], at["compiled"]),
        "timed": (at["gated"], at["sampled"]),
        "after": (at.get("compile_end", at["sampled"]), max(at.values())),
    }


def overlap_s(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


def at_once_line(rows: list[dict]) -> Line:
    """Compiled cells of one `--compile-at-once` run (`how_started`'s rows): their compilations side by side (every
    two overlap), and each timed alone: no cell's warm-up and timed steps overlap another's work before or after."""
    label = {id(r): f"{r['workload']} {r.get('mode') or ''}".strip() for r in rows}
    found = {label[id(r)]: spans(r) for r in rows}
    missing = sorted(w for w, s in found.items() if s is None)
    if len(found) < 2 or missing:
        why = f"no timeline with a wait to be timed alone: {', '.join(missing)}" if missing else "fewer than 2 cells"
        return Line("compile", "compiled side by side, each timed alone", False, why)
    names = sorted(found)
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1 :]]
    side = {f"{a}/{b}": overlap_s(found[a]["compiling"], found[b]["compiling"]) for a, b in pairs}
    clashes = {f"{a} timed beside {b}'s work": overlap_s(found[a]["timed"], found[b][part])
               for a in names for b in names if a != b for part in ("before", "after")}  # fmt: skip
    clashes = {k: v for k, v in clashes.items() if v > 0}
    waits = {label[id(r)]: (r.get("phases") or {}).get("gate_s") for r in rows}
    figures = (f"compilations side by side {', '.join(f'{k} {v:.1f} s' for k, v in side.items())}; waited to be "
               f"timed alone: {', '.join(f'{w} {s or 0:.1f} s' for w, s in sorted(waits.items()))}")  # fmt: skip
    if clashes:
        figures += f"; overlaps: {', '.join(f'{k} {v:.2f} s' for k, v in clashes.items())}"
    passed = all(v > 0 for v in side.values()) and not clashes
    data = {"side_by_side_s": side, "overlaps_s": clashes, "waits_s": waits}
    return Line("compile", "compiled side by side, each timed alone", passed, figures, data)


def modes_lines(cells: list[dict], nets: tuple[str, ...], modes=MODES, tf32_net="", graphs_net="", section="modes"):
    """Every cell ok and still training as fp32 does (its loss check not failed), or unsupported with its reason;
    tf32 faster than fp32 on `tf32_net`, and CUDA graphs faster than eager bf16 on `graphs_net` (launch-bound)."""
    lines = []
    for net in nets:
        for mode in modes:
            cell = cell_of(cells, net, mode)
            ok = cell is not None and (cell["status"] == "ok" or (cell["status"] == "unsupported" and cell["error"]))
            trains = cell is None or cell.get("loss_ok") is not False
            figures = said(cell) + ("" if trains else f"; loss check failed: {cell.get('loss_reason')}")
            lines.append(Line(section, f"{net} {mode}", ok and trains, figures,
                              {"median_s": (cell or {}).get("median_s")}))  # fmt: skip
    if tf32_net:
        lines.append(faster(section, tf32_net, cell_of(cells, tf32_net, "tf32"), cell_of(cells, tf32_net, "fp32")))
    if graphs_net:
        graphed, eager = cell_of(cells, graphs_net, "bf16+cuda_graphs"), cell_of(cells, graphs_net, "bf16")
        lines.append(faster(section, graphs_net, graphed, eager))
    return lines


def faster(section: str, net: str, a: dict | None, b: dict | None) -> Line:
    """Cell `a` faster than cell `b` (their medians, same run)."""
    check = f"{net} {(a or {}).get('mode', '?')} faster than {(b or {}).get('mode', '?')}"
    if not (a and b and a.get("median_s") and b.get("median_s")):
        return Line(section, check, False, f"{said(a)} against {said(b)}")
    ratio = a["median_s"] / b["median_s"]
    figures = f"{ms(a['median_s'])} against {ms(b['median_s'])}: {ratio:.2f}x the time"
    return Line(section, check, ratio < 1, figures, {"ratio": ratio})


# ----------------------------------------------------------------------------------------------------------------------
# Profiles


def profile_lines(profiles: dict[str, dict], expected: dict[str, tuple[str, ...]]) -> list[Line]:
    """Per profiled cell (name -> its profile row, verdict and whether its trace opened): the categories sum to the
    step within PROFILE_SUM, kernels are counted, under OTHER_SHARE of the step has no operator, the trace opens, and
    the verdict is one of `expected[name]` where that names any."""
    lines = []
    for name, p in profiles.items():
        if p.get("status") != "ok":
            lines.append(Line("profile", f"{name} profiled", False, f"{p.get('status')}: {p.get('error')}"))
            continue
        total, step = sum(p["categories"].values()), p["step_s"]
        off = abs(total - step) / step if step else None
        ranked = sorted(p["categories"].items(), key=lambda i: -i[1])
        shares = ", ".join(f"{k} {100 * v / step:.0f}%" for k, v in ranked) if step else "-"
        lines.append(
            Line(
                "profile",
                f"{name} categories sum to the step",
                off is not None and off <= PROFILE_SUM,
                f"{ms(total)} of {ms(step)} ({shares})",
                {"categories": p["categories"], "step_s": step},
            )
        )
        kernels = p.get("kernels_per_step")
        lines.append(Line("profile", f"{name} kernels per step counted", bool(kernels), f"{kernels} kernels per step"))
        other = p["categories"].get("other", 0.0) / step if step else None
        said_notes = "; ".join(n for n in p.get("notes", []) if "operator" in n) or "no note"
        lines.append(Line("profile", f"{name} device work owned by its operators (other under 10%)",
                          other is not None and other <= OTHER_SHARE,
                          f"other {100 * (other or 0):.0f}% of the step; {said_notes}"))  # fmt: skip
        lines.append(Line("profile", f"{name} trace opens", p.get("trace_events", 0) > 0,
                          f"{p.get('trace_events', 0)} events in {p.get('trace')}"))  # fmt: skip
        verdict = p.get("verdict") or {}
        if name in expected:
            bound = verdict.get("bound")
            lines.append(Line("profile", f"{name} judged {' or '.join(expected[name])}-bound", bound in expected[name],
                              f"{bound}-bound ({verdict.get('level')}): {verdict.get('figure')}"))  # fmt: skip
    return lines


# ----------------------------------------------------------------------------------------------------------------------
# dlperf peak


def peak_lines(peaks: list[dict], gpu: dict | None) -> list[Line]:
    """bf16 matmul and copy/triad bandwidth against the datasheet of `gpu` (a gpu_specs row), pinned host->device
    copies faster than pageable ones, and the cost per launched operator within LAUNCH_S."""
    lines = []
    by_kind = {(p["kind"], p.get("dtype")): p for p in peaks}
    matmul, bandwidth = by_kind.get(("matmul", "bf16")), by_kind.get(("bandwidth", None))
    sheet_flops = 1e12 * float(gpu["bf16_tensor_tflops"]) if gpu and gpu.get("bf16_tensor_tflops") else None
    sheet_bw = 1e9 * float(gpu["mem_bw_gbs"]) if gpu and gpu.get("mem_bw_gbs") else None
    name = gpu["gpu"] if gpu else "no datasheet row"
    lines.append(fraction("bf16 matmul", matmul and matmul["value"], sheet_flops, 1e12, "TFLOP/s", name))
    lines.append(fraction("copy/triad bandwidth", bandwidth and bandwidth["value"], sheet_bw, 1e9, "GB/s", name))
    lines.append(pinned_faster([p for p in peaks if p["kind"] == "h2d"]))
    launch = by_kind.get(("dispatch", None))
    cost = launch and launch["value"]
    lines.append(Line("peak", "launch cost per operator within 2-30 µs", within(cost, LAUNCH_S),
                      "-" if cost is None else f"{1e6 * cost:.2f} µs per operator", {"launch_s": cost}))  # fmt: skip
    return [*lines, tf32_faster(by_kind.get(("matmul", "tf32")), by_kind.get(("matmul", "fp32")))]


def tf32_faster(tf32: dict | None, fp32: dict | None) -> Line:
    """The tf32 matmul peak (fp32 products on TensorFloat-32 tensor cores) above fp32's: what a tf32 cell's
    utilization is held against is what the flag turns on."""
    check = "tf32 matmul faster than fp32's"
    if not (tf32 and fp32 and tf32.get("value") and fp32.get("value")):
        return Line("peak", check, False, f"tf32 {tf32 and tf32.get('value')}, fp32 {fp32 and fp32.get('value')}")
    ratio = tf32["value"] / fp32["value"]
    figures = f"{tf32['value'] / 1e12:.1f} against {fp32['value'] / 1e12:.1f} TFLOP/s: {ratio:.1f}x"
    return Line("peak", check, ratio > 1, figures, {"tf32": tf32["value"], "fp32": fp32["value"]})


def fraction(what: str, value: float | None, sheet: float | None, unit: float, label: str, gpu: str) -> Line:
    check = f"{what} within 60-100% of the datasheet"
    if not value or not sheet:
        return Line("peak", check, False, f"measured {value}, datasheet ({gpu}) {sheet}")
    share = value / sheet
    figures = f"{value / unit:.1f} of {sheet / unit:.1f} {label} ({gpu}): {100 * share:.0f}%"
    return Line("peak", check, within(share, PEAK_FRACTION), figures, {"measured": value, "datasheet": sheet})


def pinned_faster(copies: list[dict]) -> Line:
    """At the largest size measured both ways, pinned host->device faster than pageable."""
    pinned = {c["detail"]["bytes"]: c["value"] for c in copies if c["detail"].get("pinned")}
    pageable = {c["detail"]["bytes"]: c["value"] for c in copies if not c["detail"].get("pinned")}
    both = sorted(set(pinned) & set(pageable))
    if not both:
        return Line("peak", "pinned host->device faster than pageable", False, "no host->device copies measured")
    n = both[-1]
    figures = f"at {n / 2**20:g} MiB: pinned {pinned[n] / 1e9:.1f} GB/s, pageable {pageable[n] / 1e9:.1f} GB/s"
    return Line("peak", "pinned host->device faster than pageable", pinned[n] > pageable[n], figures,
                {"bytes": n, "pinned": pinned[n], "pageable": pageable[n]})  # fmt: skip


# ----------------------------------------------------------------------------------------------------------------------
# Real data, JAX, predictions


def data_lines(cells: list[dict], workloads: tuple[str, ...], loaders: tuple[str, ...]) -> list[Line]:
    """Each loader cell ok with its host->device copy figures; where pinned copies were faster and the recommended
    setting is not pinned, the pin_memory advice is given (the export holds what `dlperf table` prints)."""
    lines = []
    for w in workloads:
        for loader in loaders:
            cell = cell_of(cells, w, loader=loader)
            h2d = {k: (cell or {}).get(f"h2d_{k}_bytes_s") for k in ("pageable", "pinned")}
            recorded = bool(cell and cell["status"] == "ok" and cell.get("h2d_bytes") and all(h2d.values()))
            figures = said(cell) + (f"; h2d {cell['h2d_bytes'] / 2**20:.2f} MiB per batch, pageable "
                                    f"{h2d['pageable'] / 1e9:.1f} GB/s, pinned {h2d['pinned'] / 1e9:.1f} GB/s"
                                    if recorded else "; no h2d figures")  # fmt: skip
            lines.append(Line("data", f"{w} loader {loader}", recorded, figures, {"h2d": h2d}))
        lines.append(pin_advice_line(w, [c for c in cells if c["workload"] == w and c.get("loader")]))
    return lines


def pin_advice_line(workload: str, cells: list[dict]) -> Line:
    """Where a loader cell's pinned copies beat its pageable ones and the recommended setting (or, where none is
    enough, the best measured) is unpinned, the group's advice says pin_memory."""
    group = next((c["data_recommendation"] for c in cells if c.get("data_recommendation")), None) or {}
    recommended = next((c["recommended_loader"] for c in cells if c.get("recommended_loader")), None)
    named = recommended or group.get("best")
    won = any((c.get("h2d_pinned_bytes_s") or 0) > (c.get("h2d_pageable_bytes_s") or float("inf")) for c in cells)
    advice = [a for a in group.get("advice", []) if a.startswith(PIN_ADVICE)]
    needed = won and named is not None and "pin" not in named.split("+")
    figures = (f"recommended {recommended}" + ("" if recommended or named is None else f" (best {named})")
               + f"; pinned copies faster: {won}; " + (advice[0] if advice else "no pin advice"))  # fmt: skip
    return Line("data", f"{workload} pin_memory advice where pinned was faster", bool(advice) == needed, figures)


def ok_lines(section: str, cells: list[dict], workloads: tuple[str, ...], what: str) -> list[Line]:
    """Each workload's fp32 GPU cell ok (`what` names the cells, e.g. "JAX on CUDA")."""
    return [
        Line(section, f"{w} {what}", (c := cell_of(cells, w)) is not None and c["status"] == "ok", said(c))
        for w in workloads
    ]


def predicted_lines(cells: list[dict], table_text: str) -> list[Line]:
    """Every ok GPU cell has its stored prediction, and `dlperf table` prints its error. The errors are data for the
    predictor: no threshold on them."""
    gpu = [c for c in cells if str(c["device"]).startswith("cuda") and c["status"] == "ok" and not c.get("nproc")]
    lines = []
    for c in gpu:
        framework = "" if c.get("framework", "torch") == "torch" else f" ({c['framework']})"
        named = f"{c['workload']} {c['mode']}" + (f" {c['loader']}" if c.get("loader") else "")
        label = named + framework
        if c.get("predicted_step_s") is None:
            lines.append(Line("predicted", label, False, f"measured {ms(c['median_s'])}, no stored prediction"))
            continue
        printed = f"predicted: {named} on {c['device']}" in table_text
        figures = (f"measured {ms(c['median_s'])}, predicted {ms(c['predicted_step_s'])} on {c.get('predicted_gpu')}"
                   f" ({100 * c['prediction_error']:+.0f}%, {c.get('predicted_bound')}-bound)"
                   + ("" if printed else "; not in dlperf table's output"))  # fmt: skip
        data = {"measured_s": c["median_s"], "predicted_s": c["predicted_step_s"], "error": c["prediction_error"]}
        lines.append(Line("predicted", label, printed, figures, data))
    return lines or [Line("predicted", "GPU cells with predictions", False, "no ok GPU cell in the store")]


# ----------------------------------------------------------------------------------------------------------------------
# NCCL, crossover, the test suite


def nccl_lines(one: tuple[int, str], two: tuple[int, str]) -> list[Line]:
    """`comm --backend nccl --nproc 1` exits 0; `--nproc 2` on one GPU exits 2 with one line saying why."""
    rc, text = one
    first = Line("nccl", "comm --backend nccl --nproc 1 ok", rc == 0, f"exit {rc}: {last_line(text)}")
    rc2, err = two
    said_lines = [line for line in err.strip().splitlines() if line.strip()]
    refused = rc2 == 2 and len(said_lines) == 1 and ("GPU per process" in err or "GPU of its own" in err)
    return [first, Line("nccl", "comm --backend nccl --nproc 2 on one GPU refused in one line", refused,
                        f"exit {rc2}: {' / '.join(said_lines)[:300]}")]  # fmt: skip


def last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:300] if lines else "(no output)"


def crossover_lines(rc: int, text: str, gpu: str) -> list[Line]:
    """`dlperf crossover` at the workload's batch, with a CUDA cell of that batch stored: the GPU side "measured"."""
    said_there = [line for line in text.splitlines() if line.startswith(f"{gpu}:")]
    measured = any("measured" in line and "predicted" not in line.split("measured")[0] for line in said_there)
    return [Line("crossover", f"crossover labels {gpu} measured", rc == 0 and measured,
                 f"exit {rc}: {' / '.join(said_there) or last_line(text)}"[:400])]  # fmt: skip


SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|error|errors|deselected|xfailed|xpassed)")


DURATION = re.compile(r"^(\d+\.\d+)s (setup|call|teardown) +(\S+)$", re.M)


def tests_lines(rc: int, output: str, gpus: int) -> list[Line]:
    """`pytest -m gpu` with DLPERF_REQUIRE=cuda: 0 failed and 0 skipped, except the tests of more GPUs than the
    machine has (named in their skip reason), which are counted apart."""
    counts: dict[str, int] = {}
    for n, what in SUMMARY.findall(output.strip().splitlines()[-1] if output.strip() else ""):
        counts[what.rstrip("s") if what.startswith("error") else what] = int(n)
    skips = [line for line in output.splitlines() if line.startswith("SKIPPED")]
    more, other = 0, 0
    for s in skips:
        times = int(m[1]) if (m := re.match(r"SKIPPED \[(\d+)\]", s)) else 1  # pytest folds a repeated skip
        needs = re.search(r"needs? (\d+) (CUDA )?GPUs", s)
        if needs and int(needs[1]) > gpus:
            more += times
        else:
            other += times
    failed = counts.get("failed", 0) + counts.get("error", 0)
    figures = (f"exit {rc}: {counts.get('passed', 0)} passed, {failed} failed, {other} skipped"
               f" ({more} more need more GPUs than this machine's {gpus})")  # fmt: skip
    passed = counts.get("passed", 0) > 0 and failed == 0 and other == 0
    failures = [line[:300] for line in output.splitlines() if line.startswith(("FAILED", "ERROR"))]
    slowest = [(float(m[1]), m[2], m[3]) for m in DURATION.finditer(output)]  # --durations: where the time goes
    data = {"failures": failures, "skips": skips, "slowest": slowest}
    return [Line("tests", "pytest -m gpu: 0 failed, 0 skipped", passed, figures, data)]


def time_line(sections_s: dict[str, float], phases: list[dict], processes_s: float) -> Line:
    """The whole check within CHECK_S, with where its time went: each section's seconds (those of an earlier check
    it kept included), and of dlperf's cell processes (`processes_s` in all), each phase's seconds summed over them
    (`phases`: each process's `collect.phases`); the rest is outside them (planning and predicting, plain loops,
    pytest, dlperf peak, comm and crossover's own)."""
    total = sum(sections_s.values())
    by_phase = {name: sum(p.get(name) or 0.0 for p in phases) for name in PHASES}
    parts = ", ".join(f"{s} {t:.0f}" for s, t in sorted(sections_s.items(), key=lambda st: -st[1]))
    spent = ", ".join(f"{PHASES[n]} {t:.0f}" for n, t in sorted(by_phase.items(), key=lambda nt: -nt[1]) if t >= 0.5)
    figures = (f"{total:.0f} s against {CHECK_S:.0f}: {parts}; in {len(phases)} cell processes {processes_s:.0f} s "
               f"of wall time (each phase summed over them, side by side ones each counted: {spent}); outside them "
               f"{max(0.0, total - processes_s):.0f} s")  # fmt: skip
    data = {"total_s": total, "sections_s": sections_s, "phases_s": by_phase, "processes_s": processes_s}
    return Line("time", f"the whole check within {CHECK_S / 60:.0f} minutes", total <= CHECK_S, figures, data)


def not_run(section: str, why: str) -> Line:
    return Line(section, f"{section} not run", False, why)


# ----------------------------------------------------------------------------------------------------------------------
# The report


def markdown(header: dict[str, Any], lines: list[Line]) -> str:
    passed = sum(line.passed for line in lines)
    out = [f"## GPU check: {passed} of {len(lines)} PASS", ""]
    out += [f"- {k}: {v}" for k, v in header.items()]
    out += ["", "| | section | check | figures |", "|---|---|---|---|"]
    for line in lines:
        figures = line.figures.replace("|", "/").replace("\n", " ")
        section = f"{line.section} (kept from {line.at})" if line.at else line.section
        out.append(f"| {'PASS' if line.passed else 'FAIL'} | {section} | {line.check} | {figures} |")
    return "\n".join(out) + "\n"
