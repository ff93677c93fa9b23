"""`dlperf merge`: runs copied whole under new ids with their origin, never twice; schema version 3."""

import json
import shutil
import sqlite3
from dataclasses import replace

import pytest

from conftest import dlperf, one_line_error
from dlperf.store import MIGRATIONS, SCHEMA_VERSION, Store, merge, run_origin
from dlperf.store.machine import MeasuredPeak
from dlperf.store.records import Origin
from report.runs import BASE, OTHER_MACHINE, SLOWER, make_db, processes, write_run

PEAKS = [
    {"framework": "torch", "framework_version": "2.13.0", "device": "cpu", "threads": 1, "kind": "matmul",
     "dtype": "fp32", "value": 1e11, "detail": {"size": 1024}},
    {"framework": "torch", "framework_version": "2.13.0", "device": "cpu", "threads": 1, "kind": "bandwidth",
     "dtype": None, "value": None, "detail": {}},
]  # fmt: skip


@pytest.fixture
def sources(tmp_path):
    """a.db: two runs on one machine and its peaks; b.db: one run, one cell, on another machine."""
    a, b = tmp_path / "a.db", tmp_path / "b.db"
    make_db(a, BASE, SLOWER)
    store = Store.open(a, create=True)
    store.record_peaks({"cpu_model": "Xeon Test"}, {}, [MeasuredPeak(**p) for p in PEAKS])
    store.close()
    make_db(b, {"fcn-r": processes(40, 2, 0.2)}, fingerprint=OTHER_MACHINE)
    return a, b


def rows(path, table: str, run_id: int | None = None) -> list[dict]:
    store = Store.open(path, create=False)
    try:
        return store.rows(table, run_id)
    finally:
        store.close()


def without(row: dict, *columns: str) -> dict:
    return {k: v for k, v in row.items() if k not in columns}


def test_every_run_is_copied_whole_under_a_new_id_with_its_origin(sources, tmp_path):
    a, b = sources
    target = tmp_path / "all.db"
    proc = dlperf("merge", str(a), str(b), db=target)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"{a} run 1 -> run 1 (2 cells)", f"{a} run 2 -> run 2 (2 cells)",
                                        f"{a}: 2 measured peaks copied", f"{b} run 1 -> run 3 (1 cell)"]  # fmt: skip
    for source, old, new in ((a, 1, 1), (a, 2, 2), (b, 1, 3)):
        [run] = rows(target, "runs", new)
        assert without(run, "id", "origin_json") == without(rows(source, "runs", old)[0], "id", "origin_json")
        assert replace(run_origin(run), merged_at=None) == Origin(str(source.resolve()), old)
        for table in ("cells", "measurements"):
            copied, original = rows(target, table, new), rows(source, table, old)
            assert [without(r, "run_id") for r in copied] == [without(r, "run_id") for r in original] and copied
    store = Store.open(target, create=False)
    assert store.samples(3, "fcn-r|torch|cpu|1|fp32") == processes(40, 2, 0.2)
    assert len(store.peaks()) == 2 and store.run(1).origin is not None
    store.close()


def test_merging_again_adds_nothing_and_peaks_are_copied_once(sources, tmp_path):
    a, b = sources
    target = tmp_path / "all.db"
    assert dlperf("merge", str(a), db=target).returncode == 0
    again = dlperf("merge", str(a), str(b), db=target)
    assert again.returncode == 0, again.stderr
    assert again.stdout.splitlines() == [
        f"{a} run 1 already present as run 1: skipped",
        f"{a} run 2 already present as run 2: skipped",
        f"{b} run 1 -> run 3 (1 cell)",
    ]  # and no peaks line: none was missing
    copy = tmp_path / "copy-of-a.db"  # the same runs under another name: recognized by start, command, plan, machine
    shutil.copy(a, copy)
    assert [c.skipped for c in merge.merge([str(copy)], str(target))] == [True, True]
    assert len(rows(target, "runs")) == 3 and len(rows(target, "peaks")) == 2


def test_a_new_file_at_a_path_merged_before_is_merged_again(sources, tmp_path):
    """A CI job writes a fresh ci.db each time and merges it into its history: same path, same run id, new run."""
    ci, history = tmp_path / "ci.db", tmp_path / "history.db"
    make_db(ci, BASE)
    merge.merge([str(ci)], str(history))
    ci.unlink()
    make_db(ci, SLOWER)
    conn = sqlite3.connect(ci)  # the next job starts later than the first (here: within the same second)
    conn.execute("UPDATE runs SET started_at = '2099-01-01T00:00:00+00:00'")
    conn.commit()
    conn.close()
    [copied] = merge.merge([str(ci)], str(history))
    assert not copied.skipped and copied.target_run == 2


