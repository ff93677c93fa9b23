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
