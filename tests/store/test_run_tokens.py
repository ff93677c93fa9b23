"""Each run's token (schema version 13, `runs.token`), as `dlperf merge` and `dlperf export` carry it: two runs of one
command on one machine begun in the same second in a file made afresh at one path (a CI job's, run twice at once)
were one run to merge when their samples were alike, the second skipped as already present; a copy keeps its run's
token, so merging it again, or onward, adds nothing twice, and its export reads as its source's."""

from __future__ import annotations

import contextlib
import io
import json
import sqlite3

from conftest import old_store
from dlperf.cli import main
from dlperf.store import SCHEMA_VERSION, Store, merge
from report.runs import BASE, SLOWER, make_db, write_run

START = "2026-12-02T09:00:00+00:00"


def rows(path, table: str = "runs") -> list[dict]:
    store = Store.open(path, create=False)
    try:
        return store.rows(table)
    finally:
        store.close()


def test_two_runs_begun_in_one_second_with_alike_samples_are_two_runs_to_merge(tmp_path, monkeypatch):
    monkeypatch.setattr("dlperf.store.now", lambda: START)
    ci, history = tmp_path / "ci.db", tmp_path / "history.db"
    make_db(ci, BASE)
    [first] = merge.merge([str(ci)], str(history))
    ci.unlink()
    make_db(ci, BASE)  # the same command again, begun in the same second: its samples alike
    [second] = merge.merge([str(ci)], str(history))
    assert not first.skipped and not second.skipped and (first.target_run, second.target_run) == (1, 2)
    [again] = merge.merge([str(ci)], str(history))
    assert again.skipped and again.target_run == 2 and not again.updated
    tokens = [r["token"] for r in rows(history)]
    assert len(set(tokens)) == 2 and tokens[1] == rows(ci)[0]["token"] and all(len(t) == 32 for t in tokens)


def test_a_copy_keeps_its_runs_token_merged_onward_and_exports_as_its_source(tmp_path):
    a, first, second = tmp_path / "a.db", tmp_path / "first.db", tmp_path / "second.db"
    make_db(a, BASE, SLOWER)
    merge.merge([str(a)], str(first))
    merge.merge([str(first)], str(second))
    assert [r["token"] for r in rows(second)] == [r["token"] for r in rows(first)] == [r["token"] for r in rows(a)]
    assert all(c.skipped for c in merge.merge([str(a), str(first)], str(second)))  # nothing twice
    assert len(rows(second)) == 2
    for run in ("1", "2"):  # but for where it was measured, which names a.db's run
        copied = [json.loads(line) for line in export(second, run, tmp_path).splitlines()]
        source = [json.loads(line) for line in export(a, run, tmp_path).splitlines()]
        assert {r["run_origin"] for r in copied} == {f"{a.resolve()} run {run}"}
        assert [{**r, "run_origin": None} for r in copied] == source


def test_an_older_files_runs_have_no_token_and_still_merge_once(tmp_path):
    """A v12 file: its runs have no token once upgraded (none is made up for them), merge copies them once, and a
    run begun after the upgrade has one."""
    old, target = tmp_path / "old.db", tmp_path / "all.db"
    conn = old_store(old, 12)
    conn.commit()
    conn.close()
    store = Store(sqlite3.connect(old), str(old))
    store.conn.row_factory, store.version = sqlite3.Row, 12
    write_run(store, BASE)
    store.close()
    assert not merge.merge([str(old)], str(target))[0].skipped
    assert merge.merge([str(old)], str(target))[0].skipped
    store = Store.open(old, create=True)  # upgraded
    try:
        assert store.version == SCHEMA_VERSION and "token" not in store.mark(1)
        write_run(store, SLOWER)
    finally:
        store.close()
    assert [r["token"] is None for r in rows(old)] == [True, False]
    assert [c.skipped for c in merge.merge([str(old)], str(target))] == [True, False]
    assert [r["token"] is None for r in rows(target)] == [True, False]


def export(db, run: str, tmp_path) -> str:
    out = tmp_path / "e.jsonl"
    with contextlib.redirect_stdout(io.StringIO()):
        assert main(["export", "--db", str(db), "--run", run, "--format", "jsonl", "--samples", "-o", str(out)]) == 0
    return out.read_text()