def test_a_merged_run_keeps_the_trail_when_merged_onward(sources, tmp_path):
    a, _ = sources
    first, second = tmp_path / "first.db", tmp_path / "second.db"
    merge.merge([str(a)], str(first))
    [copied, _] = merge.merge([str(first)], str(second))
    origin = run_origin(rows(second, "runs", copied.target_run)[0])
    assert origin.db == str(first.resolve()) and origin.origin.db == str(a.resolve())


def test_table_and_compare_read_a_merged_run(sources, tmp_path):
    a, b = sources
    target = tmp_path / "all.db"
    assert dlperf("merge", str(b), str(a), db=target).returncode == 0
    table = dlperf("table", "--run", "3", db=target)
    assert table.returncode == 0, table.stderr
    assert "fcn-r" in table.stdout and "alexnet-r" in table.stdout
    compared = dlperf("compare", "2", "3", "--format", "json", db=target)  # a.db's two runs, merged
    assert compared.returncode == 1 and json.loads(compared.stdout)["regressions"]


def test_an_interrupted_copy_leaves_no_half_run(sources, tmp_path, monkeypatch):
    a, _ = sources
    target = tmp_path / "all.db"
    insert = Store._insert

    def interrupted(self, table, row):
        if table == "measurements":
            raise KeyboardInterrupt
        return insert(self, table, row)

    monkeypatch.setattr(Store, "_insert", interrupted)
    with pytest.raises(KeyboardInterrupt):
        merge.merge([str(a)], str(target))
    assert not target.exists()  # the store it created held nothing: not left behind (an empty 80 KB file was)
    monkeypatch.undo()
    make_db(target, {"fcn-r": processes(60, 2, 0.3)})
    monkeypatch.setattr(Store, "_insert", interrupted)
    closed, close = [], Store.close
    monkeypatch.setattr(Store, "close", lambda self: (closed.append(self.path), close(self))[1])
    with pytest.raises(KeyboardInterrupt):
        merge.merge([str(a)], str(target))
    assert str(target) in closed  # an existing target's connection closed, its leases released, as on success
    assert [r["id"] for r in rows(target, "runs")] == [1] and len(rows(target, "cells")) == 1  # as it was
    monkeypatch.undo()
    assert [c.skipped for c in merge.merge([str(a)], str(target))] == [False, False]


def test_a_disk_too_full_for_the_copy_says_so_and_keeps_the_target_as_it_was(sources, tmp_path, monkeypatch):
    """A merge into a store on a full disk said "SQLite could not read it (database or disk is full): damaged, or
    changed by another program", naming no file: the target is named as given, and nothing of the copy is kept. A
    store the merge created is removed."""
    from dlperf.errors import StoreFault
    from dlperf.store.location import said_as

    a, _ = sources
    target = tmp_path / "all.db"
    make_db(target, {"fcn-r": processes(60, 2, 0.3)})
    before = rows(target, "cells")
    opened = Store.open

    def small_disk(path, create=False):
        store = opened(path, create=create)
        if str(path) == str(target) or create:  # the target: room for what it holds and a page or two more
            pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
            store.conn.execute(f"PRAGMA max_page_count = {pages + 1}")
        return store

    monkeypatch.setattr(Store, "open", staticmethod(small_disk))
    with said_as("-o"), pytest.raises(StoreFault) as full:
        merge.merge([str(a)], str(target))
    said = str(full.value)
    assert said.startswith(f"-o {str(target)!r}: could not store what it copied (database or disk is full): nothing")
    assert "free room on its disk and run the command again" in said and "damaged" not in said.split("(a copy")[0]
    monkeypatch.undo()
    assert rows(target, "cells") == before
    fresh = tmp_path / "new.db"
    monkeypatch.setattr(Store, "open", staticmethod(small_disk))
    with pytest.raises(StoreFault, match="the file the merge created is removed; free room on its disk"):
        merge.merge([str(a)], str(fresh))
    assert not fresh.exists() and not (tmp_path / "new.db-journal").exists()


