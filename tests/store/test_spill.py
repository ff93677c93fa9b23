"""Where a measurement the store refused is kept (`store/spill.py`), for a database of any path."""

import os

from dlperf.store.spill import places


def test_a_database_whose_path_is_not_utf8_gets_a_place_to_keep_measurements():
    """`--db $'caf\\xe9.db'` (or a run from a folder so named) ended in UnicodeEncodeError: surrogates not allowed,
    an empty database left behind."""
    name = os.fsdecode(b"/tmp/caf\xe9.db")
    kept = places(name)
    assert kept[0].name == os.fsdecode(b"caf\xe9.db.unsaved.jsonl")
    assert kept[1].name.startswith(os.fsdecode(b"caf\xe9.db-")) and kept[1].name != places("/tmp/cafe.db")[1].name


def test_the_longest_store_name_allowed_gets_places_within_a_file_names_limit(tmp_path, monkeypatch):
    """A --db of 245 bytes: the measurement the store refused was lost, "it could not be kept either (File name too
    long)", as the places named after it added 27 bytes (42 in the temporary directory) past NAME_MAX. Such a name is
    refused now (`location.name_too_long`); the longest one allowed, 241 bytes, gets places of at most 255, each its
    own (the digest of the full path), where a measurement is kept."""
    import tempfile

    from dlperf.store import spill
    from dlperf.store.process import ProcessMeasurement
    from dlperf.vocab import Status

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    db = tmp_path / ("é" * 118 + "nn.db")  # 241 bytes; a character of two bytes cut where the name is
    other = tmp_path / ("é" * 118 + "nm.db")
    assert len(os.fsencode(db.name)) == 241
    found = places(db)
    assert [len(os.fsencode(p.name)) for p in found] == [255, 255, 255]
    assert not set(found[1:]) & set(places(other))
    (tmp_path / "data").mkdir()
    monkeypatch.setattr(spill, "data_dir", lambda: tmp_path / "data")
    (tmp_path / "data" / "unsaved").write_text("")  # not a folder: the temporary directory keeps it
    kept = spill.keep(tmp_path / "gone" / db.name, 1, "k", 0, ProcessMeasurement(status=Status.OK, samples=[0.1]))
    assert kept.parent == tmp_path / "tmp" and [k.key for k in spill.kept(tmp_path / "gone" / db.name, 1)] == ["k"]
    beside = tmp_path / db.name  # its own folder: kept beside it, then one run's lines taken up (its file rewritten)
    for run_id in (1, 2):
        assert spill.keep(beside, run_id, "k", 0, ProcessMeasurement(status=Status.OK)) == spill.path_for(beside)
    spill.forget(beside, 1)  # its copy was named .NAME.unsaved.jsonl.tmp, 260 bytes: File name too long
    assert [k.run_id for k in spill.kept(beside, 2)] == [2] and not spill.kept(beside, 1)


def test_a_measurement_kept_in_the_system_temporary_directory_is_found_under_another_tmpdir(tmp_path, monkeypatch):
    """Kept in /tmp (the store's folder and DATA_DIR refusing it), then `--resume` in a job whose $TMPDIR is its own
    (SLURM, PBS): the line was not found, and the process measured again. A line kept in a $TMPDIR of its own is named
    with that $TMPDIR in the resume command (`elsewhere`), which a resume under another does not search."""
    import tempfile

    from dlperf.store import spill
    from dlperf.store.location import resume_command
    from dlperf.store.process import ProcessMeasurement
    from dlperf.vocab import Status

    for name in ("system", "job", "own"):
        (tmp_path / name).mkdir()
    monkeypatch.setattr(spill, "SYSTEM_TEMPORARY", (str(tmp_path / "system"),))
    monkeypatch.setattr(spill, "data_dir", lambda: tmp_path / "data")
    (tmp_path / "data").write_text("not a folder")
    db = tmp_path / "gone" / "r.db"  # its folder is not there: nothing beside it
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "system"))
    kept = spill.keep(db, 1, "k", 0, ProcessMeasurement(status=Status.OK, samples=[0.1]))
    assert kept.parent == tmp_path / "system" and spill.elsewhere(kept) is None
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "job"))
    assert [k.key for k in spill.kept(db, 1)] == ["k"] and spill.holding(db) == [kept]
    spill.forget(db, 1)
    assert not kept.exists()

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "own"))
    kept = spill.keep(db, 2, "k", 0, ProcessMeasurement(status=Status.OK, samples=[0.1]))
    assert spill.elsewhere(kept) == str(tmp_path / "own") and spill.elsewhere(spill.path_for(db)) is None
    assert resume_command("r.db", spill.elsewhere(kept)).startswith(f"TMPDIR={tmp_path / 'own'} ")
    assert resume_command("r.db", spill.elsewhere(kept)).endswith(" run --resume --db r.db")


