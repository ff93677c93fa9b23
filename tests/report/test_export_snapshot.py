"""`dlperf.results(samples=True)` and `dlperf export` while a run is measured: the run's cells, their processes and
their samples were read in separate statements, so a process stored between two of them gave a record of both states
("pending", processes 0, and 709 samples). Each run's records are now read in one read transaction."""

from __future__ import annotations

import sqlite3

from dlperf.report.export import run_records
from dlperf.store import Store
from dlperf.store.process import ProcessMeasurement
from dlperf.store.records import CellFigures
from dlperf.vocab import Status
from store.test_store import KEY, new_run


def test_a_process_stored_while_a_run_is_read_is_in_none_of_its_records_or_all(tmp_path, monkeypatch):
    db = tmp_path / "r.db"
    store = Store.open(db, create=True)
    run_id = new_run(store)
    writer = sqlite3.connect(db, timeout=0, isolation_level=None)  # the sweep, storing the cell's process meanwhile
    said = []
    reads = Store.done_repeats

    def stored_meanwhile(self, run):
        found = reads(self, run)
        if said:  # read more than once: the process is stored once
            return found
        try:
            writer.execute("BEGIN IMMEDIATE")
            writer.execute("UPDATE cells SET status = 'ok', median_s = 1.5, n = 2 WHERE run_id = ?", (run_id,))
            writer.execute("INSERT INTO measurements (run_id, cell_key, repeat, status, finished_at, samples_json, "
                           "detail_json) VALUES (?, ?, 0, 'ok', '2026-01-01', '[1.0, 2.0]', '{}')",
                           (run_id, KEY))  # fmt: skip
            writer.execute("COMMIT")
            said.append("stored")
        except sqlite3.OperationalError as exc:  # the reader's snapshot holds it off: it commits once that ends
            writer.execute("ROLLBACK")
            said.append(str(exc))
        return found

    monkeypatch.setattr(Store, "done_repeats", stored_meanwhile)
    try:
        [rec] = run_records(store, store.run(run_id), True, lambda fault: None)
        assert (rec["status"], rec["processes"], rec["samples"]) == ("pending", 0, []), rec
        assert said == ["database is locked"]
        monkeypatch.undo()
        store.record(run_id, KEY, 0, ProcessMeasurement(status=Status.OK, samples=[1.0, 2.0]),
                     CellFigures(status=Status.OK, median_s=1.5, n=2))  # fmt: skip
        [rec] = run_records(store, store.run(run_id), True, lambda fault: None)
        assert (rec["status"], rec["processes"], rec["samples"]) == ("ok", 1, [[1.0, 2.0]])
        assert not store.conn.in_transaction  # the read's transaction ended: writers go on
    finally:
        writer.close()
        store.close()