@pytest.mark.parametrize(
    ("names", "fragments"),
    [
        (["missing.db"], ["missing.db", "no such database file"]),
        (["folder"], ["folder", "is a directory, not a database file"]),
        (["garbage.db"], ["garbage.db", "corrupt"]),
        (["a.db", "garbage.db"], ["garbage.db", "corrupt"]),  # the good one before it is not merged either
        (["all.db"], ["all.db", "target database itself"]),
    ],
)
def test_a_bad_source_is_refused_before_anything_is_written(sources, tmp_path, names, fragments):
    (tmp_path / "garbage.db").write_text("not a database" * 50)
    (tmp_path / "folder").mkdir()
    target = tmp_path / "all.db"
    if "all.db" in names:
        make_db(target, BASE)
    before = target.read_bytes() if target.exists() else None
    one_line_error(dlperf("merge", *(str(tmp_path / n) for n in names), db=target), *fragments)
    assert (target.read_bytes() if target.exists() else None) == before


def old_file(path, version: int = 2) -> None:
    """A store as dlperf wrote it before `dlperf merge` (schema version 2, or 1: before peaks), with one run."""
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    for reached in range(1, version + 1):
        for statement in MIGRATIONS[reached]:
            conn.execute(statement)
    conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(version),))
    conn.commit()
    old = Store(conn, str(path))
    old.version = version
    write_run(old, {"fcn-r": processes(50, 2, 0.1)})
    old.close()


@pytest.mark.parametrize("version", [1, 2])
def test_an_old_file_upgrades_to_v3_and_keeps_its_runs(tmp_path, version):
    assert SCHEMA_VERSION >= 3
    path = tmp_path / "old.db"
    old_file(path, version)
    store = Store.open(path, create=False)
    assert [r.origin for r in store.runs()] == [None]  # measured here
    assert store.samples(1, "fcn-r|torch|cpu|1|fp32") == processes(50, 2, 0.1) and store.peaks() == []
    store.close()
    assert schema_version(path) == str(version)  # a reader reads it as it is, and writes nothing
    Store.open(path, create=True).close()  # a command that writes upgrades it first
    assert schema_version(path) == str(SCHEMA_VERSION)
    conn = sqlite3.connect(path)
    assert "origin_json" in {r[1] for r in conn.execute("PRAGMA table_info(runs)")}
    conn.close()


def schema_version(path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]
    finally:
        conn.close()


def test_a_v2_source_merges(tmp_path, monkeypatch):
    path, target = tmp_path / "old.db", tmp_path / "all.db"
    old_file(path)
    Store.open(target, create=True).close()
    monkeypatch.setattr(Store, "_migrate", lambda self: (_ for _ in ()).throw(sqlite3.OperationalError("read-only")))
    [copied] = merge.merge([str(path)], str(target))  # the source stays at version 2: it cannot be upgraded
    assert not copied.skipped and copied.cells == 1
    monkeypatch.undo()
    assert rows(target, "measurements")[0]["samples_json"] == rows(path, "measurements")[0]["samples_json"]
    assert run_origin(rows(target, "runs")[0]).db == str(path.resolve())