def test_another_users_file_in_a_shared_folder_keeps_nothing_for_this_store(tmp_path, monkeypatch):
    """The temporary directories are shared: a file of another user's, named as this store's kept lines, would have
    its lines stored by this user's --resume."""
    import tempfile

    from dlperf.store import spill
    from dlperf.store.process import ProcessMeasurement
    from dlperf.vocab import Status

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o1777)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    monkeypatch.setattr(spill, "data_dir", lambda: tmp_path / "data")
    (tmp_path / "data").write_text("not a folder")
    db = tmp_path / "gone" / "r.db"
    spill.keep(db, 1, "k", 0, ProcessMeasurement(status=Status.OK, samples=[0.1]))
    assert len(spill.kept(db, 1)) == 1
    me = os.geteuid()
    monkeypatch.setattr(os, "geteuid", lambda: me + 1)  # as another user reads it
    assert spill.kept(db, 1) == [] and spill.holding(db) == []


def test_a_measurement_kept_in_a_tmpdir_of_its_own_is_resumed_under_it(tmp_path, monkeypatch):
    """`... is kept in $TMPDIR/dlperf-unsaved-...: dlperf run --resume --db r.db stores it`, followed from a shell of
    another $TMPDIR, did not find it: the run measured the process again, the kept file left behind."""
    import tempfile

    import pytest

    from dlperf.errors import StoreFault
    from dlperf.runner import sweep
    from dlperf.runner.session import Session
    from dlperf.runner.tasks import Task
    from dlperf.spec import RunSpec
    from dlperf.store import Store, spill
    from dlperf.store.process import ProcessMeasurement
    from dlperf.vocab import Status
    from report.runs import MACHINE, cell

    plan = [cell("fcn-r", threads=1)]
    store = Store.open(tmp_path / "r.db", create=True)
    run_id = store.create_run({}, {"cores": {"cores": 8}}, MACHINE, ["dlperf", "run"], plan)
    ctx = Session(store, run_id, RunSpec(("fcn-r",)), {plan[0].cell.key: {"batch": 4}}, cores=8)
    (tmp_path / "own").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "own"))
    monkeypatch.setattr(spill, "path_for", lambda db: tmp_path / "none" / "r.db.unsaved.jsonl")  # nothing beside it
    monkeypatch.setattr(spill, "data_dir", lambda: tmp_path / "data")
    (tmp_path / "data").write_text("not a folder")
    monkeypatch.setattr(sweep, "store_result", lambda *a, **k: (_ for _ in ()).throw(StoreFault("r.db: disk full")))
    try:
        with pytest.raises(StoreFault) as refused:
            sweep.store_or_keep(ctx, Task(plan[0].cell, 0), ProcessMeasurement(status=Status.OK, samples=[0.1]))
    finally:
        store.close()
    assert f": `TMPDIR={tmp_path / 'own'} dlperf run --resume --db {tmp_path / 'r.db'}` stores it" in str(refused.value)
