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
