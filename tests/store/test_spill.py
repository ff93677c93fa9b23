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