def damage(path, kind: str) -> None:
    """Overwrite part of run 2's raw samples in the file itself: the text of one stretch ("samples": the file's
    structure intact, PRAGMA integrity_check still ok, the row no longer decodes), or the whole page holding it."""
    text = json.dumps(SLOWER["alexnet-r"][1]).encode()
    data = bytearray(path.read_bytes())
    start = next(data.find(text[i : i + 40]) for i in range(100, len(text), 40) if data.find(text[i : i + 40]) > 0)
    if kind == "samples":
        data[start : start + 40] = b"#" * 40
    else:
        size = sqlite3.connect(path).execute("PRAGMA page_size").fetchone()[0]
        page = start // size * size
        data[page : page + size] = bytes(range(256)) * (size // 256)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", ["samples", "page"])
def test_a_damaged_source_stops_the_merge_before_anything_is_written(sources, tmp_path, kind):
    a, b = sources
    damage(a, kind)
    if kind == "samples":
        assert sqlite3.connect(a).execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    target = tmp_path / "all.db"
    make_db(target, {"fcn-r": processes(60, 2, 0.3)})  # a store that already holds a run
    before = target.read_bytes()
    proc = dlperf("merge", str(b), str(a), db=target)  # the good source first: not merged either
    fragments = [f"merge {str(a)!r}: run 2", "unreadable"]
    one_line_error(proc, *fragments, *(["cell alexnet-r|torch|cpu|1|fp32, process 1"] if kind == "samples" else []))
    assert target.read_bytes() == before


def test_the_whole_merge_is_one_transaction(sources, tmp_path, monkeypatch):
    a, b = sources
    target = tmp_path / "all.db"
    make_db(target, {"fcn-r": processes(60, 2, 0.3)})
    before = {table: rows(target, table) for table in ("runs", "cells", "measurements", "peaks")}
    insert, runs_inserted = Store._insert, []

    def interrupted_at_the_last_run(self, table, row):
        runs_inserted.extend([row] if table == "runs" else [])
        if len(runs_inserted) == 3:  # b's run, after both of a's
            raise KeyboardInterrupt
        return insert(self, table, row)

    monkeypatch.setattr(Store, "_insert", interrupted_at_the_last_run)
    with pytest.raises(KeyboardInterrupt):
        merge.merge([str(a), str(b)], str(target))
    assert {table: rows(target, table) for table in before} == before


def test_an_interrupted_merge_says_nothing_was_copied(sources, tmp_path, monkeypatch, capsys):
    """Its last line was "dlperf: interrupted" alone, where every other command's says what it kept."""
    from dlperf.cli import main

    a, _ = sources
    monkeypatch.setattr(Store, "_insert", lambda self, table, row, **kw: (_ for _ in ()).throw(KeyboardInterrupt))
    assert main(["merge", str(a), "-o", str(tmp_path / "all.db")]) == 130
    assert capsys.readouterr().err == (f"dlperf: interrupted: nothing was copied, {tmp_path / 'all.db'} holds what it "
                                       "held before (a file the merge created is removed)\n")  # fmt: skip
    assert not (tmp_path / "all.db").exists()


def test_a_store_made_at_the_target_by_another_process_meanwhile_is_kept(sources, tmp_path, monkeypatch):
    """The target did not exist when the merge began; another `dlperf run` made it and stored a run before the merge
    opened it, and the merge then failed: the file, and that run, were removed with the merge's."""
    a, _ = sources
    target, opened = tmp_path / "all.db", Store.open

    def made_meanwhile(path, create=False):
        if str(path) == str(target) and not made:
            made.append(path)
            make_db(target, {"fcn-r": processes(60, 2, 0.3)})
        return opened(path, create=create)

    made = []

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(Store, "open", staticmethod(made_meanwhile))
    monkeypatch.setattr(merge, "_merge_one", interrupted)
    with pytest.raises(KeyboardInterrupt):
        merge.merge([str(a)], str(target))
    monkeypatch.undo()
    assert [r["id"] for r in rows(target, "runs")] == [1]


def test_a_link_named_as_the_target_stays_and_the_file_made_through_it_goes(sources, tmp_path, monkeypatch):
    a, _ = sources
    link, real = tmp_path / "link.db", tmp_path / "real.db"
    link.symlink_to(real)
    monkeypatch.setattr(Store, "_insert", lambda self, table, row, **kw: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(KeyboardInterrupt):
        merge.merge([str(a)], str(link))
    assert link.is_symlink() and not real.exists()


def test_all_reduce_figures_are_copied_once_and_a_source_merged_before_says_so(tmp_path):
    """`dlperf comm`'s figures were left out of a merge, which said of their file "nothing to copy (it holds no run
    and no peak)"; a file of peaks merged again said "it holds no run", its peaks already there unsaid."""
    from commands.test_comm import K, M, comm_row

    figures, into = tmp_path / "c.db", tmp_path / "all.db"
    store = Store.open(figures, create=True)
    store.record_comm({"hostname": "here"}, {}, [comm_row(4 * K), comm_row(M)])
    store.close()
    said = []
    merge.merge([str(figures)], str(into), report=said.append)
    assert said == [f"{figures}: 2 all-reduce figures copied"]
    target = Store.open(into, create=False)
    assert sorted(r.bytes for r in target.comm_results()) == [4 * K, M]
    target.close()
    said.clear()
    merge.merge([str(figures)], str(into), report=said.append)
    assert said == [f"{figures}: nothing to copy (it holds no run; its 2 all-reduce figures are here already)"]
    assert len(rows(into, "comm")) == 2
