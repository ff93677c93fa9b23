"""The report held its cells' utilization against a peak `dlperf peak` measured on a busy machine (the only one of
this machine) and showed `tiny-block ... 5.69 ms (96%)` and a 96.5% bar without a word, where `dlperf table` on the
same run says the peak was measured with other processes on 68% of the CPUs and reads high."""

from __future__ import annotations

from dlperf.report import html, utilization
from dlperf.report.load import load
from dlperf.store import Store
from report.synthetic import fill

BUSY = "other processes used 68% of the CPUs"


def test_a_report_held_against_a_busy_machines_peak_says_so_where_it_shows_the_utilization(tmp_path, monkeypatch):
    db = tmp_path / "r.db"
    store = Store.open(db, create=True)
    try:
        fill(store)
    finally:
        store.close()
    lookup = utilization.peak_lookup

    def only_busy(store, fingerprint, device, threads):  # as if the stored peaks were measured under load
        found = lookup(store, fingerprint, device, threads)
        return utilization.Peaks(found, dict.fromkeys(found, BUSY))

    monkeypatch.setattr(utilization, "peak_lookup", only_busy)
    page = html.render(load(str(db)))
    section = page.split('id="utilization"', 1)[1].split("<section", 1)[0]
    warnings = page.split('id="warnings"', 1)[1].split("<section", 1)[0]
    said = f"cpu:1 fp32: only a peak measured on a busy machine ({BUSY}) exists"
    assert said in section and said in warnings and "cpu:2 fp32: only a peak" in warnings


def test_the_notes_name_only_the_busy_peaks_of_the_dtypes_the_cells_modes_use(tmp_path):
    """`dlperf table` of an fp32 and bf16 run (2 threads) noted `cpu:1 fp16: only a peak measured on a busy machine
    ... utilization ... held against it read high` (and cpu:1 bf16, cpu:2 fp16): no cell of the run was held against
    those peaks. Only a mode's own dtypes (fp32, and its bf16 or fp16) are said, as `dlperf profile` says them."""
    from dlperf.envinfo import fingerprint
    from dlperf.store.machine import MeasuredPeak
    from report.synthetic import ENV

    store = Store.open(tmp_path / "r.db", create=True)
    try:
        run_id = fill(store)  # cpu:1 fp32 cells only; cpu:2 fp32 and bf16; an undisturbed fp32 peak of each
        store.record_peaks(fingerprint(ENV), ENV, [
            MeasuredPeak(framework="torch", framework_version="2.13.0+cpu", device="cpu", threads=t, kind="matmul",
                         dtype=dtype, value=1e11, detail={"others_cpu_share": 0.42})
            for t in (1, 2) for dtype in ("bf16", "fp16")])  # fmt: skip
        notes = utilization.cells_busy_notes(store, store.run(run_id).fingerprint, store.cells(run_id))
    finally:
        store.close()
    assert [n.split(": only")[0] for n in notes] == ["cpu:2 bf16"], notes


def test_a_tf32_cells_note_names_the_tf32_peak_it_is_held_against():
    """A CUDA tf32 cell's products are held against the tf32 peak (`held_flops`), which the notes left out (only fp32
    and an autocast dtype were said: a busy tf32 peak, the one its utilization read high against, went unsaid) while
    they named the busy fp32 peak no tf32 cell is held against."""
    peaks = utilization.Peaks({"fp32": 5e13, "tf32": 4e14, "bf16": 8e14}, dict.fromkeys(("fp32", "tf32", "bf16"), BUSY))
    said = [n.split(": only")[0] for n in utilization.busy_notes(peaks, "cuda:0", "tf32")]
    assert said == ["cuda:0 tf32"]
    assert [n.split(": only")[0] for n in utilization.busy_notes(peaks, "cuda:0", "bf16")] == [
        "cuda:0 fp32",
        "cuda:0 bf16",
    ]
